package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/time/rate"

	"github.com/minictl/minictl/clock"
)

// maxIdleConns is how many idle connections a RESTClient keeps to its
// server. client-go keeps 25; minictl up shares one client between the
// controller manager, the scheduler and every kubelet.
const maxIdleConns = 128

// RESTClient speaks HTTP to one API server: it adds the credentials, the
// Accept and User-Agent headers, the rate limit and the per-request timeout,
// sends again what the server asks to have sent again (429 TooManyRequests
// with a Retry-After, see send), and turns non-2xx responses into
// *StatusError. It is safe for concurrent use; share one per process, as
// every Client[T] built on it shares its connections and its rate limit.
type RESTClient struct {
	base      *url.URL // scheme, host and an optional path prefix
	http      *http.Client
	token     string
	tokens    TokenSource // nil: token
	userAgent string
	timeout   time.Duration
	limiter   *rate.Limiter // nil: unlimited
}

// New returns a client for cfg. It reads CAFile and the client certificate
// files now, so a bad path fails here and not on the first request.
func New(cfg *Config) (*RESTClient, error) {
	if cfg == nil {
		return nil, errors.New("client: nil config")
	}
	base, err := parseServer(cfg)
	if err != nil {
		return nil, err
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	// Keep connections for concurrent requests instead of net/http's
	// default of 2 idle ones per host: a client shared by a controller
	// creating pods in batches, a scheduler and kubelets would otherwise
	// open (and leave in TIME_WAIT) a connection for most requests.
	transport.MaxIdleConns = maxIdleConns
	transport.MaxIdleConnsPerHost = maxIdleConns
	if base.Scheme == "https" {
		tlsConfig, err := tlsConfigFor(cfg)
		if err != nil {
			return nil, err
		}
		transport.TLSClientConfig = tlsConfig
	}
	c := &RESTClient{
		base:      base,
		http:      &http.Client{Transport: transport},
		token:     cfg.BearerToken,
		tokens:    cfg.TokenSource,
		userAgent: cfg.UserAgent,
		timeout:   cfg.Timeout,
	}
	if c.userAgent == "" {
		c.userAgent = DefaultUserAgent()
	}
	if cfg.QPS > 0 {
		c.limiter = rate.NewLimiter(rate.Limit(cfg.QPS), max(cfg.Burst, 1))
	}
	return c, nil
}

// WithUserAgent returns a client that sends ua as its User-Agent and shares
// everything else with c: its connections, rate limit and timeout. One
// process's components share one client this way, each under its own
// name.
func (c *RESTClient) WithUserAgent(ua string) *RESTClient {
	cp := *c
	cp.userAgent = ua
	return &cp
}

// CloseIdleConnections closes the connections of c's transport that carry
// no request: what a program does with the clients of a component that
// has stopped, so that no server waits on them. Clients made by
// WithUserAgent share them.
func (c *RESTClient) CloseIdleConnections() { c.http.CloseIdleConnections() }

// DefaultUserAgent is "<binary> (<os>/<arch>) minictl".
func DefaultUserAgent() string {
	return fmt.Sprintf("%s (%s/%s) minictl", filepath.Base(os.Args[0]), runtime.GOOS, runtime.GOARCH)
}

func parseServer(cfg *Config) (*url.URL, error) {
	server := cfg.Server
	if server == "" {
		server = DefaultServer
	}
	if !strings.Contains(server, "://") {
		scheme := "http://"
		if cfg.CAFile != "" || len(cfg.CAData) > 0 || cfg.Insecure {
			scheme = "https://"
		}
		server = scheme + server
	}
	u, err := url.Parse(server)
	if err != nil {
		return nil, fmt.Errorf("client: server %q: %w", cfg.Server, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("client: server %q: scheme must be http or https", cfg.Server)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("client: server %q: no host", cfg.Server)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("client: server %q: may not have a query or fragment", cfg.Server)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	return u, nil
}

func tlsConfigFor(cfg *Config) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: cfg.Insecure}
	caData := cfg.CAData
	if len(caData) == 0 && cfg.CAFile != "" {
		b, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("client: certificate authority: %w", err)
		}
		caData = b
	}
	if len(caData) > 0 && !cfg.Insecure {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caData) {
			return nil, errors.New("client: certificate authority: no PEM certificate found")
		}
		tc.RootCAs = pool
	}
	certData, keyData := cfg.CertData, cfg.KeyData
	for _, f := range []struct {
		data *[]byte
		file string
	}{{&certData, cfg.CertFile}, {&keyData, cfg.KeyFile}} {
		if len(*f.data) == 0 && f.file != "" {
			b, err := os.ReadFile(f.file)
			if err != nil {
				return nil, fmt.Errorf("client: client certificate: %w", err)
			}
			*f.data = b
		}
	}
	if len(certData) > 0 || len(keyData) > 0 {
		cert, err := tls.X509KeyPair(certData, keyData)
		if err != nil {
			return nil, fmt.Errorf("client: client certificate: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// Server returns the base URL requests go to.
func (c *RESTClient) Server() string { return c.base.String() }

// Do sends one request and decodes a 2xx JSON response into out (skipped when
// out is nil or the body is empty). path is absolute ("/api/v1/pods") and is
// joined to the server URL; query may be nil; contentType is sent only with a
// body. A non-2xx response returns a *StatusError; a transport failure
// returns the *url.Error that net/http reports. Config.Timeout bounds the
// whole exchange, body and retries included.
func (c *RESTClient) Do(ctx context.Context, method, path string, query url.Values, contentType string, body []byte, out any) error {
	_, data, err := c.call(ctx, method, path, query, contentType, body, "application/json")
	if err != nil {
		return err
	}
	if out == nil || len(data) == 0 {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s %s: decode response: %w", method, path, err)
	}
	return nil
}

// read is a GET asking for accept, bounded as Do is; it returns the media
// type and body of a 2xx response.
func (c *RESTClient) read(ctx context.Context, path string, query url.Values, accept string) (string, []byte, error) {
	return c.call(ctx, http.MethodGet, path, query, "", nil, accept)
}

// call is exchange bounded by Config.Timeout.
func (c *RESTClient) call(ctx context.Context, method, path string, query url.Values, contentType string, body []byte, accept string) (string, []byte, error) {
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	return c.exchange(ctx, method, path, query, contentType, body, accept)
}

// exchange sends one request asking for accept and returns the media type
// and body of a 2xx response; any other answer is a *StatusError. The
// caller bounds it with ctx.
func (c *RESTClient) exchange(ctx context.Context, method, path string, query url.Values, contentType string, body []byte, accept string) (string, []byte, error) {
	resp, err := c.send(ctx, method, path, query, contentType, body, accept)
	if err != nil {
		return "", nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", nil, fmt.Errorf("%s %s: read response: %w", method, path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return "", nil, decodeError(resp.StatusCode, method, path, data)
	}
	return responseMediaType(resp), data, nil
}

// responseMediaType is the response's Content-Type without parameters.
func responseMediaType(resp *http.Response) string {
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	return mt
}

// Stream sends a GET and returns the open body of a 2xx response for the
// caller to read and close; it is what Watch is built on. Only ctx bounds it:
// Config.Timeout does not apply to a stream.
func (c *RESTClient) Stream(ctx context.Context, path string, query url.Values) (io.ReadCloser, error) {
	body, _, err := c.stream(ctx, path, query, "application/json")
	return body, err
}

// stream is Stream asking for accept; it also returns the response's media
// type.
func (c *RESTClient) stream(ctx context.Context, path string, query url.Values, accept string) (io.ReadCloser, string, error) {
	resp, err := c.send(ctx, http.MethodGet, path, query, "", nil, accept)
	if err != nil {
		return nil, "", err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		if err != nil {
			return nil, "", fmt.Errorf("GET %s: read response: %w", path, err)
		}
		return nil, "", decodeError(resp.StatusCode, http.MethodGet, path, data)
	}
	return resp.Body, responseMediaType(resp), nil
}

// maxRetries is how many times a request the server refused with a
// Retry-After is sent again: client-go's default.
const maxRetries = 10

// send performs the request, and sends it again, up to maxRetries times,
// when the server answers 429 or a 5xx with a Retry-After header, after
// waiting the seconds it asks for, as client-go does. A wait that would
// outlast ctx is not begun: the refusal is the answer. The caller closes
// the response body.
func (c *RESTClient) send(ctx context.Context, method, path string, query url.Values, contentType string, body []byte, accept string) (*http.Response, error) {
	for attempt := 0; ; attempt++ {
		resp, err := c.sendOnce(ctx, method, path, query, contentType, body, accept)
		if err != nil {
			return nil, err
		}
		wait, ok := retryAfter(resp)
		if !ok || attempt == maxRetries {
			return resp, nil
		}
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < wait {
			return resp, nil
		}
		// Read what is left of the answer, so the connection is reused.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		if !clock.Sleep(ctx, clock.Real{}, wait) {
			return nil, fmt.Errorf("%s %s: waiting %s to retry: %w", method, path, wait, ctx.Err())
		}
	}
}

// retryAfter reports whether resp asks to be retried, and after how long:
// a 429 or a 5xx with a Retry-After of whole seconds.
func retryAfter(resp *http.Response) (time.Duration, bool) {
	if resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode < 500 {
		return 0, false
	}
	seconds, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	if err != nil || seconds < 0 {
		return 0, false
	}
	return time.Duration(seconds) * time.Second, true
}

// sendOnce waits for the rate limiter and performs the request once.
func (c *RESTClient) sendOnce(ctx context.Context, method, path string, query url.Values, contentType string, body []byte, accept string) (*http.Response, error) {
	if !strings.HasPrefix(path, "/") {
		return nil, fmt.Errorf("%s %s: path must start with /", method, path)
	}
	if c.limiter != nil {
		if err := c.limiter.Wait(ctx); err != nil {
			return nil, fmt.Errorf("%s %s: rate limit: %w", method, path, err)
		}
	}
	u := *c.base
	u.Path = c.base.Path + path
	u.RawQuery = query.Encode()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	req.Header.Set("Accept", accept)
	req.Header.Set("User-Agent", c.userAgent)
	if body != nil && contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	token := c.token
	if c.tokens != nil {
		if token, err = c.tokens.Token(ctx); err != nil {
			return nil, fmt.Errorf("%s %s: bearer token: %w", method, path, err)
		}
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return c.http.Do(req)
}
