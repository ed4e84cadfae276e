package apiserver_test

import (
	"bytes"
	"net/http"
	"slices"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/auth/audit"
)

func stages(evs []audit.Event) []audit.Stage {
	var out []audit.Stage
	for _, ev := range evs {
		out = append(out, ev.Stage)
	}
	return out
}

func last(t *testing.T, evs []audit.Event) audit.Event {
	t.Helper()
	if len(evs) == 0 {
		t.Fatal("no audit events")
	}
	return evs[len(evs)-1]
}

// TestAuditLog: with the default policy every request is recorded at the
// Metadata level, when it is received and when it is answered: who asked
// (and as whom), what, the answer's code, and authorization's decision.
func TestAuditLog(t *testing.T) {
	env := startReviewEnv(t, nil)

	allowed := env.as(t, "alice-token", "GET", "/api/v1/namespaces/default/pods?limit=5", nil, "User-Agent", "kubectl/v1.33", "X-Forwarded-For", "10.1.2.3").want(t, http.StatusOK)
	evs := env.eventsOf(t, allowed)
	if got := stages(evs); !slices.Equal(got, []audit.Stage{audit.StageRequestReceived, audit.StageResponseComplete}) {
		t.Fatalf("stages %v", got)
	}
	ev := last(t, evs)
	if ev.Level != audit.LevelMetadata || ev.Verb != "list" || ev.RequestURI != "/api/v1/namespaces/default/pods?limit=5" || ev.UserAgent != "kubectl/v1.33" {
		t.Errorf("event: %+v", ev)
	}
	if ev.User.Username != "alice" || !slices.Equal(ev.User.Groups, []string{"staff", "system:authenticated"}) || ev.ImpersonatedUser != nil {
		t.Errorf("user: %+v, impersonated %+v", ev.User, ev.ImpersonatedUser)
	}
	if ev.ObjectRef == nil || *ev.ObjectRef != (audit.ObjectReference{Resource: "pods", Namespace: "default", APIVersion: "v1"}) {
		t.Errorf("objectRef: %+v", ev.ObjectRef)
	}
	if ev.ResponseStatus == nil || ev.ResponseStatus.Code != http.StatusOK || ev.RequestObject != nil || ev.ResponseObject != nil {
		t.Errorf("a Metadata event has the code and no bodies: %+v", ev)
	}
	if ev.Annotations[audit.DecisionAnnotation] != "allow" || ev.Annotations[audit.ReasonAnnotation] != "alice reads pods" {
		t.Errorf("annotations: %v", ev.Annotations)
	}
	if !slices.Equal(ev.SourceIPs, []string{"10.1.2.3", "127.0.0.1"}) {
		t.Errorf("sourceIPs: %v", ev.SourceIPs)
	}
	if evs[0].ResponseStatus != nil || evs[0].Annotations != nil || ev.StageTimestamp.Before(&ev.RequestReceivedTimestamp) {
		t.Errorf("the RequestReceived event is written before anything is decided: %+v", evs[0])
	}

	refused := env.as(t, "mallory-token", "GET", "/api/v1/namespaces/default/secrets/db", nil)
	refused.wantStatus(t, http.StatusForbidden, metav1.StatusReasonForbidden)
	ev = last(t, env.eventsOf(t, refused))
	if ev.User.Username != "mallory" || ev.Verb != "get" || ev.ObjectRef == nil || ev.ObjectRef.Resource != "secrets" || ev.ObjectRef.Name != "db" {
		t.Errorf("refused event: %+v", ev)
	}
	if rs := ev.ResponseStatus; rs == nil || rs.Code != http.StatusForbidden || rs.Reason != metav1.StatusReasonForbidden || rs.Status != metav1.StatusFailure ||
		rs.Message != `secrets "db" is forbidden: User "mallory" cannot get resource "secrets" in API group "" in the namespace "default": mallory is denied secrets` {
		t.Errorf("responseStatus: %+v", rs)
	}
	if ev.Annotations[audit.DecisionAnnotation] != "forbid" || ev.Annotations[audit.ReasonAnnotation] != "mallory is denied secrets" {
		t.Errorf("annotations: %v", ev.Annotations)
	}

	// Impersonation: the user is who asked, impersonatedUser whom as.
	as := env.as(t, "alice-token", "POST", ssrPath, &authenticationv1.SelfSubjectReview{}, "Impersonate-User", "bob", "Impersonate-Group", "dev").want(t, http.StatusCreated)
	ev = last(t, env.eventsOf(t, as))
	if ev.User.Username != "alice" || ev.ImpersonatedUser == nil || ev.ImpersonatedUser.Username != "bob" || !slices.Equal(ev.ImpersonatedUser.Groups, []string{"dev", "system:authenticated"}) {
		t.Errorf("impersonated event: user %+v, impersonated %+v", ev.User, ev.ImpersonatedUser)
	}
	if ev.Verb != "create" || ev.ObjectRef.APIGroup != "authentication.k8s.io" || ev.ObjectRef.Resource != "selfsubjectreviews" || ev.ResponseStatus.Code != http.StatusCreated {
		t.Errorf("impersonated event: %+v", ev)
	}

	// A client's own Audit-ID is kept; a path is a non-resource request.
	req := env.as(t, "alice-token", "GET", "/version", nil, "Audit-ID", "my-request-1")
	if req.header.Get("Audit-Id") != "my-request-1" {
		t.Errorf("Audit-Id %q", req.header.Get("Audit-Id"))
	}
	ev = last(t, env.eventsOf(t, req))
	if ev.Verb != "get" || ev.ObjectRef != nil || ev.RequestURI != "/version" {
		t.Errorf("non-resource event: %+v", ev)
	}

	// A watch's answer starts long before it is complete.
	w := env.as(t, "alice-token", "GET", "/api/v1/namespaces/default/pods?watch=true&timeoutSeconds=1", nil).want(t, http.StatusOK)
	if got := stages(env.eventsOf(t, w)); !slices.Equal(got, []audit.Stage{audit.StageRequestReceived, audit.StageResponseStarted, audit.StageResponseComplete}) {
		t.Errorf("watch stages %v", got)
	}
}

const auditPolicy = `
apiVersion: audit.k8s.io/v1
kind: Policy
rules:
- level: None
  resources: [{group: "", resources: ["configmaps"]}]
- level: RequestResponse
  namespaces: ["audited"]
  resources: [{group: "", resources: ["secrets"]}]
  omitStages: ["RequestReceived"]
  omitManagedFields: true
- level: Request
  namespaces: ["audited"]
- level: Metadata
`

// TestAuditPolicy: the policy file says what is recorded: nothing of
// configmaps, whole Secrets (request and answer) in one namespace, and
// only metadata of Secrets elsewhere, whose data never reaches the log.
func TestAuditPolicy(t *testing.T) {
	policy, err := audit.ParsePolicy([]byte(auditPolicy))
	if err != nil {
		t.Fatal(err)
	}
	env := startReviewEnv(t, policy)
	createNamespace(t, env.Env, "audited")

	cm := do(t, env.Env, "POST", "/api/v1/namespaces/default/configmaps", jsonType, configMap("c", nil, map[string]string{"k": "v"})).want(t, http.StatusCreated)
	if cm.header.Get("Audit-Id") == "" {
		t.Errorf("an answer not audited still carries its Audit-Id")
	}

	secret := func(ns string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns}, StringData: map[string]string{"password": "hunter2-" + ns}}
	}
	full := do(t, env.Env, "POST", "/api/v1/namespaces/audited/secrets", jsonType, secret("audited")).want(t, http.StatusCreated)
	evs := env.eventsOf(t, full)
	if got := stages(evs); !slices.Equal(got, []audit.Stage{audit.StageResponseComplete}) {
		t.Errorf("RequestReceived is omitted: %v", got)
	}
	ev := last(t, evs)
	if ev.Level != audit.LevelRequestResponse || !bytes.Contains(ev.RequestObject, []byte("hunter2-audited")) || !bytes.Contains(ev.ResponseObject, []byte(`"kind":"Secret"`)) {
		t.Errorf("a RequestResponse event has both bodies: %s / %s", ev.RequestObject, ev.ResponseObject)
	}
	if bytes.Contains(ev.ResponseObject, []byte("managedFields")) {
		t.Errorf("the rule omits managed fields: %s", ev.ResponseObject)
	}

	// A refused write was never read: nothing of its body is recorded.
	refused := env.as(t, "mallory-token", "POST", "/api/v1/namespaces/audited/secrets", secret("audited"))
	refused.wantStatus(t, http.StatusForbidden, metav1.StatusReasonForbidden)
	ev = last(t, env.eventsOf(t, refused))
	if ev.Level != audit.LevelRequestResponse || ev.RequestObject != nil || ev.ResponseStatus.Code != http.StatusForbidden || !bytes.Contains(ev.ResponseObject, []byte(`"kind":"Status"`)) {
		t.Errorf("a refused write: %+v", ev)
	}

	meta := do(t, env.Env, "POST", "/api/v1/namespaces/default/secrets", jsonType, secret("default")).want(t, http.StatusCreated)
	ev = last(t, env.eventsOf(t, meta))
	if ev.Level != audit.LevelMetadata || ev.RequestObject != nil || ev.ResponseObject != nil {
		t.Errorf("a Metadata event has no bodies: %+v", ev)
	}
	if bytes.Contains(env.log.bytes(), []byte("hunter2-default")) {
		t.Errorf("a Secret's data reached the log at the Metadata level")
	}

	req := do(t, env.Env, "POST", "/api/v1/namespaces/audited/configmaps", jsonType, configMap("c", nil, nil)).want(t, http.StatusCreated)
	for _, ev := range env.events(t) {
		if ev.AuditID == req.header.Get("Audit-Id") || ev.AuditID == cm.header.Get("Audit-Id") {
			t.Errorf("configmaps are not audited: %+v", ev)
		}
	}
	pod := do(t, env.Env, "POST", "/api/v1/namespaces/audited/pods", jsonType, pod("p", "", nil)).want(t, http.StatusCreated)
	ev = last(t, env.eventsOf(t, pod))
	if ev.Level != audit.LevelRequest || !bytes.Contains(ev.RequestObject, []byte(`"name":"p"`)) || ev.ResponseObject != nil {
		t.Errorf("a Request event has the request alone: %+v", ev)
	}
}

// TestAuditFailedAuthentication: credentials that prove nothing leave one
// event, as kube's failed-authentication audit writes it: stage
// ResponseStarted, no user, the 401 and the kind of credential tried, and
// never the credential.
func TestAuditFailedAuthentication(t *testing.T) {
	env := startReviewEnv(t, nil)
	r := env.as(t, "stolen-token-0123456789", "DELETE", "/api/v1/namespaces/default/pods/web", nil)
	r.wantStatus(t, http.StatusUnauthorized, metav1.StatusReasonUnauthorized)
	id := r.header.Get("Audit-Id")
	if id == "" {
		t.Fatal("the 401 has no Audit-Id header")
	}
	var evs []audit.Event
	eventually(t, "the 401's audit event", func() (bool, string) {
		evs = slices.DeleteFunc(env.events(t), func(ev audit.Event) bool { return string(ev.AuditID) != id })
		return len(evs) > 0, ""
	})
	if len(evs) != 1 {
		t.Fatalf("want one event for the 401, got %+v", evs)
	}
	ev := evs[0]
	if ev.Stage != audit.StageResponseStarted || ev.Verb != "delete" || ev.RequestURI != "/api/v1/namespaces/default/pods/web" {
		t.Errorf("event: %+v", ev)
	}
	if ev.User.Username != "" || len(ev.User.Groups) != 0 {
		t.Errorf("a request that proved nothing has no user, got %+v", ev.User)
	}
	if ev.ObjectRef == nil || ev.ObjectRef.Resource != "pods" || ev.ObjectRef.Name != "web" {
		t.Errorf("objectRef: %+v", ev.ObjectRef)
	}
	if rs := ev.ResponseStatus; rs == nil || rs.Code != http.StatusUnauthorized || rs.Message != "Authentication failed, attempted: bearer" {
		t.Errorf("responseStatus: %+v", rs)
	}
	if bytes.Contains(env.log.bytes(), []byte("stolen-token")) {
		t.Error("the token is in the audit log")
	}
}
