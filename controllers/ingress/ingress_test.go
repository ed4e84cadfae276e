package ingress

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/client/record"
	"github.com/minictl/minictl/cloud/sim"
	"github.com/minictl/minictl/cloud/simtest"
	"github.com/minictl/minictl/controllers/internal/controller"
	"github.com/minictl/minictl/controllers/internal/controllertest"
)

type harness struct {
	t         *testing.T
	ctx       context.Context
	ingresses *client.Client[*networkingv1.Ingress]
	classes   *client.Client[*networkingv1.IngressClass]
	services  *client.Client[*corev1.Service]
	cloud     *sim.Client
	recorder  *record.FakeRecorder
}

// start runs an API server, a simulated cloud on loopback and the
// controller between them.
func start(t *testing.T) *harness {
	t.Helper()
	env := controllertest.Start(t)
	cl := simtest.Start(t)
	rec := &record.FakeRecorder{}
	c, err := New(Options{
		Common: controller.Common{Client: env.Client, Informers: env.Informers, Recorder: rec, Logger: controllertest.Logger(t)},
		Cloud:  cl,
	})
	if err != nil {
		t.Fatal(err)
	}
	controllertest.Run(t, env.Informers, 1, c)
	return &harness{
		t: t, ctx: context.Background(),
		ingresses: client.For[*networkingv1.Ingress](env.Client),
		classes:   client.For[*networkingv1.IngressClass](env.Client),
		services:  client.For[*corev1.Service](env.Client),
		cloud:     cl, recorder: rec,
	}
}

func (h *harness) createService(name string, ports ...corev1.ServicePort) {
	h.t.Helper()
	_, err := h.services.Create(h.ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": name}, Ports: ports},
	})
	if err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) createIngress(name string, class *string, backend, port string, tls bool) *networkingv1.Ingress {
	h.t.Helper()
	prefix := networkingv1.PathTypePrefix
	sb := &networkingv1.IngressServiceBackend{Name: backend}
	if _, err := fmt.Sscan(port, &sb.Port.Number); err != nil {
		sb.Port.Name = port
	}
	ing := &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: networkingv1.IngressSpec{
			IngressClassName: class,
			Rules: []networkingv1.IngressRule{{Host: name + ".example.com", IngressRuleValue: networkingv1.IngressRuleValue{
				HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{
					Path: "/", PathType: &prefix, Backend: networkingv1.IngressBackend{Service: sb},
				}}},
			}}},
		},
	}
	if tls {
		ing.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{name + ".example.com"}, SecretName: name + "-tls"}}
	}
	got, err := h.ingresses.Create(h.ctx, ing)
	if err != nil {
		h.t.Fatal(err)
	}
	return got
}

// address waits for the Ingress's address and returns it.
func (h *harness) address(name string) string {
	h.t.Helper()
	var ip string
	controllertest.Eventually(h.t, "ingress "+name+" gets an address", func() (bool, string) {
		ing, err := h.ingresses.Get(h.ctx, "default", name)
		if err != nil {
			return false, err.Error()
		}
		if lb := ing.Status.LoadBalancer.Ingress; len(lb) == 1 && lb[0].IP != "" {
			ip = lb[0].IP
			return true, ""
		}
		return false, fmt.Sprintf("status %+v", ing.Status)
	})
	return ip
}

func (h *harness) loadBalancerOf(ing *networkingv1.Ingress) (*sim.LoadBalancer, error) {
	return h.cloud.GetLoadBalancer(h.ctx, loadBalancerName(ing))
}

// TestDefaultClass: at start the controller creates the class "sim", the
// cluster's default, for its own controller name; a class "sim" that is
// there already is left as the administrator made it.
func TestDefaultClass(t *testing.T) {
	h := start(t)
	controllertest.Eventually(t, "the class sim", func() (bool, string) {
		ic, err := h.classes.Get(h.ctx, "", ClassName)
		if err != nil {
			return false, err.Error()
		}
		return ic.Spec.Controller == ControllerName && ic.Annotations[networkingv1.AnnotationIsDefaultIngressClass] == "true",
			fmt.Sprintf("%+v", ic)
	})
	// The DefaultIngressClass admission names it in an Ingress without a
	// class, and that Ingress is served.
	controllertest.Eventually(t, "the admission plugin sees the class", func() (bool, string) {
		ing, err := h.ingresses.Create(h.ctx, &networkingv1.Ingress{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "defaulted-", Namespace: "default"},
			Spec: networkingv1.IngressSpec{DefaultBackend: &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
				Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80},
			}}},
		})
		if err != nil {
			return false, err.Error()
		}
		return ing.Spec.IngressClassName != nil && *ing.Spec.IngressClassName == ClassName, "no class yet"
	})
}

// TestIngressGetsAnAddress: an Ingress of class sim gets the finalizer, a
// load balancer of the cloud tagged with its name, and that load
// balancer's IP as its address; adding TLS opens 443 on the same address.
// An Ingress of another class is left alone.
func TestIngressGetsAnAddress(t *testing.T) {
	h := start(t)
	h.createService("web", corev1.ServicePort{Name: "http", Port: 80})
	class := ClassName
	ing := h.createIngress("web", &class, "web", "80", false)
	ip := h.address("web")

	lb, err := h.loadBalancerOf(ing)
	if err != nil {
		t.Fatalf("load balancer: %v", err)
	}
	if lb.IP != ip || lb.Tags[sim.TagIngress] != "default/web" || len(lb.Listeners) != 1 || lb.Listeners[0].Port != 80 {
		t.Errorf("load balancer %+v, want ip %s, tagged default/web, listening on 80", lb, ip)
	}
	cur, err := h.ingresses.Get(h.ctx, "default", "web")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(cur.Finalizers, Finalizer) {
		t.Errorf("finalizers %v, want %s", cur.Finalizers, Finalizer)
	}
	if w := h.recorder.Events(); len(w) != 0 {
		t.Errorf("events %v, want none: the backend exists", w)
	}

	cur.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{"web.example.com"}, SecretName: "web-tls"}}
	if _, err := h.ingresses.Update(h.ctx, cur); err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, "the load balancer listens on 443 too", func() (bool, string) {
		lb, err := h.loadBalancerOf(ing)
		if err != nil {
			return false, err.Error()
		}
		return len(lb.Listeners) == 2 && lb.Listeners[1].Port == 443 && lb.IP == ip, fmt.Sprintf("%+v", lb)
	})

	// Another controller's class: no load balancer, no finalizer.
	if _, err := h.classes.Create(h.ctx, &networkingv1.IngressClass{
		ObjectMeta: metav1.ObjectMeta{Name: "other"}, Spec: networkingv1.IngressClassSpec{Controller: "example.com/other"},
	}); err != nil {
		t.Fatal(err)
	}
	other := "other"
	theirs := h.createIngress("theirs", &other, "web", "80", false)
	h.address("web") // a later sync of ours has happened since
	h.createIngress("after", &class, "web", "80", false)
	h.address("after")
	if lb, err := h.loadBalancerOf(theirs); !sim.IsNotFound(err) {
		t.Errorf("an Ingress of another class got load balancer %+v (%v)", lb, err)
	}
	if got, _ := h.ingresses.Get(h.ctx, "default", "theirs"); len(got.Finalizers) != 0 || len(got.Status.LoadBalancer.Ingress) != 0 {
		t.Errorf("an Ingress of another class was changed: finalizers %v status %+v", got.Finalizers, got.Status)
	}
}

// TestMissingBackend: a backend Service that does not exist, or lacks the
// port named, is a Warning on the Ingress; the Ingress gets its address
// all the same.
func TestMissingBackend(t *testing.T) {
	h := start(t)
	class := ClassName
	h.createIngress("nosvc", &class, "absent", "80", false)
	h.address("nosvc")
	controllertest.Eventually(t, "a ServiceNotFound warning", func() (bool, string) {
		w := h.recorder.WithReason(ReasonServiceNotFound)
		return len(w) > 0 && strings.Contains(w[0], `Warning ServiceNotFound Service "default/absent" not found`), fmt.Sprint(h.recorder.Events())
	})

	h.createService("web", corev1.ServicePort{Name: "http", Port: 8080})
	h.createIngress("noport", &class, "web", "https", false)
	h.address("noport")
	controllertest.Eventually(t, "a ServicePortNotFound warning", func() (bool, string) {
		w := h.recorder.WithReason(ReasonServicePortNotFound)
		return len(w) > 0 && strings.Contains(w[0], `Service "default/web" has no port "https"`), fmt.Sprint(h.recorder.Events())
	})
	for _, e := range h.recorder.Events() {
		if strings.Contains(e, ReasonServiceNotFound) && strings.Contains(e, "default/web") {
			t.Errorf("unexpected event %q", e)
		}
	}
}

// TestLoadBalancerGoesWithTheIngress: deleting an Ingress deletes its load
// balancer before the Ingress goes; an Ingress moved to another class
// loses its load balancer, its address and the finalizer.
func TestLoadBalancerGoesWithTheIngress(t *testing.T) {
	h := start(t)
	class := ClassName
	ing := h.createIngress("web", &class, "web", "80", false)
	h.address("web")
	if _, err := h.loadBalancerOf(ing); err != nil {
		t.Fatalf("load balancer: %v", err)
	}
	if err := h.ingresses.Delete(h.ctx, "default", "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, "the Ingress is gone", func() (bool, string) {
		_, err := h.ingresses.Get(h.ctx, "default", "web")
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	if lb, err := h.loadBalancerOf(ing); !sim.IsNotFound(err) {
		t.Errorf("after the Ingress went, load balancer %+v (%v), want none", lb, err)
	}

	moved := h.createIngress("moved", &class, "web", "80", false)
	h.address("moved")
	if _, err := h.classes.Create(h.ctx, &networkingv1.IngressClass{
		ObjectMeta: metav1.ObjectMeta{Name: "other"}, Spec: networkingv1.IngressClassSpec{Controller: "example.com/other"},
	}); err != nil {
		t.Fatal(err)
	}
	cur, err := h.ingresses.Get(h.ctx, "default", "moved")
	if err != nil {
		t.Fatal(err)
	}
	other := "other"
	cur.Spec.IngressClassName = &other
	if _, err := h.ingresses.Update(h.ctx, cur); err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, "the moved Ingress is released", func() (bool, string) {
		got, err := h.ingresses.Get(h.ctx, "default", "moved")
		if err != nil {
			return false, err.Error()
		}
		return len(got.Finalizers) == 0 && len(got.Status.LoadBalancer.Ingress) == 0, fmt.Sprintf("finalizers %v status %+v", got.Finalizers, got.Status)
	})
	if lb, err := h.loadBalancerOf(moved); !sim.IsNotFound(err) {
		t.Errorf("after the move, load balancer %+v (%v), want none", lb, err)
	}
}
