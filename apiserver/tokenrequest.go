package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/auth/serviceaccount"
)

// The token subresource: POST serviceaccounts/{name}/token with an
// authentication.k8s.io/v1 TokenRequest issues a token of that
// ServiceAccount, as kube-apiserver's TokenRequest API:
//
//   - spec.audiences default to the API audiences; spec.expirationSeconds
//     to an hour, and may be no less than ten minutes nor more than 2^32
//     seconds; beyond --service-account-max-token-expiration it is cut to
//     that, with a warning.
//   - spec.boundObjectRef binds the token to a Pod (which must run as the
//     ServiceAccount), a Secret or a Node of the namespace: it must exist,
//     with the uid the reference gives if it gives one, and the token dies
//     with it. A pod's token names the pod's node too.
//   - A pod-bound token asked for kube's projected-volume lifetime (3607
//     seconds) for the API audiences lives a year, with a warnafter at the
//     asked expiry.
//
// Nothing is stored: the answer is the request with status.token and
// status.expirationTimestamp.

// tokenRequestKind names TokenRequest in errors.
var tokenRequestKind = schema.GroupKind{Group: authnv1.SchemeGroupVersion.Group, Kind: "TokenRequest"}

// minTokenSeconds and maxTokenSeconds bound spec.expirationSeconds.
const (
	minTokenSeconds     = 10 * 60
	maxTokenSeconds     = 1 << 32
	defaultTokenSeconds = 60 * 60
)

func (s *Server) serveTokenRequest(w http.ResponseWriter, r *http.Request, ri *requestInfo) error {
	if r.Method != http.MethodPost {
		return newMethodNotAllowed(r.Method, r.URL.Path)
	}
	if s.saIssuer == nil {
		return newNotFoundPath(r.URL.Path) // no signing key: the API is not served
	}
	req, err := s.readTokenRequest(r, ri)
	if err != nil {
		return err
	}
	if err := s.issueToken(r.Context(), ri.namespace, ri.name, req); err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, req)
	return nil
}

// readTokenRequest decodes, defaults and validates the body.
func (s *Server) readTokenRequest(r *http.Request, ri *requestInfo) (*authnv1.TokenRequest, error) {
	var req authnv1.TokenRequest
	if err := s.readBodyInto(r, "TokenRequest", &req); err != nil {
		return nil, err
	}
	// A body that names no kind is taken for the one the path expects,
	// as kube-apiserver takes it.
	if (req.Kind != "" && req.Kind != "TokenRequest") || (req.APIVersion != "" && req.APIVersion != authnv1.SchemeGroupVersion.String()) {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the body is a %q %q, not an authentication.k8s.io/v1 TokenRequest", req.APIVersion, req.Kind))
	}
	var errs field.ErrorList
	if req.Name != "" && req.Name != ri.name {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), req.Name, "must match the service account name if specified"))
	}
	if req.Namespace != "" && req.Namespace != ri.namespace {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "namespace"), req.Namespace, "must match the service account namespace if specified"))
	}
	if req.Spec.ExpirationSeconds == nil {
		req.Spec.ExpirationSeconds = new(int64(defaultTokenSeconds))
	}
	exp := field.NewPath("spec", "expirationSeconds")
	switch n := *req.Spec.ExpirationSeconds; {
	case n < minTokenSeconds:
		errs = append(errs, field.Invalid(exp, n, "may not specify a duration less than 10 minutes"))
	case n > maxTokenSeconds:
		errs = append(errs, field.Invalid(exp, n, "may not specify a duration larger than 2^32 seconds"))
	}
	if len(errs) > 0 {
		return nil, apierrors.NewInvalid(tokenRequestKind, ri.name, errs)
	}
	req.Name, req.Namespace = ri.name, ri.namespace
	req.APIVersion, req.Kind = authnv1.SchemeGroupVersion.String(), "TokenRequest"
	if len(req.Spec.Audiences) == 0 {
		req.Spec.Audiences = slices.Clone(s.saIssuer.audiences)
	}
	return &req, nil
}

// issueToken fills req's status with a token of the ServiceAccount
// namespace/name.
func (s *Server) issueToken(ctx context.Context, namespace, name string, req *authnv1.TokenRequest) error {
	iss := s.saIssuer
	acct, err := freshGet[*corev1.ServiceAccount](ctx, s, api.ServiceAccounts, namespace, name)
	if err != nil {
		return err
	}
	if max := int64(iss.max / time.Second); max > 0 && *req.Spec.ExpirationSeconds > max {
		addWarning(ctx, fmt.Sprintf("requested expiration of %d seconds shortened to %d seconds", *req.Spec.ExpirationSeconds, max))
		req.Spec.ExpirationSeconds = &max
	}
	var b serviceaccount.Bound
	if ref := req.Spec.BoundObjectRef; ref != nil {
		if b, err = s.boundObject(ctx, namespace, name, ref); err != nil {
			return err
		}
	}
	now := time.Now()
	seconds := *req.Spec.ExpirationSeconds
	var warnAfter time.Time
	if b.Pod != nil && seconds == serviceaccount.WarnOnlyBoundTokenExpirationSeconds && isSubset(req.Spec.Audiences, iss.audiences) {
		warnAfter = now.Add(time.Duration(seconds) * time.Second)
		seconds = serviceaccount.ExpirationExtensionSeconds
	}
	c := serviceaccount.NewClaims(iss.issuer, acct, b, now, seconds, warnAfter, req.Spec.Audiences)
	tok, err := iss.signer.Sign(c)
	if err != nil {
		return fmt.Errorf("failed to generate token: %w", err)
	}
	req.CreationTimestamp = metav1.NewTime(now.Truncate(time.Second))
	req.Status = authnv1.TokenRequestStatus{Token: tok, ExpirationTimestamp: metav1.NewTime(c.ExpiresAt.Time)}
	return nil
}

// boundObject finds what ref names, as kube checks it.
func (s *Server) boundObject(ctx context.Context, namespace, saName string, ref *authnv1.BoundObjectReference) (serviceaccount.Bound, error) {
	var b serviceaccount.Bound
	gvk := schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind)
	var uid string
	var err error
	switch {
	case gvk.Group == "" && gvk.Kind == "Pod":
		if b.Pod, err = freshGet[*corev1.Pod](ctx, s, api.Pods, namespace, ref.Name); err != nil {
			return b, err
		}
		if b.Pod.Spec.ServiceAccountName != saName {
			return b, apierrors.NewBadRequest(fmt.Sprintf("cannot bind token for serviceaccount %q to pod running with serviceaccount %q", saName, b.Pod.Spec.ServiceAccountName))
		}
		uid = string(b.Pod.UID)
		if n := b.Pod.Spec.NodeName; n != "" {
			// The pod's node is named for information; its uid only
			// when the node is known.
			b.Node = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}
			if node, ok := cachedAs[*corev1.Node](s, api.Nodes, "", n); ok {
				b.Node.UID = node.UID
			}
		}
	case gvk.Group == "" && gvk.Kind == "Secret":
		if b.Secret, err = freshGet[*corev1.Secret](ctx, s, api.Secrets, namespace, ref.Name); err != nil {
			return b, err
		}
		uid = string(b.Secret.UID)
	case gvk.Group == "" && gvk.Kind == "Node":
		if b.Node, err = freshGet[*corev1.Node](ctx, s, api.Nodes, "", ref.Name); err != nil {
			return b, err
		}
		uid = string(b.Node.UID)
	default:
		return b, apierrors.NewBadRequest(fmt.Sprintf("cannot bind token to object of type %s", gvk.String()))
	}
	if ref.UID != "" && string(ref.UID) != uid {
		return b, apierrors.NewConflict(schema.GroupResource{Group: gvk.Group, Resource: gvk.Kind}, ref.Name,
			fmt.Errorf("the UID in the bound object reference (%s) does not match the UID in record. The object might have been deleted and then recreated", ref.UID))
	}
	return b, nil
}

// freshGet is namespace/name of res as its watch cache has it once the
// cache has caught up with etcd's current revision: what the request
// reads is at least as new as any write that came before it. It is the
// cache's own object, never to be changed. Not there: kube's 404.
func freshGet[T api.Object](ctx context.Context, s *Server, res *api.Resource, namespace, name string) (T, error) {
	var zero T
	v := s.serving()
	rev, err := s.store.Revision(ctx)
	if err != nil {
		return zero, v.stores[res].storageError(err, name)
	}
	if err := v.caches[res].waitFresh(ctx, rev); err != nil {
		return zero, err
	}
	t, ok := cachedAs[T](s, res, namespace, name)
	if !ok {
		return zero, apierrors.NewNotFound(res.GroupResource(), name)
	}
	return t, nil
}

// isSubset reports whether every one of a is in b.
func isSubset(a, b []string) bool {
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}
