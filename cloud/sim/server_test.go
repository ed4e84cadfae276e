package sim

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/minictl/minictl/clock"
)

// start serves a new cloud on a loopback port until the test ends.
func start(t *testing.T, opts Options) (*Cloud, *Client) {
	t.Helper()
	c, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	cl, err := NewClient("http://"+ln.Addr().String(), ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return c, cl
}

// call sends body to the cloud and returns the status code and the
// answer's body.
func call(t *testing.T, cl *Client, method, path, body string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, cl.URL()+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func mustCreate(t *testing.T, cl *Client, spec InstanceSpec) *Instance {
	t.Helper()
	in, err := cl.CreateInstance(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func TestInstanceLifecycle(t *testing.T) {
	_, cl := start(t, Options{})
	ctx := context.Background()

	code, body := call(t, cl, "POST", "/v1/instances", `{"name":"node-1","addresses":[{"type":"InternalIP","address":"127.0.1.1"}]}`)
	if code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, body)
	}
	var in Instance
	if err := json.Unmarshal([]byte(body), &in); err != nil {
		t.Fatal(err)
	}
	want := Instance{ID: "i-00000001", Name: "node-1", ProviderID: "sim://sim-a/node-1", Zone: DefaultZone, Region: DefaultRegion,
		InstanceType: DefaultInstanceType, State: StateRunning}
	if in.ID != want.ID || in.ProviderID != want.ProviderID || in.Zone != want.Zone || in.Region != want.Region ||
		in.InstanceType != want.InstanceType || in.State != want.State || len(in.Addresses) != 1 || in.Addresses[0].Address != "127.0.1.1" {
		t.Fatalf("created %+v, want %+v with InternalIP 127.0.1.1", in, want)
	}
	two := mustCreate(t, cl, InstanceSpec{Name: "node-2", Zone: "b", InstanceType: "sim.large"})
	if two.ID != "i-00000002" || two.ProviderID != "sim://b/node-2" {
		t.Fatalf("second instance %+v", two)
	}

	if _, err := cl.CreateInstance(ctx, InstanceSpec{Name: "node-1"}); !IsConflict(err) {
		t.Fatalf("a second node-1: %v, want 409", err)
	}
	all, err := cl.ListInstances(ctx)
	if err != nil || len(all) != 2 || all[0].Name != "node-1" || all[1].Name != "node-2" {
		t.Fatalf("list: %+v %v", all, err)
	}
	byName, err := cl.InstanceByName(ctx, "node-2")
	if err != nil || byName.ID != two.ID {
		t.Fatalf("by name: %+v %v", byName, err)
	}
	if _, err := cl.InstanceByName(ctx, "node-9"); !IsNotFound(err) {
		t.Fatalf("by unknown name: %v", err)
	}

	stopped, err := cl.StopInstance(ctx, in.ID)
	if err != nil || stopped.State != StateStopped {
		t.Fatalf("stop: %+v %v", stopped, err)
	}
	if again, err := cl.StopInstance(ctx, in.ID); err != nil || again.State != StateStopped {
		t.Fatalf("stop a stopped instance: %+v %v", again, err)
	}
	if got, _ := cl.GetInstance(ctx, in.ID); got.State != StateStopped {
		t.Fatalf("get after stop: %+v", got)
	}
	if started, err := cl.StartInstance(ctx, in.ID); err != nil || started.State != StateRunning {
		t.Fatalf("start: %+v %v", started, err)
	}

	if code, body := call(t, cl, "DELETE", "/v1/instances/"+in.ID, ""); code != http.StatusNoContent {
		t.Fatalf("delete: %d %s", code, body)
	}
	for _, p := range []string{"GET /v1/instances/" + in.ID, "DELETE /v1/instances/" + in.ID, "POST /v1/instances/" + in.ID + "/stop", "POST /v1/instances/i-9/start"} {
		method, path, _ := strings.Cut(p, " ")
		code, body := call(t, cl, method, path, "")
		if code != http.StatusNotFound || !strings.Contains(body, `"reason": "NotFound"`) {
			t.Errorf("%s after delete: %d %s", p, code, body)
		}
	}
	if code, body := call(t, cl, "GET", "/healthz", ""); code != http.StatusOK || body != "ok" {
		t.Errorf("healthz: %d %q", code, body)
	}
}

// TestBadInput: every refusal names what is wrong, with the right code,
// and leaves the cloud as it was.
func TestBadInput(t *testing.T) {
	c, cl := start(t, Options{})
	mustCreate(t, cl, InstanceSpec{Name: "node-1"})
	if _, _, err := c.PutLoadBalancer("web", LoadBalancerSpec{Listeners: []Listener{{Protocol: "TCP", Port: 80, NodePort: 30080}}, Backends: []string{"node-1"}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.PutLoadBalancer("other", LoadBalancerSpec{Listeners: []Listener{{Protocol: "TCP", Port: 80}}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.PutRoute("r1", RouteSpec{DestinationCIDR: "10.244.1.0/24", Target: "node-1"}); err != nil {
		t.Fatal(err)
	}
	snapshot := func() string {
		b, _ := json.Marshal([]any{c.Instances(), c.LoadBalancers(), c.Routes(), c.Faults()})
		return string(b)
	}
	before := snapshot()
	lb := func(s string) string { return `{"listeners":[` + s + `],"backends":[]}` }
	cases := []struct {
		name, method, path, body string
		code                     int
		says                     string
	}{
		{"empty body", "POST", "/v1/instances", "", 400, "body is empty"},
		{"broken JSON", "POST", "/v1/instances", `{"name":`, 400, "not valid"},
		{"unknown field", "POST", "/v1/instances", `{"name":"n","id":"i-1"}`, 400, `unknown field \"id\"`},
		{"two values", "POST", "/v1/instances", `{"name":"n"}{}`, 400, "more than one"},
		{"too big", "POST", "/v1/instances", `{"name":"` + strings.Repeat("x", maxBody) + `"}`, 413, "larger than"},
		{"no name", "POST", "/v1/instances", `{}`, 422, "name: Required value"},
		{"bad name", "POST", "/v1/instances", `{"name":"Node_1"}`, 422, `name: Invalid value: \"Node_1\"`},
		{"taken name", "POST", "/v1/instances", `{"name":"node-1"}`, 409, "already exists"},
		{"bad zone", "POST", "/v1/instances", `{"name":"n","zone":"A B"}`, 422, "zone: Invalid value"},
		{"bad type", "POST", "/v1/instances", `{"name":"n","instanceType":"huge"}`, 422, `instanceType: Unsupported value: \"huge\"`},
		{"bad address", "POST", "/v1/instances", `{"name":"n","addresses":[{"type":"InternalIP","address":"nope"}]}`, 422, "addresses[0].address: Invalid value"},
		{"bad address type", "POST", "/v1/instances", `{"name":"n","addresses":[{"type":"Public","address":"1.2.3.4"}]}`, 422, "addresses[0].type: Unsupported value"},
		{"lb bad name", "PUT", "/v1/loadbalancers/Web_1", lb(`{"protocol":"TCP","port":80}`), 422, "name: Invalid value"},
		{"lb no listeners", "PUT", "/v1/loadbalancers/x", lb(``), 422, "listeners: Required value"},
		{"lb port 0", "PUT", "/v1/loadbalancers/x", lb(`{"protocol":"TCP","port":0}`), 422, "listeners[0].port: Invalid value: 0: must be between 1 and 65535, inclusive"},
		{"lb bad protocol", "PUT", "/v1/loadbalancers/x", lb(`{"protocol":"HTTP","port":80}`), 422, "listeners[0].protocol: Unsupported value"},
		{"lb same port twice", "PUT", "/v1/loadbalancers/x", lb(`{"protocol":"TCP","port":80},{"protocol":"TCP","port":80,"nodePort":1}`), 422, "listeners[1]: Duplicate value"},
		{"lb unknown backend", "PUT", "/v1/loadbalancers/web", `{"listeners":[{"protocol":"TCP","port":80}],"backends":["node-9"]}`, 422, `backends[0]: Not found: \"node-9\"`},
		{"lb ip outside the pool", "PUT", "/v1/loadbalancers/web", `{"ip":"10.0.0.1","listeners":[{"protocol":"TCP","port":80}]}`, 422, "must be in the pool 192.0.2.0/24"},
		{"lb ip taken", "PUT", "/v1/loadbalancers/web", `{"ip":"192.0.2.2","listeners":[{"protocol":"TCP","port":80}]}`, 409, `taken by load balancer \"other\"`},
		{"lb ip not an ip", "PUT", "/v1/loadbalancers/web", `{"ip":"x","listeners":[{"protocol":"TCP","port":80}]}`, 422, "ip: Invalid value"},
		{"lb empty tag key", "PUT", "/v1/loadbalancers/web", `{"listeners":[{"protocol":"TCP","port":80}],"tags":{"":"x"}}`, 422, "tags: Invalid value"},
		{"route bad cidr", "PUT", "/v1/routes/r2", `{"destinationCIDR":"10.244.2.0/99","target":"node-1"}`, 422, "destinationCIDR: Invalid value"},
		{"route host bits", "PUT", "/v1/routes/r2", `{"destinationCIDR":"10.244.2.1/24","target":"node-1"}`, 422, "must be a network address, e.g. 10.244.2.0/24"},
		{"route no target", "PUT", "/v1/routes/r2", `{"destinationCIDR":"10.244.2.0/24"}`, 422, "target: Required value"},
		{"route unknown target", "PUT", "/v1/routes/r2", `{"destinationCIDR":"10.244.2.0/24","target":"node-9"}`, 422, `target: Not found: \"node-9\"`},
		{"route same destination", "PUT", "/v1/routes/r2", `{"destinationCIDR":"10.244.1.0/24","target":"node-1"}`, 409, `already routed by \"r1\"`},
		{"fault bad mode", "PUT", "/v1/faults", `{"mode":"flaky","duration":"1s"}`, 422, "mode: Unsupported value"},
		{"fault no duration", "PUT", "/v1/faults", `{"mode":"unavailable"}`, 422, "duration: Required value"},
		{"fault bad duration", "PUT", "/v1/faults", `{"mode":"unavailable","duration":"soon"}`, 422, "duration: Invalid value"},
		{"fault too long", "PUT", "/v1/faults", `{"mode":"unavailable","duration":"2h"}`, 422, "at most 1h0m0s"},
		{"fault slow without delay", "PUT", "/v1/faults", `{"mode":"slow","duration":"1s"}`, 422, "delay: Required value"},
		{"fault delay when unavailable", "PUT", "/v1/faults", `{"mode":"unavailable","duration":"1s","delay":"1s"}`, 422, "delay: Forbidden"},
		{"fault until", "PUT", "/v1/faults", `{"mode":"unavailable","duration":"1s","until":"2030-01-01T00:00:00Z"}`, 422, "until: Forbidden"},
		{"no such path", "GET", "/v1/machines", "", 404, "no such path"},
		{"wrong method", "PATCH", "/v1/instances", "", 405, "PATCH is not allowed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, body := call(t, cl, tc.method, tc.path, tc.body)
			if code != tc.code || !strings.Contains(body, tc.says) {
				t.Errorf("%s %s: %d %s\nwant %d saying %q", tc.method, tc.path, code, body, tc.code, tc.says)
			}
			var e Error
			if err := json.Unmarshal([]byte(body), &e); err != nil || e.Code != tc.code || e.Reason == "" {
				t.Errorf("error body %s is not an Error with code %d", body, tc.code)
			}
			if after := snapshot(); after != before {
				t.Errorf("the cloud changed:\n%s\n%s", before, after)
			}
		})
	}
}

func TestLoadBalancers(t *testing.T) {
	_, cl := start(t, Options{})
	ctx := context.Background()
	n1 := mustCreate(t, cl, InstanceSpec{Name: "node-1"})
	mustCreate(t, cl, InstanceSpec{Name: "node-2"})
	spec := LoadBalancerSpec{
		Listeners: []Listener{{Protocol: "TCP", Port: 80, NodePort: 30080}},
		Backends:  []string{"node-1", "node-2"},
		Tags:      map[string]string{TagService: "default/web"},
	}
	body, _ := json.Marshal(spec)
	code, out := call(t, cl, "PUT", "/v1/loadbalancers/web", string(body))
	if code != http.StatusCreated || !strings.Contains(out, `"ip": "192.0.2.1"`) {
		t.Fatalf("create: %d %s", code, out)
	}
	if code, out := call(t, cl, "PUT", "/v1/loadbalancers/web", string(body)); code != http.StatusOK || !strings.Contains(out, `"ip": "192.0.2.1"`) {
		t.Fatalf("put again: %d %s", code, out)
	}
	api, err := cl.PutLoadBalancer(ctx, "api", LoadBalancerSpec{Listeners: []Listener{{Protocol: "UDP", Port: 53, NodePort: 30053}}})
	if err != nil || api.IP != "192.0.2.2" || len(api.Backends) != 0 {
		t.Fatalf("second load balancer: %+v %v", api, err)
	}
	moved, err := cl.PutLoadBalancer(ctx, "api", LoadBalancerSpec{IP: "192.0.2.200", Listeners: api.Listeners})
	if err != nil || moved.IP != "192.0.2.200" || !moved.CreatedAt.Equal(api.CreatedAt) {
		t.Fatalf("asking for an IP: %+v %v", moved, err)
	}

	if err := cl.DeleteInstance(ctx, n1.ID); err != nil {
		t.Fatal(err)
	}
	web, err := cl.GetLoadBalancer(ctx, "web")
	if err != nil || len(web.Backends) != 1 || web.Backends[0] != "node-2" || web.Tags[TagService] != "default/web" {
		t.Fatalf("after node-1's machine is deleted: %+v %v", web, err)
	}

	if err := cl.DeleteLoadBalancer(ctx, "web"); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.GetLoadBalancer(ctx, "web"); !IsNotFound(err) {
		t.Fatalf("get deleted: %v", err)
	}
	if err := cl.DeleteLoadBalancer(ctx, "web"); !IsNotFound(err) {
		t.Fatalf("delete deleted: %v", err)
	}
	again, err := cl.PutLoadBalancer(ctx, "web2", spec2())
	if err != nil || again.IP != "192.0.2.1" {
		t.Fatalf("a freed IP is given again: %+v %v", again, err)
	}
	all, err := cl.ListLoadBalancers(ctx)
	if err != nil || len(all) != 2 || all[0].Name != "api" || all[1].Name != "web2" {
		t.Fatalf("list: %+v %v", all, err)
	}
}

func spec2() LoadBalancerSpec {
	return LoadBalancerSpec{Listeners: []Listener{{Protocol: "TCP", Port: 443, NodePort: 30443}}}
}

func TestPoolRunsOut(t *testing.T) {
	_, cl := start(t, Options{Pool: "192.0.2.0/30"}) // two host addresses
	ctx := context.Background()
	for _, name := range []string{"a", "b"} {
		if _, err := cl.PutLoadBalancer(ctx, name, spec2()); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cl.PutLoadBalancer(ctx, "c", spec2()); !IsConflict(err) || !strings.Contains(err.Error(), "no free address") {
		t.Fatalf("third load balancer in a /30: %v", err)
	}
}

func TestRoutes(t *testing.T) {
	_, cl := start(t, Options{})
	ctx := context.Background()
	n1 := mustCreate(t, cl, InstanceSpec{Name: "node-1"})
	mustCreate(t, cl, InstanceSpec{Name: "node-2"})
	r, err := cl.PutRoute(ctx, "r1", RouteSpec{DestinationCIDR: "10.244.1.0/24", Target: "node-1"})
	if err != nil || r.TargetID != n1.ID || r.Blackhole {
		t.Fatalf("put: %+v %v", r, err)
	}
	if r, err = cl.PutRoute(ctx, "r1", RouteSpec{DestinationCIDR: "10.244.1.0/24", Target: "node-2"}); err != nil || r.Target != "node-2" {
		t.Fatalf("repoint: %+v %v", r, err)
	}
	if _, err := cl.PutRoute(ctx, "r2", RouteSpec{DestinationCIDR: "10.244.2.0/24", Target: "node-1"}); err != nil {
		t.Fatal(err)
	}
	if err := cl.DeleteInstance(ctx, n1.ID); err != nil {
		t.Fatal(err)
	}
	all, err := cl.ListRoutes(ctx)
	if err != nil || len(all) != 2 || all[0].Blackhole || !all[1].Blackhole {
		t.Fatalf("after node-1's machine is gone, r2 should be a blackhole: %+v %v", all, err)
	}
	if err := cl.DeleteRoute(ctx, "r2"); err != nil {
		t.Fatal(err)
	}
	if err := cl.DeleteRoute(ctx, "r2"); !IsNotFound(err) {
		t.Fatalf("delete again: %v", err)
	}
	if all, _ := cl.ListRoutes(ctx); len(all) != 1 {
		t.Fatalf("routes after delete: %+v", all)
	}
}

func TestFaultUnavailable(t *testing.T) {
	fake := clock.NewFake(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	_, cl := start(t, Options{Clock: fake})
	ctx := context.Background()
	if f, err := cl.Faults(ctx); err != nil || f.Mode != FaultNone {
		t.Fatalf("faults at start: %+v %v", f, err)
	}
	f, err := cl.SetFaults(ctx, Faults{Mode: FaultUnavailable, Duration: "10s"})
	if err != nil || f.Until == nil || !f.Until.Equal(fake.Now().Add(10*time.Second)) {
		t.Fatalf("set: %+v %v", f, err)
	}
	for _, p := range []string{"GET /v1/instances", "POST /v1/instances", "GET /v1/loadbalancers", "PUT /v1/routes/x"} {
		method, path, _ := strings.Cut(p, " ")
		if code, body := call(t, cl, method, path, `{"name":"n"}`); code != http.StatusServiceUnavailable {
			t.Errorf("%s while unavailable: %d %s", p, code, body)
		}
	}
	if _, err := cl.ListInstances(ctx); !IsUnavailable(err) {
		t.Errorf("client while unavailable: %v", err)
	}
	if err := cl.Healthz(ctx); err != nil {
		t.Errorf("healthz answers through a fault: %v", err)
	}
	fake.Step(10 * time.Second)
	if _, err := cl.ListInstances(ctx); err != nil {
		t.Fatalf("after the fault's duration: %v", err)
	}
	if f, _ := cl.Faults(ctx); f.Mode != FaultNone {
		t.Fatalf("faults after the duration: %+v", f)
	}

	if _, err := cl.SetFaults(ctx, Faults{Mode: FaultUnavailable, Duration: "1h"}); err != nil {
		t.Fatal(err)
	}
	if err := cl.ClearFaults(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.ListInstances(ctx); err != nil {
		t.Fatalf("after DELETE /v1/faults: %v", err)
	}
}

func TestFaultSlow(t *testing.T) {
	fake := clock.NewFake(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	_, cl := start(t, Options{Clock: fake})
	ctx := context.Background()
	if _, err := cl.SetFaults(ctx, Faults{Mode: FaultSlow, Duration: "1m", Delay: "2s"}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := cl.CreateInstance(ctx, InstanceSpec{Name: "late"})
		done <- err
	}()
	// The call waits on the cloud's clock: it answers once two seconds
	// have passed there, and not before.
	waitFor(t, func() bool { return len(fake.Waiters()) == 1 })
	select {
	case err := <-done:
		t.Fatalf("a slow call answered before its delay: %v", err)
	default:
	}
	fake.Step(2 * time.Second)
	if err := <-done; err != nil {
		t.Fatalf("slow call: %v", err)
	}

	// A client that will not wait that long gives up, and the cloud
	// drops the call.
	impatient, _ := NewClient(cl.URL(), ClientOptions{Timeout: 50 * time.Millisecond})
	if _, err := impatient.ListInstances(ctx); err == nil {
		t.Fatal("an impatient client got an answer from a slow cloud")
	}
	waitFor(t, func() bool { return len(fake.Waiters()) == 0 })
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestDataDirKeepsTheCloud(t *testing.T) {
	dir := t.TempDir()
	c, err := New(Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	in, _ := c.CreateInstance(InstanceSpec{Name: "node-1"})
	if _, _, err := c.PutLoadBalancer("web", LoadBalancerSpec{Listeners: []Listener{{Protocol: "TCP", Port: 80}}, Backends: []string{"node-1"}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.PutRoute("r1", RouteSpec{DestinationCIDR: "10.244.0.0/24", Target: "node-1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.StopInstance(in.ID); err != nil {
		t.Fatal(err)
	}

	again, err := New(Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	got, err := again.Instance(in.ID)
	if err != nil || got.State != StateStopped || got.Name != "node-1" {
		t.Fatalf("instance after restart: %+v %v", got, err)
	}
	if lb, err := again.LoadBalancer("web"); err != nil || lb.IP != "192.0.2.1" || lb.Backends[0] != "node-1" {
		t.Fatalf("load balancer after restart: %+v %v", lb, err)
	}
	if rs := again.Routes(); len(rs) != 1 || rs[0].Blackhole {
		t.Fatalf("routes after restart: %+v", rs)
	}
	next, err := again.CreateInstance(InstanceSpec{Name: "node-2"})
	if err != nil || next.ID != "i-00000002" {
		t.Fatalf("IDs go on after a restart: %+v %v", next, err)
	}
}
