package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/minictl/minictl/apiserver"
	"github.com/minictl/minictl/auth/pki"
	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/controllers"
)

// secureFlags are the secure port's: where it listens, its certificates
// (made in the data dir unless given), and who may do what on it.
type secureFlags struct {
	listen                  string
	tlsCertFile, tlsKeyFile string
	clientCAFile            string
	certDir                 string
	anonymousAuth           bool
	authorizationMode       string
	enableAdmissionPlugins  string
	kubeconfigOut           string // where up writes the admin kubeconfig
	fallbackPort            bool   // listen was not given: a taken default port falls back to a free one

	// Authentication (kube-apiserver's flags of the same names).
	serviceAccountIssuer, apiAudiences                  string
	serviceAccountKeyFile, serviceAccountSigningKeyFile string
	serviceAccountMaxTokenExpiration                    time.Duration
	tokenAuthFile                                       string
	bootstrapTokenAuth                                  bool
}

func (f *secureFlags) bind(fs *pflag.FlagSet) {
	fs.StringVar(&f.listen, "secure-listen", "127.0.0.1:6443", "address of the secure port: TLS, with client certificates, tokens and RBAC (\"\" turns it off)")
	fs.StringVar(&f.tlsCertFile, "tls-cert-file", "", "the secure port's serving certificate (PEM); default: one made from the cluster CA in --cert-dir")
	fs.StringVar(&f.tlsKeyFile, "tls-private-key-file", "", "the key of --tls-cert-file")
	fs.StringVar(&f.clientCAFile, "client-ca-file", "", "CA bundle that signs client certificates (user = CN, groups = O); default: the cluster CA in --cert-dir")
	fs.StringVar(&f.certDir, "cert-dir", "", "where the cluster CA, the serving certificate and the ServiceAccount key pair are kept, made on first start (up: <data-dir>/pki)")
	fs.BoolVar(&f.anonymousAuth, "anonymous-auth", true, "let requests without credentials on the secure port through as system:anonymous, for RBAC to judge (false: 401)")
	fs.StringVar(&f.authorizationMode, "authorization-mode", "Node,RBAC", "comma-separated authorizers asked in turn on the secure port after system:masters: AlwaysAllow, Node, RBAC")
	fs.StringVar(&f.enableAdmissionPlugins, "enable-admission-plugins", "NodeRestriction", "comma-separated admission plugins to turn on besides the default ones: NodeRestriction")
	fs.StringVar(&f.serviceAccountIssuer, "service-account-issuer", "https://kubernetes.default.svc.cluster.local", "the iss of the ServiceAccount tokens the server issues and accepts")
	fs.StringVar(&f.apiAudiences, "api-audiences", "", "comma-separated audiences a token must be meant for to prove anything here, and a TokenRequest's default (default: the issuer)")
	fs.StringVar(&f.serviceAccountKeyFile, "service-account-key-file", "", "PEM public keys (or certificates) that verify ServiceAccount tokens, besides the signing key's own (default: <cert-dir>/sa.pub)")
	fs.StringVar(&f.serviceAccountSigningKeyFile, "service-account-signing-key-file", "", "PEM private key that signs the tokens of TokenRequests (default: <cert-dir>/sa.key)")
	fs.DurationVar(&f.serviceAccountMaxTokenExpiration, "service-account-max-token-expiration", 0, "the longest lifetime a TokenRequest may ask for (0: no cap)")
	fs.StringVar(&f.tokenAuthFile, "token-auth-file", "", "a static token file in kube's CSV format: token,user,uid,\"group1,group2\"")
	fs.BoolVar(&f.bootstrapTokenAuth, "enable-bootstrap-token-auth", false, "accept bootstrap tokens (Secrets bootstrap-token-<id> in kube-system), with which a kubelet asks for its client certificate")
}

// securePort is the secure port, open: its listener, its TLS
// configuration and the cluster's keys.
type securePort struct {
	ln      net.Listener
	tls     *tls.Config
	pki     *pki.Cluster // nil when the certificates are all given by flags
	clients *pki.CA      // signs client certificates; nil: unknown
}

// open opens the secure port, making the cluster's certificates first
// when they are not given; nil when the port is off.
func (f *secureFlags) open(log *slog.Logger) (*securePort, error) {
	if f.listen == "" {
		return nil, nil
	}
	host, _, err := net.SplitHostPort(f.listen)
	if err != nil {
		return nil, fmt.Errorf("--secure-listen %s: %w", f.listen, err)
	}
	ln, err := listenFlag("secure-listen", f.listen, f.fallbackPort, log)
	if err != nil {
		return nil, err
	}
	p := &securePort{ln: ln}
	if err := f.loadCertificates(p, host); err != nil {
		ln.Close()
		return nil, err
	}
	return p, nil
}

// loadCertificates fills p's TLS configuration from the flags' files, or
// from the cluster CA in --cert-dir, made on first start.
func (f *secureFlags) loadCertificates(p *securePort, host string) error {
	certFile, keyFile, caFile := f.tlsCertFile, f.tlsKeyFile, f.clientCAFile
	if (certFile == "") != (keyFile == "") {
		return errors.New("--tls-cert-file and --tls-private-key-file go together")
	}
	if certFile == "" || caFile == "" {
		if f.certDir == "" {
			return errors.New("the secure port needs certificates: give --tls-cert-file, --tls-private-key-file and --client-ca-file, or --cert-dir to keep a cluster CA in")
		}
		dns, ips := servingNames(host)
		c, err := pki.LoadOrCreate(f.certDir, dns, ips)
		if err != nil {
			return fmt.Errorf("certificates in %s: %w", f.certDir, err)
		}
		p.pki = c
		if certFile == "" {
			certFile, keyFile = c.ServingCertFile, c.ServingKeyFile
		}
		if caFile == "" {
			caFile = c.CAFile()
			p.clients = c.CA
		}
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return fmt.Errorf("serving certificate: %w", err)
	}
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		return fmt.Errorf("--client-ca-file: %w", err)
	}
	pool, err := certPool(caPEM)
	if err != nil {
		return fmt.Errorf("--client-ca-file %s: %w", caFile, err)
	}
	p.tls = &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool, MinVersion: tls.VersionTLS12}
	return nil
}

// servingNames are the names and addresses the serving certificate is
// for: localhost and loopback, the listen host, and the names and address
// the kubernetes Service gives the API server inside the cluster.
func servingNames(host string) ([]string, []net.IP) {
	dns := []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}
	ips := []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1"), net.ParseIP("10.96.0.1")}
	if ip := net.ParseIP(host); ip != nil && !ip.IsUnspecified() {
		ips = append(ips, ip)
	} else if host != "" && ip == nil {
		dns = append(dns, host)
	}
	return dns, ips
}

// authentication is the secure port's authenticator chain, as the flags
// and the cluster's keys say: client certificates of the client CA, then
// bearer tokens (the token file, ServiceAccount tokens signed by the
// cluster's key or one the flags name, bootstrap tokens).
func (f *secureFlags) authentication(p *securePort) (apiserver.Authentication, error) {
	a := apiserver.Authentication{
		TokenAuthFile:                    f.tokenAuthFile,
		ServiceAccountIssuer:             f.serviceAccountIssuer,
		APIAudiences:                     splitList(f.apiAudiences),
		ServiceAccountMaxTokenExpiration: f.serviceAccountMaxTokenExpiration,
		BootstrapTokenAuth:               f.bootstrapTokenAuth,
	}
	if p == nil {
		return a, nil
	}
	a.ClientCA = p.tls.ClientCAs
	signingFile := f.serviceAccountSigningKeyFile
	if signingFile == "" && p.pki != nil {
		signingFile = p.pki.ServiceAccountKeyFile
	}
	if signingFile != "" {
		b, err := os.ReadFile(signingFile)
		if err != nil {
			return a, fmt.Errorf("--service-account-signing-key-file: %w", err)
		}
		if a.ServiceAccountSigningKey, err = pki.ParseKey(b); err != nil {
			return a, fmt.Errorf("--service-account-signing-key-file %s: %w", signingFile, err)
		}
	}
	if f.serviceAccountKeyFile != "" {
		b, err := os.ReadFile(f.serviceAccountKeyFile)
		if err != nil {
			return a, fmt.Errorf("--service-account-key-file: %w", err)
		}
		if a.ServiceAccountKeys, err = pki.ParsePublicKeys(b); err != nil {
			return a, fmt.Errorf("--service-account-key-file %s: %w", f.serviceAccountKeyFile, err)
		}
	}
	return a, nil
}

// tokenClients makes clients that reach the secure port with a bearer
// token alone: the controllers' own ServiceAccounts'.
func (p *securePort) tokenClients(tokens client.TokenSource) (*client.RESTClient, error) {
	return tokenClients(client.Config{Server: p.url(), CAData: p.pki.CA.CertPEM})(tokens)
}

// url is where the secure port answers.
func (p *securePort) url() string { return "https://" + p.ln.Addr().String() }

// writeKubeconfig writes the admin's kubeconfig for the secure port, when
// the cluster's certificates are minictl's own.
func (f *secureFlags) writeKubeconfig(p *securePort) error {
	if f.kubeconfigOut == "" || p.pki == nil {
		return nil
	}
	kc := adminKubeconfig(p.url(), p.pki.CA.CertPEM, p.pki.AdminCertPEM, p.pki.AdminKeyPEM)
	if err := os.MkdirAll(filepath.Dir(f.kubeconfigOut), 0o700); err != nil {
		return err
	}
	return os.WriteFile(f.kubeconfigOut, []byte(kc), 0o600)
}

// checkLoopback refuses a plain listener address that is not loopback:
// everything that reaches the plain listener acts as the admin.
func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--listen %s: %w", addr, err)
	}
	if ip := net.ParseIP(host); (ip != nil && ip.IsLoopback()) || strings.EqualFold(host, "localhost") {
		return nil
	}
	return fmt.Errorf("--listen %s: the plain HTTP listener binds loopback addresses only (127.0.0.1, ::1, localhost), because every request on it acts as the admin; serve other addresses with --secure-listen, or turn the plain listener off with --listen \"\"", addr)
}

func certPool(pemData []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemData) {
		return nil, errors.New("no PEM certificate found")
	}
	return pool, nil
}

// clusterCredentials gives the controller manager of up the cluster's
// keys, as kubeadm gives kube-controller-manager its flags: the CA to sign
// certificates with and to publish, the key that signs legacy
// ServiceAccount tokens, and a ServiceAccount of its own for each
// controller (unless the flags said otherwise).
func (f *serverFlags) clusterCredentials(cm *controllers.Config, set map[string]bool, p *securePort) {
	if p == nil || p.pki == nil {
		cm.UseServiceAccountCredentials = false // the components use the plain listener
		return
	}
	if cm.Signing.CertFile == "" && cm.Signing.KeyFile == "" {
		cm.Signing.CertFile, cm.Signing.KeyFile = p.pki.CAFile(), p.pki.CAKeyFile()
	}
	if cm.Credentials.ServiceAccountPrivateKeyFile == "" {
		cm.Credentials.ServiceAccountPrivateKeyFile = p.pki.ServiceAccountKeyFile
	}
	if cm.Credentials.RootCAFile == "" {
		cm.Credentials.RootCAFile = p.pki.CAFile()
	}
	if !set["use-service-account-credentials"] {
		cm.UseServiceAccountCredentials = true
	}
	cm.ServiceAccountClient = p.tokenClients
}

// clusterConnector is how up's own components reach the API server: with
// client certificates of their own on the secure port when minictl keeps
// the CA that signs them, and through the plain listener otherwise.
func (f *serverFlags) clusterConnector(plainURL string, p *securePort) (connector, error) {
	if p != nil && p.clients != nil {
		return certConnector(p.url(), p.clients), nil
	}
	if p != nil && p.clients == nil && plainURL == "" {
		return nil, errors.New("the cluster's components need the plain listener (--listen) when the client CA is not minictl's own (--client-ca-file)")
	}
	if plainURL == "" {
		return nil, errors.New("the cluster's components need the plain listener (--listen) or a secure port whose client CA minictl keeps (no --client-ca-file)")
	}
	return proxyConnector(plainURL)
}
