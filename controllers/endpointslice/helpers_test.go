package endpointslice

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/client/record"
	"github.com/minictl/minictl/controllers/endpoints"
	"github.com/minictl/minictl/controllers/internal/controller"
	"github.com/minictl/minictl/controllers/internal/controllertest"
)

// These tests run the controller against a real API server on a real etcd
// (internal/testenv), next to the endpoint controller, whose Endpoints the
// slices must agree with. No kubelet runs: the tests play it, giving pods
// an IP, phase Running and a Ready condition with UpdateStatus.

const ns = "default"

type env struct {
	t         *testing.T
	rc        *client.RESTClient
	ctrl      *Controller
	recorder  *record.FakeRecorder
	pods      *client.Client[*corev1.Pod]
	nodes     *client.Client[*corev1.Node]
	services  *client.Client[*corev1.Service]
	endpoints *client.Client[*corev1.Endpoints]
	slices    *client.Client[*discoveryv1.EndpointSlice]
}

// start runs an API server with this controller (at most maxPerSlice
// endpoints a slice; 0: the default) and the endpoint controller, and a
// node node-1 in zone-a.
func start(t *testing.T, maxPerSlice int) *env {
	t.Helper()
	api := controllertest.Start(t)
	rec := &record.FakeRecorder{}
	c, err := New(Options{
		Common:               controller.Common{Client: api.Client, Informers: api.Informers, Recorder: rec, Logger: controllertest.Logger(t)},
		MaxEndpointsPerSlice: maxPerSlice,
	})
	if err != nil {
		t.Fatal(err)
	}
	ep, err := endpoints.New(endpoints.Options{Common: controller.Common{Client: api.Client, Informers: api.Informers}})
	if err != nil {
		t.Fatal(err)
	}
	controllertest.Run(t, api.Informers, 2, c, ep)
	e := &env{
		t: t, rc: api.Client, ctrl: c, recorder: rec,
		pods:      client.For[*corev1.Pod](api.Client),
		nodes:     client.For[*corev1.Node](api.Client),
		services:  client.For[*corev1.Service](api.Client),
		endpoints: client.For[*corev1.Endpoints](api.Client),
		slices:    client.For[*discoveryv1.EndpointSlice](api.Client),
	}
	e.createNode("node-1", "zone-a")
	return e
}

func (e *env) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	e.t.Cleanup(cancel)
	return ctx
}

func (e *env) createNode(name, zone string) {
	e.t.Helper()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelTopologyZone: zone}}}
	if _, err := e.nodes.Create(e.ctx(), node); err != nil {
		e.t.Fatalf("create node %s: %v", name, err)
	}
}

func (e *env) createService(name string, selector map[string]string, ports ...corev1.ServicePort) *corev1.Service {
	e.t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"tier": "frontend"}},
		Spec:       corev1.ServiceSpec{Selector: selector, Ports: ports},
	}
	out, err := e.services.Create(e.ctx(), svc)
	if err != nil {
		e.t.Fatalf("create service %s: %v", name, err)
	}
	return out
}

// newPod is a pod labelled app=app on node-1, whose container serves
// ports.
func newPod(name, app string, ports ...corev1.ContainerPort) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": app}},
		Spec: corev1.PodSpec{
			NodeName:   "node-1",
			Containers: []corev1.Container{{Name: "app", Image: "nginx:1.27", Ports: ports}},
		},
	}
}

// runPod creates pod and plays its kubelet: it runs at ip, ready or not.
func (e *env) runPod(pod *corev1.Pod, ip string, ready bool) {
	e.t.Helper()
	if _, err := e.pods.Create(e.ctx(), pod); err != nil {
		e.t.Fatalf("create pod %s: %v", pod.Name, err)
	}
	e.setPodStatus(pod.Name, ip, ready)
}

func (e *env) setPodStatus(name, ip string, ready bool) {
	e.t.Helper()
	pod, err := e.pods.Get(e.ctx(), ns, name)
	if err != nil {
		e.t.Fatalf("get pod %s: %v", name, err)
	}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	pod.Status.Phase = corev1.PodRunning
	pod.Status.PodIP = ip
	pod.Status.PodIPs = []corev1.PodIP{{IP: ip}}
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.Now()}}
	if _, err := e.pods.UpdateStatus(e.ctx(), pod); err != nil {
		e.t.Fatalf("update status of pod %s: %v", name, err)
	}
}

// slicesOf lists the service's slices, by name.
func (e *env) slicesOf(service string) []*discoveryv1.EndpointSlice {
	e.t.Helper()
	list, err := e.slices.List(e.ctx(), ns, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + service})
	if err != nil {
		e.t.Fatalf("list slices: %v", err)
	}
	out := list.Items
	slices.SortFunc(out, func(a, b *discoveryv1.EndpointSlice) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// describeSlices renders slices compactly, sorted so that packing does not
// matter: "ports http:8080/TCP: 10.0.0.1(web-1 ready) ..." one line per
// slice, slices sorted.
func describeSlices(list []*discoveryv1.EndpointSlice) string {
	var lines []string
	for _, s := range list {
		var ports []string
		for _, p := range s.Ports {
			ports = append(ports, fmt.Sprintf("%s:%d/%s", deref(p.Name), deref(p.Port), deref(p.Protocol)))
		}
		var eps []string
		for _, ep := range s.Endpoints {
			eps = append(eps, describeEndpoint(ep))
		}
		slices.Sort(eps)
		lines = append(lines, fmt.Sprintf("%s [%s]: %s", s.AddressType, strings.Join(ports, ","), strings.Join(eps, " ")))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

func describeEndpoint(ep discoveryv1.Endpoint) string {
	var state []string
	if deref(ep.Conditions.Ready) {
		state = append(state, "ready")
	}
	if deref(ep.Conditions.Serving) {
		state = append(state, "serving")
	}
	if deref(ep.Conditions.Terminating) {
		state = append(state, "terminating")
	}
	name := "?"
	if ep.TargetRef != nil {
		name = ep.TargetRef.Name
	}
	return fmt.Sprintf("%s(%s %s)", strings.Join(ep.Addresses, ","), name, strings.Join(state, ","))
}

// waitForSlices waits until the service's slices describe as want.
func (e *env) waitForSlices(service, want string) []*discoveryv1.EndpointSlice {
	e.t.Helper()
	var list []*discoveryv1.EndpointSlice
	controllertest.Eventually(e.t, "slices of "+service+" =\n"+want, func() (bool, string) {
		list = e.slicesOf(service)
		got := describeSlices(list)
		return got == want, got
	})
	return list
}
