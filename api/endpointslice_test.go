package api

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func minimalEndpointSlice() *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "web-abcde", Namespace: "default"},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{
			Addresses: []string{"10.244.0.5"},
			NodeName:  ptrTo("node-1"),
			Hostname:  ptrTo("web-0"),
		}},
		Ports: []discoveryv1.EndpointPort{{Name: ptrTo("http"), Port: ptrTo(int32(8080))}},
	}
}

func TestDefaultEndpointSlice(t *testing.T) {
	s := minimalEndpointSlice()
	s.Ports = append(s.Ports, discoveryv1.EndpointPort{Port: ptrTo(int32(9090))})
	EndpointSlices.Default(s)
	if p := s.Ports[0].Protocol; p == nil || *p != corev1.ProtocolTCP {
		t.Errorf("protocol = %v, want TCP", p)
	}
	if n := s.Ports[1].Name; n == nil || *n != "" {
		t.Errorf("unnamed port's name = %v, want \"\"", n)
	}
	checkErrors(t, EndpointSlices.Validate(s))
}

func TestValidateEndpointSlice(t *testing.T) {
	many := func(n int, f func(i int) string) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = f(i)
		}
		return out
	}
	tests := []struct {
		name   string
		mutate func(s *discoveryv1.EndpointSlice)
		want   []string
		detail string
	}{
		{"valid", func(s *discoveryv1.EndpointSlice) {}, nil, ""},
		{"no address type", func(s *discoveryv1.EndpointSlice) { s.AddressType = "" },
			[]string{"addressType: Required value"}, ""},
		{"deprecated address type", func(s *discoveryv1.EndpointSlice) { s.AddressType = "IP" },
			[]string{"addressType: Unsupported value"}, ""},
		{"endpoint without address", func(s *discoveryv1.EndpointSlice) { s.Endpoints[0].Addresses = nil },
			[]string{"endpoints[0].addresses: Required value"}, "must contain at least 1 address"},
		{"101 addresses", func(s *discoveryv1.EndpointSlice) {
			s.Endpoints[0].Addresses = many(101, func(i int) string { return fmt.Sprintf("10.0.%d.%d", i/250, i%250+1) })
		}, []string{"endpoints[0].addresses: Too many"}, ""},
		{"1001 endpoints", func(s *discoveryv1.EndpointSlice) {
			s.Endpoints = make([]discoveryv1.Endpoint, 1001)
		}, []string{"endpoints: Too many"}, "must have at most 1000 items"},
		{"IPv6 address in an IPv4 slice", func(s *discoveryv1.EndpointSlice) { s.Endpoints[0].Addresses = []string{"fd00::5"} },
			[]string{"endpoints[0].addresses[0]: Invalid value"}, "must be an IPv4 address"},
		{"not an IP", func(s *discoveryv1.EndpointSlice) { s.Endpoints[0].Addresses = []string{"web.example.com"} },
			[]string{"endpoints[0].addresses[0]: Invalid value"}, ""},
		{"loopback", func(s *discoveryv1.EndpointSlice) { s.Endpoints[0].Addresses = []string{"127.0.0.1"} },
			[]string{"endpoints[0].addresses[0]: Invalid value"}, "may not be in the loopback range"},
		{"link-local", func(s *discoveryv1.EndpointSlice) { s.Endpoints[0].Addresses = []string{"169.254.169.254"} },
			[]string{"endpoints[0].addresses[0]: Invalid value"}, "may not be in the link-local range"},
		{"FQDN", func(s *discoveryv1.EndpointSlice) {
			s.AddressType = discoveryv1.AddressTypeFQDN
			s.Endpoints[0].Addresses = []string{"web.example.com"}
		}, nil, ""},
		{"bad FQDN", func(s *discoveryv1.EndpointSlice) {
			s.AddressType = discoveryv1.AddressTypeFQDN
			s.Endpoints[0].Addresses = []string{"Web_1"}
		}, []string{"endpoints[0].addresses[0]: Invalid value"}, ""},
		{"bad hostname", func(s *discoveryv1.EndpointSlice) { s.Endpoints[0].Hostname = ptrTo("Web.0") },
			[]string{"endpoints[0].hostname: Invalid value"}, ""},
		{"bad nodeName", func(s *discoveryv1.EndpointSlice) { s.Endpoints[0].NodeName = ptrTo("Node_1") },
			[]string{"endpoints[0].nodeName: Invalid value"}, ""},
		{"duplicate zone hint", func(s *discoveryv1.EndpointSlice) {
			s.Endpoints[0].Hints = &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: "a"}, {Name: "a"}}}
		}, []string{"endpoints[0].hints.forZones[1].name: Duplicate value"}, ""},
		{"duplicate port name", func(s *discoveryv1.EndpointSlice) {
			s.Ports = append(s.Ports, discoveryv1.EndpointPort{Name: ptrTo("http"), Port: ptrTo(int32(80)), Protocol: ptrTo(corev1.ProtocolTCP)})
		}, []string{"ports[1].name: Duplicate value"}, ""},
		{"bad port name", func(s *discoveryv1.EndpointSlice) { s.Ports[0].Name = ptrTo("HTTP") },
			[]string{"ports[0].name: Invalid value"}, ""},
		{"bad protocol", func(s *discoveryv1.EndpointSlice) { s.Ports[0].Protocol = ptrTo(corev1.Protocol("ICMP")) },
			[]string{"ports[0].protocol: Unsupported value"}, ""},
		{"101 ports", func(s *discoveryv1.EndpointSlice) {
			s.Ports = make([]discoveryv1.EndpointPort, 101)
		}, []string{"ports: Too many"}, ""},
		{"bad appProtocol", func(s *discoveryv1.EndpointSlice) { s.Ports[0].AppProtocol = ptrTo("not a protocol") },
			[]string{"ports[0].appProtocol: Invalid value"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := minimalEndpointSlice()
			EndpointSlices.Default(s)
			tt.mutate(s)
			errs := EndpointSlices.Validate(s)
			checkErrors(t, errs, tt.want...)
			if tt.detail != "" {
				checkDetail(t, errs, tt.detail)
			}
		})
	}
}

func TestEndpointSliceUpdate(t *testing.T) {
	old := minimalEndpointSlice()
	EndpointSlices.Default(old)
	EndpointSlices.PrepareForCreate(old)
	if old.Generation != 1 {
		t.Errorf("generation on create = %d, want 1", old.Generation)
	}

	s := old.DeepCopy()
	s.AddressType = discoveryv1.AddressTypeIPv6
	checkErrors(t, EndpointSlices.ValidateUpdate(s, old), "addressType: Invalid value")

	s = old.DeepCopy()
	s.Annotations = map[string]string{"note": "x"}
	EndpointSlices.PrepareForUpdate(s, old)
	if s.Generation != 1 {
		t.Errorf("an annotation moved generation to %d", s.Generation)
	}
	s = old.DeepCopy()
	s.Endpoints[0].Addresses = []string{"10.244.0.6"}
	EndpointSlices.PrepareForUpdate(s, old)
	if s.Generation != 2 {
		t.Errorf("new endpoints left generation at %d, want 2", s.Generation)
	}
}

func TestEndpointSliceTable(t *testing.T) {
	s := minimalEndpointSlice()
	s.CreationTimestamp = ago(time.Hour)
	for i := range 4 {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.244.1.%d", i+1)}})
	}
	checkCells(t, EndpointSlices.TableRow(s, tableNow).Cells,
		[]any{"web-abcde", "IPv4", "8080", "10.244.0.5,10.244.1.1,10.244.1.2 + 2 more...", "60m"})
	s.Endpoints, s.Ports = nil, nil
	checkCells(t, EndpointSlices.TableRow(s, tableNow).Cells, []any{"web-abcde", "IPv4", "<unset>", "<unset>", "60m"})
	var names []string
	for _, c := range EndpointSlices.TableColumns() {
		names = append(names, c.Name)
	}
	checkCells(t, names, []string{"Name", "AddressType", "Ports", "Endpoints", "Age"})
}
