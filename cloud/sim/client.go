package sim

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// DefaultTimeout bounds each call of a Client made without one.
const DefaultTimeout = 10 * time.Second

// Client calls the simulated cloud's HTTP API. Its methods return the
// cloud's *Error for an answer that is not a success (IsNotFound and the
// like tell them apart), and stop when their context ends or the
// client's timeout passes.
type Client struct {
	base string
	http *http.Client
}

// ClientOptions configure a Client.
type ClientOptions struct {
	// Timeout bounds each call (DefaultTimeout).
	Timeout time.Duration
	// Transport carries the calls (http.DefaultTransport).
	Transport http.RoundTripper
}

// NewClient is a client of the cloud at baseURL (http://127.0.0.1:8090).
func NewClient(baseURL string, opts ClientOptions) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("cloud: url %q is not an http(s) URL", baseURL)
	}
	return &Client{
		base: strings.TrimRight(u.String(), "/"),
		http: &http.Client{Timeout: cmp.Or(opts.Timeout, DefaultTimeout), Transport: opts.Transport},
	}, nil
}

// URL is the cloud's base URL.
func (c *Client) URL() string { return c.base }

// Healthz reports whether the cloud answers.
func (c *Client) Healthz(ctx context.Context) error {
	return c.do(ctx, http.MethodGet, "/healthz", nil, nil)
}

// ListInstances lists the machines, oldest first.
func (c *Client) ListInstances(ctx context.Context) ([]Instance, error) {
	var l List[Instance]
	err := c.do(ctx, http.MethodGet, "/v1/instances", nil, &l)
	return l.Items, err
}

// InstanceByName is the machine named name.
func (c *Client) InstanceByName(ctx context.Context, name string) (*Instance, error) {
	var l List[Instance]
	if err := c.do(ctx, http.MethodGet, "/v1/instances?name="+url.QueryEscape(name), nil, &l); err != nil {
		return nil, err
	}
	if len(l.Items) == 0 {
		return nil, newError(http.StatusNotFound, "no instance is named %q", name)
	}
	return &l.Items[0], nil
}

// GetInstance is the machine with this ID.
func (c *Client) GetInstance(ctx context.Context, id string) (*Instance, error) {
	var in Instance
	if err := c.do(ctx, http.MethodGet, "/v1/instances/"+url.PathEscape(id), nil, &in); err != nil {
		return nil, err
	}
	return &in, nil
}

// CreateInstance starts a machine.
func (c *Client) CreateInstance(ctx context.Context, spec InstanceSpec) (*Instance, error) {
	var in Instance
	if err := c.do(ctx, http.MethodPost, "/v1/instances", spec, &in); err != nil {
		return nil, err
	}
	return &in, nil
}

// DeleteInstance terminates a machine.
func (c *Client) DeleteInstance(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/v1/instances/"+url.PathEscape(id), nil, nil)
}

// StopInstance shuts a machine down.
func (c *Client) StopInstance(ctx context.Context, id string) (*Instance, error) {
	var in Instance
	if err := c.do(ctx, http.MethodPost, "/v1/instances/"+url.PathEscape(id)+"/stop", nil, &in); err != nil {
		return nil, err
	}
	return &in, nil
}

// StartInstance boots a stopped machine.
func (c *Client) StartInstance(ctx context.Context, id string) (*Instance, error) {
	var in Instance
	if err := c.do(ctx, http.MethodPost, "/v1/instances/"+url.PathEscape(id)+"/start", nil, &in); err != nil {
		return nil, err
	}
	return &in, nil
}

// ListLoadBalancers lists the load balancers by name.
func (c *Client) ListLoadBalancers(ctx context.Context) ([]LoadBalancer, error) {
	var l List[LoadBalancer]
	err := c.do(ctx, http.MethodGet, "/v1/loadbalancers", nil, &l)
	return l.Items, err
}

// GetLoadBalancer is the load balancer named name.
func (c *Client) GetLoadBalancer(ctx context.Context, name string) (*LoadBalancer, error) {
	var lb LoadBalancer
	if err := c.do(ctx, http.MethodGet, "/v1/loadbalancers/"+url.PathEscape(name), nil, &lb); err != nil {
		return nil, err
	}
	return &lb, nil
}

// PutLoadBalancer creates or updates the load balancer named name.
func (c *Client) PutLoadBalancer(ctx context.Context, name string, spec LoadBalancerSpec) (*LoadBalancer, error) {
	var lb LoadBalancer
	if err := c.do(ctx, http.MethodPut, "/v1/loadbalancers/"+url.PathEscape(name), spec, &lb); err != nil {
		return nil, err
	}
	return &lb, nil
}

// DeleteLoadBalancer deletes the load balancer named name.
func (c *Client) DeleteLoadBalancer(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodDelete, "/v1/loadbalancers/"+url.PathEscape(name), nil, nil)
}

// ListRoutes lists the route table by name.
func (c *Client) ListRoutes(ctx context.Context) ([]Route, error) {
	var l List[Route]
	err := c.do(ctx, http.MethodGet, "/v1/routes", nil, &l)
	return l.Items, err
}

// PutRoute creates or changes the route named name.
func (c *Client) PutRoute(ctx context.Context, name string, spec RouteSpec) (*Route, error) {
	var r Route
	if err := c.do(ctx, http.MethodPut, "/v1/routes/"+url.PathEscape(name), spec, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// DeleteRoute removes the route named name.
func (c *Client) DeleteRoute(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodDelete, "/v1/routes/"+url.PathEscape(name), nil, nil)
}

// Faults is the fault switch as it is now.
func (c *Client) Faults(ctx context.Context) (*Faults, error) {
	var f Faults
	if err := c.do(ctx, http.MethodGet, "/v1/faults", nil, &f); err != nil {
		return nil, err
	}
	return &f, nil
}

// SetFaults turns the fault switch on.
func (c *Client) SetFaults(ctx context.Context, f Faults) (*Faults, error) {
	var out Faults
	if err := c.do(ctx, http.MethodPut, "/v1/faults", f, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ClearFaults turns the fault switch off.
func (c *Client) ClearFaults(ctx context.Context) error {
	return c.do(ctx, http.MethodDelete, "/v1/faults", nil, nil)
}

// do sends body (JSON, when not nil) and decodes a success into out (when
// not nil); any other answer becomes an *Error.
func (c *Client) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("cloud: %s %s: %w", method, path, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return fmt.Errorf("cloud: %s %s: %w", method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("cloud: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return fmt.Errorf("cloud: %s %s: %w", method, path, err)
	}
	if resp.StatusCode >= 300 {
		e := &Error{}
		if json.Unmarshal(b, e) != nil || e.Message == "" {
			e = newError(resp.StatusCode, "%s %s: %s", method, path, strings.TrimSpace(string(b)))
		}
		e.Code = resp.StatusCode
		return e
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("cloud: %s %s: decode answer: %w", method, path, err)
	}
	return nil
}
