package apiserver_test

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"

	"github.com/minictl/minictl/internal/testenv"
)

// A ConfigMap with a field ConfigMaps do not have, and one spelled with the
// wrong case (JSON field names are case-sensitive in Kubernetes).
const cmWithUnknownFields = `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"NAME","labels":{"a":"b"}},"data":{"k":"v"},"bogus":1,"Data":{"x":"y"}}`

func cmBody(name string) string { return strings.Replace(cmWithUnknownFields, "NAME", name, 1) }

func TestFieldValidation(t *testing.T) {
	env := testenv.Start(t)

	t.Run("Strict refuses unknown fields", func(t *testing.T) {
		st := do(t, env, http.MethodPost, cmPath("default", "")+"?fieldValidation=Strict&fieldManager=kubectl-create", jsonType, cmBody("strict")).
			wantStatus(t, http.StatusBadRequest, metav1.StatusReasonBadRequest)
		want := `ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding error: unknown field "bogus", unknown field "Data"`
		if st.Message != want {
			t.Errorf("message %q\nwant     %q", st.Message, want)
		}
		do(t, env, http.MethodGet, cmPath("default", "strict"), "", nil).want(t, http.StatusNotFound)

		// The version alone, not the group, as kube-apiserver says it.
		st = do(t, env, http.MethodPost, deployPath("default", "")+"?fieldValidation=Strict", jsonType,
			`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"strict"},"spec":{"bogus":1}}`).
			wantStatus(t, http.StatusBadRequest, metav1.StatusReasonBadRequest)
		if want := `Deployment in version "v1" cannot be handled as a Deployment: strict decoding error: unknown field "spec.bogus"`; st.Message != want {
			t.Errorf("message %q\nwant     %q", st.Message, want)
		}
	})

	t.Run("Warn is the default and says so in Warning headers", func(t *testing.T) {
		for _, q := range []string{"", "?fieldValidation=Warn"} {
			r := do(t, env, http.MethodPost, cmPath("default", "")+q, jsonType, cmBody("warn"+strings.ToLower(strings.TrimPrefix(q, "?fieldValidation=")))).want(t, http.StatusCreated)
			got := r.header.Values("Warning")
			if len(got) != 2 || got[0] != `299 - "unknown field \"bogus\""` || got[1] != `299 - "unknown field \"Data\""` {
				t.Errorf("%q: Warning headers %q", q, got)
			}
			var cm corev1.ConfigMap
			r.into(t, &cm)
			if cm.Data["k"] != "v" || cm.Data["x"] != "" || cm.Labels["a"] != "b" {
				t.Errorf("stored %v: known fields kept, unknown ones dropped", cm.Data)
			}
		}
	})

	t.Run("Ignore is silent", func(t *testing.T) {
		r := do(t, env, http.MethodPost, cmPath("default", "")+"?fieldValidation=Ignore", jsonType, cmBody("ignore")).want(t, http.StatusCreated)
		if w := r.header.Values("Warning"); len(w) != 0 {
			t.Errorf("Warning headers %q", w)
		}
	})

	t.Run("update and patch too", func(t *testing.T) {
		create[corev1.ConfigMap](t, env, cmPath("default", ""), configMap("p", nil, nil))
		for _, tc := range []struct{ patchType, body string }{
			{mergePatch, `{"spec":{"x":1}}`},
			{strategicPtch, `{"spec":{"x":1}}`},
			{jsonPatch, `[{"op":"add","path":"/spec","value":{"x":1}}]`},
		} {
			st := do(t, env, http.MethodPatch, cmPath("default", "p")+"?fieldValidation=Strict", tc.patchType, tc.body).
				wantStatus(t, http.StatusBadRequest, metav1.StatusReasonBadRequest)
			if !strings.Contains(st.Message, `strict decoding error: unknown field "spec"`) {
				t.Errorf("%s: %s", tc.patchType, st.Message)
			}
			r := do(t, env, http.MethodPatch, cmPath("default", "p"), tc.patchType, tc.body).want(t, http.StatusOK)
			if w := r.header.Get("Warning"); w != `299 - "unknown field \"spec\""` {
				t.Errorf("%s: Warning %q", tc.patchType, w)
			}
		}
		st := do(t, env, http.MethodPut, cmPath("default", "p")+"?fieldValidation=Strict", jsonType,
			`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"p"},"data":{"a":"1","a":"2"}}`).
			wantStatus(t, http.StatusBadRequest, metav1.StatusReasonBadRequest)
		if !strings.Contains(st.Message, `duplicate field "data.a"`) {
			t.Errorf("duplicate field: %s", st.Message)
		}
	})

	t.Run("bad options", func(t *testing.T) {
		do(t, env, http.MethodPost, cmPath("default", "")+"?fieldValidation=Loud", jsonType, cmBody("x")).
			wantStatus(t, http.StatusBadRequest, metav1.StatusReasonBadRequest)
		do(t, env, http.MethodPost, cmPath("default", "")+"?fieldManager="+strings.Repeat("m", 129), jsonType, cmBody("x")).
			wantStatus(t, http.StatusBadRequest, metav1.StatusReasonBadRequest)
	})
}

// A server-side apply names its object's kind and apiVersion, or is
// refused as kube-apiserver refuses it.
func TestServerSideApplyNamesItsKind(t *testing.T) {
	env := testenv.Start(t)
	create[corev1.ConfigMap](t, env, cmPath("default", ""), configMap("c", nil, nil))
	st := do(t, env, http.MethodPatch, cmPath("default", "c")+"?fieldManager=kubectl", "application/apply-patch+yaml", "data: {a: b}").
		wantStatus(t, http.StatusBadRequest, metav1.StatusReasonBadRequest)
	if want := "invalid object type: /, Kind="; st.Message != want {
		t.Errorf("message %q, want %q", st.Message, want)
	}
	cm := patch[corev1.ConfigMap](t, env, cmPath("default", "c")+"?fieldManager=kubectl", "application/apply-patch+yaml",
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {a: b}")
	if cm.Data["a"] != "b" {
		t.Errorf("applied data %v", cm.Data)
	}
}

// TestProtobufBodies: client-go's typed clients send protobuf; minictl
// reads it (and answers JSON, which they accept).
func TestProtobufBodies(t *testing.T) {
	env := testenv.Start(t)
	sc := runtime.NewScheme()
	if err := corev1.AddToScheme(sc); err != nil {
		t.Fatal(err)
	}
	enc := protobuf.NewSerializer(sc, sc)
	encode := func(obj runtime.Object) []byte {
		var b bytes.Buffer
		if err := enc.Encode(obj, &b); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	cm := configMap("pb", map[string]string{"a": "b"}, map[string]string{"k": "v"})
	got := call[corev1.ConfigMap](t, env, http.MethodPost, cmPath("default", ""), "application/vnd.kubernetes.protobuf", encode(cm), http.StatusCreated)
	if got.Data["k"] != "v" || got.Labels["a"] != "b" || got.UID == "" {
		t.Errorf("created %+v", got)
	}
	uid := got.UID
	del := &metav1.DeleteOptions{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "DeleteOptions"}, Preconditions: &metav1.Preconditions{UID: &uid}}
	do(t, env, http.MethodDelete, cmPath("default", "pb"), "application/vnd.kubernetes.protobuf", encode(del)).want(t, http.StatusOK)
	do(t, env, http.MethodPost, cmPath("default", ""), "application/vnd.kubernetes.protobuf", "k8s\x00garbage").
		wantStatus(t, http.StatusBadRequest, metav1.StatusReasonBadRequest)
	secret := &corev1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}, ObjectMeta: metav1.ObjectMeta{Name: "s"}}
	st := do(t, env, http.MethodPost, cmPath("default", ""), "application/vnd.kubernetes.protobuf", encode(secret)).
		wantStatus(t, http.StatusBadRequest, metav1.StatusReasonBadRequest)
	if !strings.Contains(st.Message, "Secret") || !strings.Contains(st.Message, "configmaps") {
		t.Errorf("message %q does not say the body's kind and the URL's resource", st.Message)
	}

	// An update in protobuf, as client-go sends it.
	again := call[corev1.ConfigMap](t, env, http.MethodPost, cmPath("default", ""), "application/vnd.kubernetes.protobuf", encode(cm), http.StatusCreated)
	again.Data["k"] = "w"
	updated := call[corev1.ConfigMap](t, env, http.MethodPut, cmPath("default", "pb"), "application/vnd.kubernetes.protobuf", encode(again), http.StatusOK)
	if updated.Data["k"] != "w" || updated.ResourceVersion == again.ResourceVersion {
		t.Errorf("updated %+v", updated)
	}
}
