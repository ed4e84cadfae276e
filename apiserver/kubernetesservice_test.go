package apiserver_test

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/minictl/minictl/apiserver"
	"github.com/minictl/minictl/internal/testenv"
)

// TestKubernetesService: the API server publishes itself as the kubernetes
// Service in default, at the service range's first address, with
// Endpoints naming where it listens; a deleted one comes back.
func TestKubernetesService(t *testing.T) {
	env := testenv.StartWith(t, testenv.Options{Server: apiserver.Config{
		ServiceClusterIPRange: netip.MustParsePrefix("10.100.0.0/16"),
		AdvertiseAddress:      netip.MustParseAddr("192.0.2.10"),
	}})
	port := env.URL[strings.LastIndex(env.URL, ":")+1:]
	const svcPath, epPath = "/api/v1/namespaces/default/services/kubernetes", "/api/v1/namespaces/default/endpoints/kubernetes"
	const slicePath = "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/kubernetes"

	check := func() (bool, string) {
		var svc corev1.Service
		if r := do(t, env, http.MethodGet, svcPath, "", nil); r.code != http.StatusOK {
			return false, fmt.Sprintf("service: %d", r.code)
		} else {
			r.into(t, &svc)
		}
		var ep corev1.Endpoints
		if r := do(t, env, http.MethodGet, epPath, "", nil); r.code != http.StatusOK {
			return false, fmt.Sprintf("endpoints: %d", r.code)
		} else {
			r.into(t, &ep)
		}
		if svc.Spec.ClusterIP != "10.100.0.1" || svc.Spec.Type != corev1.ServiceTypeClusterIP || len(svc.Spec.Ports) != 1 ||
			svc.Spec.Ports[0].Name != "https" || svc.Spec.Ports[0].Port != 443 || svc.Spec.Ports[0].TargetPort.String() != port ||
			svc.Labels["provider"] != "kubernetes" || svc.Labels["component"] != "apiserver" {
			return false, fmt.Sprintf("service %+v labels %v", svc.Spec, svc.Labels)
		}
		if len(ep.Subsets) != 1 || len(ep.Subsets[0].Addresses) != 1 || ep.Subsets[0].Addresses[0].IP != "192.0.2.10" ||
			len(ep.Subsets[0].Ports) != 1 || ep.Subsets[0].Ports[0].Name != "https" || fmt.Sprint(ep.Subsets[0].Ports[0].Port) != port {
			return false, fmt.Sprintf("endpoints %+v", ep.Subsets)
		}
		var slice discoveryv1.EndpointSlice
		if r := do(t, env, http.MethodGet, slicePath, "", nil); r.code != http.StatusOK {
			return false, fmt.Sprintf("endpointslice: %d", r.code)
		} else {
			r.into(t, &slice)
		}
		if slice.Labels[discoveryv1.LabelServiceName] != "kubernetes" || slice.AddressType != discoveryv1.AddressTypeIPv4 ||
			len(slice.Endpoints) != 1 || fmt.Sprint(slice.Endpoints[0].Addresses) != "[192.0.2.10]" ||
			slice.Endpoints[0].Conditions.Ready == nil || !*slice.Endpoints[0].Conditions.Ready ||
			len(slice.Ports) != 1 || slice.Ports[0].Name == nil || *slice.Ports[0].Name != "https" || fmt.Sprint(*slice.Ports[0].Port) != port {
			return false, fmt.Sprintf("endpointslice %+v", slice)
		}
		return true, ""
	}
	eventually(t, "the kubernetes Service, Endpoints and EndpointSlice", check)

	// Deleted, both come back; an edited port is put back.
	do(t, env, http.MethodDelete, epPath, "", nil).want(t, http.StatusOK)
	do(t, env, http.MethodDelete, slicePath, "", nil).want(t, http.StatusOK)
	do(t, env, http.MethodPatch, svcPath, "application/merge-patch+json",
		`{"spec":{"ports":[{"name":"https","port":8443,"protocol":"TCP","targetPort":1}]}}`).want(t, http.StatusOK)
	// The server puts them back on its next round, within 10 seconds.
	eventuallyWithin(t, 30*time.Second, "the kubernetes Service and Endpoints after a delete and an edit", check)

	// The endpoints controller's Services have selectors; this one has
	// none, and nothing else claims its Endpoints.
	var svc corev1.Service
	do(t, env, http.MethodGet, svcPath, "", nil).want(t, http.StatusOK).into(t, &svc)
	if svc.Spec.Selector != nil {
		t.Errorf("selector %v", svc.Spec.Selector)
	}
}

// TestKubernetesServiceDefaults: with nothing configured, the first address
// of 10.96.0.0/12.
func TestKubernetesServiceDefaults(t *testing.T) {
	env := testenv.Start(t)
	eventually(t, "the kubernetes Service at 10.96.0.1", func() (bool, string) {
		r := do(t, env, http.MethodGet, "/api/v1/namespaces/default/services/kubernetes", "", nil)
		if r.code != http.StatusOK {
			return false, fmt.Sprint(r.code)
		}
		var svc corev1.Service
		r.into(t, &svc)
		return svc.Spec.ClusterIP == "10.96.0.1", svc.Spec.ClusterIP
	})
}
