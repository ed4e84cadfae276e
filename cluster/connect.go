package cluster

import (
	"github.com/minictl/minictl/apiserver"
	"github.com/minictl/minictl/auth/pki"
	"github.com/minictl/minictl/client"
)

// Connector gives a component its client to the API server, acting as
// user in groups.
type Connector func(user string, groups ...string) (*client.RESTClient, error)

// ProxyConnector reaches the plain loopback listener at server: one
// client, whose connections every component shares, each naming in its
// User-Agent the user it acts for. Everything on the plain listener acts
// as the admin; the name gives a component's requests the priority level
// of the system's own, so that a test's flood of requests never starves
// the controllers.
func ProxyConnector(server string) (Connector, error) {
	rc, err := client.New(&client.Config{Server: server})
	if err != nil {
		return nil, err
	}
	return func(name string, _ ...string) (*client.RESTClient, error) {
		return rc.WithUserAgent(apiserver.SystemUserAgent(name)), nil
	}, nil
}

// CertConnector reaches the secure port at server with a client
// certificate for each user, issued by ca when the component starts, and
// verifies the server with the same CA: each component is authenticated
// and authorized as the user it is, as in a kubeadm cluster.
func CertConnector(server string, ca *pki.CA) Connector {
	return func(name string, groups ...string) (*client.RESTClient, error) {
		certPEM, keyPEM, err := ca.Issue(pki.CertRequest{CommonName: name, Organization: groups})
		if err != nil {
			return nil, err
		}
		return client.New(&client.Config{Server: server, CAData: ca.CertPEM, CertData: certPEM, KeyData: keyPEM})
	}
}
