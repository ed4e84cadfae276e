package endpointslice

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/controllers/internal/controllertest"
)

// A service of 250 ready pods gets three slices of at most 100 endpoints,
// whose addresses are exactly its Endpoints' addresses; one more pod
// changes one slice only.
func TestSlicesOf250Pods(t *testing.T) {
	t.Parallel()
	e := start(t, 0)
	svc := e.createService("web", map[string]string{"app": "web"}, corev1.ServicePort{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)})
	for i := range 250 {
		e.runPod(newPod(fmt.Sprintf("web-%03d", i), "web"), fmt.Sprintf("10.244.%d.%d", i/200, i%200+1), true)
	}

	var list []*discoveryv1.EndpointSlice
	controllertest.Eventually(t, "3 slices of 250 endpoints", func() (bool, string) {
		list = e.slicesOf("web")
		var sizes []int
		total := 0
		for _, s := range list {
			sizes = append(sizes, len(s.Endpoints))
			total += len(s.Endpoints)
		}
		return len(list) == 3 && total == 250, fmt.Sprintf("sizes %v", sizes)
	})
	var sizes []int
	var sliceAddrs []string
	for _, s := range list {
		sizes = append(sizes, len(s.Endpoints))
		for _, ep := range s.Endpoints {
			sliceAddrs = append(sliceAddrs, ep.Addresses...)
		}
	}
	slices.Sort(sizes)
	if !slices.Equal(sizes, []int{50, 100, 100}) {
		t.Errorf("slice sizes %v, want 50, 100, 100", sizes)
	}

	var epAddrs []string
	controllertest.Eventually(t, "Endpoints of 250 addresses", func() (bool, string) {
		ep, err := e.endpoints.Get(e.ctx(), ns, "web")
		if err != nil {
			return false, err.Error()
		}
		epAddrs = epAddrs[:0]
		for _, ss := range ep.Subsets {
			for _, a := range ss.Addresses {
				epAddrs = append(epAddrs, a.IP)
			}
		}
		return len(epAddrs) == 250, fmt.Sprintf("%d addresses", len(epAddrs))
	})
	slices.Sort(sliceAddrs)
	slices.Sort(epAddrs)
	if !slices.Equal(sliceAddrs, epAddrs) {
		t.Errorf("slice addresses differ from the Endpoints':\nslices    %v\nendpoints %v", sliceAddrs, epAddrs)
	}

	for _, s := range list {
		if !strings.HasPrefix(s.Name, "web-") || s.GenerateName != "web-" {
			t.Errorf("slice %s (generateName %q); want web-xxxxx", s.Name, s.GenerateName)
		}
		if s.AddressType != discoveryv1.AddressTypeIPv4 {
			t.Errorf("slice %s addressType %s", s.Name, s.AddressType)
		}
		want := map[string]string{discoveryv1.LabelServiceName: "web", discoveryv1.LabelManagedBy: ControllerName, "tier": "frontend"}
		for k, v := range want {
			if s.Labels[k] != v {
				t.Errorf("slice %s label %s=%q, want %q", s.Name, k, s.Labels[k], v)
			}
		}
		ref := metav1.GetControllerOf(s)
		if ref == nil || ref.Kind != "Service" || ref.Name != "web" || ref.UID != svc.UID || ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
			t.Errorf("slice %s controller %+v; want Service web", s.Name, ref)
		}
		if len(s.Ports) != 1 || deref(s.Ports[0].Name) != "http" || deref(s.Ports[0].Port) != 8080 || deref(s.Ports[0].Protocol) != corev1.ProtocolTCP {
			t.Errorf("slice %s ports %s", s.Name, describeSlices([]*discoveryv1.EndpointSlice{s}))
		}
		if ts := s.Annotations[corev1.EndpointsLastChangeTriggerTime]; ts != "" {
			if _, err := time.Parse(time.RFC3339Nano, ts); err != nil {
				t.Errorf("trigger time %q: %v", ts, err)
			}
		}
		ep := s.Endpoints[0]
		if deref(ep.NodeName) != "node-1" || deref(ep.Zone) != "zone-a" || ep.TargetRef == nil || ep.TargetRef.Kind != "Pod" || ep.Hostname != nil {
			t.Errorf("endpoint %+v; want node-1 in zone-a, a pod targetRef and no hostname", ep)
		}
	}

	// One more pod lands in the slice it fits: the others are not written.
	before := map[string]string{}
	for _, s := range list {
		before[s.Name] = s.ResourceVersion
	}
	e.runPod(newPod("web-250", "web"), "10.244.9.9", true)
	controllertest.Eventually(t, "251 endpoints", func() (bool, string) {
		list = e.slicesOf("web")
		total := 0
		for _, s := range list {
			total += len(s.Endpoints)
		}
		return total == 251, fmt.Sprintf("%d endpoints in %d slices", total, len(list))
	})
	changed := 0
	for _, s := range list {
		if rv, ok := before[s.Name]; !ok || rv != s.ResourceVersion {
			changed++
		}
	}
	if len(list) != 3 || changed != 1 {
		t.Errorf("one more pod: %d slices, %d written; want 3 and 1", len(list), changed)
	}
}

// Conditions as kube computes them: ready and serving for a ready pod,
// neither for one that is not ready, and a pod being deleted stays, not
// ready, serving as its readiness says, terminating. A pod going away
// shrinks its slice in place.
func TestEndpointConditions(t *testing.T) {
	t.Parallel()
	e := start(t, 0)
	e.createService("web", map[string]string{"app": "web"}, corev1.ServicePort{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)})
	e.runPod(newPod("web-1", "web"), "10.0.0.1", true)
	e.runPod(newPod("web-2", "web"), "10.0.0.2", false)
	e.runPod(newPod("web-3", "web"), "10.0.0.3", true)
	// No IP yet: not an endpoint.
	if _, err := e.pods.Create(e.ctx(), newPod("web-4", "web")); err != nil {
		t.Fatal(err)
	}
	list := e.waitForSlices("web", "IPv4 [http:8080/TCP]: 10.0.0.1(web-1 ready,serving) 10.0.0.2(web-2 ) 10.0.0.3(web-3 ready,serving)")
	name := list[0].Name

	// Deleted, but its kubelet has not finished it: terminating.
	if err := e.pods.Delete(e.ctx(), ns, "web-3", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitForSlices("web", "IPv4 [http:8080/TCP]: 10.0.0.1(web-1 ready,serving) 10.0.0.2(web-2 ) 10.0.0.3(web-3 serving,terminating)")

	// Gone: the same slice shrinks.
	zero := int64(0)
	if err := e.pods.Delete(e.ctx(), ns, "web-3", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	list = e.waitForSlices("web", "IPv4 [http:8080/TCP]: 10.0.0.1(web-1 ready,serving) 10.0.0.2(web-2 )")
	if list[0].Name != name {
		t.Errorf("the slice was replaced (%s → %s), not updated", name, list[0].Name)
	}

	// publishNotReadyAddresses: every endpoint is ready.
	svc, err := e.services.Get(e.ctx(), ns, "web")
	if err != nil {
		t.Fatal(err)
	}
	svc.Spec.PublishNotReadyAddresses = true
	if _, err := e.services.Update(e.ctx(), svc); err != nil {
		t.Fatal(err)
	}
	e.waitForSlices("web", "IPv4 [http:8080/TCP]: 10.0.0.1(web-1 ready,serving) 10.0.0.2(web-2 ready)")
}

// A named targetPort is resolved per pod: pods that name it differently
// are in different slices, and a pod without it serves no port.
func TestNamedPortsPerPod(t *testing.T) {
	t.Parallel()
	e := start(t, 0)
	e.createService("api", map[string]string{"app": "api"}, corev1.ServicePort{Name: "http", Port: 80, TargetPort: intstr.FromString("web")})
	e.runPod(newPod("api-old", "api", corev1.ContainerPort{Name: "web", ContainerPort: 8080}), "10.0.1.1", true)
	e.runPod(newPod("api-new", "api", corev1.ContainerPort{Name: "web", ContainerPort: 9090}), "10.0.1.2", true)
	e.runPod(newPod("api-new2", "api", corev1.ContainerPort{Name: "web", ContainerPort: 9090}), "10.0.1.3", true)
	e.waitForSlices("api", strings.Join([]string{
		"IPv4 [http:8080/TCP]: 10.0.1.1(api-old ready,serving)",
		"IPv4 [http:9090/TCP]: 10.0.1.2(api-new ready,serving) 10.0.1.3(api-new2 ready,serving)",
	}, "\n"))
}

// A selector change moves the slices to the pods now selected; a service
// that selects nothing keeps one empty slice; a service without selector
// is left alone.
func TestSelectorChange(t *testing.T) {
	t.Parallel()
	e := start(t, 0)
	e.createService("web", map[string]string{"app": "blue"}, corev1.ServicePort{Name: "http", Port: 80})
	e.runPod(newPod("blue-1", "blue"), "10.0.2.1", true)
	e.runPod(newPod("green-1", "green"), "10.0.2.2", true)
	e.waitForSlices("web", "IPv4 [http:80/TCP]: 10.0.2.1(blue-1 ready,serving)")

	svc, err := e.services.Get(e.ctx(), ns, "web")
	if err != nil {
		t.Fatal(err)
	}
	svc.Spec.Selector = map[string]string{"app": "green"}
	if _, err := e.services.Update(e.ctx(), svc); err != nil {
		t.Fatal(err)
	}
	e.waitForSlices("web", "IPv4 [http:80/TCP]: 10.0.2.2(green-1 ready,serving)")

	svc, err = e.services.Get(e.ctx(), ns, "web")
	if err != nil {
		t.Fatal(err)
	}
	svc.Spec.Selector = map[string]string{"app": "none"}
	if _, err := e.services.Update(e.ctx(), svc); err != nil {
		t.Fatal(err)
	}
	// The placeholder: no ports, no endpoints.
	e.waitForSlices("web", "IPv4 []: ")

	e.createService("external", nil, corev1.ServicePort{Name: "http", Port: 80})
	e.createService("web2", map[string]string{"app": "blue"}, corev1.ServicePort{Name: "http", Port: 80})
	e.waitForSlices("web2", "IPv4 [http:80/TCP]: 10.0.2.1(blue-1 ready,serving)")
	if got := e.slicesOf("external"); len(got) != 0 {
		t.Errorf("a service without selector got slices:\n%s", describeSlices(got))
	}
}

// A slice deleted by someone else comes back; one edited by someone else
// is put right.
func TestSlicesRepaired(t *testing.T) {
	t.Parallel()
	e := start(t, 0)
	e.createService("web", map[string]string{"app": "web"}, corev1.ServicePort{Name: "http", Port: 80})
	e.runPod(newPod("web-1", "web"), "10.0.3.1", true)
	want := "IPv4 [http:80/TCP]: 10.0.3.1(web-1 ready,serving)"
	list := e.waitForSlices("web", want)

	s := list[0].DeepCopy()
	s.Endpoints = nil
	if _, err := e.slices.Update(e.ctx(), s); err != nil {
		t.Fatal(err)
	}
	e.waitForSlices("web", want)

	if err := e.slices.Delete(e.ctx(), ns, s.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, "a new slice", func() (bool, string) {
		list = e.slicesOf("web")
		return len(list) == 1 && list[0].Name != s.Name && describeSlices(list) == want, describeSlices(list)
	})
}

// Bad slices are refused with 422 naming the field, and nothing is stored.
func TestBadSlicesAreInvalid(t *testing.T) {
	t.Parallel()
	e := start(t, 0)
	ptr := func(s string) *string { return &s }
	port := int32(80)
	tests := []struct {
		name  string
		slice discoveryv1.EndpointSlice
		field string
	}{
		{"no addressType", discoveryv1.EndpointSlice{}, "addressType"},
		{"IPv6 address in IPv4 slice", discoveryv1.EndpointSlice{AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"fd00::1"}}}}, "endpoints[0].addresses[0]"},
		{"duplicate port names", discoveryv1.EndpointSlice{AddressType: discoveryv1.AddressTypeIPv4,
			Ports: []discoveryv1.EndpointPort{{Name: ptr("http"), Port: &port}, {Name: ptr("http"), Port: &port}}}, "ports[1].name"},
		{"bad nodeName", discoveryv1.EndpointSlice{AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}, NodeName: ptr("Node_1")}}}, "endpoints[0].nodeName"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.slice
			s.ObjectMeta = metav1.ObjectMeta{Name: "bad", Namespace: ns}
			_, err := e.slices.Create(e.ctx(), &s)
			if !client.IsInvalid(err) || client.StatusCode(err) != 422 || !strings.Contains(err.Error(), tt.field) {
				t.Fatalf("create: %v; want 422 Invalid naming %s", err, tt.field)
			}
			if _, err := e.slices.Get(e.ctx(), ns, "bad"); !client.IsNotFound(err) {
				t.Errorf("get after a refused create: %v; want NotFound", err)
			}
		})
	}

	good := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "good", Namespace: ns}, AddressType: discoveryv1.AddressTypeIPv4}
	created, err := e.slices.Create(e.ctx(), good)
	if err != nil {
		t.Fatal(err)
	}
	created.AddressType = discoveryv1.AddressTypeIPv6
	if _, err := e.slices.Update(e.ctx(), created); !client.IsInvalid(err) || !strings.Contains(err.Error(), "addressType") {
		t.Errorf("changing addressType: %v; want 422 Invalid naming addressType", err)
	}
}
