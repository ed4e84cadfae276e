// Package authorizer is what kube's authorizers decide on: a request's
// attributes (who, which verb, on what), the Authorizer interface, the
// union of authorization modes, and the words of a refusal.
package authorizer

import (
	"context"
	"errors"
	"fmt"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/minictl/minictl/auth/user"
)

// Attributes are what is asked: the user, the verb, and either a resource
// (ResourceRequest: group, version, resource, subresource, namespace,
// name) or a path (a non-resource URL such as /healthz or /apis).
type Attributes struct {
	User            *user.Info
	Verb            string
	ResourceRequest bool

	APIGroup, APIVersion  string
	Resource, Subresource string
	Namespace, Name       string
	// FieldSelector is a list's or watch's fieldSelector, in its
	// canonical form ("" if it has none or it does not parse), for the
	// authorizers that allow a list only when it is scoped, as the Node
	// authorizer allows a kubelet the pods of its own node alone.
	FieldSelector string

	Path string
}

// Decision is an authorizer's answer.
type Decision int

const (
	// NoOpinion: ask the next authorizer; when none allows, the request
	// is refused.
	NoOpinion Decision = iota
	Allow
	// Deny refuses at once, whatever later authorizers would say.
	Deny
)

func (d Decision) String() string {
	switch d {
	case Allow:
		return "allow"
	case Deny:
		return "deny"
	}
	return "no opinion"
}

// Authorizer decides whether a request may go on, and says why in reason
// (shown to the user after a refusal, and in the audit log).
type Authorizer interface {
	Authorize(ctx context.Context, a Attributes) (d Decision, reason string, err error)
}

// Func is a function that is an Authorizer.
type Func func(ctx context.Context, a Attributes) (Decision, string, error)

func (f Func) Authorize(ctx context.Context, a Attributes) (Decision, string, error) {
	return f(ctx, a)
}

// RuleResolver lists what a user may do in a namespace ("" for the
// cluster scope): what SelfSubjectRulesReview answers and
// `kubectl auth can-i --list` prints. incomplete says a rule could not be
// read (a binding to a missing role), so the list may lack some.
type RuleResolver interface {
	RulesFor(ctx context.Context, u *user.Info, namespace string) (resource []authorizationv1.ResourceRule, nonResource []authorizationv1.NonResourceRule, incomplete bool, err error)
}

// AlwaysAllow allows everything: the authorization mode of a server
// that has no users to tell apart.
var AlwaysAllow = Func(func(context.Context, Attributes) (Decision, string, error) { return Allow, "", nil })

// Privileged allows the members of system:masters everything and has no
// opinion on anyone else, as kube-apiserver's first authorizer.
var Privileged = Func(func(_ context.Context, a Attributes) (Decision, string, error) {
	if a.User.InGroup(user.SystemPrivilegedGroup) {
		return Allow, "", nil
	}
	return NoOpinion, "", nil
})

// Union asks each authorizer in turn: the first Allow or Deny decides.
// When all have no opinion, the reasons they gave are joined, and so are
// their errors.
func Union(as ...Authorizer) Authorizer {
	return Func(func(ctx context.Context, a Attributes) (Decision, string, error) {
		var reasons string
		var errs []error
		for _, az := range as {
			d, reason, err := az.Authorize(ctx, a)
			if err != nil {
				errs = append(errs, err)
			}
			if d != NoOpinion {
				return d, reason, nil
			}
			if reason != "" {
				if reasons != "" {
					reasons += ", "
				}
				reasons += reason
			}
		}
		return NoOpinion, reasons, errors.Join(errs...)
	})
}

// ForbiddenMessage is kube-apiserver's sentence for a refusal:
// `User "x" cannot list resource "pods" in API group "" in the namespace "y"`.
func ForbiddenMessage(a Attributes) string {
	name := ""
	if a.User != nil {
		name = a.User.Name
	}
	if !a.ResourceRequest {
		return fmt.Sprintf("User %q cannot %s path %q", name, a.Verb, a.Path)
	}
	resource := a.Resource
	if a.Subresource != "" {
		resource += "/" + a.Subresource
	}
	if a.Namespace != "" {
		return fmt.Sprintf("User %q cannot %s resource %q in API group %q in the namespace %q", name, a.Verb, resource, a.APIGroup, a.Namespace)
	}
	return fmt.Sprintf("User %q cannot %s resource %q in API group %q at the cluster scope", name, a.Verb, resource, a.APIGroup)
}

// Forbidden is the 403 Status of a refusal, as kube-apiserver words it:
// `pods is forbidden: User "x" cannot list resource "pods" in API group ""
// in the namespace "y"`, with the authorizer's reason after a colon.
func Forbidden(a Attributes, reason string) *apierrors.StatusError {
	msg := ForbiddenMessage(a)
	if reason != "" {
		msg += ": " + reason
	}
	gr := schema.GroupResource{Group: a.APIGroup, Resource: a.Resource}
	return apierrors.NewForbidden(gr, a.Name, errors.New(msg))
}
