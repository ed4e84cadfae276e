package authorizer

import (
	"net/http/httptest"
	"testing"

	"github.com/minictl/minictl/auth/user"
)

func TestFromRequest(t *testing.T) {
	for _, tc := range []struct {
		method, target string
		want           Attributes
	}{
		{"GET", "/api/v1/namespaces/default/pods", Attributes{ResourceRequest: true, Verb: "list", APIVersion: "v1", Namespace: "default", Resource: "pods"}},
		{"GET", "/api/v1/pods?watch=true", Attributes{ResourceRequest: true, Verb: "watch", APIVersion: "v1", Resource: "pods"}},
		{"GET", "/api/v1/namespaces/ns/pods?fieldSelector=metadata.name%3Dweb", Attributes{ResourceRequest: true, Verb: "list", APIVersion: "v1", Namespace: "ns", Resource: "pods", Name: "web", FieldSelector: "metadata.name=web"}},
		{"GET", "/api/v1/pods?watch=true&fieldSelector=spec.nodeName%3Dnode-1", Attributes{ResourceRequest: true, Verb: "watch", APIVersion: "v1", Resource: "pods", FieldSelector: "spec.nodeName=node-1"}},
		{"POST", "/api/v1/namespaces/ns/pods/web/eviction", Attributes{ResourceRequest: true, Verb: "create", APIVersion: "v1", Namespace: "ns", Resource: "pods", Name: "web", Subresource: "eviction"}},
		{"DELETE", "/apis/apps/v1/namespaces/ns/deployments", Attributes{ResourceRequest: true, Verb: "deletecollection", APIGroup: "apps", APIVersion: "v1", Namespace: "ns", Resource: "deployments"}},
		{"PUT", "/api/v1/namespaces/ns/status", Attributes{ResourceRequest: true, Verb: "update", APIVersion: "v1", Namespace: "ns", Resource: "namespaces", Name: "ns", Subresource: "status"}},
		{"GET", "/api/v1/namespaces/ns", Attributes{ResourceRequest: true, Verb: "get", APIVersion: "v1", Namespace: "ns", Resource: "namespaces", Name: "ns"}},
		{"PATCH", "/apis/apps/v1/namespaces/ns/deployments/web/scale", Attributes{ResourceRequest: true, Verb: "patch", APIGroup: "apps", APIVersion: "v1", Namespace: "ns", Resource: "deployments", Name: "web", Subresource: "scale"}},
		{"GET", "/api/v1/nodes/n1/proxy/stats", Attributes{ResourceRequest: true, Verb: "get", APIVersion: "v1", Resource: "nodes", Name: "n1", Subresource: "proxy"}},
		{"GET", "/api/v1/watch/namespaces/ns/pods", Attributes{ResourceRequest: true, Verb: "watch", APIVersion: "v1", Namespace: "ns", Resource: "pods"}},
		{"GET", "/healthz", Attributes{Verb: "get", Path: "/healthz"}},
		{"GET", "/apis/apps", Attributes{Verb: "get", Path: "/apis/apps"}},
		{"GET", "/api/v1", Attributes{Verb: "get", Path: "/api/v1"}},
		{"POST", "/logs", Attributes{Verb: "post", Path: "/logs"}},
	} {
		r := httptest.NewRequest(tc.method, tc.target, nil)
		got := FromRequest(r, nil)
		tc.want.Path = r.URL.Path
		if got != tc.want {
			t.Errorf("%s %s:\n got  %+v\n want %+v", tc.method, tc.target, got, tc.want)
		}
	}
}

func TestForbiddenMessages(t *testing.T) {
	for _, tc := range []struct {
		a    Attributes
		want string
	}{
		{Attributes{Verb: "list", ResourceRequest: true, Resource: "pods", Namespace: "y"}, `pods is forbidden: User "x" cannot list resource "pods" in API group "" in the namespace "y"`},
		{Attributes{Verb: "get", ResourceRequest: true, APIGroup: "apps", Resource: "deployments", Subresource: "scale", Name: "web"}, `deployments.apps "web" is forbidden: User "x" cannot get resource "deployments/scale" in API group "apps" at the cluster scope`},
		{Attributes{Verb: "get", Path: "/metrics"}, `forbidden: User "x" cannot get path "/metrics"`},
	} {
		tc.a.User = &userX
		if got := Forbidden(tc.a, "").ErrStatus.Message; got != tc.want {
			t.Errorf("got  %s\nwant %s", got, tc.want)
		}
	}
}

var userX = user.Info{Name: "x"}
