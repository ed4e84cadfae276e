package apiserver

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/minictl/minictl/internal/webhook"
)

// converterHook is a conversion webhook over TLS on 127.0.0.1 (httptest's
// own certificate, trusted through the caBundle). It sets each object's
// apiVersion to the desired one, then lets answer change the response;
// it records every review it receives, as JSON.
type converterHook struct {
	srv *httptest.Server

	mu      sync.Mutex
	answer  func(resp map[string]any)
	reviews []map[string]any
}

func newConverterHook(t *testing.T, answer func(resp map[string]any)) *converterHook {
	t.Helper()
	h := &converterHook{answer: answer}
	h.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		var review, recorded map[string]any
		if err == nil {
			err = json.Unmarshal(body, &review)
		}
		if err == nil {
			err = json.Unmarshal(body, &recorded)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		h.mu.Lock()
		h.reviews = append(h.reviews, recorded)
		answer := h.answer
		h.mu.Unlock()
		req := review["request"].(map[string]any)
		var converted []any
		for _, o := range req["objects"].([]any) {
			o.(map[string]any)["apiVersion"] = req["desiredAPIVersion"]
			converted = append(converted, o)
		}
		resp := map[string]any{"uid": req["uid"], "convertedObjects": converted, "result": map[string]any{"status": "Success"}}
		if answer != nil {
			answer(resp)
		}
		delete(review, "request")
		review["response"] = resp
		_ = json.NewEncoder(w).Encode(review)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *converterHook) setAnswer(answer func(resp map[string]any)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.answer = answer
}

func (h *converterHook) received() []map[string]any {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.reviews)
}

// converter is the webhookConverter of a definition whose webhook is h,
// asking for the review versions given.
func (h *converterHook) converter(reviewVersions ...string) *webhookConverter {
	return converterOf(h.srv, reviewVersions...)
}

// converterOf is the webhookConverter of a definition whose webhook is
// srv.
func converterOf(srv *httptest.Server, reviewVersions ...string) *webhookConverter {
	url := srv.URL + "/convert"
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "hosts.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Conversion: &apiextensionsv1.CustomResourceConversion{
			Strategy: apiextensionsv1.WebhookConverter,
			Webhook: &apiextensionsv1.WebhookConversion{
				ClientConfig: &apiextensionsv1.WebhookClientConfig{
					URL:      &url,
					CABundle: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}),
				},
				ConversionReviewVersions: reviewVersions,
			},
		}},
	}
	return newWebhookConverter(webhook.NewClient(webhook.Options{}), crd, newMetrics(prometheus.NewRegistry()))
}

func host(name, apiVersion string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": apiVersion, "kind": "Host",
		"metadata": map[string]any{
			"name": name, "namespace": "default", "uid": "uid-" + name, "generation": int64(1),
			"labels": map[string]any{"app": name}, "finalizers": []any{"example.com/keep"},
		},
		"spec": map[string]any{"hostPort": name + ":80"},
	}}
}

// TestWebhookConverterReviewVersions: the review is sent in the first
// version of conversionReviewVersions that minictl speaks; a v1 answer
// must be for the request's uid, a v1beta1 answer's uid is not checked,
// as in kube; a definition naming no version minictl speaks is an error.
func TestWebhookConverterReviewVersions(t *testing.T) {
	ctx := context.Background()
	h := newConverterHook(t, nil)
	for _, tc := range []struct {
		versions []string
		wrongUID bool
		want     string // the review's apiVersion
		err      string
	}{
		{versions: []string{"v1", "v1beta1"}, want: "apiextensions.k8s.io/v1"},
		{versions: []string{"v2", "v1beta1", "v1"}, want: "apiextensions.k8s.io/v1beta1"},
		{versions: []string{"v1beta1"}, wrongUID: true, want: "apiextensions.k8s.io/v1beta1"},
		{versions: []string{"v1"}, wrongUID: true, want: "apiextensions.k8s.io/v1", err: `conversion webhook for example.com/v1, Kind=Host failed: expected response.uid=`},
		{versions: []string{"v2"}, err: "conversion webhook for example.com/v1, Kind=Host failed: no supported conversion review versions in [v2]"},
	} {
		h.setAnswer(nil)
		if tc.wrongUID {
			h.setAnswer(func(resp map[string]any) { resp["uid"] = "another" })
		}
		before := len(h.received())
		out, err := h.converter(tc.versions...).convert(ctx, []*unstructured.Unstructured{host("a", "example.com/v1")}, "example.com/v2")
		if tc.err != "" {
			if err == nil || !strings.HasPrefix(err.Error(), tc.err) {
				t.Errorf("%v: got %v, want an error starting %q", tc.versions, err, tc.err)
			}
		} else if err != nil || len(out) != 1 || out[0].GetAPIVersion() != "example.com/v2" {
			t.Errorf("%v: got %v, %v; want the object at example.com/v2", tc.versions, out, err)
		}
		got := h.received()[before:]
		if tc.want == "" {
			if len(got) != 0 {
				t.Errorf("%v: the webhook was called", tc.versions)
			}
			continue
		}
		if len(got) != 1 || got[0]["apiVersion"] != tc.want || got[0]["kind"] != "ConversionReview" {
			t.Errorf("%v: the webhook received %v, want one %s ConversionReview", tc.versions, got, tc.want)
			continue
		}
		req := got[0]["request"].(map[string]any)
		if req["desiredAPIVersion"] != "example.com/v2" || req["uid"] == "" || len(req["objects"].([]any)) != 1 {
			t.Errorf("%v: request %v", tc.versions, req)
		}
	}
}

// TestWebhookConverterSendsOnlyWhatConverts: objects already in the
// desired version are not sent, and come back as they were, in order;
// with none to convert, the webhook is not called.
func TestWebhookConverterSendsOnlyWhatConverts(t *testing.T) {
	ctx := context.Background()
	h := newConverterHook(t, nil)
	c := h.converter("v1")
	a, b, d := host("a", "example.com/v1"), host("b", "example.com/v2"), host("d", "example.com/v1")
	out, err := c.convert(ctx, []*unstructured.Unstructured{a, b, d}, "example.com/v2")
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 3 || out[0].GetName() != "a" || out[1] != b || out[2].GetName() != "d" || out[0].GetAPIVersion() != "example.com/v2" || out[2].GetAPIVersion() != "example.com/v2" {
		t.Errorf("got %v", out)
	}
	if a.GetAPIVersion() != "example.com/v1" {
		t.Errorf("the original was changed: %v", a)
	}
	reviews := h.received()
	if len(reviews) != 1 {
		t.Fatalf("%d reviews, want 1", len(reviews))
	}
	var sent []string
	for _, o := range reviews[0]["request"].(map[string]any)["objects"].([]any) {
		sent = append(sent, o.(map[string]any)["metadata"].(map[string]any)["name"].(string))
	}
	if !slices.Equal(sent, []string{"a", "d"}) {
		t.Errorf("sent %v, want [a d]", sent)
	}
	if out, err := c.convert(ctx, []*unstructured.Unstructured{b}, "example.com/v2"); err != nil || out[0] != b || len(h.received()) != 1 {
		t.Errorf("nothing to convert: %v, %v, %d reviews", out, err, len(h.received()))
	}
}

// TestWebhookConverterChecksTheAnswer: every answer kube refuses is an
// error, worded as kube words it.
func TestWebhookConverterChecksTheAnswer(t *testing.T) {
	ctx := context.Background()
	obj := func(resp map[string]any) map[string]any {
		return resp["convertedObjects"].([]any)[0].(map[string]any)
	}
	meta := func(resp map[string]any) map[string]any { return obj(resp)["metadata"].(map[string]any) }
	for _, tc := range []struct {
		name   string
		answer func(resp map[string]any)
		want   string
	}{
		{"failure with a message", func(r map[string]any) {
			r["result"] = map[string]any{"status": "Failure", "message": "hosts cannot be converted today"}
		}, "failed: hosts cannot be converted today"},
		{"failure without one", func(r map[string]any) { r["result"] = map[string]any{"status": "Failure"} },
			"failed: response.result.status was 'Failure', not 'Success'"},
		{"no response", func(r map[string]any) { clear(r) }, "failed: expected response.uid="},
		{"too few", func(r map[string]any) { r["convertedObjects"] = []any{} }, "returned 0 objects, expected 1"},
		{"too many", func(r map[string]any) { r["convertedObjects"] = append(r["convertedObjects"].([]any), obj(r)) },
			"returned 2 objects, expected 1"},
		{"not an object", func(r map[string]any) { r["convertedObjects"] = []any{"x"} },
			"returned invalid converted object at index 0"},
		{"wrong apiVersion", func(r map[string]any) { obj(r)["apiVersion"] = "example.com/v1" },
			"returned invalid converted object at index 0: invalid groupVersion (expected example.com/v2, received example.com/v1)"},
		{"wrong kind", func(r map[string]any) { obj(r)["kind"] = "Guest" },
			"returned invalid converted object at index 0: invalid kind (expected Host, received Guest)"},
		{"renamed", func(r map[string]any) { meta(r)["name"] = "b" },
			"returned invalid converted object at index 0: must have the same name: a != b"},
		{"moved", func(r map[string]any) { meta(r)["namespace"] = "other" },
			"returned invalid converted object at index 0: must have the same namespace: default != other"},
		{"another uid", func(r map[string]any) { meta(r)["uid"] = "uid-b" },
			"returned invalid converted object at index 0: must have the same UID: uid-a != uid-b"},
		{"no metadata", func(r map[string]any) { delete(obj(r), "metadata") },
			"returned invalid converted object at index 0: must have the same name: a != "},
		{"a label not a string", func(r map[string]any) { meta(r)["labels"] = map[string]any{"app": 1} },
			"returned invalid metadata in object at index 0: metadata.labels[app] must be a string, but is int64 in converted object"},
		{"an invalid label", func(r map[string]any) { meta(r)["labels"] = map[string]any{"not a key!": "x"} },
			`returned invalid metadata in object at index 0: metadata.labels: Invalid value: "not a key!"`},
		{"an invalid annotation", func(r map[string]any) { meta(r)["annotations"] = map[string]any{"not a key!": "x"} },
			`returned invalid metadata in object at index 0: metadata.annotations: Invalid value: "not a key!"`},
	} {
		h := newConverterHook(t, tc.answer)
		_, err := h.converter("v1").convert(ctx, []*unstructured.Unstructured{host("a", "example.com/v1")}, "example.com/v2")
		want := "conversion webhook for example.com/v1, Kind=Host " + tc.want
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s: got %v, want an error starting %q", tc.name, err, want)
		}
	}
	// A webhook that does not answer 200, or not at all.
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	c := converterOf(srv, "v1")
	_, err := c.convert(ctx, []*unstructured.Unstructured{host("a", "example.com/v1")}, "example.com/v2")
	if want := "conversion webhook for example.com/v1, Kind=Host failed: the server responded with the status code 503"; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("503: got %v, want an error starting %q", err, want)
	}
	srv.Close()
	_, err = c.convert(ctx, []*unstructured.Unstructured{host("a", "example.com/v1")}, "example.com/v2")
	if want := "conversion webhook for example.com/v1, Kind=Host failed: Post"; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("closed: got %v, want an error starting %q", err, want)
	}
}

// TestWebhookConverterKeepsMetadata: a webhook may change labels and
// annotations; any other change to metadata is dropped, as kube drops it,
// and the original is not changed.
func TestWebhookConverterKeepsMetadata(t *testing.T) {
	h := newConverterHook(t, func(r map[string]any) {
		m := r["convertedObjects"].([]any)[0].(map[string]any)["metadata"].(map[string]any)
		m["labels"] = map[string]any{"app": "a", "converted": "true"}
		m["annotations"] = map[string]any{"example.com/by": "webhook"}
		m["generation"] = 99
		m["finalizers"] = []any{}
		m["resourceVersion"] = "12345"
	})
	a := host("a", "example.com/v1")
	orig := a.DeepCopy()
	out, err := h.converter("v1").convert(context.Background(), []*unstructured.Unstructured{a}, "example.com/v2")
	if err != nil {
		t.Fatal(err)
	}
	want := orig.DeepCopy()
	want.SetAPIVersion("example.com/v2")
	want.SetLabels(map[string]string{"app": "a", "converted": "true"})
	want.SetAnnotations(map[string]string{"example.com/by": "webhook"})
	if !equalJSON(t, out[0], want) {
		t.Errorf("converted:\n%s\nwant:\n%s", mustMarshal(t, out[0]), mustMarshal(t, want))
	}
	if !equalJSON(t, a, orig) {
		t.Errorf("the original changed: %s", mustMarshal(t, a))
	}
	// A webhook that drops the labels drops them.
	h.setAnswer(func(r map[string]any) {
		delete(r["convertedObjects"].([]any)[0].(map[string]any)["metadata"].(map[string]any), "labels")
	})
	out, err = h.converter("v1").convert(context.Background(), []*unstructured.Unstructured{a}, "example.com/v2")
	if err != nil || out[0].GetLabels() != nil || out[0].GetGeneration() != 1 {
		t.Errorf("labels dropped: %v, %v", out, err)
	}
}

func mustMarshal(t *testing.T, v runtime.Object) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func equalJSON(t *testing.T, a, b runtime.Object) bool {
	return mustMarshal(t, a) == mustMarshal(t, b)
}
