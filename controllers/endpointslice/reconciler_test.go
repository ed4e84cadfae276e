package endpointslice

import (
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The packing, on its own: what a change of a few endpoints writes, with
// at most 3 endpoints a slice.
func TestPlanPortsKeepsChurnLow(t *testing.T) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns, UID: "svc-uid"}}
	ports := []discoveryv1.EndpointPort{}
	endpoint := func(i int) discoveryv1.Endpoint {
		yes, no := true, false
		return discoveryv1.Endpoint{
			Addresses:  []string{fmt.Sprintf("10.0.0.%d", i)},
			Conditions: discoveryv1.EndpointConditions{Ready: &yes, Serving: &yes, Terminating: &no},
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: fmt.Sprintf("pod-%d", i)},
		}
	}
	slice := func(name string, ids ...int) *discoveryv1.EndpointSlice {
		s := newSlice(svc, ports, discoveryv1.AddressTypeIPv4)
		s.Name = name
		for _, i := range ids {
			s.Endpoints = append(s.Endpoints, endpoint(i))
		}
		return s
	}
	want := func(ids ...int) *endpointSet {
		set := newEndpointSet()
		for _, i := range ids {
			ep := endpoint(i)
			set.insert(&ep)
		}
		return set
	}
	names := func(list []*discoveryv1.EndpointSlice) []string {
		var out []string
		for _, s := range list {
			out = append(out, fmt.Sprintf("%s:%d", s.Name, len(s.Endpoints)))
		}
		slices.Sort(out)
		return out
	}
	c := &Controller{maxPerSlice: 3}

	tests := []struct {
		name                   string
		existing               []*discoveryv1.EndpointSlice
		want                   *endpointSet
		create, update, remove []string
	}{
		{"nothing changed", []*discoveryv1.EndpointSlice{slice("a", 1, 2, 3), slice("b", 4)}, want(1, 2, 3, 4),
			nil, nil, nil},
		{"two new fit the slice with room", []*discoveryv1.EndpointSlice{slice("a", 1, 2, 3), slice("b", 4)}, want(1, 2, 3, 4, 5, 6),
			nil, []string{"b:3"}, nil},
		{"one gone, one new: the slice written anyway takes it", []*discoveryv1.EndpointSlice{slice("a", 1, 2, 3), slice("b", 4)}, want(1, 3, 4, 5),
			nil, []string{"a:3"}, nil},
		{"a slice emptied is deleted", []*discoveryv1.EndpointSlice{slice("a", 1, 2, 3), slice("b", 4)}, want(1, 2, 3),
			nil, nil, []string{"b:1"}},
		{"too many for the room left: a new slice", []*discoveryv1.EndpointSlice{slice("a", 1, 2, 3)}, want(1, 2, 3, 4, 5, 6, 7),
			[]string{":1", ":3"}, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := c.planPorts(svc, tt.existing, tt.want, ports, discoveryv1.AddressTypeIPv4)
			if got := names(p.create); !slices.Equal(got, tt.create) {
				t.Errorf("create %v, want %v", got, tt.create)
			}
			if got := names(p.update); !slices.Equal(got, tt.update) {
				t.Errorf("update %v, want %v", got, tt.update)
			}
			if got := names(p.delete); !slices.Equal(got, tt.remove) {
				t.Errorf("delete %v, want %v", got, tt.remove)
			}
		})
	}
}
