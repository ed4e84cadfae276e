package ingress

import (
	"context"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"

	"github.com/minictl/minictl/auth/user"
	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/controllers/internal/controllertest"
)

// The controller runs as user.SimIngressController; its bootstrap role
// must allow every call it makes, and no more than an ingress controller
// needs, and the API server's RBAC says so.
func TestRoleAllowsTheIngressController(t *testing.T) {
	env := controllertest.StartWith(t, controllertest.Options{AuthorizationModes: []string{"RBAC"}})
	reviews := client.For[*authorizationv1.SubjectAccessReview](env.Client)
	allowed := func(ra authorizationv1.ResourceAttributes) bool {
		t.Helper()
		out, err := reviews.Create(context.Background(), &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user.SimIngressController, Groups: []string{user.AllAuthenticated}, ResourceAttributes: &ra,
		}})
		if err != nil {
			t.Fatal(err)
		}
		return out.Status.Allowed
	}
	const group = "networking.k8s.io"
	for _, ra := range []authorizationv1.ResourceAttributes{
		{Verb: "list", Group: group, Resource: "ingresses"},
		{Verb: "watch", Group: group, Resource: "ingresses"},
		{Verb: "update", Group: group, Resource: "ingresses", Namespace: "default", Name: "web"}, // the finalizer
		{Verb: "update", Group: group, Resource: "ingresses", Subresource: "status", Namespace: "default", Name: "web"},
		{Verb: "list", Group: group, Resource: "ingressclasses"},
		{Verb: "watch", Group: group, Resource: "ingressclasses"},
		{Verb: "create", Group: group, Resource: "ingressclasses"},
		{Verb: "list", Resource: "services"},
		{Verb: "watch", Resource: "services"},
		{Verb: "create", Resource: "events", Namespace: "default"},
		{Verb: "patch", Resource: "events", Namespace: "default", Name: "e1"},
	} {
		if !allowed(ra) {
			t.Errorf("%s may not %s %s/%s", user.SimIngressController, ra.Verb, ra.Resource, ra.Subresource)
		}
	}
	for _, ra := range []authorizationv1.ResourceAttributes{
		{Verb: "delete", Group: group, Resource: "ingresses", Namespace: "default", Name: "web"},
		{Verb: "update", Group: group, Resource: "ingressclasses", Name: "sim"},
		{Verb: "update", Resource: "services", Namespace: "default", Name: "web"},
		{Verb: "get", Resource: "secrets", Namespace: "default", Name: "web-tls"},
	} {
		if allowed(ra) {
			t.Errorf("%s may %s %s: more than it needs", user.SimIngressController, ra.Verb, ra.Resource)
		}
	}
}
