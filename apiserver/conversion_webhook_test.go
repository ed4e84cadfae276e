package apiserver_test

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/minictl/minictl/internal/testenv"
	"github.com/minictl/minictl/store"
)

// conversionServer is a conversion webhook served over TLS on 127.0.0.1
// with a CA of its own. It converts hosts.example.com between v1, where
// a host is spec.hostPort ("web:80"), and v2, where it is spec.host and
// spec.port; its mode makes it answer otherwise. Every request it
// receives is recorded, with its review's apiVersion.
type conversionServer struct {
	srv      *httptest.Server
	caBundle []byte

	mu       sync.Mutex
	mode     string
	requests []apiextensionsv1.ConversionRequest
	versions []string // each review's apiVersion
}

func newConversionServer(t *testing.T) *conversionServer {
	t.Helper()
	caPEM, cert := newServingCert(t)
	cs := &conversionServer{caBundle: caPEM}
	cs.srv = httptest.NewUnstartedServer(http.HandlerFunc(cs.serve))
	cs.srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	cs.srv.StartTLS()
	t.Cleanup(cs.srv.Close)
	return cs
}

func (cs *conversionServer) setMode(mode string) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.mode = mode
}

func (cs *conversionServer) received() []apiextensionsv1.ConversionRequest {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return append([]apiextensionsv1.ConversionRequest(nil), cs.requests...)
}

// serve answers a ConversionReview, v1 or v1beta1 (their JSON is the
// same), in the version it was asked in.
func (cs *conversionServer) serve(w http.ResponseWriter, r *http.Request) {
	var review apiextensionsv1.ConversionReview
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
		http.Error(w, "not a ConversionReview", http.StatusBadRequest)
		return
	}
	req := review.Request
	cs.mu.Lock()
	cs.requests = append(cs.requests, *req)
	cs.versions = append(cs.versions, review.APIVersion)
	mode := cs.mode
	cs.mu.Unlock()

	resp := &apiextensionsv1.ConversionResponse{UID: req.UID, Result: metav1.Status{Status: metav1.StatusSuccess}}
	for _, raw := range req.Objects {
		var obj unstructured.Unstructured
		if err := obj.UnmarshalJSON(raw.Raw); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		convertHost(obj.Object, req.DesiredAPIVersion)
		switch mode {
		case "rename":
			obj.SetName(obj.GetName() + "-renamed")
		case "uid":
			obj.SetUID("not-the-uid")
		case "apiVersion":
			obj.SetAPIVersion("example.com/v0")
		case "label":
			// Labels may change; the generation may not, and is kept.
			obj.SetLabels(map[string]string{"converted-to": req.DesiredAPIVersion[strings.LastIndex(req.DesiredAPIVersion, "/")+1:]})
			obj.SetGeneration(99)
		}
		b, _ := obj.MarshalJSON()
		resp.ConvertedObjects = append(resp.ConvertedObjects, runtime.RawExtension{Raw: b})
	}
	switch mode {
	case "fail":
		resp.ConvertedObjects = nil
		resp.Result = metav1.Status{Status: metav1.StatusFailure, Message: "hosts cannot be converted today"}
	case "count":
		resp.ConvertedObjects = append(resp.ConvertedObjects, resp.ConvertedObjects...)
	}
	review.Request, review.Response = nil, resp
	_ = json.NewEncoder(w).Encode(&review)
}

// convertHost converts a host's spec to apiVersion to: v1's hostPort
// "h:p" is v2's host "h" and port p.
func convertHost(obj map[string]any, to string) {
	spec, _ := obj["spec"].(map[string]any)
	switch {
	case spec == nil:
	case strings.HasSuffix(to, "/v2"):
		if hp, ok := spec["hostPort"].(string); ok {
			h, p, _ := strings.Cut(hp, ":")
			port, _ := strconv.ParseInt(p, 10, 64)
			spec["host"], spec["port"] = h, port
			delete(spec, "hostPort")
		}
	case strings.HasSuffix(to, "/v1"):
		if h, ok := spec["host"].(string); ok {
			spec["hostPort"] = fmt.Sprintf("%s:%v", h, spec["port"])
			delete(spec, "host")
			delete(spec, "port")
		}
	}
	obj["apiVersion"] = to
}

// hostCRD is hosts.example.com, namespaced: v1 (stored) has
// spec.hostPort, v2 has spec.host and spec.port, and the webhook at url
// converts between them.
func hostCRD(url string, caBundle []byte, reviewVersions ...string) map[string]any {
	version := func(name string, storage bool, spec map[string]any) map[string]any {
		return map[string]any{
			"name": name, "served": true, "storage": storage,
			"schema": map[string]any{"openAPIV3Schema": map[string]any{
				"type":       "object",
				"properties": map[string]any{"spec": map[string]any{"type": "object", "properties": spec}},
			}},
		}
	}
	return map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "hosts.example.com"},
		"spec": map[string]any{
			"group": "example.com", "scope": "Namespaced",
			"names": map[string]any{"plural": "hosts", "singular": "host", "kind": "Host", "listKind": "HostList"},
			"versions": []any{
				version("v1", true, map[string]any{"hostPort": map[string]any{"type": "string"}}),
				version("v2", false, map[string]any{"host": map[string]any{"type": "string"}, "port": map[string]any{"type": "integer"}}),
			},
			"conversion": map[string]any{
				"strategy": "Webhook",
				"webhook": map[string]any{
					"clientConfig":             map[string]any{"url": url, "caBundle": caBundle},
					"conversionReviewVersions": reviewVersions,
				},
			},
		},
	}
}

const (
	hostsV1  = "/apis/example.com/v1/namespaces/default/hosts"
	hostsV2  = "/apis/example.com/v2/namespaces/default/hosts"
	hostsKey = "/registry/example.com/hosts/default/"
)

func hostV1(name, hostPort string) map[string]any {
	return map[string]any{
		"apiVersion": "example.com/v1", "kind": "Host", "metadata": map[string]any{"name": name},
		"spec": map[string]any{"hostPort": hostPort},
	}
}

func hostV2(name, host string, port int64) map[string]any {
	return map[string]any{
		"apiVersion": "example.com/v2", "kind": "Host", "metadata": map[string]any{"name": name},
		"spec": map[string]any{"host": host, "port": port},
	}
}

// wantV1 and wantV2 fail the test unless obj is the host in that
// version's shape.
func wantV1(t *testing.T, what string, obj map[string]any, hostPort string) {
	t.Helper()
	spec, _ := obj["spec"].(map[string]any)
	if obj["apiVersion"] != "example.com/v1" || len(spec) != 1 || spec["hostPort"] != hostPort {
		t.Errorf("%s: got apiVersion %v spec %v, want example.com/v1 with hostPort %q", what, obj["apiVersion"], spec, hostPort)
	}
}

func wantV2(t *testing.T, what string, obj map[string]any, host string, port int64) {
	t.Helper()
	spec, _ := obj["spec"].(map[string]any)
	if obj["apiVersion"] != "example.com/v2" || len(spec) != 2 || spec["host"] != host || spec["port"] != port {
		t.Errorf("%s: got apiVersion %v spec %v, want example.com/v2 with host %q port %d", what, obj["apiVersion"], spec, host, port)
	}
}

// objectOf is an event's object as unstructured content.
func objectOf(t *testing.T, ev event) map[string]any {
	t.Helper()
	var u unstructured.Unstructured
	if err := u.UnmarshalJSON(ev.Object); err != nil {
		t.Fatalf("decode the object of %s: %v", ev, err)
	}
	return u.Object
}

// TestConversionWebhookConvertsBetweenVersions: a definition whose
// conversion strategy is Webhook has its objects converted by it, both
// ways: written at v2, a host is stored in v1's shape; it reads in each
// version's shape from etcd and from the watch cache, lists and watches
// at v2 in v2's. The webhook gets ConversionReview v1 requests without
// resourceVersions; labels it sets are kept, other metadata is not.
func TestConversionWebhookConvertsBetweenVersions(t *testing.T) {
	env := testenv.Start(t)
	cs := newConversionServer(t)
	createCRD(t, env, hostCRD(cs.srv.URL+"/convert", cs.caBundle, "v1"))
	w := watch(t, env, hostsV2+"?watch=true")

	created := create[unstructured.Unstructured](t, env, hostsV2, hostV2("web", "web.local", 8080))
	wantV2(t, "the create's answer", created.Object, "web.local", 8080)
	kv, err := env.Store.Get(t.Context(), hostsKey+"web")
	if err != nil {
		t.Fatalf("etcd get: %v", err)
	}
	var stored map[string]any
	if err := json.Unmarshal(kv.Value, &stored); err != nil {
		t.Fatal(err)
	}
	wantV1(t, "etcd", stored, "web.local:8080")

	rv := created.GetResourceVersion()
	for _, q := range []string{"", "?resourceVersion=" + rv} { // etcd, then the watch cache
		v1 := get[unstructured.Unstructured](t, env, hostsV1+"/web"+q)
		wantV1(t, "get at v1"+q, v1.Object, "web.local:8080")
		v2 := get[unstructured.Unstructured](t, env, hostsV2+"/web"+q)
		wantV2(t, "get at v2"+q, v2.Object, "web.local", 8080)
		if v1.GetResourceVersion() != rv || v2.GetResourceVersion() != rv || v2.GetUID() != created.GetUID() {
			t.Errorf("get%s: resourceVersions %s and %s, uid %s; want %s and uid %s", q, v1.GetResourceVersion(), v2.GetResourceVersion(), v2.GetUID(), rv, created.GetUID())
		}
		l := get[unstructured.UnstructuredList](t, env, hostsV2+q)
		if len(l.Items) != 1 || l.GetKind() != "HostList" {
			t.Fatalf("list at v2%s: %d items, kind %s", q, len(l.Items), l.GetKind())
		}
		wantV2(t, "list at v2"+q, l.Items[0].Object, "web.local", 8080)
	}
	wantV2(t, "the watch at v2", objectOf(t, w.expect(t, "ADDED web")[0]), "web.local", 8080)

	// Changed at v1, which the webhook is not needed for: a watcher at v2
	// sees it in v2's shape.
	patch[unstructured.Unstructured](t, env, hostsV1+"/web", "application/merge-patch+json", `{"spec":{"hostPort":"web.local:9090"}}`)
	wantV2(t, "the watch at v2, after a change at v1", objectOf(t, w.expect(t, "MODIFIED web")[0]), "web.local", 9090)

	reqs := cs.received()
	uids := map[string]bool{}
	toStorage := false
	for _, req := range reqs {
		if uids[string(req.UID)] || req.UID == "" {
			t.Errorf("request uid %q is empty or not fresh", req.UID)
		}
		uids[string(req.UID)] = true
		for _, raw := range req.Objects {
			if strings.Contains(string(raw.Raw), `"resourceVersion"`) {
				t.Errorf("the webhook was sent a resourceVersion: %s", raw.Raw)
			}
		}
		if req.DesiredAPIVersion == "example.com/v1" && len(req.Objects) == 1 && strings.Contains(string(req.Objects[0].Raw), `"apiVersion":"example.com/v2"`) {
			toStorage = true
		}
	}
	if !toStorage {
		t.Errorf("no request converted the create to example.com/v1: %d requests", len(reqs))
	}
	cs.mu.Lock()
	for _, v := range cs.versions {
		if v != "apiextensions.k8s.io/v1" {
			t.Errorf("a review of apiVersion %q, want apiextensions.k8s.io/v1", v)
		}
	}
	cs.mu.Unlock()
	if n := metric(t, env, `apiserver_crd_conversion_webhook_duration_seconds_count{crd_name="hosts.example.com",from_version="v2",succeeded="true",to_version="v1"}`); n < 1 {
		t.Errorf("conversions from v2 to v1 observed: %v, want at least 1", n)
	}

	// The webhook labels what it converts and tries to set the
	// generation: the label is kept, the generation is not.
	cs.setMode("label")
	labelled := create[unstructured.Unstructured](t, env, hostsV2, hostV2("api", "api.local", 443))
	kv, err = env.Store.Get(t.Context(), hostsKey+"api")
	if err != nil {
		t.Fatalf("etcd get: %v", err)
	}
	stored = nil
	if err := json.Unmarshal(kv.Value, &stored); err != nil {
		t.Fatal(err)
	}
	meta := stored["metadata"].(map[string]any)
	if labels, _ := meta["labels"].(map[string]any); labels["converted-to"] != "v1" || meta["generation"] != float64(1) || meta["uid"] != string(labelled.GetUID()) {
		t.Errorf("stored metadata %v, want the webhook's label, generation 1 and the create's uid", meta)
	}
	v2 := get[unstructured.Unstructured](t, env, hostsV2+"/api")
	if v2.GetLabels()["converted-to"] != "v2" || v2.GetGeneration() != 1 {
		t.Errorf("read at v2: labels %v generation %d, want converted-to=v2 and 1", v2.GetLabels(), v2.GetGeneration())
	}
}

// TestConversionWebhookReviewV1beta1: a definition whose webhook speaks
// only ConversionReview v1beta1 is sent that.
func TestConversionWebhookReviewV1beta1(t *testing.T) {
	env := testenv.Start(t)
	cs := newConversionServer(t)
	createCRD(t, env, hostCRD(cs.srv.URL+"/convert", cs.caBundle, "v1beta1"))
	create[unstructured.Unstructured](t, env, hostsV2, hostV2("web", "web.local", 80))
	wantV1(t, "get at v1", get[unstructured.Unstructured](t, env, hostsV1+"/web").Object, "web.local:80")
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if len(cs.versions) == 0 {
		t.Fatal("the webhook was not called")
	}
	for _, v := range cs.versions {
		if v != "apiextensions.k8s.io/v1beta1" {
			t.Errorf("a review of apiVersion %q, want apiextensions.k8s.io/v1beta1", v)
		}
	}
}

// TestConversionWebhookFailures: whatever the webhook does wrong (it
// answers Failure, renames the object, changes its uid, answers too many
// objects or the wrong apiVersion, or is down), a write that needs it
// gets a 500 Status saying so and stores nothing; a read that needs it
// gets the same 500, a watcher an ERROR event with it. What needs no
// conversion is served as ever.
func TestConversionWebhookFailures(t *testing.T) {
	env := testenv.Start(t)
	cs := newConversionServer(t)
	createCRD(t, env, hostCRD(cs.srv.URL+"/convert", cs.caBundle, "v1"))
	ok := create[unstructured.Unstructured](t, env, hostsV1, hostV1("ok", "ok.local:80"))
	get[unstructured.Unstructured](t, env, hostsV2+"/ok?resourceVersion="+ok.GetResourceVersion()) // in the v2 cache

	internal := func(t *testing.T, what string, r *reply, want string) {
		t.Helper()
		st := r.wantStatus(t, http.StatusInternalServerError, metav1.StatusReasonInternalError)
		if !strings.Contains(st.Message, want) {
			t.Errorf("%s: message %q, want it to say %q", what, st.Message, want)
		}
	}
	notStored := func(t *testing.T, name string) {
		t.Helper()
		if _, err := env.Store.Get(t.Context(), hostsKey+name); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("etcd get %s: %v, want not found", name, err)
		}
	}
	for _, tc := range []struct{ mode, write, read string }{
		{"fail",
			"Internal error occurred: conversion webhook for example.com/v2, Kind=Host failed: hosts cannot be converted today",
			"Internal error occurred: conversion webhook for example.com/v1, Kind=Host failed: hosts cannot be converted today"},
		{"rename",
			"conversion webhook for example.com/v2, Kind=Host returned invalid converted object at index 0: must have the same name: bad-rename != bad-rename-renamed",
			"returned invalid converted object at index 0: must have the same name: ok != ok-renamed"},
		{"uid", "returned invalid converted object at index 0: must have the same UID", "must have the same UID"},
		{"count", "conversion webhook for example.com/v2, Kind=Host returned 2 objects, expected 1", "returned 2 objects, expected 1"},
		{"apiVersion",
			"returned invalid converted object at index 0: invalid groupVersion (expected example.com/v1, received example.com/v0)",
			"invalid groupVersion (expected example.com/v2, received example.com/v0)"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			cs.setMode(tc.mode)
			defer cs.setMode("")
			name := "bad-" + strings.ToLower(tc.mode)
			internal(t, "create at v2", do(t, env, http.MethodPost, hostsV2, jsonType, hostV2(name, "bad.local", 1)), tc.write)
			notStored(t, name)
			before, err := env.Store.Get(t.Context(), hostsKey+"ok")
			if err != nil {
				t.Fatal(err)
			}
			internal(t, "merge patch at v2", do(t, env, http.MethodPatch, hostsV2+"/ok", "application/merge-patch+json", `{"spec":{"port":81}}`), "conversion webhook for example.com/")
			if after, err := env.Store.Get(t.Context(), hostsKey+"ok"); err != nil || after.Revision != before.Revision {
				t.Errorf("etcd holds ok at revision %d (%v), want it unchanged at %d", after.Revision, err, before.Revision)
			}
			internal(t, "get at v2", do(t, env, http.MethodGet, hostsV2+"/ok", "", nil), tc.read)
			internal(t, "list at v2", do(t, env, http.MethodGet, hostsV2, "", nil), tc.read)
			do(t, env, http.MethodGet, hostsV1+"/ok", "", nil).want(t, http.StatusOK)
		})
	}

	// A watcher at v2 hears that a change could not be converted, with
	// the webhook's reason; the change is not lost: once the webhook
	// answers again, a watch from before it sees it.
	w := watch(t, env, hostsV2+"?watch=true&resourceVersion="+ok.GetResourceVersion())
	cs.setMode("fail")
	changed := patch[unstructured.Unstructured](t, env, hostsV1+"/ok", "application/merge-patch+json", `{"spec":{"hostPort":"ok.local:81"}}`)
	ev := w.nextNonBookmark(t)
	if st := ev.status(t); ev.Type != "ERROR" || st.Code != http.StatusInternalServerError || !strings.Contains(st.Message, "hosts cannot be converted today") {
		t.Fatalf("watch at v2: %s %+v, want an ERROR event with a 500 saying why", ev.Type, st)
	}
	w.ended(t, waitTimeout)
	cs.setMode("")
	eventually(t, "the v2 cache has the change", func() (bool, string) {
		r := do(t, env, http.MethodGet, hostsV2+"/ok?resourceVersion="+changed.GetResourceVersion(), "", nil)
		return r.code == http.StatusOK, string(r.body)
	})
	w = watch(t, env, hostsV2+"?watch=true&resourceVersion="+ok.GetResourceVersion())
	wantV2(t, "the watch at v2, once the webhook answers", objectOf(t, w.expect(t, "MODIFIED ok")[0]), "ok.local", 81)

	// The webhook is down.
	cs.srv.Close()
	internal(t, "create at v2, webhook down", do(t, env, http.MethodPost, hostsV2, jsonType, hostV2("down", "down.local", 1)),
		"conversion webhook for example.com/v2, Kind=Host failed: Post")
	notStored(t, "down")
	internal(t, "get at v2, webhook down", do(t, env, http.MethodGet, hostsV2+"/ok", "", nil), "conversion webhook for example.com/v1, Kind=Host failed: Post")
	internal(t, "list at v2, webhook down", do(t, env, http.MethodGet, hostsV2, "", nil), "conversion webhook for example.com/v1, Kind=Host failed: Post")
	create[unstructured.Unstructured](t, env, hostsV1, hostV1("stored", "stored.local:80"))
	wantV1(t, "get at v1, webhook down", get[unstructured.Unstructured](t, env, hostsV1+"/stored").Object, "stored.local:80")
}

// An object stored while v2 was the storage version (the definition has
// moved its storage to v1 since) is converted from v2, the version it was
// stored in: the webhook is asked to turn v2's shape into v1's, for the
// watch cache and for a read from etcd alike.
func TestConversionWebhookConvertsFromTheVersionStored(t *testing.T) {
	env := testenv.Start(t)
	cs := newConversionServer(t)
	createCRD(t, env, hostCRD(cs.srv.URL+"/convert", cs.caBundle, "v1"))
	old := `{"apiVersion":"example.com/v2","kind":"Host","metadata":{"name":"old","namespace":"default","uid":"u-old",` +
		`"creationTimestamp":"2026-01-01T00:00:00Z"},"spec":{"host":"old.local","port":7070}}`
	rev, err := env.Store.Create(t.Context(), hostsKey+"old", []byte(old))
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"", "?resourceVersion=" + strconv.FormatInt(rev, 10)} { // etcd, then the watch cache
		wantV1(t, "get at v1"+q, get[unstructured.Unstructured](t, env, hostsV1+"/old"+q).Object, "old.local:7070")
		wantV2(t, "get at v2"+q, get[unstructured.Unstructured](t, env, hostsV2+"/old"+q).Object, "old.local", 7070)
	}
}
