package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/auth/authorizer"
	"github.com/minictl/minictl/auth/user"
)

// The reviews are questions asked with a create and answered in the
// status of the object sent back (201), as kube-apiserver's Creater-only
// storages answer them; nothing is stored, and no admission runs. Who the
// caller is comes from the request (after impersonation): the "self"
// reviews ask about the caller, the others about whoever their spec names.

// serveReview answers the create of a review.
func (s *Server) serveReview(w http.ResponseWriter, r *http.Request, ri *requestInfo) error {
	obj, err := s.decodeObject(r, ri.res)
	if err != nil {
		return err
	}
	if err := checkIdentity(ri.res, obj, ri.namespace, ""); err != nil {
		return err
	}
	ctx := r.Context()
	var answer api.Object
	switch o := obj.(type) {
	case *authenticationv1.TokenReview:
		answer, err = s.reviewToken(ctx, o)
	case *authenticationv1.SelfSubjectReview:
		answer, err = reviewSelf(ctx)
	case *authorizationv1.SubjectAccessReview:
		answer, err = s.reviewAccess(ctx, o)
	case *authorizationv1.SelfSubjectAccessReview:
		answer, err = s.reviewSelfAccess(ctx, o)
	case *authorizationv1.LocalSubjectAccessReview:
		answer, err = s.reviewLocalAccess(ctx, o, ri.namespace)
	case *authorizationv1.SelfSubjectRulesReview:
		answer, err = s.reviewSelfRules(ctx, o)
	default:
		return apierrors.NewInternalError(fmt.Errorf("no review is answered for %T", obj))
	}
	if err != nil {
		return err
	}
	setTypeMeta(ri.res, answer)
	writeJSON(w, http.StatusCreated, answer)
	return nil
}

// errNoUser is the answer to a self review that reaches the server with
// no user, which the filter chain never lets happen.
var errNoUser = apierrors.NewBadRequest("no user present on request")

// defaultAPIAudiences are the audiences of a token meant for the API
// server itself when it was given none (Authentication.APIAudiences or
// a ServiceAccount issuer): a TokenReview that names no audiences asks
// for the server's, and a token whose authenticator names none is taken
// to be for them.
var defaultAPIAudiences = []string{"https://kubernetes.default.svc.cluster.local"}

// reviewToken says who spec.token proves its bearer is, for audiences
// (the API server's own when none are named). A token no authenticator
// accepts is answered unauthenticated, with the reason in status.error,
// not refused.
func (s *Server) reviewToken(ctx context.Context, tr *authenticationv1.TokenReview) (api.Object, error) {
	if tr.Spec.Token == "" {
		return nil, apierrors.NewBadRequest("token is required for TokenReview in authentication")
	}
	tr.Status = authenticationv1.TokenReviewStatus{}
	if s.tokens == nil {
		return tr, nil
	}
	resp, ok, err := s.tokens.AuthenticateToken(ctx, tr.Spec.Token)
	if err != nil {
		tr.Status.Error = err.Error()
	}
	if !ok || resp == nil || resp.User == nil {
		return tr, nil
	}
	own := s.apiAudiences
	if len(own) == 0 {
		own = defaultAPIAudiences
	}
	wanted := tr.Spec.Audiences
	if len(wanted) == 0 {
		wanted = own
	}
	has := resp.Audiences
	if len(has) == 0 {
		has = own
	}
	var auds []string
	for _, a := range wanted {
		if slices.Contains(has, a) {
			auds = append(auds, a)
		}
	}
	if len(auds) == 0 {
		// Meant for someone else: it proves nothing here.
		tr.Status.Error = fmt.Sprintf("token audiences %q is invalid for the target audiences %q", has, wanted)
		return tr, nil
	}
	u := resp.User
	tr.Status.Authenticated = true
	tr.Status.Audiences = auds
	tr.Status.User = authenticationv1.UserInfo{Username: u.Name, UID: u.UID, Groups: u.Groups, Extra: toExtraValues[authenticationv1.ExtraValue](u.Extra)}
	return tr, nil
}

// reviewSelf is `kubectl auth whoami`: the caller as the server sees it.
func reviewSelf(ctx context.Context) (api.Object, error) {
	u, ok := user.From(ctx)
	if !ok {
		return nil, errNoUser
	}
	return &authenticationv1.SelfSubjectReview{
		ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(time.Now())},
		Status: authenticationv1.SelfSubjectReviewStatus{UserInfo: authenticationv1.UserInfo{
			Username: u.Name, UID: u.UID, Groups: u.Groups, Extra: toExtraValues[authenticationv1.ExtraValue](u.Extra),
		}},
	}, nil
}

// reviewAccess asks the authorizers whether spec's user may do what spec
// asks (`kubectl auth can-i --as`, a webhook authorizer's question).
func (s *Server) reviewAccess(ctx context.Context, sar *authorizationv1.SubjectAccessReview) (api.Object, error) {
	errs := validateSubjectAccessReviewSpec(sar.Spec)
	errs = append(errs, metadataMustBeEmpty(sar.ObjectMeta, false)...)
	if len(errs) > 0 {
		return nil, apierrors.NewInvalid(schemaGroupKind(api.SubjectAccessReviews), "", errs)
	}
	sar.Status = s.decide(ctx, specUser(sar.Spec), sar.Spec.ResourceAttributes, sar.Spec.NonResourceAttributes)
	return sar, nil
}

// reviewLocalAccess is reviewAccess within one namespace: the URL's,
// which the spec must name too.
func (s *Server) reviewLocalAccess(ctx context.Context, sar *authorizationv1.LocalSubjectAccessReview, namespace string) (api.Object, error) {
	if namespace == "" {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("namespace is required on this type: %v", namespace))
	}
	errs := validateSubjectAccessReviewSpec(sar.Spec)
	errs = append(errs, metadataMustBeEmpty(sar.ObjectMeta, true)...)
	if ra := sar.Spec.ResourceAttributes; ra != nil && ra.Namespace != sar.Namespace {
		errs = append(errs, field.Invalid(field.NewPath("spec.resourceAttributes.namespace"), ra.Namespace, "must match metadata.namespace"))
	}
	if sar.Spec.NonResourceAttributes != nil {
		errs = append(errs, field.Invalid(field.NewPath("spec.nonResourceAttributes"), sar.Spec.NonResourceAttributes, "disallowed on this kind of request"))
	}
	if len(errs) > 0 {
		return nil, apierrors.NewInvalid(schemaGroupKind(api.LocalSubjectAccessReviews), "", errs)
	}
	if namespace != sar.Namespace {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("spec.resourceAttributes.namespace must match namespace: %v", namespace))
	}
	sar.Status = s.decide(ctx, specUser(sar.Spec), sar.Spec.ResourceAttributes, nil)
	return sar, nil
}

// reviewSelfAccess is `kubectl auth can-i`: may the caller do this?
func (s *Server) reviewSelfAccess(ctx context.Context, sar *authorizationv1.SelfSubjectAccessReview) (api.Object, error) {
	spec := sar.Spec
	errs := validateAttributes(spec.ResourceAttributes, spec.NonResourceAttributes)
	errs = append(errs, metadataMustBeEmpty(sar.ObjectMeta, false)...)
	if len(errs) > 0 {
		return nil, apierrors.NewInvalid(schemaGroupKind(api.SelfSubjectAccessReviews), "", errs)
	}
	u, ok := user.From(ctx)
	if !ok {
		return nil, errNoUser
	}
	sar.Status = s.decide(ctx, u, spec.ResourceAttributes, spec.NonResourceAttributes)
	return sar, nil
}

// reviewSelfRules is `kubectl auth can-i --list`: what the caller may do
// in spec.namespace, as the rule resolver lists it. Without one (no RBAC)
// the list is empty.
func (s *Server) reviewSelfRules(ctx context.Context, rr *authorizationv1.SelfSubjectRulesReview) (api.Object, error) {
	u, ok := user.From(ctx)
	if !ok {
		return nil, errNoUser
	}
	if rr.Spec.Namespace == "" {
		return nil, apierrors.NewBadRequest("no namespace on request")
	}
	answer := &authorizationv1.SelfSubjectRulesReview{}
	if s.rules == nil {
		answer.Status.ResourceRules = []authorizationv1.ResourceRule{}
		answer.Status.NonResourceRules = []authorizationv1.NonResourceRule{}
		return answer, nil
	}
	res, nonRes, incomplete, err := s.rules.RulesFor(ctx, u, rr.Spec.Namespace)
	answer.Status = authorizationv1.SubjectRulesReviewStatus{ResourceRules: res, NonResourceRules: nonRes, Incomplete: incomplete}
	if answer.Status.ResourceRules == nil {
		answer.Status.ResourceRules = []authorizationv1.ResourceRule{}
	}
	if answer.Status.NonResourceRules == nil {
		answer.Status.NonResourceRules = []authorizationv1.NonResourceRule{}
	}
	if err != nil {
		answer.Status.EvaluationError = err.Error()
	}
	return answer, nil
}

// decide asks the server's authorizers about u and the attributes, and
// words the answer as a review's status: allowed, or denied when an
// authorizer refused outright (a refusal for lack of an allowing rule is
// neither), with the reason and any error the authorizers met.
func (s *Server) decide(ctx context.Context, u *user.Info, ra *authorizationv1.ResourceAttributes, nra *authorizationv1.NonResourceAttributes) authorizationv1.SubjectAccessReviewStatus {
	a := authorizer.Attributes{User: u}
	if ra != nil {
		a.ResourceRequest = true
		a.Verb, a.Namespace, a.Name = ra.Verb, ra.Namespace, ra.Name
		a.APIGroup, a.APIVersion, a.Resource, a.Subresource = ra.Group, ra.Version, ra.Resource, ra.Subresource
	} else if nra != nil {
		a.Verb, a.Path = nra.Verb, nra.Path
	}
	d, reason, err := s.authorizer.Authorize(ctx, a)
	st := authorizationv1.SubjectAccessReviewStatus{Allowed: d == authorizer.Allow, Denied: d == authorizer.Deny, Reason: reason}
	if err != nil {
		st.EvaluationError = err.Error()
	}
	return st
}

// specUser is the user a (Local)SubjectAccessReview asks about.
func specUser(spec authorizationv1.SubjectAccessReviewSpec) *user.Info {
	u := &user.Info{Name: spec.User, UID: spec.UID, Groups: spec.Groups}
	if len(spec.Extra) > 0 {
		u.Extra = make(map[string][]string, len(spec.Extra))
		for k, v := range spec.Extra {
			u.Extra[k] = []string(v)
		}
	}
	return u
}

// toExtraValues converts a user's extra attributes to a review's.
func toExtraValues[V ~[]string](extra map[string][]string) map[string]V {
	if extra == nil {
		return nil
	}
	out := make(map[string]V, len(extra))
	for k, v := range extra {
		out[k] = V(v)
	}
	return out
}

// validateAttributes is kube's rule for every access review: exactly one
// of resourceAttributes and nonResourceAttributes.
func validateAttributes(ra *authorizationv1.ResourceAttributes, nra *authorizationv1.NonResourceAttributes) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	if ra != nil && nra != nil {
		errs = append(errs, field.Invalid(spec.Child("nonResourceAttributes"), nra, "cannot be specified in combination with resourceAttributes"))
	}
	if ra == nil && nra == nil {
		errs = append(errs, field.Invalid(spec.Child("resourceAttributes"), nra, "exactly one of nonResourceAttributes or resourceAttributes must be specified"))
	}
	return errs
}

// validateSubjectAccessReviewSpec adds, for a review about someone else,
// that it must say who.
func validateSubjectAccessReviewSpec(spec authorizationv1.SubjectAccessReviewSpec) field.ErrorList {
	errs := validateAttributes(spec.ResourceAttributes, spec.NonResourceAttributes)
	if spec.User == "" && len(spec.Groups) == 0 {
		errs = append(errs, field.Invalid(field.NewPath("spec", "user"), spec.User, "at least one of user or group must be specified"))
	}
	return errs
}

// metadataMustBeEmpty: a review has no name, labels or anything else of
// its own (managedFields aside, and the namespace of a local one).
func metadataMustBeEmpty(meta metav1.ObjectMeta, local bool) field.ErrorList {
	shallow := meta
	shallow.ManagedFields = nil
	msg := "must be empty"
	if local {
		shallow.Namespace = ""
		msg = "must be empty except for namespace"
	}
	if apiequality.Semantic.DeepEqual(metav1.ObjectMeta{}, shallow) {
		return nil
	}
	return field.ErrorList{field.Invalid(field.NewPath("metadata"), meta, msg)}
}
