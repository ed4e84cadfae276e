// Package webhook calls the HTTPS webhooks the API server is configured
// with (admission webhooks; conversion webhooks use it too), as
// kube-apiserver's pkg/util/webhook does.
//
// Properties:
//   - Only HTTPS. The server's certificate is verified against the
//     configuration's caBundle, or the system's roots when it has none; a
//     webhook named by a Service is verified as
//     <name>.<namespace>.svc, whatever address its Endpoints give.
//   - Every call ends by its context: the caller's deadline, shortened
//     by the call's own timeout.
//   - An answer larger than the client's limit is an error, read no
//     further; so is a status other than 200.
//   - A Client is safe for concurrent use. It keeps one transport (and its
//     idle connections) per CA bundle and server name.
package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"
)

// ClientConfig says where a webhook is and how to trust it, as
// admissionregistration's and apiextensions' WebhookClientConfig do:
// exactly one of URL and Service.
type ClientConfig struct {
	URL      string   // "https://host:port/path"
	Service  *Service // a Service of the cluster
	CABundle []byte   // PEM certificates; empty: the system's roots
}

// Service names a webhook served behind a cluster Service.
type Service struct {
	Namespace, Name string
	Path            string // "" means "/"
	Port            int32  // the Service's port; 0 means 443
}

// ServiceResolver finds the address (host:port) a Service's port is
// served at, from its Endpoints.
type ServiceResolver interface {
	ResolveService(ctx context.Context, namespace, name string, port int32) (string, error)
}

// ResolverFunc is a function that is a ServiceResolver.
type ResolverFunc func(ctx context.Context, namespace, name string, port int32) (string, error)

// ResolveService calls f.
func (f ResolverFunc) ResolveService(ctx context.Context, namespace, name string, port int32) (string, error) {
	return f(ctx, namespace, name, port)
}

// Options configure a Client.
type Options struct {
	// Resolver resolves Service references; nil: a webhook named by a
	// Service cannot be called.
	Resolver ServiceResolver
	// MaxResponseBytes bounds an answer's body (0: DefaultMaxResponseBytes).
	MaxResponseBytes int64
}

// DefaultMaxResponseBytes is the largest answer a Client reads by default:
// room for an object at etcd's limit and a patch rewriting all of it.
const DefaultMaxResponseBytes = 6 << 20

// maxTransports bounds the transports a Client keeps; past it they are
// all dropped and built again as needed (configurations rarely churn).
const maxTransports = 64

// Client calls webhooks over HTTPS.
type Client struct {
	resolver ServiceResolver
	maxBody  int64

	mu         sync.Mutex
	transports map[transportKey]*http.Transport // guarded by mu
}

type transportKey struct{ caBundle, serverName string }

// NewClient returns a Client.
func NewClient(opts Options) *Client {
	if opts.MaxResponseBytes == 0 {
		opts.MaxResponseBytes = DefaultMaxResponseBytes
	}
	return &Client{resolver: opts.Resolver, maxBody: opts.MaxResponseBytes, transports: map[transportKey]*http.Transport{}}
}

// Post sends body (JSON) to the webhook cc names and returns its answer's
// body. timeout, if positive, bounds the call beyond ctx.
func (c *Client) Post(ctx context.Context, cc ClientConfig, timeout time.Duration, body []byte) ([]byte, error) {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	target, serverName, err := c.target(ctx, cc)
	if err != nil {
		return nil, err
	}
	tr, err := c.transport(cc.CABundle, serverName)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	// A redirect is not followed: it could lead anywhere, even to plain HTTP.
	noRedirects := func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := (&http.Client{Transport: tr, CheckRedirect: noRedirects}).Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, c.maxBody+1))
	if err != nil {
		return nil, fmt.Errorf("read the answer: %w", err)
	}
	if int64(len(out)) > c.maxBody {
		return nil, fmt.Errorf("the answer is larger than %d bytes", c.maxBody)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, &StatusCodeError{Code: resp.StatusCode, Body: out}
	}
	return out, nil
}

// StatusCodeError is a webhook's answer with a status other than 200.
type StatusCodeError struct {
	Code int
	Body []byte
}

func (e *StatusCodeError) Error() string {
	const show = 256
	b := e.Body
	if len(b) > show {
		b = b[:show]
	}
	return fmt.Sprintf("the server responded with the status code %d: %q", e.Code, b)
}

// target returns the URL to post to and the name the server's certificate
// must carry ("" for a URL: its host).
func (c *Client) target(ctx context.Context, cc ClientConfig) (target, serverName string, err error) {
	switch {
	case cc.URL != "" && cc.Service != nil:
		return "", "", errors.New("a webhook has a url and a service; it may have only one")
	case cc.URL != "":
		u, err := url.Parse(cc.URL)
		if err != nil {
			return "", "", fmt.Errorf("parse the webhook url: %w", err)
		}
		if u.Scheme != "https" {
			return "", "", fmt.Errorf("the webhook url %q is not https", cc.URL)
		}
		return cc.URL, "", nil
	case cc.Service != nil:
		svc := cc.Service
		if c.resolver == nil {
			return "", "", fmt.Errorf("service %s/%s: no service resolver", svc.Namespace, svc.Name)
		}
		port := svc.Port
		if port == 0 {
			port = 443
		}
		hostPort, err := c.resolver.ResolveService(ctx, svc.Namespace, svc.Name, port)
		if err != nil {
			return "", "", fmt.Errorf("resolve service %s/%s port %d: %w", svc.Namespace, svc.Name, port, err)
		}
		path := svc.Path
		if path == "" {
			path = "/"
		}
		u := url.URL{Scheme: "https", Host: hostPort, Path: path}
		return u.String(), svc.Name + "." + svc.Namespace + ".svc", nil
	}
	return "", "", errors.New("a webhook has neither a url nor a service")
}

// transport returns the transport that trusts caBundle (the system's roots
// if empty) and expects serverName ("": the URL's host).
func (c *Client) transport(caBundle []byte, serverName string) (*http.Transport, error) {
	key := transportKey{string(caBundle), serverName}
	c.mu.Lock()
	defer c.mu.Unlock()
	if tr := c.transports[key]; tr != nil {
		return tr, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: serverName}
	if len(caBundle) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caBundle) {
			return nil, errors.New("the caBundle holds no PEM certificate")
		}
		cfg.RootCAs = pool
	}
	tr := &http.Transport{
		TLSClientConfig:     cfg,
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout: 10 * time.Second,
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     90 * time.Second,
		ForceAttemptHTTP2:   true,
	}
	if len(c.transports) >= maxTransports {
		c.closeLocked()
	}
	c.transports[key] = tr
	return tr, nil
}

// Close drops the idle connections of every transport.
func (c *Client) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closeLocked()
}

func (c *Client) closeLocked() {
	for k, tr := range c.transports {
		tr.CloseIdleConnections()
		delete(c.transports, k)
	}
}

// JoinHostPort is net.JoinHostPort with a numeric port, for resolvers.
func JoinHostPort(host string, port int32) string {
	return net.JoinHostPort(host, strconv.Itoa(int(port)))
}
