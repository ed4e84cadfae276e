package service

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/client/record"
	"github.com/minictl/minictl/cloud/sim"
	"github.com/minictl/minictl/cloud/simtest"
	"github.com/minictl/minictl/controllers/internal/controller"
	"github.com/minictl/minictl/controllers/internal/controllertest"
)

// harness is an API server, a simulated cloud on loopback, and the
// service controller between them.
type harness struct {
	t        *testing.T
	ctx      context.Context
	services *client.Client[*corev1.Service]
	nodes    *client.Client[*corev1.Node]
	cloud    *sim.Client
	recorder *record.FakeRecorder
}

func start(t *testing.T) *harness {
	t.Helper()
	env := controllertest.Start(t)
	cl := simtest.Start(t)
	rec := &record.FakeRecorder{}
	c, err := New(Options{
		Common: controller.Common{Client: env.Client, Informers: env.Informers, Recorder: rec, Logger: controllertest.Logger(t)},
		Cloud:  sim.NewProvider(cl), ClusterName: "kubernetes",
		// Fast retries, so that a cloud outage of a second is retried
		// within the test; kube's are 5s doubling to 300s.
		MinRetryDelay: 50 * time.Millisecond, MaxRetryDelay: 500 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	controllertest.Run(t, env.Informers, 1, c)
	return &harness{
		t: t, ctx: context.Background(),
		services: client.For[*corev1.Service](env.Client), nodes: client.For[*corev1.Node](env.Client),
		cloud: cl, recorder: rec,
	}
}

// addNode starts a machine in the cloud and registers its Node.
func (h *harness) addNode(name string, labels map[string]string) *corev1.Node {
	h.t.Helper()
	return h.registerNode(h.addMachine(name), labels)
}

func (h *harness) addMachine(name string) *sim.Instance {
	h.t.Helper()
	in, err := h.cloud.CreateInstance(h.ctx, sim.InstanceSpec{Name: name})
	if err != nil {
		h.t.Fatal(err)
	}
	return in
}

func (h *harness) registerNode(in *sim.Instance, labels map[string]string) *corev1.Node {
	h.t.Helper()
	name := in.Name
	n, err := h.nodes.Create(h.ctx, &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       corev1.NodeSpec{ProviderID: in.ProviderID},
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return n
}

func (h *harness) createService(name string, mutate func(*corev1.Service)) *corev1.Service {
	h.t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeLoadBalancer,
			Selector: map[string]string{"app": name},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80}},
		},
	}
	if mutate != nil {
		mutate(svc)
	}
	svc, err := h.services.Create(h.ctx, svc)
	if err != nil {
		h.t.Fatal(err)
	}
	return svc
}

func (h *harness) patchService(name, patch string, subresource ...string) {
	h.t.Helper()
	if _, err := h.services.Patch(h.ctx, "default", name, types.MergePatchType, []byte(patch), subresource...); err != nil {
		h.t.Fatal(err)
	}
}

// waitIngress waits for the Service to publish a load balancer IP, and
// returns the Service then.
func (h *harness) waitIngress(name string) *corev1.Service {
	h.t.Helper()
	var svc *corev1.Service
	controllertest.Eventually(h.t, name+"'s load balancer ingress", func() (bool, string) {
		var err error
		svc, err = h.services.Get(h.ctx, "default", name)
		if err != nil {
			return false, err.Error()
		}
		in := svc.Status.LoadBalancer.Ingress
		return len(in) == 1 && in[0].IP != "", fmt.Sprintf("status %+v", svc.Status.LoadBalancer)
	})
	return svc
}

// waitBackends waits for the cloud's load balancer of svc to forward to
// exactly want.
func (h *harness) waitBackends(svc *corev1.Service, want ...string) {
	h.t.Helper()
	controllertest.Eventually(h.t, "backends "+strings.Join(want, ","), func() (bool, string) {
		lb, err := h.cloud.GetLoadBalancer(h.ctx, sim.DefaultLoadBalancerName(svc))
		if err != nil {
			return false, err.Error()
		}
		got := slices.Sorted(slices.Values(lb.Backends))
		return slices.Equal(got, want), fmt.Sprintf("backends %v", got)
	})
}

// waitNoLoadBalancer waits for the cloud to have no load balancer for svc.
func (h *harness) waitNoLoadBalancer(svc *corev1.Service) {
	h.t.Helper()
	controllertest.Eventually(h.t, "the load balancer deleted", func() (bool, string) {
		_, err := h.cloud.GetLoadBalancer(h.ctx, sim.DefaultLoadBalancerName(svc))
		return sim.IsNotFound(err), fmt.Sprintf("get: %v", err)
	})
}

func (h *harness) waitEvent(reason string) {
	h.t.Helper()
	controllertest.Eventually(h.t, "a "+reason+" event", func() (bool, string) {
		return len(h.recorder.WithReason(reason)) > 0, fmt.Sprint(h.recorder.Events())
	})
}

func TestLoadBalancerFollowsTheServiceAndTheNodes(t *testing.T) {
	h := start(t)
	h.addNode("node-1", nil)
	h.addNode("node-2", nil)
	svc := h.createService("web", nil)

	svc = h.waitIngress("web")
	if !slices.Contains(svc.Finalizers, LoadBalancerCleanupFinalizer) {
		t.Fatalf("finalizers %v, want %s", svc.Finalizers, LoadBalancerCleanupFinalizer)
	}
	lb, err := h.cloud.GetLoadBalancer(h.ctx, sim.DefaultLoadBalancerName(svc))
	if err != nil {
		t.Fatal(err)
	}
	if lb.IP != svc.Status.LoadBalancer.Ingress[0].IP {
		t.Fatalf("the Service publishes %s, the cloud's load balancer has %s", svc.Status.LoadBalancer.Ingress[0].IP, lb.IP)
	}
	h.waitBackends(svc, "node-1", "node-2")
	h.waitEvent("EnsuringLoadBalancer")
	h.waitEvent("EnsuredLoadBalancer")

	// A new node becomes a backend.
	h.addNode("node-3", nil)
	h.waitBackends(svc, "node-1", "node-2", "node-3")
	h.waitEvent("UpdatedLoadBalancer")

	// A node labelled for exclusion stops being one.
	n1, err := h.nodes.Get(h.ctx, "", "node-1")
	if err != nil {
		t.Fatal(err)
	}
	n1.Labels = map[string]string{corev1.LabelNodeExcludeBalancers: "true"}
	if _, err := h.nodes.Update(h.ctx, n1); err != nil {
		t.Fatal(err)
	}
	h.waitBackends(svc, "node-2", "node-3")

	// A deleted node goes too.
	if err := h.nodes.Delete(h.ctx, "", "node-3", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitBackends(svc, "node-2")

	// Deleting the Service deletes its load balancer, then the finalizer
	// lets the Service go.
	if err := h.services.Delete(h.ctx, "default", "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitNoLoadBalancer(svc)
	controllertest.Eventually(t, "the Service gone", func() (bool, string) {
		_, err := h.services.Get(h.ctx, "default", "web")
		return client.IsNotFound(err), fmt.Sprintf("get: %v", err)
	})
	h.waitEvent("DeletingLoadBalancer")
	h.waitEvent("DeletedLoadBalancer")
}

// A NotReady node stays a backend: kube's load balancer node set is
// stable, and the cloud's health checks, not the controller, keep traffic
// off a node that is down. Its exclusion label is what takes it out.
func TestNotReadyNodeStaysABackend(t *testing.T) {
	h := start(t)
	h.addNode("node-1", nil)
	h.addNode("node-2", nil)
	svc := h.waitIngressOf(h.createService("web", nil))
	h.waitBackends(svc, "node-1", "node-2")

	h.setReady("node-2", corev1.ConditionFalse)
	// Something the controller does see after the readiness change: a
	// node excluded. When node-1 is gone from the backends, the node
	// sync has run over node-2's NotReady status too.
	n1, err := h.nodes.Get(h.ctx, "", "node-1")
	if err != nil {
		t.Fatal(err)
	}
	n1.Labels = map[string]string{corev1.LabelNodeExcludeBalancers: "yes"} // not a boolean: excluded, as in kube
	if _, err := h.nodes.Update(h.ctx, n1); err != nil {
		t.Fatal(err)
	}
	h.waitBackends(svc, "node-2")
}

func (h *harness) waitIngressOf(svc *corev1.Service) *corev1.Service {
	h.t.Helper()
	return h.waitIngress(svc.Name)
}

func (h *harness) setReady(name string, status corev1.ConditionStatus) {
	h.t.Helper()
	patch := fmt.Sprintf(`{"status":{"conditions":[{"type":"Ready","status":%q,"reason":"Test"}]}}`, status)
	if _, err := h.nodes.Patch(h.ctx, "", name, types.MergePatchType, []byte(patch), "status"); err != nil {
		h.t.Fatal(err)
	}
}

func TestTypeChangeDeletesTheLoadBalancer(t *testing.T) {
	h := start(t)
	h.addNode("node-1", nil)
	svc := h.waitIngressOf(h.createService("web", nil))

	h.patchService("web", `{"spec":{"type":"ClusterIP","allocateLoadBalancerNodePorts":null,"externalTrafficPolicy":null,"ports":[{"name":"http","port":80,"protocol":"TCP","targetPort":80}]}}`)
	h.waitNoLoadBalancer(svc)
	controllertest.Eventually(t, "status cleared and the finalizer removed", func() (bool, string) {
		got, err := h.services.Get(h.ctx, "default", "web")
		if err != nil {
			return false, err.Error()
		}
		return len(got.Status.LoadBalancer.Ingress) == 0 && !slices.Contains(got.Finalizers, LoadBalancerCleanupFinalizer),
			fmt.Sprintf("status %+v, finalizers %v", got.Status.LoadBalancer, got.Finalizers)
	})
}

func TestCloudOutageDelaysButDoesNotLoseTheLoadBalancer(t *testing.T) {
	h := start(t)
	h.addNode("node-1", nil)
	h.addNode("node-2", nil)
	svc := h.waitIngressOf(h.createService("web", nil))
	ip := svc.Status.LoadBalancer.Ingress[0].IP

	// The cloud answers 503 for a while; a new Service and a new node
	// (whose machine is already up) arrive meanwhile.
	machine := h.addMachine("node-3")
	if _, err := h.cloud.SetFaults(h.ctx, sim.Faults{Mode: sim.FaultUnavailable, Duration: "2s"}); err != nil {
		t.Fatal(err)
	}
	other := h.createService("api", nil)
	h.waitEvent("SyncLoadBalancerFailed")
	h.registerNode(machine, nil)

	// Once the cloud is back, both load balancers are there, with every
	// node, and the first kept its address.
	other = h.waitIngressOf(other)
	h.waitBackends(other, "node-1", "node-2", "node-3")
	h.waitBackends(svc, "node-1", "node-2", "node-3")
	got, err := h.services.Get(h.ctx, "default", "web")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Status.LoadBalancer.Ingress) != 1 || got.Status.LoadBalancer.Ingress[0].IP != ip {
		t.Fatalf("after the outage web publishes %+v, want %s still", got.Status.LoadBalancer, ip)
	}
	for _, e := range h.recorder.WithReason("SyncLoadBalancerFailed") {
		if !strings.HasPrefix(e, "Warning SyncLoadBalancerFailed Error syncing load balancer: ") {
			t.Errorf("event %q", e)
		}
	}
}

// A Service whose loadBalancerClass names another implementation is not
// the controller's: no finalizer, no load balancer.
func TestLoadBalancerClassIsNotOurs(t *testing.T) {
	h := start(t)
	h.addNode("node-1", nil)
	class := "example.com/internal-vip"
	classed := h.createService("classed", func(s *corev1.Service) { s.Spec.LoadBalancerClass = &class })
	// Once "plain", created after, has its load balancer, the
	// controller has seen "classed" too.
	h.waitIngressOf(h.createService("plain", nil))

	got, err := h.services.Get(h.ctx, "default", "classed")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Finalizers) != 0 || len(got.Status.LoadBalancer.Ingress) != 0 {
		t.Fatalf("classed Service: finalizers %v, status %+v", got.Finalizers, got.Status.LoadBalancer)
	}
	if _, err := h.cloud.GetLoadBalancer(h.ctx, sim.DefaultLoadBalancerName(classed)); !sim.IsNotFound(err) {
		t.Fatalf("the cloud's load balancer for the classed Service: %v, want not found", err)
	}
}
