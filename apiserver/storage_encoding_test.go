package apiserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/internal/testenv"
)

// TestStoredEncoding: as kube-apiserver stores them, a built-in kind's
// object is in etcd in protobuf (the k8s\x00 envelope naming its
// apiVersion and kind) and a custom object as JSON, neither with a
// resourceVersion; what protobuf cannot tell apart, an empty list from
// none, the write's answer, a read from the cache and a read from etcd
// agree on; an update that changes nothing still writes nothing.
func TestStoredEncoding(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	stored := func(key string) []byte {
		t.Helper()
		kv, err := env.Store.Get(ctx, key)
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		return kv.Value
	}

	cm := create[corev1.ConfigMap](t, env, cmPath("default", ""), configMap("enc", nil, map[string]string{"k": "v"}))
	value := stored("/registry/core/configmaps/default/enc")
	apiVersion, kind, msg, err := api.ProtobufObject(value)
	if err != nil || apiVersion != "v1" || kind != "ConfigMap" {
		t.Fatalf("the stored ConfigMap is %q (%s %s, %v), want protobuf of a v1 ConfigMap", value, apiVersion, kind, err)
	}
	var back corev1.ConfigMap
	if err := api.UnmarshalProtobuf(msg, &back); err != nil || back.Data["k"] != "v" || back.UID != cm.UID || back.ResourceVersion != "" {
		t.Errorf("stored ConfigMap decodes to %+v (%v), want its data and uid and no resourceVersion", back, err)
	}

	// An update that changes nothing writes nothing: same resourceVersion.
	again := update[corev1.ConfigMap](t, env, cmPath("default", "enc"), cm)
	if again.ResourceVersion != cm.ResourceVersion || !bytes.Equal(stored("/registry/core/configmaps/default/enc"), value) {
		t.Errorf("a no-op update moved the resourceVersion %s → %s", cm.ResourceVersion, again.ResourceVersion)
	}

	// An EndpointSlice's endpoints have no omitempty: [] and null differ
	// in JSON, not in protobuf. Every read agrees with the answer.
	slice := map[string]any{
		"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
		"metadata":    map[string]any{"name": "empty"},
		"addressType": "IPv4", "endpoints": []any{},
	}
	slices := "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices"
	answer := do(t, env, http.MethodPost, slices, "application/json", slice).want(t, http.StatusCreated).body
	var created discoveryv1.EndpointSlice
	if err := json.Unmarshal(answer, &created); err != nil {
		t.Fatal(err)
	}
	if created.Endpoints != nil || !bytes.Contains(answer, []byte(`"endpoints":null`)) {
		t.Errorf("answer %s, want endpoints null, as stored", answer)
	}
	eventually(t, "the cache serves the answer", func() (bool, string) {
		got := do(t, env, http.MethodGet, slices+"/empty?resourceVersion=0", "", nil)
		return got.code == http.StatusOK && bytes.Equal(got.body, answer), string(got.body)
	})
	if got := do(t, env, http.MethodGet, slices+"/empty", "", nil).want(t, http.StatusOK).body; !bytes.Equal(got, answer) {
		t.Errorf("read from etcd %s\nwant the answer %s", got, answer)
	}

	// A dry run answers what a create would store.
	slice["metadata"] = map[string]any{"name": "dry"}
	dry := do(t, env, http.MethodPost, slices+"?dryRun=All", "application/json", slice).want(t, http.StatusCreated).body
	if !bytes.Contains(dry, []byte(`"endpoints":null`)) {
		t.Errorf("dry-run answer %s, want endpoints null, as a create stores it", dry)
	}

	// A ConfigMap stored as JSON, as minictl stored every kind before:
	// read, and an update that changes nothing still writes nothing.
	legacy := `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"legacy","namespace":"default",` +
		`"uid":"4a8e8e0c-0000-4000-8000-000000000002","creationTimestamp":"2026-01-02T03:04:05Z"},"data":{"k":"v"}}`
	if _, err := env.Store.Create(ctx, "/registry/core/configmaps/default/legacy", []byte(legacy)); err != nil {
		t.Fatal(err)
	}
	old := get[corev1.ConfigMap](t, env, cmPath("default", "legacy"))
	if old.Data["k"] != "v" {
		t.Fatalf("the JSON ConfigMap reads as %+v", old)
	}
	if again := update[corev1.ConfigMap](t, env, cmPath("default", "legacy"), old); again.ResourceVersion != old.ResourceVersion {
		t.Errorf("a no-op update of a JSON value wrote: resourceVersion %s → %s", old.ResourceVersion, again.ResourceVersion)
	}
	old.Data["k"] = "w"
	if changed := update[corev1.ConfigMap](t, env, cmPath("default", "legacy"), old); changed.Data["k"] != "w" || !api.IsProtobufObject(stored("/registry/core/configmaps/default/legacy")) {
		t.Errorf("a real update of a JSON value: %+v, stored %q", changed, stored("/registry/core/configmaps/default/legacy"))
	}

	// A custom object is stored as JSON, and so is its definition, as
	// kube-apiserver's apiextensions server stores it.
	createCRD(t, env, widgetCRD())
	create[map[string]any](t, env, widgetsV1, widget("w", 1, "red", nil))
	var w map[string]any
	value = stored("/registry/example.com/widgets/default/w")
	if err := json.Unmarshal(value, &w); err != nil || w["kind"] != "Widget" {
		t.Errorf("the stored Widget is %q (%v), want its JSON", value, err)
	}
	if meta, _ := w["metadata"].(map[string]any); meta["resourceVersion"] != nil {
		t.Errorf("the stored Widget has a resourceVersion: %s", value)
	}
	if value = stored("/registry/apiextensions.k8s.io/customresourcedefinitions/widgets.example.com"); !json.Valid(value) {
		t.Errorf("the stored definition is %q, want JSON", value)
	}
}
