package client

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/minictl/minictl/api"
)

// request is what the fake server saw.
type request struct {
	Method, Path, Query string
	Header              http.Header
	Body                []byte
}

// fakeServer is an httptest server answering canned kube-style responses:
// reply writes the response for each request. It records every request.
type fakeServer struct {
	*httptest.Server
	mu       sync.Mutex
	requests []request
}

func newFakeServer(t *testing.T, reply func(w http.ResponseWriter, r *http.Request)) *fakeServer {
	t.Helper()
	f := &fakeServer{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.requests = append(f.requests, request{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Clone(), body})
		f.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		reply(w, r)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeServer) last(t *testing.T) request {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.requests) == 0 {
		t.Fatal("no request reached the server")
	}
	return f.requests[len(f.requests)-1]
}

func (f *fakeServer) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.requests)
}

// respond writes a JSON body with a status code.
func respond(code int, body string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_, _ = io.WriteString(w, body)
	}
}

func newTestClient(t *testing.T, cfg Config) *RESTClient {
	t.Helper()
	rc, err := New(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	return rc
}

const configMapJSON = `{"metadata":{"name":"web","namespace":"default","resourceVersion":"7","uid":"u1"},"data":{"k":"v"}}`

func TestGetSendsHeadersAndSetsTypeMeta(t *testing.T) {
	srv := newFakeServer(t, respond(200, configMapJSON))
	rc := newTestClient(t, Config{Server: srv.URL, BearerToken: "s3cret", UserAgent: "test-agent"})
	cm, err := For[*corev1.ConfigMap](rc).Get(context.Background(), "default", "web")
	if err != nil {
		t.Fatal(err)
	}
	if cm.Name != "web" || cm.ResourceVersion != "7" || cm.Data["k"] != "v" {
		t.Errorf("decoded %+v", cm)
	}
	if cm.Kind != "ConfigMap" || cm.APIVersion != "v1" {
		t.Errorf("TypeMeta = %+v", cm.TypeMeta)
	}
	req := srv.last(t)
	if req.Method != "GET" || req.Path != "/api/v1/namespaces/default/configmaps/web" {
		t.Errorf("request %s %s", req.Method, req.Path)
	}
	for h, want := range map[string]string{
		"Accept": "application/vnd.kubernetes.protobuf, application/json", "Authorization": "Bearer s3cret", "User-Agent": "test-agent", "Content-Type": "",
	} {
		if got := req.Header.Get(h); got != want {
			t.Errorf("%s = %q, want %q", h, got, want)
		}
	}
}

func TestServerPathPrefixAndDefaults(t *testing.T) {
	srv := newFakeServer(t, respond(200, `{"metadata":{"name":"node-1"}}`))
	rc := newTestClient(t, Config{Server: srv.URL + "/prefix/"})
	if _, err := For[*corev1.Node](rc).Get(context.Background(), "ignored", "node-1"); err != nil {
		t.Fatal(err)
	}
	req := srv.last(t)
	if req.Path != "/prefix/api/v1/nodes/node-1" {
		t.Errorf("path = %s", req.Path)
	}
	if req.Header.Get("Authorization") != "" {
		t.Error("Authorization sent without a token")
	}
	if ua := req.Header.Get("User-Agent"); !strings.Contains(ua, "minictl") {
		t.Errorf("default User-Agent = %q", ua)
	}
}

func TestNewRejectsBadServers(t *testing.T) {
	for _, server := range []string{"ftp://x", "http://", "http://x/?a=b", "http://x:bad port"} {
		if _, err := New(&Config{Server: server}); err == nil {
			t.Errorf("New(%q) succeeded", server)
		}
	}
	if _, err := New(nil); err == nil {
		t.Error("New(nil) succeeded")
	}
	rc, err := New(&Config{Server: "127.0.0.1:8080"})
	if err != nil || rc.Server() != "http://127.0.0.1:8080" {
		t.Errorf("bare host:port: %v, %v", rc, err)
	}
	rc, err = New(&Config{Server: "example:6443", Insecure: true})
	if err != nil || rc.Server() != "https://example:6443" {
		t.Errorf("bare host:port with TLS settings: %v, %v", rc, err)
	}
	if _, err := New(&Config{Server: "https://x", CAData: []byte("not pem")}); err == nil {
		t.Error("New with a bad CA succeeded")
	}
	if _, err := New(&Config{Server: "https://x", CAFile: "/nonexistent/ca.crt"}); err == nil {
		t.Error("New with a missing CA file succeeded")
	}
}

func TestErrorResponses(t *testing.T) {
	srv := newFakeServer(t, respond(404,
		`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"configmaps \"web\" not found","reason":"NotFound","details":{"name":"web","kind":"configmaps"},"code":404}`))
	cms := For[*corev1.ConfigMap](newTestClient(t, Config{Server: srv.URL}))
	cm, err := cms.Get(context.Background(), "default", "web")
	if !IsNotFound(err) || err.Error() != `configmaps "web" not found` || cm != nil {
		t.Errorf("Get = %v, %v; want a NotFound and a nil object", cm, err)
	}

	plain := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) { http.Error(w, "nope", http.StatusForbidden) })
	err = For[*corev1.ConfigMap](newTestClient(t, Config{Server: plain.URL})).Delete(context.Background(), "default", "web", metav1.DeleteOptions{})
	if !IsForbidden(err) || !strings.Contains(err.Error(), "nope") || StatusCode(err) != 403 {
		t.Errorf("Delete = %v, want a synthesized Forbidden quoting the body", err)
	}

	// A transport failure is not a StatusError.
	srv.Close()
	_, err = cms.Get(context.Background(), "default", "web")
	if err == nil || ReasonForError(err) != "" || StatusCode(err) != 0 {
		t.Errorf("Get from a closed server = %v", err)
	}
}

func TestClientSideChecksSendNothing(t *testing.T) {
	srv := newFakeServer(t, respond(200, "{}"))
	rc := newTestClient(t, Config{Server: srv.URL})
	ctx := context.Background()
	pods := For[*corev1.Pod](rc)
	checks := map[string]error{}
	_, checks["get without name"] = pods.Get(ctx, "default", "")
	_, checks["get without namespace"] = pods.Get(ctx, "", "web")
	_, checks["create without namespace"] = pods.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web"}})
	_, checks["update without name"] = pods.Update(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default"}})
	_, checks["patch without type"] = pods.Patch(ctx, "default", "web", "", []byte("{}"))
	_, checks["list with a bad namespace"] = pods.List(ctx, "a/b", metav1.ListOptions{})
	checks["delete with a slash"] = pods.Delete(ctx, "default", "a/b", metav1.DeleteOptions{})
	checks["bind without target"] = rc.Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}})
	_, checks["watch with a bad namespace"] = pods.Watch(ctx, "..", metav1.ListOptions{})
	for name, err := range checks {
		if err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if n := srv.count(); n != 0 {
		t.Errorf("%d requests reached the server", n)
	}
}

func TestList(t *testing.T) {
	srv := newFakeServer(t, respond(200, `{"kind":"PodList","apiVersion":"v1",
		"metadata":{"resourceVersion":"99","continue":"next-page","remainingItemCount":3},
		"items":[{"metadata":{"name":"a","namespace":"x"}},{"metadata":{"name":"b","namespace":"y"}}]}`))
	pods := For[*corev1.Pod](newTestClient(t, Config{Server: srv.URL}))
	list, err := pods.List(context.Background(), "", metav1.ListOptions{LabelSelector: "app=web", Limit: 2, Watch: true})
	if err != nil {
		t.Fatal(err)
	}
	if list.ResourceVersion != "99" || list.Continue != "next-page" || list.RemainingItemCount == nil || *list.RemainingItemCount != 3 {
		t.Errorf("list meta: rv %q continue %q remaining %v", list.ResourceVersion, list.Continue, list.RemainingItemCount)
	}
	if len(list.Items) != 2 || list.Items[0].Name != "a" || list.Items[1].Namespace != "y" {
		t.Fatalf("items = %+v", list.Items)
	}
	for _, p := range list.Items {
		if p.Kind != "Pod" || p.APIVersion != "v1" {
			t.Errorf("item TypeMeta = %+v", p.TypeMeta)
		}
	}
	req := srv.last(t)
	if req.Path != "/api/v1/pods" || req.Query != "labelSelector=app%3Dweb&limit=2" {
		t.Errorf("request %s?%s (watch must be dropped)", req.Path, req.Query)
	}
	// Protobuf is asked for first; this server answered JSON, which was read.
	if got := req.Header.Get("Accept"); got != "application/vnd.kubernetes.protobuf, application/json" {
		t.Errorf("Accept %q, want protobuf preferred and JSON taken", got)
	}

	empty := newFakeServer(t, respond(200, `{"kind":"DeploymentList","apiVersion":"apps/v1","metadata":{"resourceVersion":"5"},"items":null}`))
	deps, err := For[*appsv1.Deployment](newTestClient(t, Config{Server: empty.URL})).List(context.Background(), "shop", metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if deps.Items == nil || len(deps.Items) != 0 || deps.ResourceVersion != "5" {
		t.Errorf("empty list = %+v", deps)
	}
	if got := empty.last(t).Path; got != "/apis/apps/v1/namespaces/shop/deployments" {
		t.Errorf("path = %s", got)
	}

	nullItem := newFakeServer(t, respond(200, `{"items":[null]}`))
	if _, err := For[*corev1.Pod](newTestClient(t, Config{Server: nullItem.URL})).List(context.Background(), "", metav1.ListOptions{}); err == nil {
		t.Error("a null item was accepted")
	}
}

// echo answers every request with its own body, as a server answers a write
// with the object stored.
func echo(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}

func TestWrites(t *testing.T) {
	var mu sync.Mutex
	var lastBody []byte
	srv := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		lastBody = body
		mu.Unlock()
		// Patches and deletes are answered in JSON, whatever the client
		// prefers; the rest get their own body back, in its media type.
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodPatch || r.Method == http.MethodDelete {
			_, _ = io.WriteString(w, `{"metadata":{"name":"web","namespace":"default","resourceVersion":"8"}}`)
			return
		}
		w.Header().Set("Content-Type", r.Header.Get("Content-Type"))
		_, _ = w.Write(body)
	})
	deps := For[*appsv1.Deployment](newTestClient(t, Config{Server: srv.URL}))
	ctx := context.Background()
	in := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", ResourceVersion: "7"}}

	tests := []struct {
		name                string
		call                func() error
		method, path, ctype string
		body                string // a substring the body must contain
	}{
		{"create", func() error { _, err := deps.Create(ctx, in); return err },
			"POST", "/apis/apps/v1/namespaces/default/deployments", api.ProtobufMediaType, `"kind":"Deployment","apiVersion":"apps/v1"`},
		{"update", func() error { _, err := deps.Update(ctx, in); return err },
			"PUT", "/apis/apps/v1/namespaces/default/deployments/web", api.ProtobufMediaType, `"resourceVersion":"7"`},
		{"update status", func() error { _, err := deps.UpdateStatus(ctx, in); return err },
			"PUT", "/apis/apps/v1/namespaces/default/deployments/web/status", api.ProtobufMediaType, `"name":"web"`},
		{"merge patch", func() error {
			_, err := deps.Patch(ctx, "default", "web", types.MergePatchType, []byte(`{"spec":{"replicas":3}}`))
			return err
		}, "PATCH", "/apis/apps/v1/namespaces/default/deployments/web", "application/merge-patch+json", `{"spec":{"replicas":3}}`},
		{"json patch of status", func() error {
			_, err := deps.Patch(ctx, "default", "web", types.JSONPatchType, []byte(`[{"op":"add","path":"/status/replicas","value":1}]`), "status")
			return err
		}, "PATCH", "/apis/apps/v1/namespaces/default/deployments/web/status", "application/json-patch+json", `"op":"add"`},
		{"strategic merge patch", func() error {
			_, err := deps.Patch(ctx, "default", "web", types.StrategicMergePatchType, []byte(`{}`))
			return err
		}, "PATCH", "/apis/apps/v1/namespaces/default/deployments/web", "application/strategic-merge-patch+json", `{}`},
		{"delete", func() error {
			grace := int64(0)
			policy := metav1.DeletePropagationForeground
			uid := types.UID("u1")
			return deps.Delete(ctx, "default", "web", metav1.DeleteOptions{
				GracePeriodSeconds: &grace, PropagationPolicy: &policy,
				Preconditions: &metav1.Preconditions{UID: &uid},
			})
		}, "DELETE", "/apis/apps/v1/namespaces/default/deployments/web", "application/json",
			`{"gracePeriodSeconds":0,"preconditions":{"uid":"u1"},"propagationPolicy":"Foreground"}`},
		{"delete collection", func() error {
			return deps.DeleteCollection(ctx, "default", metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "app=web"})
		}, "DELETE", "/apis/apps/v1/namespaces/default/deployments", "application/json", `{}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.call(); err != nil {
				t.Fatal(err)
			}
			req := srv.last(t)
			if req.Method != tt.method || req.Path != tt.path {
				t.Errorf("request %s %s, want %s %s", req.Method, req.Path, tt.method, tt.path)
			}
			if got := req.Header.Get("Content-Type"); got != tt.ctype {
				t.Errorf("Content-Type = %q, want %q", got, tt.ctype)
			}
			if got, want := req.Header.Get("Accept"), api.ProtobufMediaType+", application/json"; tt.method != "DELETE" && got != want {
				t.Errorf("Accept = %q, want %q", got, want)
			}
			mu.Lock()
			body := string(lastBody)
			mu.Unlock()
			if tt.ctype == api.ProtobufMediaType {
				body = protobufAsJSON(t, []byte(body), &appsv1.Deployment{})
			}
			if !strings.Contains(body, tt.body) {
				t.Errorf("body %s does not contain %s", body, tt.body)
			}
		})
	}
	if in.Kind != "" || in.APIVersion != "" {
		t.Errorf("the caller's object was modified: %+v", in.TypeMeta)
	}
	if q := srv.last(t).Query; q != "labelSelector=app%3Dweb" {
		t.Errorf("delete collection query = %q", q)
	}

	out, err := deps.Create(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if out == in || out.Kind != "Deployment" || out.Name != "web" {
		t.Errorf("Create returned %p %+v, want a new object with TypeMeta", out, out.TypeMeta)
	}
}

func TestBindAndScale(t *testing.T) {
	srv := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasSuffix(r.URL.Path, "/binding"):
			respond(201, `{"kind":"Status","apiVersion":"v1","status":"Success","code":201}`)(w, r)
		case r.Method == http.MethodGet:
			respond(200, `{"kind":"Scale","apiVersion":"autoscaling/v1","metadata":{"name":"web","namespace":"default","resourceVersion":"3"},"spec":{"replicas":2},"status":{"replicas":2,"selector":"app=web"}}`)(w, r)
		default:
			echo(w, r)
		}
	})
	rc := newTestClient(t, Config{Server: srv.URL})
	ctx := context.Background()

	err := rc.Bind(ctx, &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-1"},
		Target:     corev1.ObjectReference{Kind: "Node", Name: "node-1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	req := srv.last(t)
	if req.Method != "POST" || req.Path != "/api/v1/namespaces/default/pods/web-1/binding" {
		t.Errorf("bind request %s %s", req.Method, req.Path)
	}
	var b corev1.Binding
	if err := json.Unmarshal(req.Body, &b); err != nil || b.Kind != "Binding" || b.APIVersion != "v1" || b.Target.Name != "node-1" {
		t.Errorf("bind body %s (%v)", req.Body, err)
	}

	deps := For[*appsv1.Deployment](rc)
	scale, err := deps.GetScale(ctx, "default", "web")
	if err != nil {
		t.Fatal(err)
	}
	if scale.Spec.Replicas != 2 || scale.Status.Selector != "app=web" || srv.last(t).Path != "/apis/apps/v1/namespaces/default/deployments/web/scale" {
		t.Errorf("scale = %+v from %s", scale, srv.last(t).Path)
	}
	scale.Spec.Replicas = 5
	scale.Kind = ""
	updated, err := deps.UpdateScale(ctx, scale)
	if err != nil {
		t.Fatal(err)
	}
	req = srv.last(t)
	if req.Method != "PUT" || req.Path != "/apis/apps/v1/namespaces/default/deployments/web/scale" ||
		updated.Spec.Replicas != 5 || updated.Kind != "Scale" || !strings.Contains(string(req.Body), `"apiVersion":"autoscaling/v1"`) {
		t.Errorf("update scale: %s %s %s → %+v", req.Method, req.Path, req.Body, updated)
	}
}

func TestTimeoutBoundsRequestsButNotWatches(t *testing.T) {
	release := make(chan struct{})
	srv := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("watch") == "true" {
			w.WriteHeader(200)
			w.(http.Flusher).Flush()
			select {
			case <-release:
				_, _ = io.WriteString(w, `{"type":"ADDED","object":{"metadata":{"name":"late"}}}`+"\n")
			case <-r.Context().Done():
			}
			return
		}
		<-r.Context().Done() // never answers a plain request
	})
	defer close(release)
	cms := For[*corev1.ConfigMap](newTestClient(t, Config{Server: srv.URL, Timeout: 100 * time.Millisecond}))

	_, err := cms.Get(context.Background(), "default", "web")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Get against a silent server = %v, want a deadline", err)
	}

	w, err := cms.Watch(context.Background(), "default", metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	select {
	case ev, ok := <-w.Events():
		t.Fatalf("watch ended or sent %v (ok=%v) before anything was written: %v", ev, ok, w.Err())
	case <-time.After(300 * time.Millisecond): // three Timeouts: the watch must still be open
	}
	release <- struct{}{}
	ev := <-w.Events()
	if ev.Type != watch.Added || ev.Object.Name != "late" {
		t.Errorf("event = %+v", ev)
	}
}

func TestRateLimit(t *testing.T) {
	srv := newFakeServer(t, respond(200, configMapJSON))
	cms := For[*corev1.ConfigMap](newTestClient(t, Config{Server: srv.URL, QPS: 0.001, Burst: 1}))
	if _, err := cms.Get(context.Background(), "default", "web"); err != nil {
		t.Fatal(err)
	}
	// The bucket is empty and refills in 1000s: the next request cannot fit
	// in its context's deadline and fails without being sent.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := cms.Get(ctx, "default", "web")
	if err == nil || !strings.Contains(err.Error(), "rate limit") {
		t.Errorf("second Get = %v, want a rate limit error", err)
	}
	if n := srv.count(); n != 1 {
		t.Errorf("%d requests reached the server, want 1", n)
	}
}

// tooMany is kube-apiserver's answer to a request over its in-flight
// limit.
const tooMany = `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Too many requests, please try again later.","reason":"TooManyRequests","details":{"retryAfterSeconds":1},"code":429}`

// refuseFirst answers the first n requests with code (and kube's Status
// for a 429) and a Retry-After of retryAfter ("" for none), and the rest
// with configMapJSON.
func refuseFirst(n, code int, retryAfter string) func(http.ResponseWriter, *http.Request) {
	var mu sync.Mutex
	seen := 0
	return func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen++
		refuse := seen <= n
		mu.Unlock()
		if !refuse {
			respond(200, configMapJSON)(w, r)
			return
		}
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		if code != http.StatusTooManyRequests {
			http.Error(w, "try again later", code)
			return
		}
		respond(code, tooMany)(w, r)
	}
}

// TestRetryAfter: as client-go does, a 429 or a 5xx that carries a
// Retry-After is sent again after the wait it asks for, body and all, at
// most maxRetries times; anything else is answered at once.
func TestRetryAfter(t *testing.T) {
	ctx := context.Background()
	t.Run("429 then success", func(t *testing.T) {
		srv := newFakeServer(t, refuseFirst(3, http.StatusTooManyRequests, "0"))
		cms := For[*corev1.ConfigMap](newTestClient(t, Config{Server: srv.URL}))
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"}}
		if _, err := cms.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
		if n := srv.count(); n != 4 {
			t.Errorf("%d requests reached the server, want 4", n)
		}
		if body := protobufAsJSON(t, srv.last(t).Body, &corev1.ConfigMap{}); !strings.Contains(body, `"name":"web"`) {
			t.Errorf("the retried create sent %s", body)
		}
	})
	t.Run("a 503 with Retry-After is retried", func(t *testing.T) {
		srv := newFakeServer(t, refuseFirst(1, http.StatusServiceUnavailable, "0"))
		if _, err := For[*corev1.ConfigMap](newTestClient(t, Config{Server: srv.URL})).Get(ctx, "default", "web"); err != nil || srv.count() != 2 {
			t.Errorf("Get = %v after %d requests, want success after 2", err, srv.count())
		}
	})
	t.Run("bounded", func(t *testing.T) {
		srv := newFakeServer(t, refuseFirst(1000, http.StatusTooManyRequests, "0"))
		_, err := For[*corev1.ConfigMap](newTestClient(t, Config{Server: srv.URL})).Get(ctx, "default", "web")
		if !IsTooManyRequests(err) || err.Error() != "Too many requests, please try again later." {
			t.Errorf("Get = %v, want the server's TooManyRequests", err)
		}
		if n := srv.count(); n != 1+maxRetries {
			t.Errorf("%d requests reached the server, want %d", n, 1+maxRetries)
		}
	})
	t.Run("not without Retry-After", func(t *testing.T) {
		for _, code := range []int{http.StatusTooManyRequests, http.StatusInternalServerError} {
			srv := newFakeServer(t, refuseFirst(1, code, ""))
			_, err := For[*corev1.ConfigMap](newTestClient(t, Config{Server: srv.URL})).Get(ctx, "default", "web")
			if StatusCode(err) != code || srv.count() != 1 {
				t.Errorf("HTTP %d without Retry-After: Get = %v after %d requests, want the error after 1", code, err, srv.count())
			}
		}
	})
	t.Run("not past the deadline", func(t *testing.T) {
		srv := newFakeServer(t, refuseFirst(1, http.StatusTooManyRequests, "5"))
		cms := For[*corev1.ConfigMap](newTestClient(t, Config{Server: srv.URL, Timeout: time.Second}))
		start := time.Now()
		_, err := cms.Get(ctx, "default", "web")
		if !IsTooManyRequests(err) || srv.count() != 1 || time.Since(start) > 900*time.Millisecond {
			t.Errorf("Get = %v after %d requests and %v; want the 429 at once", err, srv.count(), time.Since(start))
		}
	})
	t.Run("a cancelled wait", func(t *testing.T) {
		srv := newFakeServer(t, refuseFirst(1, http.StatusTooManyRequests, "5"))
		cms := For[*corev1.ConfigMap](newTestClient(t, Config{Server: srv.URL}))
		ctx, cancel := context.WithCancel(ctx)
		time.AfterFunc(50*time.Millisecond, cancel)
		if _, err := cms.Get(ctx, "default", "web"); !errors.Is(err, context.Canceled) || srv.count() != 1 {
			t.Errorf("Get = %v after %d requests, want it cancelled while waiting", err, srv.count())
		}
	})
	t.Run("a watch is retried too", func(t *testing.T) {
		var mu sync.Mutex
		seen := 0
		srv := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			seen++
			first := seen == 1
			mu.Unlock()
			if first {
				w.Header().Set("Retry-After", "0")
				respond(http.StatusTooManyRequests, tooMany)(w, r)
				return
			}
			_, _ = io.WriteString(w, `{"type":"ADDED","object":{"metadata":{"name":"web"}}}`+"\n")
		})
		w, err := For[*corev1.ConfigMap](newTestClient(t, Config{Server: srv.URL})).Watch(ctx, "default", metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		if ev := <-w.Events(); ev.Type != watch.Added || ev.Object.Name != "web" {
			t.Errorf("event = %+v", ev)
		}
	})
}

// TestWithUserAgent: a client under another name shares everything else.
func TestWithUserAgent(t *testing.T) {
	srv := newFakeServer(t, respond(200, configMapJSON))
	rc := newTestClient(t, Config{Server: srv.URL, UserAgent: "base", BearerToken: "s3cret"})
	named := rc.WithUserAgent("minictl/system:kube-scheduler")
	if _, err := For[*corev1.ConfigMap](named).Get(context.Background(), "default", "web"); err != nil {
		t.Fatal(err)
	}
	if req := srv.last(t); req.Header.Get("User-Agent") != "minictl/system:kube-scheduler" || req.Header.Get("Authorization") != "Bearer s3cret" {
		t.Errorf("headers %v", req.Header)
	}
	if _, err := For[*corev1.ConfigMap](rc).Get(context.Background(), "default", "web"); err != nil {
		t.Fatal(err)
	}
	if ua := srv.last(t).Header.Get("User-Agent"); ua != "base" {
		t.Errorf("the original client now sends User-Agent %q", ua)
	}
}

func TestTLS(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(respond(200, configMapJSON)))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshake the test expects to fail
	srv.StartTLS()
	defer srv.Close()
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	ctx := context.Background()

	for _, tt := range []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"trusted CA", Config{Server: srv.URL, CAData: caPEM}, true},
		{"insecure", Config{Server: srv.URL, Insecure: true}, true},
		{"unknown CA", Config{Server: srv.URL}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := For[*corev1.ConfigMap](newTestClient(t, tt.cfg)).Get(ctx, "default", "web")
			if tt.ok && err != nil {
				t.Fatal(err)
			}
			var unknown x509.UnknownAuthorityError
			if !tt.ok && !errors.As(err, &unknown) {
				t.Fatalf("err = %v, want an unknown authority", err)
			}
		})
	}
}

// watchServer serves a watch whose events the test sends one at a time; a
// closed events channel ends the response. gone is closed when the handler
// returns, which after a client-side Stop proves the connection was dropped.
type watchServer struct {
	*fakeServer
	events chan string
	gone   chan struct{}
}

func newWatchServer(t *testing.T) *watchServer {
	ws := &watchServer{events: make(chan string), gone: make(chan struct{}, 1)}
	ws.fakeServer = newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		defer func() { ws.gone <- struct{}{} }()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Transfer-Encoding", "chunked")
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		for {
			select {
			case line, ok := <-ws.events:
				if !ok {
					return
				}
				_, _ = io.WriteString(w, line+"\n")
				w.(http.Flusher).Flush()
			case <-r.Context().Done():
				return
			}
		}
	})
	return ws
}

func watchLine(typ watch.EventType, name, rv string) string {
	return fmt.Sprintf(`{"type":%q,"object":{"kind":"Pod","apiVersion":"v1","metadata":{"name":%q,"namespace":"default","resourceVersion":%q}}}`, typ, name, rv)
}

func TestWatchOverHTTP(t *testing.T) {
	ws := newWatchServer(t)
	pods := For[*corev1.Pod](newTestClient(t, Config{Server: ws.URL}))
	timeout := int64(60)
	w, err := pods.Watch(context.Background(), "default", metav1.ListOptions{
		ResourceVersion: "5", AllowWatchBookmarks: true, TimeoutSeconds: &timeout, FieldSelector: "spec.nodeName=node-1",
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	req := ws.last(t)
	if req.Path != "/api/v1/namespaces/default/pods" ||
		req.Query != "allowWatchBookmarks=true&fieldSelector=spec.nodeName%3Dnode-1&resourceVersion=5&timeoutSeconds=60&watch=true" {
		t.Errorf("watch request %s?%s", req.Path, req.Query)
	}
	if got := req.Header.Get("Accept"); got != "application/vnd.kubernetes.protobuf, application/json" {
		t.Errorf("Accept %q, want protobuf preferred and JSON taken", got)
	}
	for i, typ := range []watch.EventType{watch.Added, watch.Modified, watch.Deleted} {
		rv := fmt.Sprint(6 + i)
		ws.events <- watchLine(typ, "web", rv)
		ev := <-w.Events()
		if ev.Type != typ || ev.Object.Name != "web" || ev.Object.ResourceVersion != rv {
			t.Errorf("event %d = %s %+v", i, ev.Type, ev.Object)
		}
	}
	close(ws.events) // the server ends the response
	if _, ok := <-w.Events(); ok {
		t.Error("event after the server ended")
	}
	if w.Err() != nil {
		t.Errorf("Err() = %v after a clean end", w.Err())
	}
}

func TestWatchStopAndCancelDropTheConnection(t *testing.T) {
	for _, how := range []string{"stop", "cancel"} {
		t.Run(how, func(t *testing.T) {
			ws := newWatchServer(t)
			pods := For[*corev1.Pod](newTestClient(t, Config{Server: ws.URL}))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			w, err := pods.Watch(ctx, "", metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			ws.events <- watchLine(watch.Added, "a", "1")
			if ev := <-w.Events(); ev.Object == nil || ev.Object.Name != "a" {
				t.Fatalf("first event = %+v", ev)
			}
			if how == "stop" {
				w.Stop()
			} else {
				cancel()
			}
			for range w.Events() {
			}
			if w.Err() != nil {
				t.Errorf("Err() = %v", w.Err())
			}
			waitClosed(t, "server handler", ws.gone)
		})
	}
}

func TestWatchRefusedWithStatus(t *testing.T) {
	srv := newFakeServer(t, respond(410,
		`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"too old resource version: 1 (50)","reason":"Expired","code":410}`))
	_, err := For[*corev1.Pod](newTestClient(t, Config{Server: srv.URL})).Watch(context.Background(), "", metav1.ListOptions{ResourceVersion: "1"})
	if !IsGone(err) {
		t.Errorf("Watch = %v, want IsGone", err)
	}
}

func TestWatchErrorEventOverHTTP(t *testing.T) {
	srv := newFakeServer(t, respond(200,
		`{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","message":"too old resource version: 1 (50)","reason":"Expired","code":410}}`+"\n"))
	w, err := For[*corev1.Pod](newTestClient(t, Config{Server: srv.URL})).Watch(context.Background(), "", metav1.ListOptions{ResourceVersion: "1"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	ev := <-w.Events()
	if ev.Type != watch.Error || !IsGone(ev.Err()) || ev.Object != nil {
		t.Errorf("event = %+v", ev)
	}
	if _, ok := <-w.Events(); ok || w.Err() != nil {
		t.Errorf("stream did not end cleanly: %v", w.Err())
	}
}

func TestForPanicsOnUnservedType(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("no panic")
		}
	}()
	For[*autoscalingv1.Scale](nil)
}

// protobufAsJSON decodes body, an object in Kubernetes' protobuf encoding,
// into obj and returns its JSON, TypeMeta from the envelope included.
func protobufAsJSON(t *testing.T, body []byte, obj api.Object) string {
	t.Helper()
	apiVersion, kind, msg, err := api.ProtobufObject(body)
	if err != nil {
		t.Fatalf("body %q: %v", body, err)
	}
	if err := api.UnmarshalProtobuf(msg, obj); err != nil {
		t.Fatalf("body %q: %v", body, err)
	}
	obj.GetObjectKind().SetGroupVersionKind(schema.FromAPIVersionAndKind(apiVersion, kind))
	j, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return string(j)
}
