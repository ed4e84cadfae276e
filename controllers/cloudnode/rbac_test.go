package cloudnode

import (
	"context"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/controllers/internal/controllertest"
)

// Both cloud node controllers run as kube-system's node-controller
// (--use-service-account-credentials); its bootstrap role must allow every
// write they make, and the API server's RBAC says so.
func TestNodeControllerRoleAllowsTheCloudNodeControllers(t *testing.T) {
	env := controllertest.StartWith(t, controllertest.Options{AuthorizationModes: []string{"RBAC"}})
	reviews := client.For[*authorizationv1.SubjectAccessReview](env.Client)
	const sa = "system:serviceaccount:kube-system:node-controller"
	for _, ra := range []authorizationv1.ResourceAttributes{
		{Verb: "update", Resource: "nodes", Name: "n1"},                       // cloud-node: initialize
		{Verb: "patch", Resource: "nodes", Name: "n1"},                        // cloud-node: GA labels; lifecycle: shutdown taint
		{Verb: "patch", Resource: "nodes", Subresource: "status", Name: "n1"}, // cloud-node: addresses
		{Verb: "get", Resource: "nodes", Name: "n1"},                          // lifecycle: taint retries
		{Verb: "delete", Resource: "nodes", Name: "n1"},                       // lifecycle: machine gone
		{Verb: "create", Resource: "events", Namespace: "default"},            // Synced, DeletingNode
		{Verb: "patch", Resource: "events", Namespace: "default", Name: "e1"}, // repeated events
		{Verb: "create", Group: "events.k8s.io", Resource: "events", Namespace: "default"},
	} {
		out, err := reviews.Create(context.Background(), &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: sa, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"},
			ResourceAttributes: &ra,
		}})
		if err != nil {
			t.Fatal(err)
		}
		if !out.Status.Allowed {
			t.Errorf("node-controller may not %s %s/%s: %s", ra.Verb, ra.Resource, ra.Subresource, out.Status.Reason)
		}
	}
	// And not more than a node controller needs.
	out, err := reviews.Create(context.Background(), &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: sa, ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "create", Resource: "nodes"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if out.Status.Allowed {
		t.Error("node-controller may create nodes")
	}
}
