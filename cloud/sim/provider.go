package sim

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/minictl/minictl/cloud"
)

// ProviderName is the simulated cloud's --cloud-provider name and the
// scheme of its provider IDs.
const ProviderName = "sim"

// DefaultURL is where the cloud listens unless told otherwise, and the
// provider's URL when it has no --cloud-config.
const DefaultURL = "http://127.0.0.1:8090"

func init() {
	cloud.Register(ProviderName, func(configFile string) (cloud.Interface, error) {
		cfg, err := ReadConfig(configFile)
		if err != nil {
			return nil, err
		}
		c, err := NewClient(cfg.URL, ClientOptions{Timeout: cfg.Timeout.Duration})
		if err != nil {
			return nil, err
		}
		return NewProvider(c), nil
	})
}

// Config is the provider's --cloud-config file, YAML:
//
//	url: http://127.0.0.1:8090
//	timeout: 10s   # optional, each call's bound
type Config struct {
	URL     string   `json:"url"`
	Timeout Duration `json:"timeout,omitempty"`
}

// Duration is a time.Duration written as "10s".
type Duration struct{ time.Duration }

func (d *Duration) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("timeout %q is not a duration such as 10s", s)
	}
	d.Duration = v
	return nil
}

func (d Duration) MarshalJSON() ([]byte, error) { return []byte(`"` + d.String() + `"`), nil }

// ReadConfig reads a --cloud-config file; "" is the default config (the
// cloud at DefaultURL).
func ReadConfig(file string) (Config, error) {
	var cfg Config
	if file == "" {
		return Config{URL: DefaultURL}, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return cfg, fmt.Errorf("cloud config: %w", err)
	}
	if err := yaml.UnmarshalStrict(b, &cfg); err != nil {
		return cfg, fmt.Errorf("cloud config %s: %w", file, err)
	}
	if cfg.URL == "" {
		return cfg, fmt.Errorf("cloud config %s: url: Required value: the simulated cloud's URL, e.g. %s", file, DefaultURL)
	}
	return cfg, nil
}

// WriteConfig writes a --cloud-config file naming the cloud at url.
func WriteConfig(file, url string) error {
	return os.WriteFile(file, []byte("url: "+url+"\n"), 0o600)
}

// Provider is cloud.Interface over the simulated cloud's API. It keeps no
// state of its own: every answer comes from the cloud.
type Provider struct {
	c *Client
}

var (
	_ cloud.Interface    = (*Provider)(nil)
	_ cloud.LoadBalancer = (*Provider)(nil)
	_ cloud.InstancesV2  = (*Provider)(nil)
	_ cloud.Zones        = (*Provider)(nil)
	_ cloud.Routes       = (*Provider)(nil)
)

// NewProvider is the provider that asks the cloud c talks to.
func NewProvider(c *Client) *Provider { return &Provider{c: c} }

// Client is the client the provider calls the cloud with.
func (p *Provider) Client() *Client { return p.c }

func (p *Provider) LoadBalancer() (cloud.LoadBalancer, bool) { return p, true }
func (p *Provider) InstancesV2() (cloud.InstancesV2, bool)   { return p, true }
func (p *Provider) Zones() (cloud.Zones, bool)               { return p, true }
func (p *Provider) Routes() (cloud.Routes, bool)             { return p, true }
func (p *Provider) ProviderName() string                     { return ProviderName }

// GetLoadBalancerName is kube's default name: "a" and the Service's UID
// without dashes, at most 32 characters.
func (p *Provider) GetLoadBalancerName(_ context.Context, _ string, svc *corev1.Service) string {
	return DefaultLoadBalancerName(svc)
}

// DefaultLoadBalancerName is the name kube's cloud providers give a
// Service's load balancer when they have no better one.
func DefaultLoadBalancerName(svc *corev1.Service) string {
	name := strings.ReplaceAll("a"+string(svc.UID), "-", "")
	return name[:min(len(name), 32)]
}

func (p *Provider) GetLoadBalancer(ctx context.Context, clusterName string, svc *corev1.Service) (*corev1.LoadBalancerStatus, bool, error) {
	lb, err := p.c.GetLoadBalancer(ctx, DefaultLoadBalancerName(svc))
	if IsNotFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return lbStatus(lb), true, nil
}

// EnsureLoadBalancer gives the Service a load balancer with a listener per
// port, forwarding to its nodePort on the machines of nodes, tagged with
// the cluster and the Service. A Service's spec.loadBalancerIP asks for
// that address of the pool.
func (p *Provider) EnsureLoadBalancer(ctx context.Context, clusterName string, svc *corev1.Service, nodes []*corev1.Node) (*corev1.LoadBalancerStatus, error) {
	backends, err := p.backends(ctx, nodes)
	if err != nil {
		return nil, err
	}
	spec := LoadBalancerSpec{
		IP:       svc.Spec.LoadBalancerIP,
		Backends: backends,
		Tags: map[string]string{
			TagCluster:    clusterName,
			TagService:    svc.Namespace + "/" + svc.Name,
			TagServiceUID: string(svc.UID),
		},
	}
	for _, port := range svc.Spec.Ports {
		spec.Listeners = append(spec.Listeners, Listener{Protocol: string(port.Protocol), Port: port.Port, NodePort: port.NodePort})
	}
	lb, err := p.c.PutLoadBalancer(ctx, DefaultLoadBalancerName(svc), spec)
	if err != nil {
		return nil, err
	}
	return lbStatus(lb), nil
}

// UpdateLoadBalancer changes only the load balancer's backends.
func (p *Provider) UpdateLoadBalancer(ctx context.Context, clusterName string, svc *corev1.Service, nodes []*corev1.Node) error {
	name := DefaultLoadBalancerName(svc)
	lb, err := p.c.GetLoadBalancer(ctx, name)
	if err != nil {
		return err
	}
	backends, err := p.backends(ctx, nodes)
	if err != nil {
		return err
	}
	_, err = p.c.PutLoadBalancer(ctx, name, LoadBalancerSpec{IP: lb.IP, Listeners: lb.Listeners, Backends: backends, Tags: lb.Tags})
	return err
}

func (p *Provider) EnsureLoadBalancerDeleted(ctx context.Context, clusterName string, svc *corev1.Service) error {
	err := p.c.DeleteLoadBalancer(ctx, DefaultLoadBalancerName(svc))
	if IsNotFound(err) {
		return nil // already gone
	}
	return err
}

// backends are the names of nodes' machines; a node the cloud has no
// machine for is left out, as a real cloud cannot register it.
func (p *Provider) backends(ctx context.Context, nodes []*corev1.Node) ([]string, error) {
	all, err := p.c.ListInstances(ctx)
	if err != nil {
		return nil, err
	}
	out := []string{}
	for _, n := range nodes {
		if in := match(all, n.Spec.ProviderID, n.Name); in != nil {
			out = append(out, in.Name)
		}
	}
	return out, nil
}

func lbStatus(lb *LoadBalancer) *corev1.LoadBalancerStatus {
	vip := corev1.LoadBalancerIPModeVIP
	return &corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: lb.IP, IPMode: &vip}}}
}

// instance finds a node's machine: by provider ID first, by name when the
// node has none yet. nil with no error: there is no such machine.
func (p *Provider) instance(ctx context.Context, providerID, name string) (*Instance, error) {
	if providerID != "" && !strings.HasPrefix(providerID, ProviderName+"://") {
		// Not ours to judge: "no such machine" would get the node deleted.
		return nil, fmt.Errorf("sim: provider ID %q is not the simulated cloud's (sim://<zone>/<name>)", providerID)
	}
	all, err := p.c.ListInstances(ctx)
	if err != nil {
		return nil, err
	}
	return match(all, providerID, name), nil
}

func match(all []Instance, providerID, name string) *Instance {
	for i := range all {
		if providerID != "" && all[i].ProviderID == providerID {
			return &all[i]
		}
	}
	if providerID != "" {
		return nil // the machine the node was made on is gone
	}
	for i := range all {
		if all[i].Name == name {
			return &all[i]
		}
	}
	return nil
}

func (p *Provider) InstanceExists(ctx context.Context, node *corev1.Node) (bool, error) {
	in, err := p.instance(ctx, node.Spec.ProviderID, node.Name)
	return in != nil, err
}

func (p *Provider) InstanceShutdown(ctx context.Context, node *corev1.Node) (bool, error) {
	in, err := p.instance(ctx, node.Spec.ProviderID, node.Name)
	if err != nil {
		return false, err
	}
	if in == nil {
		return false, cloud.InstanceNotFound
	}
	return in.State == StateStopped, nil
}

func (p *Provider) InstanceMetadata(ctx context.Context, node *corev1.Node) (*cloud.InstanceMetadata, error) {
	in, err := p.instance(ctx, node.Spec.ProviderID, node.Name)
	if err != nil {
		return nil, err
	}
	if in == nil {
		return nil, cloud.InstanceNotFound
	}
	md := &cloud.InstanceMetadata{ProviderID: in.ProviderID, InstanceType: in.InstanceType, Zone: in.Zone, Region: in.Region}
	for _, a := range in.Addresses {
		md.NodeAddresses = append(md.NodeAddresses, corev1.NodeAddress{Type: corev1.NodeAddressType(a.Type), Address: a.Address})
	}
	return md, nil
}

func (p *Provider) GetZoneByProviderID(ctx context.Context, providerID string) (cloud.Zone, error) {
	if providerID == "" {
		return cloud.Zone{}, errors.New("sim: empty provider ID")
	}
	return p.zone(ctx, providerID, "")
}

func (p *Provider) GetZoneByNodeName(ctx context.Context, nodeName types.NodeName) (cloud.Zone, error) {
	return p.zone(ctx, "", string(nodeName))
}

func (p *Provider) zone(ctx context.Context, providerID, name string) (cloud.Zone, error) {
	in, err := p.instance(ctx, providerID, name)
	if err != nil {
		return cloud.Zone{}, err
	}
	if in == nil {
		return cloud.Zone{}, cloud.InstanceNotFound
	}
	return cloud.Zone{FailureDomain: in.Zone, Region: in.Region}, nil
}

// ListRoutes is the cluster's part of the route table: the routes tagged
// with its name.
func (p *Provider) ListRoutes(ctx context.Context, clusterName string) ([]*cloud.Route, error) {
	all, err := p.c.ListRoutes(ctx)
	if err != nil {
		return nil, err
	}
	var out []*cloud.Route
	for _, r := range all {
		if r.Tags[TagCluster] != clusterName {
			continue
		}
		out = append(out, &cloud.Route{Name: r.Name, TargetNode: types.NodeName(r.Target), DestinationCIDR: r.DestinationCIDR, Blackhole: r.Blackhole})
	}
	return out, nil
}

// CreateRoute names the route <cluster>-<nameHint> (the node's UID), as
// GCE's provider does, cut to the cloud's 63 characters.
func (p *Provider) CreateRoute(ctx context.Context, clusterName string, nameHint string, route *cloud.Route) error {
	name := RouteName(clusterName, nameHint)
	_, err := p.c.PutRoute(ctx, name, RouteSpec{
		DestinationCIDR: route.DestinationCIDR,
		Target:          string(route.TargetNode),
		Tags:            map[string]string{TagCluster: clusterName},
	})
	return err
}

// RouteName is the cloud's name of a cluster's route for nameHint.
func RouteName(clusterName, nameHint string) string {
	name := strings.ToLower(clusterName + "-" + nameHint)
	return strings.TrimRight(name[:min(len(name), maxNameLength)], "-")
}

func (p *Provider) DeleteRoute(ctx context.Context, clusterName string, route *cloud.Route) error {
	err := p.c.DeleteRoute(ctx, route.Name)
	if IsNotFound(err) {
		return nil // already gone
	}
	return err
}
