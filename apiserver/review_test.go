package apiserver_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/apiserver"
	"github.com/minictl/minictl/auth/audit"
	"github.com/minictl/minictl/auth/authenticator"
	"github.com/minictl/minictl/auth/authorizer"
	"github.com/minictl/minictl/auth/user"
	"github.com/minictl/minictl/store"
)

// The reviews', impersonation's and audit's tests share a few users who
// prove themselves with bearer tokens, and an authorizer that knows what
// each may do (testAuthorizer):
//
//	alice     reads pods anywhere, and may impersonate bob, the group dev,
//	          the extra scopes=view and the ServiceAccount default:builder
//	mallory   is refused secrets outright (Deny)
//	bob, dev  bob's group dev lists configmaps
//
// Everybody may create the reviews; everything else is refused for lack
// of a rule.

// testTokens are the users' bearer tokens. The "aud" token is meant for
// another audience than the API server's.
var testTokens = map[string]*authenticator.Response{
	"alice-token":   {User: &user.Info{Name: "alice", UID: "alice-uid", Groups: []string{"staff", user.AllAuthenticated}}},
	"mallory-token": {User: &user.Info{Name: "mallory", Groups: []string{user.AllAuthenticated}}},
	"aud-token":     {User: &user.Info{Name: "vault"}, Audiences: []string{"vault"}},
}

const noRule = "no rule allows it"

var testAuthorizer = authorizer.Func(func(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	u := a.User
	switch {
	case a.Verb == "create" && (a.APIGroup == "authorization.k8s.io" || a.APIGroup == "authentication.k8s.io"):
		return authorizer.Allow, "reviews are for everyone", nil
	case u.Name == "alice" && a.Resource == "pods" && (a.Verb == "get" || a.Verb == "list" || a.Verb == "watch"):
		return authorizer.Allow, "alice reads pods", nil
	case u.Name == "alice" && a.Verb == "impersonate":
		ok := a.Resource == "users" && a.Name == "bob" ||
			a.Resource == "groups" && a.Name == "dev" ||
			a.Resource == "userextras" && a.Subresource == "scopes" && a.Name == "view" ||
			a.Resource == "serviceaccounts" && a.Namespace == "default" && a.Name == "builder"
		if ok {
			return authorizer.Allow, "", nil
		}
	case u.Name == "mallory" && a.Resource == "secrets":
		return authorizer.Deny, "mallory is denied secrets", nil
	case u.InGroup("dev") && a.Resource == "configmaps" && a.Verb == "list":
		return authorizer.Allow, "dev lists configmaps", nil
	}
	return authorizer.NoOpinion, noRule, nil
})

// testRules lists alice's rules; nobody else has any.
type testRules struct{}

func (testRules) RulesFor(_ context.Context, u *user.Info, namespace string) ([]authorizationv1.ResourceRule, []authorizationv1.NonResourceRule, bool, error) {
	if u.Name != "alice" {
		return nil, nil, false, nil
	}
	return []authorizationv1.ResourceRule{{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{""}, Resources: []string{"pods"}}},
		[]authorizationv1.NonResourceRule{{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz"}}}, false, nil
}

// startReviewEnv starts a secureEnv with the users above; policy nil
// audits at the default level.
func startReviewEnv(t *testing.T, policy *audit.Policy) *secureEnv {
	t.Helper()
	return startSecureEnv(t, secureOptions{
		server: apiserver.Config{Authorizer: testAuthorizer, RuleResolver: testRules{}, AuditPolicy: policy},
		tokens: testTokens,
		audit:  true,
	})
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

const (
	sarPath  = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
	ssarPath = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
	ssrrPath = "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews"
	trPath   = "/apis/authentication.k8s.io/v1/tokenreviews"
	ssrPath  = "/apis/authentication.k8s.io/v1/selfsubjectreviews"
)

func lsarPath(ns string) string {
	return "/apis/authorization.k8s.io/v1/namespaces/" + ns + "/localsubjectaccessreviews"
}

func sar(u string, ra *authorizationv1.ResourceAttributes) *authorizationv1.SubjectAccessReview {
	return &authorizationv1.SubjectAccessReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "authorization.k8s.io/v1", Kind: "SubjectAccessReview"},
		Spec:     authorizationv1.SubjectAccessReviewSpec{User: u, ResourceAttributes: ra},
	}
}

// TestSubjectAccessReview asks the authorizers about other users, as an
// admin (or a webhook authorizer's caller) does: allowed, refused for want
// of a rule (neither allowed nor denied), and denied outright.
func TestSubjectAccessReview(t *testing.T) {
	env := startReviewEnv(t, nil)
	for _, tc := range []struct {
		user            string
		ra              authorizationv1.ResourceAttributes
		allowed, denied bool
		reason          string
	}{
		{"alice", authorizationv1.ResourceAttributes{Verb: "list", Resource: "pods", Namespace: "web"}, true, false, "alice reads pods"},
		{"alice", authorizationv1.ResourceAttributes{Verb: "delete", Resource: "pods", Namespace: "web", Name: "p"}, false, false, noRule},
		{"mallory", authorizationv1.ResourceAttributes{Verb: "get", Resource: "secrets", Namespace: "web"}, false, true, "mallory is denied secrets"},
	} {
		var got authorizationv1.SubjectAccessReview
		do(t, env.Env, "POST", sarPath, jsonType, sar(tc.user, &tc.ra)).want(t, http.StatusCreated).into(t, &got)
		st := got.Status
		if st.Allowed != tc.allowed || st.Denied != tc.denied || st.Reason != tc.reason || st.EvaluationError != "" {
			t.Errorf("%s %+v: got %+v, want allowed %v, denied %v, reason %q", tc.user, tc.ra, st, tc.allowed, tc.denied, tc.reason)
		}
		if got.Kind != "SubjectAccessReview" || got.Spec.User != tc.user || *got.Spec.ResourceAttributes != tc.ra {
			t.Errorf("the answer does not carry the question: %+v", got)
		}
	}

	// A group alone is someone to ask about; a path is something to ask.
	var byGroup authorizationv1.SubjectAccessReview
	do(t, env.Env, "POST", sarPath, jsonType, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		Groups: []string{user.SystemPrivilegedGroup}, NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"},
	}}).want(t, http.StatusCreated).into(t, &byGroup)
	if !byGroup.Status.Allowed {
		t.Errorf("system:masters may get /metrics: %+v", byGroup.Status)
	}

	// Kube's validation, word for word, and nothing answered.
	for _, tc := range []struct {
		body any
		msg  string
	}{
		{&authorizationv1.SubjectAccessReview{}, `SubjectAccessReview.authorization.k8s.io "" is invalid: [spec.resourceAttributes: Invalid value: null: exactly one of nonResourceAttributes or resourceAttributes must be specified, spec.user: Invalid value: "": at least one of user or group must be specified]`},
		{&authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: "a",
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "get"}, NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/", Verb: "get"}}},
			`SubjectAccessReview.authorization.k8s.io "" is invalid: spec.nonResourceAttributes: Invalid value: {"path":"/","verb":"get"}: cannot be specified in combination with resourceAttributes`},
	} {
		st := do(t, env.Env, "POST", sarPath, jsonType, tc.body).wantStatus(t, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid)
		if st.Message != tc.msg {
			t.Errorf("got  %s\nwant %s", st.Message, tc.msg)
		}
	}
	named := sar("alice", &authorizationv1.ResourceAttributes{Verb: "get"})
	named.Name = "keep-me"
	st := do(t, env.Env, "POST", sarPath, jsonType, named).wantStatus(t, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid)
	if want := "metadata: Invalid value"; !contains(st.Message, want) || !contains(st.Message, "must be empty") {
		t.Errorf("a review with a name: %s", st.Message)
	}

	// A review is only created: nothing is kept to get, list or watch.
	do(t, env.Env, "GET", sarPath, "", nil).wantStatus(t, http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed)
	do(t, env.Env, "GET", sarPath+"?watch=true", "", nil).wantStatus(t, http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed)
	do(t, env.Env, "DELETE", sarPath, "", nil).wantStatus(t, http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed)
	do(t, env.Env, "GET", sarPath+"/x", "", nil).wantStatus(t, http.StatusNotFound, metav1.StatusReasonNotFound)
	all, err := env.Store.List(t.Context(), "", store.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range all.Items {
		if contains(kv.Key, "review") {
			t.Errorf("a review was stored at %s", kv.Key)
		}
	}
}

// TestReviewDiscovery: discovery lists the reviews with the one verb they
// serve, so that the controllers that list, watch or delete every kind
// pass them by; OpenAPI documents their POST alone.
func TestReviewDiscovery(t *testing.T) {
	env := startReviewEnv(t, nil)
	var list metav1.APIResourceList
	do(t, env.Env, "GET", "/apis/authorization.k8s.io/v1", "", nil).want(t, http.StatusOK).into(t, &list)
	var names []string
	for _, r := range list.APIResources {
		names = append(names, r.Name)
		if !slices.Equal(r.Verbs, []string{"create"}) {
			t.Errorf("%s: verbs %v, want [create]", r.Name, r.Verbs)
		}
		if r.Namespaced != (r.Name == "localsubjectaccessreviews") {
			t.Errorf("%s: namespaced %v", r.Name, r.Namespaced)
		}
	}
	slices.Sort(names)
	if want := []string{"localsubjectaccessreviews", "selfsubjectaccessreviews", "selfsubjectrulesreviews", "subjectaccessreviews"}; !slices.Equal(names, want) {
		t.Errorf("authorization.k8s.io/v1 serves %v, want %v", names, want)
	}
	do(t, env.Env, "GET", "/apis/authentication.k8s.io/v1", "", nil).want(t, http.StatusOK).into(t, &list)
	if len(list.APIResources) != 2 {
		t.Errorf("authentication.k8s.io/v1 serves %+v", list.APIResources)
	}
	var doc struct {
		Paths map[string]map[string]any `json:"paths"`
	}
	do(t, env.Env, "GET", "/openapi/v3/apis/authorization.k8s.io/v1", "", nil).want(t, http.StatusOK).into(t, &doc)
	ops := doc.Paths[sarPath]
	if _, ok := ops["post"]; !ok || ops["get"] != nil || ops["delete"] != nil {
		t.Errorf("OpenAPI for %s: %v", sarPath, ops)
	}
	if _, ok := doc.Paths[sarPath+"/{name}"]; ok {
		t.Errorf("OpenAPI documents a named review")
	}
}

// TestLocalSubjectAccessReview: the question is about the URL's namespace,
// and the spec must name the same one.
func TestLocalSubjectAccessReview(t *testing.T) {
	env := startReviewEnv(t, nil)
	lsar := func(ns string) *authorizationv1.LocalSubjectAccessReview {
		return &authorizationv1.LocalSubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: "alice", ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "get", Resource: "pods", Namespace: ns},
		}}
	}
	var got authorizationv1.LocalSubjectAccessReview
	do(t, env.Env, "POST", lsarPath("web"), jsonType, lsar("web")).want(t, http.StatusCreated).into(t, &got)
	if !got.Status.Allowed || got.Namespace != "web" {
		t.Errorf("alice may get pods in web: %+v", got)
	}
	st := do(t, env.Env, "POST", lsarPath("web"), jsonType, lsar("other")).wantStatus(t, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid)
	if want := `LocalSubjectAccessReview.authorization.k8s.io "" is invalid: spec.resourceAttributes.namespace: Invalid value: "other": must match metadata.namespace`; st.Message != want {
		t.Errorf("got  %s\nwant %s", st.Message, want)
	}
	other := lsar("web")
	other.Namespace = "other"
	st = do(t, env.Env, "POST", lsarPath("web"), jsonType, other).wantStatus(t, http.StatusBadRequest, metav1.StatusReasonBadRequest)
	if want := "the namespace of the provided object (other) does not match the namespace sent on the request (web)"; st.Message != want {
		t.Errorf("got %s", st.Message)
	}
	path := lsar("web")
	path.Spec.ResourceAttributes = nil
	path.Spec.NonResourceAttributes = &authorizationv1.NonResourceAttributes{Path: "/healthz", Verb: "get"}
	st = do(t, env.Env, "POST", lsarPath("web"), jsonType, path).wantStatus(t, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid)
	if !contains(st.Message, "spec.nonResourceAttributes: Invalid value") || !contains(st.Message, "disallowed on this kind of request") {
		t.Errorf("got %s", st.Message)
	}
	// The cluster-wide path of a namespaced review is no path at all.
	do(t, env.Env, "POST", "/apis/authorization.k8s.io/v1/localsubjectaccessreviews", jsonType, lsar("web")).wantStatus(t, http.StatusNotFound, metav1.StatusReasonNotFound)
}

// TestSelfReviews are `kubectl auth can-i`, `kubectl auth can-i --list`
// and `kubectl auth whoami` on the secure port: the caller is whoever the
// token proves.
func TestSelfReviews(t *testing.T) {
	env := startReviewEnv(t, nil)
	can := func(token, verb, resource string) authorizationv1.SubjectAccessReviewStatus {
		var got authorizationv1.SelfSubjectAccessReview
		env.as(t, token, "POST", ssarPath, &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Resource: resource, Namespace: "default"},
		}}).want(t, http.StatusCreated).into(t, &got)
		return got.Status
	}
	if st := can("alice-token", "list", "pods"); !st.Allowed {
		t.Errorf("alice can list pods: %+v", st)
	}
	if st := can("alice-token", "create", "pods"); st.Allowed || st.Denied || st.Reason != noRule {
		t.Errorf("alice cannot create pods: %+v", st)
	}
	if st := can("mallory-token", "get", "secrets"); st.Allowed || !st.Denied {
		t.Errorf("mallory is denied secrets: %+v", st)
	}
	st := env.as(t, "alice-token", "POST", ssarPath, &authorizationv1.SelfSubjectAccessReview{}).wantStatus(t, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid)
	if want := `SelfSubjectAccessReview.authorization.k8s.io "" is invalid: spec.resourceAttributes: Invalid value: null: exactly one of nonResourceAttributes or resourceAttributes must be specified`; st.Message != want {
		t.Errorf("got  %s\nwant %s", st.Message, want)
	}

	var rules authorizationv1.SelfSubjectRulesReview
	env.as(t, "alice-token", "POST", ssrrPath, &authorizationv1.SelfSubjectRulesReview{Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: "default"}}).
		want(t, http.StatusCreated).into(t, &rules)
	if len(rules.Status.ResourceRules) != 1 || rules.Status.ResourceRules[0].Resources[0] != "pods" || len(rules.Status.NonResourceRules) != 1 || rules.Status.Incomplete {
		t.Errorf("alice's rules: %+v", rules.Status)
	}
	rules = authorizationv1.SelfSubjectRulesReview{}
	env.as(t, "mallory-token", "POST", ssrrPath, &authorizationv1.SelfSubjectRulesReview{Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: "default"}}).
		want(t, http.StatusCreated).into(t, &rules)
	if rules.Status.ResourceRules == nil || len(rules.Status.ResourceRules) != 0 || rules.Status.Incomplete {
		t.Errorf("mallory has no rules, listed as empty: %+v", rules.Status)
	}
	st = env.as(t, "alice-token", "POST", ssrrPath, &authorizationv1.SelfSubjectRulesReview{}).wantStatus(t, http.StatusBadRequest, metav1.StatusReasonBadRequest)
	if st.Message != "no namespace on request" {
		t.Errorf("got %s", st.Message)
	}

	var me authenticationv1.SelfSubjectReview
	env.as(t, "alice-token", "POST", ssrPath, &authenticationv1.SelfSubjectReview{}).want(t, http.StatusCreated).into(t, &me)
	if u := me.Status.UserInfo; u.Username != "alice" || u.UID != "alice-uid" || !slices.Equal(u.Groups, []string{"staff", user.AllAuthenticated}) {
		t.Errorf("whoami as alice: %+v", u)
	}
	if me.Kind != "SelfSubjectReview" || me.CreationTimestamp.IsZero() {
		t.Errorf("the answer: %+v", me)
	}
	// With no credential at all, and anonymous requests not allowed: 401.
	env.as(t, "", "POST", ssrPath, &authenticationv1.SelfSubjectReview{}).wantStatus(t, http.StatusUnauthorized, metav1.StatusReasonUnauthorized)
}

// TestTokenReview says who a token is, for the API server's own audience
// or the ones asked for; a token it does not know is answered, not
// refused.
func TestTokenReview(t *testing.T) {
	env := startReviewEnv(t, nil)
	review := func(token string, auds ...string) authenticationv1.TokenReviewStatus {
		var got authenticationv1.TokenReview
		do(t, env.Env, "POST", trPath, jsonType, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: auds}}).
			want(t, http.StatusCreated).into(t, &got)
		return got.Status
	}
	st := review("alice-token")
	if !st.Authenticated || st.User.Username != "alice" || st.User.UID != "alice-uid" || !slices.Equal(st.User.Groups, []string{"staff", user.AllAuthenticated}) {
		t.Errorf("alice's token: %+v", st)
	}
	if len(st.Audiences) != 1 || st.Error != "" {
		t.Errorf("alice's token is the API server's: %+v", st)
	}
	if st := review("forged"); st.Authenticated || st.User.Username != "" {
		t.Errorf("a forged token: %+v", st)
	}
	if st := review("aud-token", "vault"); !st.Authenticated || !slices.Equal(st.Audiences, []string{"vault"}) {
		t.Errorf("a token for vault, asked for vault: %+v", st)
	}
	if st := review("aud-token"); st.Authenticated || st.Error == "" {
		t.Errorf("a token for vault proves nothing to the API server: %+v", st)
	}
	if st := review("alice-token", "vault"); st.Authenticated {
		t.Errorf("the API server's token proves nothing to vault: %+v", st)
	}
	s := do(t, env.Env, "POST", trPath, jsonType, &authenticationv1.TokenReview{}).wantStatus(t, http.StatusBadRequest, metav1.StatusReasonBadRequest)
	if s.Message != "token is required for TokenReview in authentication" {
		t.Errorf("got %s", s.Message)
	}
}
