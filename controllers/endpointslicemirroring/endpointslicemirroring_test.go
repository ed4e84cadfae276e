package endpointslicemirroring

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
	"github.com/minictl/minictl/controllers/internal/controller"
	"github.com/minictl/minictl/controllers/internal/controllertest"
)

// These tests run the controller against a real API server on a real etcd.

const ns = "default"

type env struct {
	t         *testing.T
	services  *client.Client[*corev1.Service]
	endpoints *client.Client[*corev1.Endpoints]
	slices    *client.Client[*discoveryv1.EndpointSlice]
	recorder  *record.FakeRecorder
}

func start(t *testing.T, maxPerSubset int) *env {
	t.Helper()
	api := controllertest.Start(t)
	rec := &record.FakeRecorder{}
	c, err := New(Options{
		Common:                controller.Common{Client: api.Client, Informers: api.Informers, Recorder: rec, Logger: controllertest.Logger(t)},
		MaxEndpointsPerSubset: maxPerSubset,
	})
	if err != nil {
		t.Fatal(err)
	}
	controllertest.Run(t, api.Informers, 2, c)
	return &env{
		t: t, recorder: rec,
		services:  client.For[*corev1.Service](api.Client),
		endpoints: client.For[*corev1.Endpoints](api.Client),
		slices:    client.For[*discoveryv1.EndpointSlice](api.Client),
	}
}

func (e *env) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	e.t.Cleanup(cancel)
	return ctx
}

// describe renders the slices of service name, one line per slice, sorted:
// "IPv4 [db:5432/TCP] 10.1.0.1(ready) ...".
func (e *env) describe(name string) (string, []*discoveryv1.EndpointSlice) {
	e.t.Helper()
	list, err := e.slices.List(e.ctx(), ns, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + name})
	if err != nil {
		e.t.Fatalf("list slices: %v", err)
	}
	var lines []string
	for _, s := range list.Items {
		var ports, eps []string
		for _, p := range s.Ports {
			ports = append(ports, fmt.Sprintf("%s:%d/%s", deref(p.Name), deref(p.Port), deref(p.Protocol)))
		}
		for _, ep := range s.Endpoints {
			state := "notready"
			if deref(ep.Conditions.Ready) {
				state = "ready"
			}
			eps = append(eps, fmt.Sprintf("%s(%s)", strings.Join(ep.Addresses, ","), state))
		}
		slices.Sort(eps)
		lines = append(lines, fmt.Sprintf("%s [%s] %s", s.AddressType, strings.Join(ports, ","), strings.Join(eps, " ")))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n"), list.Items
}

func (e *env) waitFor(name, want string) []*discoveryv1.EndpointSlice {
	e.t.Helper()
	var items []*discoveryv1.EndpointSlice
	controllertest.Eventually(e.t, "slices of "+name+" = "+want, func() (bool, string) {
		var got string
		got, items = e.describe(name)
		return got == want, got
	})
	return items
}

// Endpoints written by hand for a service without selector are mirrored,
// follow their changes, and stop being mirrored when they ask not to be.
func TestMirrorsHandWrittenEndpoints(t *testing.T) {
	t.Parallel()
	e := start(t, 0)
	if _, err := e.services.Create(e.ctx(), &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "db", Port: 5432}}},
	}); err != nil {
		t.Fatal(err)
	}
	ep, err := e.endpoints.Create(e.ctx(), &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns, Labels: map[string]string{"team": "data"},
			Annotations: map[string]string{"note": "external database", corev1.EndpointsLastChangeTriggerTime: "2026-01-01T00:00:00Z"}},
		Subsets: []corev1.EndpointSubset{{
			Addresses:         []corev1.EndpointAddress{{IP: "10.1.0.1"}, {IP: "10.1.0.2"}},
			NotReadyAddresses: []corev1.EndpointAddress{{IP: "10.1.0.3"}},
			Ports:             []corev1.EndpointPort{{Name: "db", Port: 5432}},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	items := e.waitFor("db", "IPv4 [db:5432/TCP] 10.1.0.1(ready) 10.1.0.2(ready) 10.1.0.3(notready)")
	s := items[0]
	if s.Labels[discoveryv1.LabelManagedBy] != ControllerName || s.Labels["team"] != "data" {
		t.Errorf("labels %v; want the Endpoints' and managed-by %s", s.Labels, ControllerName)
	}
	if s.Annotations["note"] != "external database" || s.Annotations[corev1.EndpointsLastChangeTriggerTime] != "" {
		t.Errorf("annotations %v; want the Endpoints' but the trigger time", s.Annotations)
	}
	if ref := metav1.GetControllerOf(s); ref == nil || ref.Kind != "Endpoints" || ref.UID != ep.UID {
		t.Errorf("controller %+v; want the Endpoints", ref)
	}

	// A change is mirrored in place; an IPv6 address gets a slice of its
	// own.
	ep, err = e.endpoints.Get(e.ctx(), ns, "db")
	if err != nil {
		t.Fatal(err)
	}
	ep.Subsets[0].Addresses = append(ep.Subsets[0].Addresses[1:], corev1.EndpointAddress{IP: "fd00::4"})
	if _, err := e.endpoints.Update(e.ctx(), ep); err != nil {
		t.Fatal(err)
	}
	items = e.waitFor("db", "IPv4 [db:5432/TCP] 10.1.0.2(ready) 10.1.0.3(notready)\nIPv6 [db:5432/TCP] fd00::4(ready)")
	for _, it := range items {
		if it.AddressType == discoveryv1.AddressTypeIPv4 && it.Name != s.Name {
			t.Errorf("the IPv4 slice was replaced (%s → %s), not updated", s.Name, it.Name)
		}
	}

	// skip-mirror: the mirrored slices go.
	ep, err = e.endpoints.Get(e.ctx(), ns, "db")
	if err != nil {
		t.Fatal(err)
	}
	ep.Labels[discoveryv1.LabelSkipMirror] = "true"
	if _, err := e.endpoints.Update(e.ctx(), ep); err != nil {
		t.Fatal(err)
	}
	e.waitFor("db", "")
}

// The Endpoints of a service with a selector are the endpoint
// controller's, and its slices the endpointslice controller's: nothing is
// mirrored. A service that gains a selector loses its mirrored slices.
func TestServiceWithSelectorIsNotMirrored(t *testing.T) {
	t.Parallel()
	e := start(t, 0)
	for _, name := range []string{"web", "ext"} {
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
		}
		if name == "web" {
			svc.Spec.Selector = map[string]string{"app": "web"}
		}
		if _, err := e.services.Create(e.ctx(), svc); err != nil {
			t.Fatal(err)
		}
		if _, err := e.endpoints.Create(e.ctx(), &corev1.Endpoints{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Subsets: []corev1.EndpointSubset{{
				Addresses: []corev1.EndpointAddress{{IP: "10.2.0.1"}},
				Ports:     []corev1.EndpointPort{{Name: "http", Port: 80}},
			}},
		}); err != nil {
			t.Fatal(err)
		}
	}
	e.waitFor("ext", "IPv4 [http:80/TCP] 10.2.0.1(ready)")
	if got, _ := e.describe("web"); got != "" {
		t.Errorf("a service with a selector was mirrored: %s", got)
	}

	svc, err := e.services.Get(e.ctx(), ns, "ext")
	if err != nil {
		t.Fatal(err)
	}
	svc.Spec.Selector = map[string]string{"app": "ext"}
	if _, err := e.services.Update(e.ctx(), svc); err != nil {
		t.Fatal(err)
	}
	e.waitFor("ext", "")
}

// At most MaxEndpointsPerSubset addresses of a subset are mirrored; the
// rest are skipped, with a Warning.
func TestTooManyAddresses(t *testing.T) {
	t.Parallel()
	e := start(t, 2)
	if _, err := e.services.Create(e.ctx(), &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "big", Namespace: ns},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.endpoints.Create(e.ctx(), &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Name: "big", Namespace: ns},
		Subsets: []corev1.EndpointSubset{{
			Addresses: []corev1.EndpointAddress{{IP: "10.3.0.1"}, {IP: "10.3.0.2"}, {IP: "10.3.0.3"}},
			Ports:     []corev1.EndpointPort{{Name: "http", Port: 80}},
		}},
	}); err != nil {
		t.Fatal(err)
	}
	e.waitFor("big", "IPv4 [http:80/TCP] 10.3.0.1(ready) 10.3.0.2(ready)")
	controllertest.Eventually(t, "a TooManyAddressesToMirror event", func() (bool, string) {
		evs := e.recorder.Events()
		for _, ev := range evs {
			if strings.Contains(ev, "TooManyAddressesToMirror") && strings.Contains(ev, "1 addresses were skipped") {
				return true, ""
			}
		}
		return false, strings.Join(evs, "; ")
	})
}
