package e2e

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/internal/minitest"
)

// TestEndpointSlices runs the slice controllers on the built binary, each
// as its own ServiceAccount: a Deployment of 250 pods behind a Service gets
// three EndpointSlices whose addresses are exactly the Service's Endpoints;
// Endpoints written by hand for a Service without selector are mirrored;
// a bad slice is refused with 422 naming the field.
func TestEndpointSlices(t *testing.T) {
	c := up(t, minitest.FreeAddr(t), t.TempDir(), "--fast", "--nodes", "3")
	rc := c.client(t)
	ctx := context.Background()
	deployments := client.For[*appsv1.Deployment](rc)
	services := client.For[*corev1.Service](rc)
	endpoints := client.For[*corev1.Endpoints](rc)
	eps := client.For[*discoveryv1.EndpointSlice](rc)

	code, status := c.do(http.MethodPost, "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices", "application/json",
		`{"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice","metadata":{"name":"bad"},"addressType":"IPv4",
		  "endpoints":[{"addresses":["fd00::1"]}]}`)
	if code != http.StatusUnprocessableEntity || field(status, "reason") != "Invalid" ||
		!strings.Contains(fmt.Sprint(field(status, "message")), "endpoints[0].addresses[0]") {
		t.Fatalf("an IPv6 address in an IPv4 slice: %d %v", code, status)
	}

	d := deploymentObj("web", 250, "nginx:1.27")
	d.Spec.Template.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}
	if _, err := deployments.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	if _, err := services.Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "web"},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}},
		},
	}); err != nil {
		t.Fatal(err)
	}

	// The Endpoints and the slices of 250 ready pods, the same addresses.
	var epAddrs, sliceAddrs []string
	var sizes []int
	waitLong(t, "250 ready addresses in the Endpoints and in 3 slices", func() (bool, string) {
		ep, err := endpoints.Get(ctx, "default", "web")
		if err != nil {
			return false, err.Error()
		}
		epAddrs = epAddrs[:0]
		for _, ss := range ep.Subsets {
			for _, a := range ss.Addresses {
				epAddrs = append(epAddrs, a.IP)
			}
		}
		list, err := eps.List(ctx, "default", metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=web"})
		if err != nil {
			return false, err.Error()
		}
		sliceAddrs, sizes = sliceAddrs[:0], sizes[:0]
		for _, s := range list.Items {
			sizes = append(sizes, len(s.Endpoints))
			for _, e := range s.Endpoints {
				if e.Conditions.Ready != nil && *e.Conditions.Ready {
					sliceAddrs = append(sliceAddrs, e.Addresses...)
				}
			}
		}
		return len(epAddrs) == 250 && len(sliceAddrs) == 250 && len(list.Items) == 3,
			fmt.Sprintf("endpoints %d, slices %v, ready in slices %d", len(epAddrs), sizes, len(sliceAddrs))
	})
	slices.Sort(epAddrs)
	slices.Sort(sliceAddrs)
	if !slices.Equal(epAddrs, sliceAddrs) {
		t.Errorf("the slices' addresses are not the Endpoints':\nslices    %v\nendpoints %v", sliceAddrs, epAddrs)
	}
	// Pods that came and went while the Deployment settled may have left
	// room in a slice: the controller does not move endpoints between
	// slices to pack them tighter, as kube's does not.
	for _, n := range sizes {
		if n > 100 {
			t.Errorf("slice sizes %v; want at most 100 a slice", sizes)
		}
	}

	// Mirroring: a Service without selector, Endpoints by hand.
	if _, err := services.Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "default"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "pg", Port: 5432}}},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := endpoints.Create(ctx, &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "default"},
		Subsets: []corev1.EndpointSubset{{
			Addresses: []corev1.EndpointAddress{{IP: "192.0.2.10"}},
			Ports:     []corev1.EndpointPort{{Name: "pg", Port: 5432}},
		}},
	}); err != nil {
		t.Fatal(err)
	}
	waitLong(t, "the db Endpoints mirrored", func() (bool, string) {
		list, err := eps.List(ctx, "default", metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=db"})
		if err != nil {
			return false, err.Error()
		}
		if len(list.Items) != 1 {
			return false, fmt.Sprintf("%d slices", len(list.Items))
		}
		s := list.Items[0]
		ok := s.Labels[discoveryv1.LabelManagedBy] == "endpointslicemirroring-controller.k8s.io" &&
			len(s.Endpoints) == 1 && s.Endpoints[0].Addresses[0] == "192.0.2.10"
		return ok, fmt.Sprintf("%v %v", s.Labels, s.Endpoints)
	})
}

// waitLong is eventually with room for 250 pods to be created, scheduled
// and started on a busy machine.
func waitLong(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(4 * time.Minute)
	var last string
	for time.Now().Before(deadline) {
		ok, state := cond()
		if ok {
			return
		}
		last = state
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s; last: %s", what, last)
}
