package sim

import (
	"cmp"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/minictl/minictl/clock"
)

// DefaultPool is where load balancers' IPs come from: TEST-NET-1
// (RFC 5737), a documentation range that routes nowhere, so no one
// mistakes a simulated load balancer's address for a reachable one.
const DefaultPool = "192.0.2.0/24"

// Options configure a Cloud. The zero value is an in-memory cloud with
// the default pool and the real clock.
type Options struct {
	// DataDir, when set, is where the cloud keeps its machines, load
	// balancers and routes (cloud.json), so that a restart finds them
	// again. Faults are never kept.
	DataDir string
	// Pool is the CIDR load balancers' IPs come from (DefaultPool).
	Pool string
	// Clock times the fault switch.
	Clock clock.Clock
	// Log receives a line for every change, as component "cloud".
	Log *slog.Logger
}

// Cloud is the simulated cloud's state. Every method is safe to call
// concurrently and returns copies: a caller never holds the cloud's own
// records.
type Cloud struct {
	log   *slog.Logger
	clock clock.Clock
	file  string // "" when nothing is kept
	pool  *net.IPNet

	mu sync.Mutex
	// state is what a restart keeps.
	state state
	// fault is the switch; its until is zero when it is off.
	fault      Faults
	faultUntil time.Time
	faultDelay time.Duration
	// changed is closed, and replaced, on every change to an instance, so
	// that a watcher (up's machines) wakes without polling.
	changed chan struct{}
}

type state struct {
	NextID        int                      `json:"nextID"`
	Instances     map[string]*Instance     `json:"instances"`
	LoadBalancers map[string]*LoadBalancer `json:"loadBalancers"`
	// Routes keep their target's ID; Blackhole is worked out on reading.
	Routes map[string]*Route `json:"routes"`
}

// New makes a cloud, with what opts.DataDir holds when there is anything.
func New(opts Options) (*Cloud, error) {
	c := &Cloud{
		log:     cmp.Or(opts.Log, slog.New(slog.DiscardHandler)).With("component", "cloud"),
		clock:   clock.Or(opts.Clock),
		changed: make(chan struct{}),
		state: state{
			NextID:        1,
			Instances:     map[string]*Instance{},
			LoadBalancers: map[string]*LoadBalancer{},
			Routes:        map[string]*Route{},
		},
	}
	_, pool, err := net.ParseCIDR(cmp.Or(opts.Pool, DefaultPool))
	if err != nil || pool.IP.To4() == nil {
		return nil, fmt.Errorf("cloud: load balancer pool %q is not an IPv4 CIDR", opts.Pool)
	}
	c.pool = pool
	if opts.DataDir != "" {
		c.file = dataFile(opts.DataDir)
		if err := c.load(); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Changed is closed at the next change to any instance.
func (c *Cloud) Changed() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changed
}

// changedLocked records a change: it is kept and watchers wake.
func (c *Cloud) changedLocked() {
	c.saveLocked()
	close(c.changed)
	c.changed = make(chan struct{})
}

// Instances lists the machines, oldest first.
func (c *Cloud) Instances() []Instance {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Instance, 0, len(c.state.Instances))
	for _, in := range c.state.Instances {
		out = append(out, copyInstance(in))
	}
	slices.SortFunc(out, func(a, b Instance) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// Instance is the machine with this ID.
func (c *Cloud) Instance(id string) (Instance, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	in, ok := c.state.Instances[id]
	if !ok {
		return Instance{}, newError(http.StatusNotFound, "instance %q not found", id)
	}
	return copyInstance(in), nil
}

// CreateInstance starts a new machine; its name must be free.
func (c *Cloud) CreateInstance(spec InstanceSpec) (Instance, error) {
	spec.Zone = cmp.Or(spec.Zone, DefaultZone)
	spec.Region = cmp.Or(spec.Region, DefaultRegion)
	spec.InstanceType = cmp.Or(spec.InstanceType, DefaultInstanceType)
	if err := invalid("instance", spec.Name, validateInstanceSpec(&spec)); err != nil {
		return Instance{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if other := c.byNameLocked(spec.Name); other != nil {
		return Instance{}, newError(http.StatusConflict, "instance named %q already exists (%s)", spec.Name, other.ID)
	}
	in := &Instance{
		ID:           fmt.Sprintf("i-%08d", c.state.NextID),
		Name:         spec.Name,
		ProviderID:   ProviderID(spec.Zone, spec.Name),
		Zone:         spec.Zone,
		Region:       spec.Region,
		InstanceType: spec.InstanceType,
		Addresses:    slices.Clone(spec.Addresses),
		State:        StateRunning,
		CreatedAt:    c.clock.Now().UTC().Truncate(time.Second),
	}
	c.state.NextID++
	c.state.Instances[in.ID] = in
	c.log.Info(fmt.Sprintf("instance %s created for %s in zone %s, %s", in.ID, in.Name, in.Zone, describeAddresses(in.Addresses)),
		"object", in.Name, "instance", in.ID, "zone", in.Zone, "region", in.Region, "type", in.InstanceType)
	c.changedLocked()
	return copyInstance(in), nil
}

// DeleteInstance terminates a machine: it leaves every load balancer's
// backends, and routes to it become blackholes.
func (c *Cloud) DeleteInstance(id string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	in, ok := c.state.Instances[id]
	if !ok {
		return newError(http.StatusNotFound, "instance %q not found", id)
	}
	delete(c.state.Instances, id)
	c.log.Info(fmt.Sprintf("instance %s (%s) deleted", id, in.Name), "object", in.Name, "instance", id)
	for _, lb := range c.sortedLBsLocked() {
		if i := slices.Index(lb.Backends, in.Name); i >= 0 {
			lb.Backends = slices.Delete(lb.Backends, i, i+1)
			lb.UpdatedAt = c.clock.Now().UTC().Truncate(time.Second)
			c.log.Info(fmt.Sprintf("load balancer %s: backend %s removed, its instance is gone", lb.Name, in.Name), "object", lb.Name)
		}
	}
	for _, r := range c.state.Routes {
		if r.TargetID == id {
			c.log.Info(fmt.Sprintf("route %s to %s is a blackhole now", r.Name, in.Name), "object", r.Name)
		}
	}
	c.changedLocked()
	return nil
}

// StopInstance shuts a machine down; stopping a stopped one changes
// nothing.
func (c *Cloud) StopInstance(id string) (Instance, error) { return c.setState(id, StateStopped) }

// StartInstance boots a stopped machine; starting a running one changes
// nothing.
func (c *Cloud) StartInstance(id string) (Instance, error) { return c.setState(id, StateRunning) }

func (c *Cloud) setState(id, to string) (Instance, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	in, ok := c.state.Instances[id]
	if !ok {
		return Instance{}, newError(http.StatusNotFound, "instance %q not found", id)
	}
	if in.State != to {
		in.State = to
		c.log.Info(fmt.Sprintf("instance %s (%s) %s", id, in.Name, to), "object", in.Name, "instance", id, "state", to)
		c.changedLocked()
	}
	return copyInstance(in), nil
}

func (c *Cloud) byNameLocked(name string) *Instance {
	for _, in := range c.state.Instances {
		if in.Name == name {
			return in
		}
	}
	return nil
}

// LoadBalancers lists the load balancers by name.
func (c *Cloud) LoadBalancers() []LoadBalancer {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []LoadBalancer
	for _, lb := range c.sortedLBsLocked() {
		out = append(out, copyLB(lb))
	}
	return out
}

func (c *Cloud) sortedLBsLocked() []*LoadBalancer {
	out := slices.Collect(maps.Values(c.state.LoadBalancers))
	slices.SortFunc(out, func(a, b *LoadBalancer) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// LoadBalancer is the load balancer with this name.
func (c *Cloud) LoadBalancer(name string) (LoadBalancer, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	lb, ok := c.state.LoadBalancers[name]
	if !ok {
		return LoadBalancer{}, newError(http.StatusNotFound, "load balancer %q not found", name)
	}
	return copyLB(lb), nil
}

// PutLoadBalancer creates the load balancer or replaces its listeners,
// backends and tags; it keeps its IP unless spec asks for another.
// created tells which.
func (c *Cloud) PutLoadBalancer(name string, spec LoadBalancerSpec) (lb LoadBalancer, created bool, err error) {
	errs := append(validateName(name), validateLoadBalancerSpec(&spec)...)
	if err := invalid("load balancer", name, errs); err != nil {
		return LoadBalancer{}, false, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, b := range spec.Backends {
		if c.byNameLocked(b) == nil {
			return LoadBalancer{}, false, newError(http.StatusUnprocessableEntity,
				"load balancer %q is invalid: backends[%d]: Not found: %q: no instance has this name", name, i, b)
		}
	}
	old, exists := c.state.LoadBalancers[name]
	ip := spec.IP
	switch {
	case ip != "":
		if err := c.checkIPLocked(name, ip); err != nil {
			return LoadBalancer{}, false, err
		}
	case exists:
		ip = old.IP
	default:
		if ip = c.freeIPLocked(); ip == "" {
			return LoadBalancer{}, false, newError(http.StatusConflict, "no free address left in the pool %s", c.pool)
		}
	}
	now := c.clock.Now().UTC().Truncate(time.Second)
	next := &LoadBalancer{
		Name:      name,
		IP:        ip,
		Listeners: slices.Clone(spec.Listeners),
		Backends:  slices.Clone(spec.Backends),
		Tags:      maps.Clone(spec.Tags),
		CreatedAt: now,
		UpdatedAt: now,
	}
	if next.Backends == nil {
		next.Backends = []string{}
	}
	if exists {
		next.CreatedAt = old.CreatedAt
		if sameLB(old, next) {
			return copyLB(old), false, nil
		}
	}
	c.state.LoadBalancers[name] = next
	verb := "created"
	if exists {
		verb = "updated"
	}
	c.log.Info(fmt.Sprintf("load balancer %s %s%s, ip %s, listeners %s, backends %s", name, verb, owner(next.Tags), ip,
		describeListeners(next.Listeners), cmp.Or(strings.Join(next.Backends, ","), "none")),
		"object", name, "ip", ip)
	c.saveLocked()
	return copyLB(next), !exists, nil
}

// DeleteLoadBalancer deletes the load balancer and frees its IP.
func (c *Cloud) DeleteLoadBalancer(name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	lb, ok := c.state.LoadBalancers[name]
	if !ok {
		return newError(http.StatusNotFound, "load balancer %q not found", name)
	}
	delete(c.state.LoadBalancers, name)
	c.log.Info(fmt.Sprintf("load balancer %s deleted%s, ip %s freed", name, owner(lb.Tags), lb.IP), "object", name, "ip", lb.IP)
	c.saveLocked()
	return nil
}

func (c *Cloud) checkIPLocked(name, ip string) error {
	if !c.pool.Contains(net.ParseIP(ip)) {
		return newError(http.StatusUnprocessableEntity, "load balancer %q is invalid: ip: Invalid value: %q: must be in the pool %s", name, ip, c.pool)
	}
	for _, lb := range c.state.LoadBalancers {
		if lb.IP == ip && lb.Name != name {
			return newError(http.StatusConflict, "ip %s is taken by load balancer %q", ip, lb.Name)
		}
	}
	return nil
}

// freeIPLocked is the lowest free host address of the pool, "" when none
// is left.
func (c *Cloud) freeIPLocked() string {
	taken := map[string]bool{}
	for _, lb := range c.state.LoadBalancers {
		taken[lb.IP] = true
	}
	base := c.pool.IP.To4()
	ones, bits := c.pool.Mask.Size()
	size := 1 << (bits - ones)
	for n := 1; n < size-1; n++ { // not the network nor the broadcast address
		ip := make(net.IP, 4)
		v := uint32(base[0])<<24 | uint32(base[1])<<16 | uint32(base[2])<<8 | uint32(base[3]) + uint32(n)
		ip[0], ip[1], ip[2], ip[3] = byte(v>>24), byte(v>>16), byte(v>>8), byte(v)
		if !taken[ip.String()] {
			return ip.String()
		}
	}
	return ""
}

// Routes lists the route table by name.
func (c *Cloud) Routes() []Route {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Route, 0, len(c.state.Routes))
	for _, r := range c.state.Routes {
		out = append(out, c.routeLocked(r))
	}
	slices.SortFunc(out, func(a, b Route) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

func (c *Cloud) routeLocked(r *Route) Route {
	out := *r
	out.Tags = maps.Clone(r.Tags)
	_, alive := c.state.Instances[r.TargetID]
	out.Blackhole = !alive
	return out
}

// PutRoute creates the route or points it elsewhere. Its target must be
// an instance, and no other route may have its destination.
func (c *Cloud) PutRoute(name string, spec RouteSpec) (r Route, created bool, err error) {
	errs := append(validateName(name), validateRouteSpec(&spec)...)
	if err := invalid("route", name, errs); err != nil {
		return Route{}, false, err
	}
	_, dst, _ := net.ParseCIDR(spec.DestinationCIDR)
	c.mu.Lock()
	defer c.mu.Unlock()
	target := c.byNameLocked(spec.Target)
	if target == nil {
		return Route{}, false, newError(http.StatusUnprocessableEntity,
			"route %q is invalid: target: Not found: %q: no instance has this name", name, spec.Target)
	}
	for _, other := range c.state.Routes {
		if other.Name != name && other.DestinationCIDR == dst.String() {
			return Route{}, false, newError(http.StatusConflict, "destination %s is already routed by %q", dst, other.Name)
		}
	}
	old, exists := c.state.Routes[name]
	next := &Route{
		Name:            name,
		DestinationCIDR: dst.String(),
		Target:          target.Name,
		TargetID:        target.ID,
		Tags:            maps.Clone(spec.Tags),
		CreatedAt:       c.clock.Now().UTC().Truncate(time.Second),
	}
	if exists {
		next.CreatedAt = old.CreatedAt
		if old.DestinationCIDR == next.DestinationCIDR && old.TargetID == next.TargetID && maps.Equal(old.Tags, next.Tags) {
			return c.routeLocked(old), false, nil
		}
	}
	c.state.Routes[name] = next
	c.log.Info(fmt.Sprintf("route %s: %s → %s (%s)", name, next.DestinationCIDR, target.Name, target.ID), "object", name)
	c.saveLocked()
	return c.routeLocked(next), !exists, nil
}

// DeleteRoute removes a route.
func (c *Cloud) DeleteRoute(name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.state.Routes[name]
	if !ok {
		return newError(http.StatusNotFound, "route %q not found", name)
	}
	delete(c.state.Routes, name)
	c.log.Info(fmt.Sprintf("route %s: %s → %s deleted", name, r.DestinationCIDR, r.Target), "object", name)
	c.saveLocked()
	return nil
}

// SetFaults turns the fault switch on for f.Duration from now.
func (c *Cloud) SetFaults(f Faults) (Faults, error) {
	window, delay, errs := validateFaults(&f)
	if err := invalid("faults", f.Mode, errs); err != nil {
		return Faults{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fault = Faults{Mode: f.Mode, Duration: window.String()}
	if delay > 0 {
		c.fault.Delay = delay.String()
	}
	c.faultUntil = c.clock.Now().Add(window)
	c.faultDelay = delay
	msg := fmt.Sprintf("fault %s for %s", f.Mode, window)
	if delay > 0 {
		msg += ", each call delayed " + delay.String()
	}
	c.log.Info(msg, "mode", f.Mode, "duration", window, "delay", delay)
	return c.faultsLocked(), nil
}

// Faults is the switch as it is now.
func (c *Cloud) Faults() Faults {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.faultsLocked()
}

func (c *Cloud) faultsLocked() Faults {
	if c.faultUntil.IsZero() || !c.clock.Now().Before(c.faultUntil) {
		return Faults{Mode: FaultNone}
	}
	f := c.fault
	until := c.faultUntil.UTC()
	f.Until = &until
	return f
}

// ClearFaults turns the switch off.
func (c *Cloud) ClearFaults() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.faultsLocked().Mode != FaultNone {
		c.log.Info("fault cleared", "mode", c.fault.Mode)
	}
	c.faultUntil = time.Time{}
}

// activeFault is the mode in force (FaultNone when off) and its delay.
func (c *Cloud) activeFault() (string, time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.faultsLocked()
	return f.Mode, c.faultDelay
}

// ProviderID is the provider ID of the machine name in zone:
// sim://<zone>/<name>.
func ProviderID(zone, name string) string { return ProviderName + "://" + zone + "/" + name }

func copyInstance(in *Instance) Instance {
	out := *in
	out.Addresses = slices.Clone(in.Addresses)
	if out.Addresses == nil {
		out.Addresses = []Address{}
	}
	return out
}

func copyLB(lb *LoadBalancer) LoadBalancer {
	out := *lb
	out.Listeners = slices.Clone(lb.Listeners)
	out.Backends = slices.Clone(lb.Backends)
	out.Tags = maps.Clone(lb.Tags)
	return out
}

func sameLB(a, b *LoadBalancer) bool {
	return a.IP == b.IP && slices.Equal(a.Listeners, b.Listeners) && slices.Equal(a.Backends, b.Backends) && maps.Equal(a.Tags, b.Tags)
}

// owner names whose a load balancer is, from its tags: " for default/web".
func owner(tags map[string]string) string {
	if s := tags[TagService]; s != "" {
		return " for " + s
	}
	if s := tags[TagIngress]; s != "" {
		return " for ingress " + s
	}
	return ""
}

func describeListeners(ls []Listener) string {
	parts := make([]string, len(ls))
	for i, l := range ls {
		parts[i] = fmt.Sprintf("%s/%d→%d", l.Protocol, l.Port, l.NodePort)
	}
	return strings.Join(parts, ",")
}

func describeAddresses(as []Address) string {
	if len(as) == 0 {
		return "no addresses"
	}
	parts := make([]string, len(as))
	for i, a := range as {
		parts[i] = a.Type + " " + a.Address
	}
	return strings.Join(parts, ", ")
}

func itoa(n int32) string { return fmt.Sprint(n) }
