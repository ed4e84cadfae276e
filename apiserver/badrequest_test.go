package apiserver_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/internal/testenv"
)

// TestBadRequests sends what a confused client might, and checks that each
// is refused with the right code and reason, that nothing is written (etcd's
// revision does not move), and that the server still answers afterwards.
func TestBadRequests(t *testing.T) {
	env := testenv.Start(t)
	create[corev1.ConfigMap](t, env, cmPath("default", ""), configMap("existing", nil, map[string]string{"k": "v"}))
	create[corev1.Pod](t, env, podPath("default", ""), pod("existing", "", nil))
	existing := get[corev1.ConfigMap](t, env, cmPath("default", "existing"))
	huge := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"huge"},"data":{"k":"` + strings.Repeat("x", 4<<20) + `"}}`

	withName := func(name string) *corev1.ConfigMap { return configMap(name, nil, nil) }
	wrongNS := withName("cm")
	wrongNS.Namespace = "kube-system"
	renamed := existing.DeepCopy()
	renamed.Name = "other"
	podNoImage := pod("no-image", "", nil)
	podNoImage.Spec.Containers[0].Image = ""
	badLabel := withName("bad-label")
	badLabel.Labels = map[string]string{"bad key!": "x"}

	for _, tc := range []struct {
		name        string
		method      string
		path        string
		contentType string
		body        any
		code        int
		reason      metav1.StatusReason
		causeField  string // if set, a cause must name this field
	}{
		{"malformed JSON", http.MethodPost, cmPath("default", ""), jsonType, `{"metadata":{"name":`, 400, metav1.StatusReasonBadRequest, ""},
		{"JSON of the wrong shape", http.MethodPost, cmPath("default", ""), jsonType, `{"metadata":{"name":["a"]}}`, 400, metav1.StatusReasonBadRequest, ""},
		{"two JSON documents", http.MethodPost, cmPath("default", ""), jsonType, `{"metadata":{"name":"a"}}{"metadata":{"name":"b"}}`, 400, metav1.StatusReasonBadRequest, ""},
		{"empty body", http.MethodPost, cmPath("default", ""), jsonType, ``, 400, metav1.StatusReasonBadRequest, ""},
		{"malformed YAML", http.MethodPost, cmPath("default", ""), yamlType, "metadata:\n  name: [a\n", 400, metav1.StatusReasonBadRequest, ""},
		{"wrong kind in the body", http.MethodPost, cmPath("default", ""), jsonType, `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"}}`, 400, metav1.StatusReasonBadRequest, ""},
		{"wrong apiVersion in the body", http.MethodPost, cmPath("default", ""), jsonType, `{"apiVersion":"apps/v1","kind":"ConfigMap","metadata":{"name":"s"}}`, 400, metav1.StatusReasonBadRequest, ""},
		{"body namespace is not the URL's", http.MethodPost, cmPath("default", ""), jsonType, wrongNS, 400, metav1.StatusReasonBadRequest, ""},
		{"body name is not the URL's on PUT", http.MethodPut, cmPath("default", "existing"), jsonType, renamed, 400, metav1.StatusReasonBadRequest, ""},
		{"invalid name", http.MethodPost, cmPath("default", ""), jsonType, withName("Not_Valid"), 422, metav1.StatusReasonInvalid, "metadata.name"},
		{"no name", http.MethodPost, cmPath("default", ""), jsonType, withName(""), 422, metav1.StatusReasonInvalid, "metadata.name"},
		{"invalid label", http.MethodPost, cmPath("default", ""), jsonType, badLabel, 422, metav1.StatusReasonInvalid, "metadata.labels"},
		{"pod without an image", http.MethodPost, podPath("default", ""), jsonType, podNoImage, 422, metav1.StatusReasonInvalid, "spec.containers[0].image"},
		{"deployment whose selector does not match its template", http.MethodPost, deployPath("default", ""), jsonType,
			func() *appsv1.Deployment {
				d := deployment("mismatch", 1)
				d.Spec.Template.Labels = map[string]string{"app": "other"}
				return d
			}(), 422, metav1.StatusReasonInvalid, "spec.template.metadata.labels"},
		{"4 MiB body", http.MethodPost, cmPath("default", ""), jsonType, huge, 413, metav1.StatusReasonRequestEntityTooLarge, ""},
		{"4 MiB body without a Content-Length", http.MethodPost, cmPath("default", ""), jsonType, strings.NewReader(huge), 413, metav1.StatusReasonRequestEntityTooLarge, ""},
		{"Content-Type text/plain", http.MethodPost, cmPath("default", ""), "text/plain", `{"metadata":{"name":"plain"}}`, 415, metav1.StatusReasonUnsupportedMediaType, ""},
		{"create without a Content-Type", http.MethodPost, cmPath("default", ""), "", `{"metadata":{"name":"untyped"}}`, 415, metav1.StatusReasonUnsupportedMediaType, ""},
		{"update without a Content-Type", http.MethodPut, cmPath("default", "existing"), "", `{"metadata":{"name":"existing"}}`, 415, metav1.StatusReasonUnsupportedMediaType, ""},
		{"patch without a Content-Type", http.MethodPatch, cmPath("default", "existing"), "", `{"data":{"k":"x"}}`, 415, metav1.StatusReasonUnsupportedMediaType, ""},
		{"patch with Content-Type application/json", http.MethodPatch, cmPath("default", "existing"), jsonType, `{"data":{"k":"x"}}`, 415, metav1.StatusReasonUnsupportedMediaType, ""},
		{"malformed merge patch", http.MethodPatch, cmPath("default", "existing"), mergePatch, `{"data":`, 400, metav1.StatusReasonBadRequest, ""},
		{"malformed JSON patch", http.MethodPatch, cmPath("default", "existing"), jsonPatch, `{"op":"add"}`, 400, metav1.StatusReasonBadRequest, ""},
		{"patch that renames", http.MethodPatch, cmPath("default", "existing"), mergePatch, `{"metadata":{"name":"renamed"}}`, 400, metav1.StatusReasonBadRequest, ""},
		{"patch that moves the object to another namespace", http.MethodPatch, cmPath("default", "existing"), mergePatch, `{"metadata":{"namespace":"kube-system"}}`, 400, metav1.StatusReasonBadRequest, ""},
		{"unknown resource", http.MethodGet, "/api/v1/foos", "", nil, 404, metav1.StatusReasonNotFound, ""},
		{"unknown resource in a namespace", http.MethodPost, "/api/v1/namespaces/default/foos", jsonType, `{}`, 404, metav1.StatusReasonNotFound, ""},
		{"unknown group", http.MethodGet, "/apis/nope.example.com/v1/things", "", nil, 404, metav1.StatusReasonNotFound, ""},
		{"unknown subresource", http.MethodGet, cmPath("default", "existing") + "/status", "", nil, 404, metav1.StatusReasonNotFound, ""},
		{"namespaced object without a namespace", http.MethodGet, "/api/v1/configmaps/existing", "", nil, 404, metav1.StatusReasonNotFound, ""},
		{"PUT on a collection", http.MethodPut, cmPath("default", ""), jsonType, withName("x"), 405, metav1.StatusReasonMethodNotAllowed, ""},
		{"PATCH on a collection", http.MethodPatch, cmPath("default", ""), mergePatch, `{}`, 405, metav1.StatusReasonMethodNotAllowed, ""},
		{"POST on an object", http.MethodPost, cmPath("default", "existing"), jsonType, withName("existing"), 405, metav1.StatusReasonMethodNotAllowed, ""},
		{"DELETE on a subresource", http.MethodDelete, podPath("default", "existing") + "/status", "", nil, 405, metav1.StatusReasonMethodNotAllowed, ""},
		{"PUT on pods/binding", http.MethodPut, podPath("default", "existing") + "/binding", jsonType,
			`{"apiVersion":"v1","kind":"Binding","metadata":{"name":"existing"},"target":{"kind":"Node","name":"n1"}}`, 405, metav1.StatusReasonMethodNotAllowed, ""},
		{"GET on namespaces/finalize", http.MethodGet, "/api/v1/namespaces/default/finalize", "", nil, 405, metav1.StatusReasonMethodNotAllowed, ""},
		{"invalid propagationPolicy", http.MethodDelete, cmPath("default", "existing") + "?propagationPolicy=Sideways", "", nil, 422, metav1.StatusReasonInvalid, "propagationPolicy"},
		{"malformed DeleteOptions", http.MethodDelete, cmPath("default", "existing"), jsonType, `{"gracePeriodSeconds":"soon"}`, 400, metav1.StatusReasonBadRequest, ""},
		{"invalid gracePeriodSeconds", http.MethodDelete, cmPath("default", "existing") + "?gracePeriodSeconds=soon", "", nil, 400, metav1.StatusReasonBadRequest, ""},
		{"negative limit", http.MethodGet, cmPath("default", "") + "?limit=-1", "", nil, 400, metav1.StatusReasonBadRequest, ""},
		{"invalid timeoutSeconds", http.MethodGet, cmPath("default", "") + "?watch=true&timeoutSeconds=x", "", nil, 400, metav1.StatusReasonBadRequest, ""},
		// ListOptions are checked as kube-apiserver's ValidateListOptions: 422.
		{"invalid resourceVersionMatch", http.MethodGet, cmPath("default", "") + "?resourceVersion=1&resourceVersionMatch=Newest", "", nil, 422, metav1.StatusReasonInvalid, ""},
		{"resourceVersionMatch without a resourceVersion", http.MethodGet, cmPath("default", "") + "?resourceVersionMatch=NotOlderThan", "", nil, 422, metav1.StatusReasonInvalid, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := revision(t, env)
			r := do(t, env, tc.method, tc.path, tc.contentType, tc.body)
			st := r.wantStatus(t, tc.code, tc.reason)
			if st.Message == "" {
				t.Errorf("Status without a message")
			}
			if tc.causeField != "" {
				var fields []string
				if st.Details != nil {
					for _, c := range st.Details.Causes {
						fields = append(fields, c.Field)
					}
				}
				if !slices.Contains(fields, tc.causeField) {
					t.Errorf("causes name fields %v, want %s; message: %s", fields, tc.causeField, st.Message)
				}
			}
			if after := revision(t, env); after != before {
				t.Errorf("etcd revision moved from %d to %d: something was written", before, after)
			}
			healthy(t, env)
		})
	}

	// Nothing the table sent was stored, and what existed is untouched.
	if l := get[corev1.ConfigMapList](t, env, "/api/v1/configmaps"); !slices.Equal(cmNames(l), []string{"existing"}) {
		t.Errorf("configmaps after the bad requests: %v", cmNames(l))
	}
	if got := get[corev1.ConfigMap](t, env, cmPath("default", "existing")); got.ResourceVersion != existing.ResourceVersion {
		t.Errorf("existing configmap changed: rv %s -> %s", existing.ResourceVersion, got.ResourceVersion)
	}
	if got := get[corev1.Pod](t, env, podPath("default", "existing")); got.Spec.NodeName != "" {
		t.Errorf("existing pod was bound to %q", got.Spec.NodeName)
	}
}

// TestBodyWithoutLength sends a create chunked, with no Content-Length, as
// a client streaming its body does, and one with a length larger than the
// server reserves up front: the server reads each whole.
func TestBodyWithoutLength(t *testing.T) {
	env := testenv.Start(t)
	value := strings.Repeat("v", 5000) // well past the first read buffer
	body := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"chunked"},"data":{"k":"` + value + `"}}`
	do(t, env, http.MethodPost, cmPath("default", ""), jsonType, strings.NewReader(body)).want(t, http.StatusCreated)
	if got := get[corev1.ConfigMap](t, env, cmPath("default", "chunked")); got.Data["k"] != value {
		t.Errorf("stored value has %d bytes, want %d", len(got.Data["k"]), len(value))
	}

	// A body with a length past what the server reserves up front grows
	// as it arrives, and is read whole too.
	large := strings.Repeat("l", 200<<10)
	body = `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"large"},"data":{"k":"` + large + `"}}`
	do(t, env, http.MethodPost, cmPath("default", ""), jsonType, body).want(t, http.StatusCreated)
	if got := get[corev1.ConfigMap](t, env, cmPath("default", "large")); got.Data["k"] != large {
		t.Errorf("stored value has %d bytes, want %d", len(got.Data["k"]), len(large))
	}
}
