package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/cloud/sim"
	"github.com/minictl/minictl/internal/minitest"
)

// cloudControllerManager is one `minictl cloud-controller-manager`
// process.
type cloudControllerManager struct {
	p        *minitest.Process
	identity string
	health   string // http://<addr>/healthz
}

func startCloudControllerManager(t *testing.T, server, cloudConfig string) *cloudControllerManager {
	t.Helper()
	p := minitest.Start(t, false, "cloud-controller-manager", "--fast", "--server", server,
		"--cloud-provider", "sim", "--cloud-config", cloudConfig, "--address", "127.0.0.1:0")
	// Its first line: "cloud controller manager <identity> (cloud sim): /healthz and /metrics on http://<addr>"
	var first string
	eventually(t, "the cloud controller manager's first line", func() (bool, string) {
		line, _, ok := strings.Cut(p.Stdout.String(), "\n")
		first = line
		select {
		case <-p.Exited():
			t.Fatalf("cloud controller manager exited:\n%s", p.Stderr)
		default:
		}
		return ok, p.Stderr.String()
	})
	f := strings.Fields(first)
	if len(f) < 4 || !strings.HasPrefix(f[len(f)-1], "http://") {
		t.Fatalf("unexpected first line %q", first)
	}
	return &cloudControllerManager{p: p, identity: f[3], health: f[len(f)-1] + "/healthz"}
}

// startSimCloud serves a simulated cloud on loopback for the test and
// writes a --cloud-config naming it.
func startSimCloud(t *testing.T) (*sim.Client, string) {
	t.Helper()
	c, err := sim.New(sim.Options{})
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
		<-done
	})
	url := "http://" + ln.Addr().String()
	file := filepath.Join(t.TempDir(), "cloud.yaml")
	if err := sim.WriteConfig(file, url); err != nil {
		t.Fatal(err)
	}
	cl, err := sim.NewClient(url, sim.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cl, file
}

func healthz(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestCloudControllerManagerLeaderElection runs two cloud controller
// managers against one cluster and one cloud: one takes the Lease
// kube-system/cloud-controller-manager and gives a LoadBalancer Service its
// load balancer; killed, the other takes over and serves the next one.
func TestCloudControllerManagerLeaderElection(t *testing.T) {
	c := up(t, minitest.FreeAddr(t), t.TempDir(), "--fast", "--cloud-provider=")
	rc := c.client(t)
	ctx := minitest.Context(t)
	cloudClient, cloudConfig := startSimCloud(t)
	// Machines for up's nodes, so that they can be backends.
	for i := 1; i <= 3; i++ {
		if _, err := cloudClient.CreateInstance(ctx, sim.InstanceSpec{Name: fmt.Sprintf("node-%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	a, b := startCloudControllerManager(t, c.URL, cloudConfig), startCloudControllerManager(t, c.URL, cloudConfig)
	leases := client.For[*coordinationv1.Lease](rc)
	holder := func() string {
		l, err := leases.Get(ctx, "kube-system", "cloud-controller-manager")
		if err != nil || l.Spec.HolderIdentity == nil {
			return fmt.Sprint(err)
		}
		return *l.Spec.HolderIdentity
	}
	eventually(t, "one cloud controller manager to take the lease", func() (bool, string) {
		h := holder()
		return h == a.identity || h == b.identity, h
	})
	leader, standby := a, b
	if holder() == b.identity {
		leader, standby = b, a
	}
	for _, m := range []*cloudControllerManager{a, b} {
		if code, body := healthz(m.health); code != http.StatusOK || body != "ok" {
			t.Fatalf("%s: %d %q", m.health, code, body)
		}
	}

	services := client.For[*corev1.Service](rc)
	lbService := func(name string) {
		t.Helper()
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
			Spec: corev1.ServiceSpec{
				Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": name},
				Ports: []corev1.ServicePort{{Port: 80}},
			},
		}
		if _, err := services.Create(ctx, svc); err != nil {
			t.Fatal(err)
		}
		eventually(t, name+"'s load balancer ingress", func() (bool, string) {
			got, err := services.Get(ctx, "default", name)
			if err != nil {
				return false, err.Error()
			}
			in := got.Status.LoadBalancer.Ingress
			return len(in) == 1 && in[0].IP != "", fmt.Sprintf("%+v", got.Status.LoadBalancer)
		})
	}
	lbService("first")

	if err := leader.p.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-leader.p.Exited()
	eventually(t, "the standby to take the lease", func() (bool, string) {
		h := holder()
		return h == standby.identity, h
	})
	lbService("second")
	lbs, err := cloudClient.ListLoadBalancers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(lbs) != 2 {
		t.Fatalf("the cloud has %d load balancers, want 2 (one per Service): %+v", len(lbs), lbs)
	}
}

// TestUpRunsTheCloudControllerManager checks the cloud controller manager
// up runs in process, as system:cloud-controller-manager with its
// controllers on their own ServiceAccounts under RBAC: a LoadBalancer
// Service gets its load balancer with every node behind it, and every
// node its route.
func TestUpRunsTheCloudControllerManager(t *testing.T) {
	ctx := minitest.Context(t)
	c := up(t, minitest.FreeAddr(t), t.TempDir(), "--fast", "--cloud-controller-manager-address", "127.0.0.1:0")
	var url string
	eventually(t, "the cloud's URL in the banner", func() (bool, string) {
		m := cloudLine.FindStringSubmatch(c.Stdout.String())
		if m != nil {
			url = m[1]
		}
		return m != nil, c.Stdout.String()
	})
	cloudClient, err := sim.NewClient(url, sim.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rc := c.client(t)

	services := client.For[*corev1.Service](rc)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": "web"},
			Ports: []corev1.ServicePort{{Port: 80}},
		},
	}
	svc, err = services.Create(ctx, svc)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "web's load balancer behind node-1..3", func() (bool, string) {
		lb, err := cloudClient.GetLoadBalancer(ctx, sim.DefaultLoadBalancerName(svc))
		if err != nil {
			return false, err.Error()
		}
		got, err := services.Get(ctx, "default", "web")
		if err != nil {
			return false, err.Error()
		}
		in := got.Status.LoadBalancer.Ingress
		return len(in) == 1 && in[0].IP == lb.IP && strings.Join(lb.Backends, ",") == "node-1,node-2,node-3",
			fmt.Sprintf("status %+v, backends %v", got.Status.LoadBalancer, lb.Backends)
	})

	nodes := client.For[*corev1.Node](rc)
	eventually(t, "every node's route created", func() (bool, string) {
		list, err := nodes.List(ctx, "", metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		var states []string
		ok := len(list.Items) == 3
		for _, n := range list.Items {
			state := "no NetworkUnavailable"
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeNetworkUnavailable {
					state = string(c.Status) + " " + c.Reason
				}
			}
			ok = ok && state == "False RouteCreated"
			states = append(states, n.Name+": "+state)
		}
		return ok, strings.Join(states, "; ")
	})
	routes, err := cloudClient.ListRoutes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(routes) != 3 {
		t.Fatalf("the cloud has %d routes, want one per node: %+v", len(routes), routes)
	}
}
