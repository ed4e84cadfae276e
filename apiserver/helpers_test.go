package apiserver_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/internal/testenv"
)

// These helpers drive the server the way curl and kubectl do: plain HTTP
// requests with JSON (or YAML) bodies, answers decoded into k8s.io/api
// types and metav1.Status. Nothing here knows the server's internals.

const (
	jsonType      = "application/json"
	yamlType      = "application/yaml"
	mergePatch    = "application/merge-patch+json"
	jsonPatch     = "application/json-patch+json"
	strategicPtch = "application/strategic-merge-patch+json"

	// waitTimeout bounds every wait for something the server does
	// asynchronously (its watch cache catching up, a stream ending).
	waitTimeout = 10 * time.Second
)

// reply is one HTTP answer, read in full.
type reply struct {
	code   int
	header http.Header
	body   []byte
}

// do sends one request to env's plain listener, as the admin. body is
// sent as encodeBody sends it.
func do(t testing.TB, env *testenv.Env, method, path, contentType string, body any) *reply {
	t.Helper()
	rd := encodeBody(t, body)
	req, err := http.NewRequest(method, env.URL+path, rd)
	if err != nil {
		t.Fatalf("new request: %v", err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := env.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return &reply{code: resp.StatusCode, header: resp.Header, body: data}
}

// encodeBody is a request's body: nil for none, a []byte or string sent
// as is, an io.Reader sent chunked (with no Content-Length), or anything
// else, sent as JSON.
func encodeBody(t testing.TB, body any) io.Reader {
	t.Helper()
	switch b := body.(type) {
	case nil:
		return nil
	case []byte:
		return bytes.NewReader(b)
	case string:
		return strings.NewReader(b)
	case io.Reader:
		return struct{ io.Reader }{b} // hides the length http.NewRequest would find
	default:
		data, err := json.Marshal(b)
		if err != nil {
			t.Fatalf("encode body: %v", err)
		}
		return bytes.NewReader(data)
	}
}

// want fails the test unless the reply has the given code.
func (r *reply) want(t testing.TB, code int) *reply {
	t.Helper()
	if r.code != code {
		t.Fatalf("got HTTP %d, want %d; body: %s", r.code, code, truncate(r.body))
	}
	return r
}

// into decodes the body into v.
func (r *reply) into(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %T: %v; body: %s", v, err, truncate(r.body))
	}
}

// status decodes the body as a Status and checks that it is one.
func (r *reply) status(t testing.TB) metav1.Status {
	t.Helper()
	var st metav1.Status
	r.into(t, &st)
	if st.Kind != "Status" || st.APIVersion != "v1" {
		t.Fatalf("body is not a v1 Status: %s", truncate(r.body))
	}
	return st
}

// wantStatus checks an error answer: the HTTP code, and a Status body
// with the same code and the given reason.
func (r *reply) wantStatus(t testing.TB, code int, reason metav1.StatusReason) metav1.Status {
	t.Helper()
	r.want(t, code)
	st := r.status(t)
	if st.Status != metav1.StatusFailure || int(st.Code) != code || st.Reason != reason {
		t.Fatalf("got Status{status %q, code %d, reason %q}, want {Failure, %d, %q}; message: %s",
			st.Status, st.Code, st.Reason, code, reason, st.Message)
	}
	return st
}

func truncate(b []byte) string {
	const n = 2000
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}

// call sends body and decodes a successful answer (code) into a new T.
func call[T any](t testing.TB, env *testenv.Env, method, path, contentType string, body any, code int) *T {
	t.Helper()
	out := new(T)
	do(t, env, method, path, contentType, body).want(t, code).into(t, out)
	return out
}

func create[T any](t testing.TB, env *testenv.Env, path string, obj any) *T {
	t.Helper()
	return call[T](t, env, http.MethodPost, path, jsonType, obj, http.StatusCreated)
}

func get[T any](t testing.TB, env *testenv.Env, path string) *T {
	t.Helper()
	return call[T](t, env, http.MethodGet, path, "", nil, http.StatusOK)
}

func update[T any](t testing.TB, env *testenv.Env, path string, obj any) *T {
	t.Helper()
	return call[T](t, env, http.MethodPut, path, jsonType, obj, http.StatusOK)
}

func patch[T any](t testing.TB, env *testenv.Env, path, patchType string, body any) *T {
	t.Helper()
	return call[T](t, env, http.MethodPatch, path, patchType, body, http.StatusOK)
}

// rv parses a resourceVersion; every resourceVersion minictl hands out is an
// etcd revision, so tests may compare them as numbers.
func rv(t testing.TB, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		t.Fatalf("resourceVersion %q is not a positive integer", s)
	}
	return n
}

// revision is etcd's current revision: it moves on every write and only then.
func revision(t testing.TB, env *testenv.Env) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	r, err := env.Store.Revision(ctx)
	if err != nil {
		t.Fatalf("etcd revision: %v", err)
	}
	return r
}

// eventually polls cond until it reports true or the deadline passes.
// It is for state that the server reaches asynchronously; cond says what
// it saw, for the failure message.
func eventually(t testing.TB, what string, cond func() (bool, string)) {
	t.Helper()
	eventuallyWithin(t, waitTimeout, what, cond)
}

// eventuallyWithin is eventually with a deadline of its own, for state the
// server reaches on a period of its own.
func eventuallyWithin(t testing.TB, wait time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		ok, saw := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true after %v; last saw: %s", what, wait, saw)
		}
		time.Sleep(10 * time.Millisecond) // polling interval, not synchronisation
	}
}

// healthy fails the test unless /healthz answers ok.
func healthy(t testing.TB, env *testenv.Env) {
	t.Helper()
	r := do(t, env, http.MethodGet, "/healthz", "", nil)
	if r.code != http.StatusOK || string(r.body) != "ok" {
		t.Fatalf("/healthz: %d %q", r.code, r.body)
	}
}

// --- objects ---

func configMap(name string, labels map[string]string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Data:       data,
	}
}

func pod(name, nodeName string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: corev1.PodSpec{
			NodeName:   nodeName,
			Containers: []corev1.Container{{Name: "app", Image: "nginx:1.27"}},
		},
	}
}

func namespace(name string) *corev1.Namespace {
	return &corev1.Namespace{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
	}
}

func createNamespace(t testing.TB, env *testenv.Env, name string) {
	t.Helper()
	create[corev1.Namespace](t, env, "/api/v1/namespaces", namespace(name))
}

func cmPath(ns, name string) string {
	p := "/api/v1/namespaces/" + ns + "/configmaps"
	if name != "" {
		p += "/" + name
	}
	return p
}

func podPath(ns, name string) string {
	p := "/api/v1/namespaces/" + ns + "/pods"
	if name != "" {
		p += "/" + name
	}
	return p
}

// names lists the names of a list's items, in order.
func names[T any](items []T, name func(*T) string) []string {
	out := make([]string, 0, len(items))
	for i := range items {
		out = append(out, name(&items[i]))
	}
	return out
}

func cmNames(l *corev1.ConfigMapList) []string {
	return names(l.Items, func(c *corev1.ConfigMap) string { return c.Name })
}

func podNames(l *corev1.PodList) []string {
	return names(l.Items, func(p *corev1.Pod) string { return p.Namespace + "/" + p.Name })
}

// --- watch streams ---

// event is one watch event as it came over the wire.
type event struct {
	Type   string          `json:"type"`
	Object json.RawMessage `json:"object"`

	meta metav1.PartialObjectMetadata // the object's metadata (not for ERROR)
}

func (e event) String() string {
	return fmt.Sprintf("%s %s rv=%s", e.Type, e.meta.Name, e.meta.ResourceVersion)
}

// status decodes an ERROR event's Status.
func (e event) status(t testing.TB) metav1.Status {
	t.Helper()
	var st metav1.Status
	if err := json.Unmarshal(e.Object, &st); err != nil {
		t.Fatalf("decode ERROR object: %v: %s", err, e.Object)
	}
	return st
}

// stream is one open watch: a goroutine decodes the chunked body, one
// JSON document per line, into events.
type stream struct {
	resp   *http.Response
	events chan event
	ctx    context.Context // ends when the test disconnects
	cancel context.CancelFunc
	err    error // why the stream ended; read after events is closed
}

// watch opens a watch (path must have ?watch=true or &watch=true) and
// fails the test unless the server answers 200 with a JSON stream.
func watch(t testing.TB, env *testenv.Env, path string) *stream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, env.URL+path, nil)
	if err != nil {
		cancel()
		t.Fatalf("new request: %v", err)
	}
	// No client timeout: a watch lasts as long as the test wants.
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("watch %s: %v", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		t.Fatalf("watch %s: HTTP %d: %s", path, resp.StatusCode, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != jsonType {
		t.Errorf("watch %s: Content-Type %q, want %q", path, ct, jsonType)
	}
	s := &stream{resp: resp, events: make(chan event, 1024), ctx: ctx, cancel: cancel}
	go s.read()
	t.Cleanup(s.close)
	return s
}

func (s *stream) read() {
	defer close(s.events)
	defer s.resp.Body.Close()
	sc := bufio.NewScanner(s.resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 8<<20)
	for sc.Scan() {
		var ev event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			s.err = fmt.Errorf("decode event %q: %w", truncate(sc.Bytes()), err)
			return
		}
		if ev.Type != "ERROR" {
			if err := json.Unmarshal(ev.Object, &ev.meta); err != nil {
				s.err = fmt.Errorf("decode event object: %w", err)
				return
			}
		}
		select {
		case s.events <- ev:
		case <-s.ctx.Done():
			return // the test has gone; nobody reads the rest
		}
	}
	s.err = sc.Err()
}

// close disconnects, as a client that goes away does.
func (s *stream) close() { s.cancel() }

// next returns the next event, failing the test if none comes in time or
// the stream ends.
func (s *stream) next(t testing.TB) event {
	t.Helper()
	select {
	case ev, ok := <-s.events:
		if !ok {
			t.Fatalf("watch stream ended (err %v) while an event was expected", s.err)
		}
		return ev
	case <-time.After(waitTimeout):
		t.Fatalf("no watch event within %v", waitTimeout)
	}
	return event{}
}

// nextNonBookmark skips bookmarks.
func (s *stream) nextNonBookmark(t testing.TB) event {
	t.Helper()
	for {
		if ev := s.next(t); ev.Type != "BOOKMARK" {
			return ev
		}
	}
}

// expect reads len(want) events (bookmarks skipped), each "TYPE name",
// and checks that their resourceVersions strictly increase.
func (s *stream) expect(t testing.TB, want ...string) []event {
	t.Helper()
	var got []event
	var last int64
	for i, w := range want {
		ev := s.nextNonBookmark(t)
		got = append(got, ev)
		if ev.Type+" "+ev.meta.Name != w {
			t.Fatalf("event %d: got %s, want %s (%s)", i, ev, w, ev.Object)
		}
		if r := rv(t, ev.meta.ResourceVersion); r <= last {
			t.Fatalf("event %d (%s): resourceVersion %d is not after the previous %d", i, ev, r, last)
		} else {
			last = r
		}
	}
	return got
}

// ended waits until the server ends the stream.
func (s *stream) ended(t testing.TB, within time.Duration) {
	t.Helper()
	timeout := time.After(within)
	for {
		select {
		case ev, ok := <-s.events:
			if !ok {
				if s.err != nil {
					t.Fatalf("watch stream ended with an error: %v", s.err)
				}
				return
			}
			if ev.Type != "BOOKMARK" {
				t.Fatalf("unexpected event %s while waiting for the stream to end", ev)
			}
		case <-timeout:
			t.Fatalf("watch stream still open after %v", within)
		}
	}
}

// --- metrics ---

// metric reads one series from /metrics, e.g. metric(t, env,
// `minictl_etcd_watches{resource="pods"}`); a missing series is 0.
func metric(t testing.TB, env *testenv.Env, series string) float64 {
	t.Helper()
	body := do(t, env, http.MethodGet, "/metrics", "", nil).want(t, http.StatusOK).body
	for line := range strings.SplitSeq(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("metric %s: value %q: %v", series, v, err)
			}
			return f
		}
	}
	return 0
}

// query builds a query string from key, value pairs.
func query(kv ...string) string {
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Add(kv[i], kv[i+1])
	}
	return v.Encode()
}
