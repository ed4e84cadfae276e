package apiserver_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/internal/testenv"
)

// webhookServer is an admission webhook served over TLS on 127.0.0.1
// with a CA of its own, as a cluster's webhooks are. Each path answers
// differently; every review it receives is recorded.
type webhookServer struct {
	srv      *httptest.Server
	caBundle []byte

	mu      sync.Mutex
	reviews map[string][]admissionv1.AdmissionRequest // by path
}

func newWebhookServer(t *testing.T, dnsNames ...string) *webhookServer {
	t.Helper()
	caPEM, cert := newServingCert(t, dnsNames...)
	ws := &webhookServer{caBundle: caPEM, reviews: map[string][]admissionv1.AdmissionRequest{}}
	ws.srv = httptest.NewUnstartedServer(http.HandlerFunc(ws.serve))
	ws.srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	ws.srv.StartTLS()
	t.Cleanup(ws.srv.Close)
	return ws
}

// newServingCert makes a CA and a certificate it signs for 127.0.0.1 and
// dnsNames.
func newServingCert(t *testing.T, dnsNames ...string) (caPEM []byte, cert tls.Certificate) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "webhook test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "webhook"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: dnsNames,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func (ws *webhookServer) url(path string) *string {
	u := ws.srv.URL + path
	return &u
}

func (ws *webhookServer) received(path string) []admissionv1.AdmissionRequest {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return append([]admissionv1.AdmissionRequest(nil), ws.reviews[path]...)
}

func (ws *webhookServer) serve(w http.ResponseWriter, r *http.Request) {
	var review admissionv1.AdmissionReview
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
		http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
		return
	}
	ws.mu.Lock()
	ws.reviews[r.URL.Path] = append(ws.reviews[r.URL.Path], *review.Request)
	ws.mu.Unlock()
	resp := &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
	switch r.URL.Path {
	case "/deny":
		resp.Allowed = false
		resp.Result = &metav1.Status{Code: http.StatusForbidden, Message: "pods named bad are not welcome"}
		resp.Warnings = []string{"the deny webhook saw this"}
	case "/label":
		pt := admissionv1.PatchTypeJSONPatch
		resp.PatchType = &pt
		resp.Patch = []byte(`[{"op":"add","path":"/metadata/labels","value":{"patched":"true"}}]`)
	case "/b":
		pt := admissionv1.PatchTypeJSONPatch
		resp.PatchType = &pt
		resp.Patch = []byte(`[{"op":"add","path":"/metadata/labels/b","value":"yes"}]`)
	case "/replicas":
		pt := admissionv1.PatchTypeJSONPatch
		resp.PatchType = &pt
		resp.Patch = []byte(`[{"op":"replace","path":"/spec/replicas","value":2}]`)
	case "/slow":
		select {
		case <-r.Context().Done():
		case <-time.After(20 * time.Second):
		}
		return
	case "/garbage":
		_, _ = w.Write([]byte("this is not JSON"))
		return
	case "/huge":
		chunk := []byte(strings.Repeat("x", 1<<20))
		for range 64 {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
		return
	}
	review.Response = resp
	review.Request = nil
	_ = json.NewEncoder(w).Encode(&review)
}

// hookFor is a webhook on pod creates calling url.
func hookFor(name string, url *string, caBundle []byte, fail admissionregistrationv1.FailurePolicyType) admissionregistrationv1.ValidatingWebhook {
	return admissionregistrationv1.ValidatingWebhook{
		Name:         name,
		ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: url, CABundle: caBundle},
		Rules: []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
		}},
		FailurePolicy:           &fail,
		SideEffects:             ptr(admissionregistrationv1.SideEffectClassNone),
		AdmissionReviewVersions: []string{"v1"},
	}
}

func validatingConfig(name string, hooks ...admissionregistrationv1.ValidatingWebhook) *admissionregistrationv1.ValidatingWebhookConfiguration {
	return &admissionregistrationv1.ValidatingWebhookConfiguration{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingWebhookConfiguration"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks:   hooks,
	}
}

const (
	validatingPath = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
	mutatingPath   = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
)

// untilPodCreate retries a dry-run create of a pod until the answer is
// code: a configuration takes effect once the watch cache has it.
func untilPodCreate(t *testing.T, env *testenv.Env, code int) {
	t.Helper()
	eventually(t, "the webhook configuration takes effect", func() (bool, string) {
		r := do(t, env, http.MethodPost, podPath("default", "")+"?dryRun=All", jsonType, pod("probe", "", nil))
		return r.code == code, string(r.body)
	})
}

// TestValidatingWebhookDeniesPod: a validating webhook over TLS refuses a
// pod; the client gets the webhook's code and message, the webhook's
// warning, and nothing is stored. The webhook saw a complete
// AdmissionReview v1.
func TestValidatingWebhookDeniesPod(t *testing.T) {
	env := testenv.Start(t)
	ws := newWebhookServer(t)
	create[admissionregistrationv1.ValidatingWebhookConfiguration](t, env, validatingPath,
		validatingConfig("deny", hookFor("deny.minictl.test", ws.url("/deny"), ws.caBundle, admissionregistrationv1.Fail)))
	untilPodCreate(t, env, http.StatusForbidden)

	r := do(t, env, http.MethodPost, podPath("default", ""), jsonType, pod("bad", "", nil))
	st := r.wantStatus(t, http.StatusForbidden, "")
	if want := `admission webhook "deny.minictl.test" denied the request: pods named bad are not welcome`; st.Message != want {
		t.Errorf("message %q, want %q", st.Message, want)
	}
	if w := r.header.Get("Warning"); !strings.Contains(w, "the deny webhook saw this") {
		t.Errorf("Warning header %q, want the webhook's warning", w)
	}
	do(t, env, http.MethodGet, podPath("default", "bad"), "", nil).want(t, http.StatusNotFound)

	reqs := ws.received("/deny")
	last := reqs[len(reqs)-1]
	if last.UID == "" || last.Operation != admissionv1.Create || last.Name != "bad" || last.Namespace != "default" ||
		last.Kind != (metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}) ||
		last.Resource != (metav1.GroupVersionResource{Version: "v1", Resource: "pods"}) ||
		last.RequestKind == nil || last.DryRun == nil || *last.DryRun || last.UserInfo.Username == "" {
		t.Errorf("review request %+v: want uid, CREATE, default/bad, v1 Pod, pods, requestKind, dryRun false, a user", last)
	}
	var sent corev1.Pod
	if err := json.Unmarshal(last.Object.Raw, &sent); err != nil || sent.Name != "bad" || sent.Kind != "Pod" {
		t.Errorf("review object %s: want the pod (%v)", last.Object.Raw, err)
	}
	if !strings.Contains(string(last.Options.Raw), `"kind":"CreateOptions"`) {
		t.Errorf("review options %s: want CreateOptions", last.Options.Raw)
	}
	if metric(t, env, `apiserver_admission_webhook_rejection_count{error_type="no_error",name="deny.minictl.test",operation="CREATE",rejection_code="403",type="validating"}`) < 1 {
		t.Errorf("the rejection is not counted")
	}
}

// TestMutatingWebhookPatchesPod: a mutating webhook's JSON patch is
// applied before the pod is stored; with generateName, the webhook sees
// the create before the name is chosen.
func TestMutatingWebhookPatchesPod(t *testing.T) {
	env := testenv.Start(t)
	ws := newWebhookServer(t)
	h := hookFor("label.minictl.test", ws.url("/label"), ws.caBundle, admissionregistrationv1.Fail)
	create[admissionregistrationv1.MutatingWebhookConfiguration](t, env, mutatingPath, &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "label"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name: h.Name, ClientConfig: h.ClientConfig, Rules: h.Rules, FailurePolicy: h.FailurePolicy,
			SideEffects: h.SideEffects, AdmissionReviewVersions: h.AdmissionReviewVersions,
		}},
	})
	eventually(t, "the mutating webhook takes effect", func() (bool, string) {
		r := do(t, env, http.MethodPost, podPath("default", "")+"?dryRun=All", jsonType, pod("probe", "", nil))
		var p corev1.Pod
		_ = json.Unmarshal(r.body, &p)
		return p.Labels["patched"] == "true", string(r.body)
	})

	p := create[corev1.Pod](t, env, podPath("default", ""), pod("web", "", nil))
	if p.Labels["patched"] != "true" {
		t.Fatalf("created pod labels %v, want patched=true", p.Labels)
	}
	if got := get[corev1.Pod](t, env, podPath("default", "web")); got.Labels["patched"] != "true" {
		t.Errorf("stored pod labels %v, want patched=true", got.Labels)
	}

	gen := pod("", "", nil)
	gen.GenerateName = "web-"
	p = create[corev1.Pod](t, env, podPath("default", ""), gen)
	if !strings.HasPrefix(p.Name, "web-") || p.Labels["patched"] != "true" {
		t.Errorf("generated pod %s labels %v, want web-xxxxx, patched=true", p.Name, p.Labels)
	}
	reqs := ws.received("/label")
	if last := reqs[len(reqs)-1]; last.Name != "" {
		t.Errorf("mutating webhook saw name %q for a generateName create, want none yet", last.Name)
	}
}

// TestWebhookFailurePolicy: a webhook that cannot be reached lets the
// write through with Ignore, and refuses it with Fail in a clear 500.
func TestWebhookFailurePolicy(t *testing.T) {
	env := testenv.Start(t)
	ws := newWebhookServer(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "https://" + ln.Addr().String() + "/down"
	ln.Close() // nothing listens there any more

	create[admissionregistrationv1.ValidatingWebhookConfiguration](t, env, validatingPath,
		validatingConfig("down-ignore", hookFor("ignore.minictl.test", &down, ws.caBundle, admissionregistrationv1.Ignore)))
	create[admissionregistrationv1.ValidatingWebhookConfiguration](t, env, validatingPath,
		validatingConfig("down-fail", hookFor("fail.minictl.test", &down, ws.caBundle, admissionregistrationv1.Fail)))
	untilPodCreate(t, env, http.StatusInternalServerError)

	st := do(t, env, http.MethodPost, podPath("default", ""), jsonType, pod("refused", "", nil)).
		wantStatus(t, http.StatusInternalServerError, metav1.StatusReasonInternalError)
	if !strings.Contains(st.Message, `failed calling webhook "fail.minictl.test"`) {
		t.Errorf("message %q, want it to name the webhook that could not be called", st.Message)
	}
	if strings.Contains(st.Message, "ignore.minictl.test") {
		t.Errorf("message %q names the Ignore webhook", st.Message)
	}

	do(t, env, http.MethodDelete, validatingPath+"/down-fail", "", nil).want(t, http.StatusOK)
	untilPodCreate(t, env, http.StatusCreated)
	create[corev1.Pod](t, env, podPath("default", ""), pod("through", "", nil))
}

// TestWebhookMatching: rules, namespaceSelector and objectSelector decide
// which writes a webhook is called for.
func TestWebhookMatching(t *testing.T) {
	env := testenv.Start(t)
	ws := newWebhookServer(t)
	createNamespace(t, env, "plain")
	watched := namespace("watched")
	watched.Labels = map[string]string{"webhooks": "on"}
	create[corev1.Namespace](t, env, "/api/v1/namespaces", watched)

	h := hookFor("nsobj.minictl.test", ws.url("/nsobj"), ws.caBundle, admissionregistrationv1.Fail)
	h.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"webhooks": "on"}}
	h.ObjectSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	status := hookFor("status.minictl.test", ws.url("/status"), ws.caBundle, admissionregistrationv1.Fail)
	status.Rules[0].Operations = []admissionregistrationv1.OperationType{admissionregistrationv1.OperationAll}
	status.Rules[0].Resources = []string{"pods/status"}
	create[admissionregistrationv1.ValidatingWebhookConfiguration](t, env, validatingPath, validatingConfig("matching", h, status))

	web := map[string]string{"app": "web"}
	eventually(t, "the configuration takes effect", func() (bool, string) {
		do(t, env, http.MethodPost, podPath("watched", "")+"?dryRun=All", jsonType, pod("probe", "", web))
		return len(ws.received("/nsobj")) > 0, "no review yet"
	})
	before := len(ws.received("/nsobj"))
	create[corev1.Pod](t, env, podPath("plain", ""), pod("a", "", web))               // namespace not selected
	create[corev1.Pod](t, env, podPath("watched", ""), pod("b", "", nil))             // object not selected
	create[corev1.Pod](t, env, podPath("watched", ""), pod("c", "", web))             // both selected
	create[corev1.ConfigMap](t, env, cmPath("watched", ""), configMap("d", web, nil)) // not in the rules
	got := ws.received("/nsobj")[before:]
	if len(got) != 1 || got[0].Name != "c" {
		t.Errorf("webhook called for %d writes %v, want only pod watched/c", len(got), got)
	}

	if n := len(ws.received("/status")); n != 0 {
		t.Fatalf("pods/status webhook called %d times for writes of pods", n)
	}
	c := get[corev1.Pod](t, env, podPath("watched", "c"))
	c.Status.Phase = corev1.PodRunning
	update[corev1.Pod](t, env, podPath("watched", "c")+"/status", c)
	st := ws.received("/status")
	if len(st) != 1 || st[0].SubResource != "status" || st[0].Operation != admissionv1.Update || st[0].OldObject.Raw == nil {
		t.Errorf("pods/status webhook got %+v, want one UPDATE of status with the old object", st)
	}
}

// TestWebhookTimeout: a webhook slower than its timeoutSeconds fails the
// call in about that time.
func TestWebhookTimeout(t *testing.T) {
	env := testenv.Start(t)
	ws := newWebhookServer(t)
	h := hookFor("slow.minictl.test", ws.url("/slow"), ws.caBundle, admissionregistrationv1.Fail)
	h.TimeoutSeconds = ptr(int32(1))
	create[admissionregistrationv1.ValidatingWebhookConfiguration](t, env, validatingPath, validatingConfig("slow", h))
	untilPodCreate(t, env, http.StatusInternalServerError)

	start := time.Now()
	st := do(t, env, http.MethodPost, podPath("default", ""), jsonType, pod("late", "", nil)).
		wantStatus(t, http.StatusInternalServerError, metav1.StatusReasonInternalError)
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the write took %v, want about the webhook's 1s timeout", took)
	}
	if !strings.Contains(st.Message, `failed calling webhook "slow.minictl.test"`) {
		t.Errorf("message %q, want the webhook named", st.Message)
	}
}

// TestWebhookBadAnswers: an answer that is not an AdmissionReview, or is
// larger than the server reads, is a clear error; the server goes on.
func TestWebhookBadAnswers(t *testing.T) {
	for _, path := range []string{"/garbage", "/huge"} {
		t.Run(strings.TrimPrefix(path, "/"), func(t *testing.T) {
			env := testenv.Start(t)
			ws := newWebhookServer(t)
			create[admissionregistrationv1.ValidatingWebhookConfiguration](t, env, validatingPath,
				validatingConfig("bad", hookFor("bad.minictl.test", ws.url(path), ws.caBundle, admissionregistrationv1.Fail)))
			untilPodCreate(t, env, http.StatusInternalServerError)
			st := do(t, env, http.MethodPost, podPath("default", ""), jsonType, pod("x", "", nil)).
				wantStatus(t, http.StatusInternalServerError, metav1.StatusReasonInternalError)
			if !strings.Contains(st.Message, `failed calling webhook "bad.minictl.test"`) {
				t.Errorf("message %q, want the webhook named", st.Message)
			}
			healthy(t, env)
		})
	}
}

// TestWebhookConfigurationValidation: kube's defaults are set, and a
// configuration kube refuses is a 422 naming the field.
func TestWebhookConfigurationValidation(t *testing.T) {
	env := testenv.Start(t)
	u := "https://127.0.0.1:1/x"
	got := create[admissionregistrationv1.ValidatingWebhookConfiguration](t, env, validatingPath,
		validatingConfig("defaults", hookFor("a.minictl.test", &u, nil, admissionregistrationv1.Fail)))
	h := got.Webhooks[0]
	if *h.MatchPolicy != admissionregistrationv1.Equivalent || *h.TimeoutSeconds != 10 || h.NamespaceSelector == nil ||
		h.ObjectSelector == nil || *h.Rules[0].Scope != admissionregistrationv1.AllScopes {
		t.Errorf("defaults %+v: want Equivalent, 10s, selectors {}, scope *", h)
	}

	for name, change := range map[string]func(h *admissionregistrationv1.ValidatingWebhook){
		"webhooks[0].clientConfig.url": func(h *admissionregistrationv1.ValidatingWebhook) { h.ClientConfig.URL = ptr("http://127.0.0.1/x") },
		"webhooks[0].clientConfig":     func(h *admissionregistrationv1.ValidatingWebhook) { h.ClientConfig.URL = nil },
		"webhooks[0].sideEffects": func(h *admissionregistrationv1.ValidatingWebhook) {
			h.SideEffects = ptr(admissionregistrationv1.SideEffectClassSome)
		},
		"webhooks[0].timeoutSeconds":          func(h *admissionregistrationv1.ValidatingWebhook) { h.TimeoutSeconds = ptr(int32(31)) },
		"webhooks[0].admissionReviewVersions": func(h *admissionregistrationv1.ValidatingWebhook) { h.AdmissionReviewVersions = []string{"v1beta1"} },
		"webhooks[0].clientConfig.caBundle":   func(h *admissionregistrationv1.ValidatingWebhook) { h.ClientConfig.CABundle = []byte("not pem") },
		"webhooks[0].rules[0].operations":     func(h *admissionregistrationv1.ValidatingWebhook) { h.Rules[0].Operations = nil },
		"webhooks[0].name":                    func(h *admissionregistrationv1.ValidatingWebhook) { h.Name = "short" },
	} {
		h := hookFor("b.minictl.test", &u, nil, admissionregistrationv1.Fail)
		change(&h)
		st := do(t, env, http.MethodPost, validatingPath, jsonType, validatingConfig("bad", h)).
			wantStatus(t, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid)
		if !strings.Contains(st.Message, name) {
			t.Errorf("%s: message %q does not name the field", name, st.Message)
		}
	}
	dup := validatingConfig("dup", hookFor("c.minictl.test", &u, nil, admissionregistrationv1.Fail), hookFor("c.minictl.test", &u, nil, admissionregistrationv1.Fail))
	do(t, env, http.MethodPost, validatingPath, jsonType, dup).wantStatus(t, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid)
}

// TestWebhookService: a webhook named by a Service is called at its
// Endpoints' address, and its certificate must be for
// <name>.<namespace>.svc.
func TestWebhookService(t *testing.T) {
	env := testenv.Start(t)
	good := newWebhookServer(t, "hooks.default.svc")
	wrong := newWebhookServer(t, "other.default.svc")
	for name, ws := range map[string]*webhookServer{"hooks": good, "wronghooks": wrong} {
		_, portStr, _ := net.SplitHostPort(strings.TrimPrefix(ws.srv.URL, "https://"))
		port, _ := strconv.Atoi(portStr)
		create[corev1.Service](t, env, "/api/v1/namespaces/default/services", &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "https", Port: 443}}},
		})
		create[corev1.Endpoints](t, env, "/api/v1/namespaces/default/endpoints", &corev1.Endpoints{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Subsets: []corev1.EndpointSubset{{
				Addresses: []corev1.EndpointAddress{{IP: "127.0.0.1"}},
				Ports:     []corev1.EndpointPort{{Name: "https", Port: int32(port)}},
			}},
		})
	}
	svcHook := func(hookName, svc string, caBundle []byte) admissionregistrationv1.ValidatingWebhook {
		h := hookFor(hookName, nil, caBundle, admissionregistrationv1.Fail)
		h.ClientConfig.Service = &admissionregistrationv1.ServiceReference{Namespace: "default", Name: svc, Path: ptr("/deny")}
		return h
	}
	create[admissionregistrationv1.ValidatingWebhookConfiguration](t, env, validatingPath,
		validatingConfig("svc", svcHook("svc.minictl.test", "hooks", good.caBundle)))
	untilPodCreate(t, env, http.StatusForbidden)
	if n := len(good.received("/deny")); n == 0 {
		t.Fatalf("the service's webhook was not called")
	}

	do(t, env, http.MethodDelete, validatingPath+"/svc", "", nil).want(t, http.StatusOK)
	create[admissionregistrationv1.ValidatingWebhookConfiguration](t, env, validatingPath,
		validatingConfig("wrong", svcHook("wrong.minictl.test", "wronghooks", wrong.caBundle)))
	untilPodCreate(t, env, http.StatusInternalServerError)
	st := do(t, env, http.MethodPost, podPath("default", ""), jsonType, pod("x", "", nil)).
		wantStatus(t, http.StatusInternalServerError, metav1.StatusReasonInternalError)
	if !strings.Contains(st.Message, "certificate") {
		t.Errorf("message %q: want the certificate for another name refused", st.Message)
	}
	if n := len(wrong.received("/deny")); n != 0 {
		t.Errorf("the webhook with a certificate for another name got %d reviews", n)
	}
}

// TestWebhookScale: a write of the scale subresource is sent as kube sends
// it, an autoscaling/v1 Scale of deployments/scale, only to webhooks whose
// rules name the subresource; a mutating webhook's patch of the Scale
// changes the replicas written.
func TestWebhookScale(t *testing.T) {
	env := testenv.Start(t)
	ws := newWebhookServer(t)
	rule := func(resources ...string) []admissionregistrationv1.RuleWithOperations {
		return []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: resources},
		}}
	}
	main := hookFor("main.minictl.test", ws.url("/main"), ws.caBundle, admissionregistrationv1.Fail)
	main.Rules = rule("deployments")
	create[admissionregistrationv1.ValidatingWebhookConfiguration](t, env, validatingPath, validatingConfig("main", main))
	scale := hookFor("scale.minictl.test", ws.url("/replicas"), ws.caBundle, admissionregistrationv1.Fail)
	create[admissionregistrationv1.MutatingWebhookConfiguration](t, env, mutatingPath, &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "scale"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name: scale.Name, ClientConfig: scale.ClientConfig, Rules: rule("deployments/scale"), FailurePolicy: scale.FailurePolicy,
			SideEffects: scale.SideEffects, AdmissionReviewVersions: scale.AdmissionReviewVersions,
		}},
	})
	const deploy = "/apis/apps/v1/namespaces/default/deployments"
	create[map[string]any](t, env, deploy, map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "web"},
		"spec": map[string]any{"replicas": 1, "selector": map[string]any{"matchLabels": map[string]any{"app": "web"}},
			"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": "web"}},
				"spec": map[string]any{"containers": []any{map[string]any{"name": "app", "image": "nginx"}}}}},
	})
	eventually(t, "the scale webhook takes effect", func() (bool, string) {
		r := do(t, env, http.MethodPatch, deploy+"/web/scale?dryRun=All", mergePatch, `{"spec":{"replicas":5}}`)
		return strings.Contains(string(r.body), `"replicas":2`), string(r.body)
	})
	mainBefore := len(ws.received("/main"))
	do(t, env, http.MethodPatch, deploy+"/web/scale", mergePatch, `{"spec":{"replicas":5}}`).want(t, http.StatusOK)
	var d struct {
		Spec struct{ Replicas int32 } `json:"spec"`
	}
	do(t, env, http.MethodGet, deploy+"/web", "", nil).want(t, http.StatusOK).into(t, &d)
	if d.Spec.Replicas != 2 {
		t.Errorf("replicas %d after the webhook's patch of the Scale, want 2", d.Spec.Replicas)
	}
	reqs := ws.received("/replicas")
	last := reqs[len(reqs)-1]
	if last.SubResource != "scale" || last.Kind.Kind != "Scale" || last.Kind.Group != "autoscaling" || last.Resource.Resource != "deployments" ||
		!strings.Contains(string(last.Object.Raw), `"replicas":5`) || !strings.Contains(string(last.OldObject.Raw), `"kind":"Scale"`) {
		t.Errorf("scale review %+v object %s: want an autoscaling/v1 Scale of deployments/scale", last, last.Object.Raw)
	}
	if n := len(ws.received("/main")) - mainBefore; n != 0 {
		t.Errorf("the webhook on deployments was called %d times for a scale", n)
	}
}

// TestWebhookReinvocation: a mutating webhook with reinvocationPolicy
// IfNeeded is called again when a later webhook changed the object; one
// with Never is not.
func TestWebhookReinvocation(t *testing.T) {
	env := testenv.Start(t)
	ws := newWebhookServer(t)
	mutating := func(name, path string, policy admissionregistrationv1.ReinvocationPolicyType) *admissionregistrationv1.MutatingWebhookConfiguration {
		h := hookFor(name+".minictl.test", ws.url(path), ws.caBundle, admissionregistrationv1.Fail)
		return &admissionregistrationv1.MutatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Webhooks: []admissionregistrationv1.MutatingWebhook{{
				Name: h.Name, ClientConfig: h.ClientConfig, Rules: h.Rules, FailurePolicy: h.FailurePolicy,
				SideEffects: h.SideEffects, AdmissionReviewVersions: h.AdmissionReviewVersions, ReinvocationPolicy: &policy,
			}},
		}
	}
	// Configurations are called in the order of their names: a, then b.
	create[admissionregistrationv1.MutatingWebhookConfiguration](t, env, mutatingPath, mutating("a", "/label", admissionregistrationv1.IfNeededReinvocationPolicy))
	create[admissionregistrationv1.MutatingWebhookConfiguration](t, env, mutatingPath, mutating("b", "/b", admissionregistrationv1.NeverReinvocationPolicy))
	eventually(t, "both webhooks take effect", func() (bool, string) {
		r := do(t, env, http.MethodPost, podPath("default", "")+"?dryRun=All", jsonType, pod("probe", "", nil))
		return len(ws.received("/b")) > 0, string(r.body)
	})
	a, b := len(ws.received("/label")), len(ws.received("/b"))
	p := create[corev1.Pod](t, env, podPath("default", ""), pod("again", "", nil))
	if da, db := len(ws.received("/label"))-a, len(ws.received("/b"))-b; da != 2 || db != 1 {
		t.Errorf("calls: a %d, b %d; want a twice (b changed the object after it) and b once", da, db)
	}
	// a's second call set the labels anew, without b's.
	if p.Labels["patched"] != "true" || p.Labels["b"] != "" {
		t.Errorf("labels %v, want a's, as its second call left them", p.Labels)
	}
}

// TestWebhookMatchConditions: a webhook's matchConditions decide whether
// it is called: the deny webhook sees only the pod its condition names;
// a condition that fails to evaluate refuses the write under
// failurePolicy Fail.
func TestWebhookMatchConditions(t *testing.T) {
	env := testenv.Start(t)
	ws := newWebhookServer(t)
	h := hookFor("deny.minictl.test", ws.url("/deny"), ws.caBundle, admissionregistrationv1.Fail)
	h.MatchConditions = []admissionregistrationv1.MatchCondition{
		{Name: "only-bad", Expression: "object.metadata.name == 'bad'"},
		{Name: "creates", Expression: "request.operation == 'CREATE'"},
	}
	create[admissionregistrationv1.ValidatingWebhookConfiguration](t, env, validatingPath, validatingConfig("deny", h))
	eventually(t, "the webhook configuration takes effect", func() (bool, string) {
		r := do(t, env, http.MethodPost, podPath("default", "")+"?dryRun=All", jsonType, pod("bad", "", nil))
		return r.code == http.StatusForbidden, string(r.body)
	})
	calls := len(ws.received("/deny"))
	create[corev1.Pod](t, env, podPath("default", ""), pod("good", "", nil))
	if n := len(ws.received("/deny")); n != calls {
		t.Errorf("the webhook was called for a pod its condition excludes")
	}
	st := do(t, env, http.MethodPost, podPath("default", ""), jsonType, pod("bad", "", nil)).wantStatus(t, http.StatusForbidden, "")
	if !strings.Contains(st.Message, "pods named bad are not welcome") {
		t.Errorf("message %q, want the webhook's", st.Message)
	}

	// A condition that errors (no such key) refuses with failurePolicy Fail.
	h2 := hookFor("broken.minictl.test", ws.url("/allow"), ws.caBundle, admissionregistrationv1.Fail)
	h2.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "broken", Expression: "object.metadata.noSuchField == 'x'"}}
	h2.Rules[0].Resources = []string{"configmaps"}
	create[admissionregistrationv1.ValidatingWebhookConfiguration](t, env, validatingPath, validatingConfig("broken", h2))
	var r *reply
	eventually(t, "the broken condition takes effect", func() (bool, string) {
		r = do(t, env, http.MethodPost, cmPath("default", "")+"?dryRun=All", jsonType, configMap("c", nil, nil))
		return r.code == http.StatusForbidden, string(r.body)
	})
	if st := r.status(t); !strings.Contains(st.Message, "no such key: noSuchField") {
		t.Errorf("message %q, want the evaluation error", st.Message)
	}

	// A condition that does not compile is refused when written.
	h3 := hookFor("uncompiled.minictl.test", ws.url("/allow"), ws.caBundle, admissionregistrationv1.Fail)
	h3.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "bad", Expression: "object.metadata.name =="}}
	st = do(t, env, http.MethodPost, validatingPath, jsonType, validatingConfig("uncompiled", h3)).wantStatus(t, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid)
	if st.Details == nil || len(st.Details.Causes) != 1 || st.Details.Causes[0].Field != "webhooks[0].matchConditions[0].expression" {
		t.Errorf("status %+v, want one cause at webhooks[0].matchConditions[0].expression", st)
	}
}

// TestWebhookMatchPolicy: a webhook whose rules name example.com/v1 is
// called for a create at v2 only with matchPolicy Equivalent, and then
// sees the object converted to v1, with the version asked for in
// requestKind and requestResource.
func TestWebhookMatchPolicy(t *testing.T) {
	env := testenv.Start(t)
	createCRD(t, env, widgetCRD())
	ws := newWebhookServer(t)
	hook := func(name, path string, mp admissionregistrationv1.MatchPolicyType) admissionregistrationv1.ValidatingWebhook {
		h := hookFor(name, ws.url(path), ws.caBundle, admissionregistrationv1.Fail)
		h.Rules[0].Rule = admissionregistrationv1.Rule{APIGroups: []string{"example.com"}, APIVersions: []string{"v1"}, Resources: []string{"widgets"}}
		h.MatchPolicy = &mp
		return h
	}
	create[admissionregistrationv1.ValidatingWebhookConfiguration](t, env, validatingPath, validatingConfig("widgets",
		hook("equivalent.minictl.test", "/equivalent", admissionregistrationv1.Equivalent),
		hook("exact.minictl.test", "/exact", admissionregistrationv1.Exact)))
	eventually(t, "both webhooks are called for a create at v1", func() (bool, string) {
		do(t, env, http.MethodPost, widgetsV1+"?dryRun=All", jsonType, widget("probe", 1, "red", nil))
		return len(ws.received("/equivalent")) > 0 && len(ws.received("/exact")) > 0, ""
	})
	equivalent, exact := len(ws.received("/equivalent")), len(ws.received("/exact"))

	v2 := widget("w", 1, "red", nil)
	v2["apiVersion"] = "example.com/v2"
	do(t, env, http.MethodPost, "/apis/example.com/v2/namespaces/default/widgets", jsonType, v2).want(t, http.StatusCreated)
	if n := len(ws.received("/exact")); n != exact {
		t.Errorf("the Exact webhook was called %d times for a create at v2, want none", n-exact)
	}
	got := ws.received("/equivalent")
	if len(got) != equivalent+1 {
		t.Fatalf("the Equivalent webhook was called %d times for a create at v2, want once", len(got)-equivalent)
	}
	r := got[len(got)-1]
	if r.Kind != (metav1.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}) ||
		r.Resource != (metav1.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}) ||
		r.RequestKind == nil || r.RequestKind.Version != "v2" || r.RequestResource == nil || r.RequestResource.Version != "v2" {
		t.Errorf("kind %v resource %v requestKind %v requestResource %v: want v1, asked at v2", r.Kind, r.Resource, r.RequestKind, r.RequestResource)
	}
	if !strings.Contains(string(r.Object.Raw), `"apiVersion":"example.com/v1"`) {
		t.Errorf("object %s: want it converted to example.com/v1", r.Object.Raw)
	}
}
