package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/minictl/minictl/auth/authenticator"
	"github.com/minictl/minictl/auth/pki"
	"github.com/minictl/minictl/client"
)

// secureFlags are the secure port's: where it listens, its certificates
// (made in the data dir unless given), and who may do what on it.
type secureFlags struct {
	listen                   string
	tlsCertFile, tlsKeyFile  string
	clientCAFile             string
	certDir                  string
	anonymousAuth            bool
	authorizationMode        string
	enableAdmissionPlugins   string
	kubeconfigOut            string // where up writes the admin kubeconfig
	fallbackPort             bool   // listen was not given: a taken default port falls back to a free one
	servingHosts, servingIPs []string
}

func (f *secureFlags) bind(fs *flag.FlagSet) {
	fs.StringVar(&f.listen, "secure-listen", "127.0.0.1:6443", "address of the secure port: TLS, with client certificates, tokens and RBAC (\"\" turns it off)")
	fs.StringVar(&f.tlsCertFile, "tls-cert-file", "", "the secure port's serving certificate (PEM); default: one made from the cluster CA in --cert-dir")
	fs.StringVar(&f.tlsKeyFile, "tls-private-key-file", "", "the key of --tls-cert-file")
	fs.StringVar(&f.clientCAFile, "client-ca-file", "", "CA bundle that signs client certificates (user = CN, groups = O); default: the cluster CA in --cert-dir")
	fs.StringVar(&f.certDir, "cert-dir", "", "where the cluster CA, the serving certificate and the ServiceAccount key pair are kept, made on first start (up: <data-dir>/pki)")
	fs.BoolVar(&f.anonymousAuth, "anonymous-auth", true, "let requests without credentials on the secure port through as system:anonymous, for RBAC to judge (false: 401)")
	fs.StringVar(&f.authorizationMode, "authorization-mode", "AlwaysAllow", "comma-separated authorizers asked in turn on the secure port after system:masters: AlwaysAllow, Node, RBAC")
	fs.StringVar(&f.enableAdmissionPlugins, "enable-admission-plugins", "", "comma-separated admission plugins to turn on besides the default ones: NodeRestriction")
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
	ln, err := net.Listen("tcp", f.listen)
	if err != nil && f.fallbackPort {
		log.Info("secure port taken; using a free one", "wanted", f.listen, "err", err)
		ln, err = net.Listen("tcp", net.JoinHostPort(host, "0"))
	}
	if err != nil {
		return nil, fmt.Errorf("secure listen: %w", err)
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

// authenticator is the secure port's authenticator chain.
func (p *securePort) authenticator() authenticator.Request {
	if p == nil {
		return nil
	}
	return nil
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
