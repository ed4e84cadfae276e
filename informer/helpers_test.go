package informer

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/internal/testenv"
)

// These helpers run informers against a real API server on a real etcd
// (internal/testenv). Nothing is mocked; failures are injected by stopping
// the server, compacting etcd, or wrapping the ListerWatcher.

// itEnv is one server, a client of it, and the namespace tests write to.
type itEnv struct {
	env *testenv.Env
	rc  *client.RESTClient
	cms *client.Client[*corev1.ConfigMap]
	ns  string
}

func startIT(t *testing.T, opts testenv.Options) *itEnv {
	t.Helper()
	env := testenv.StartWith(t, opts)
	rc, err := client.New(&client.Config{Server: env.URL, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return &itEnv{env: env, rc: rc, cms: client.For[*corev1.ConfigMap](rc), ns: "default"}
}

// testLogger logs to t.Log, which shows only for failed tests and -v.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// testCtx is cancelled when the test ends, and bounds it.
func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// fastReflector shortens everything timed, so that tests see re-watches,
// small pages and quick retries.
func fastReflector() ReflectorOptions {
	return ReflectorOptions{
		PageSize:        3,
		MinWatchTimeout: 2 * time.Second,
		Backoff:         Backoff{Initial: 20 * time.Millisecond, Max: 300 * time.Millisecond, ResetAfter: 5 * time.Second, Jitter: 0.5},
	}
}

// runInformer runs inf until the test ends, then checks that Run returns.
func runInformer(t *testing.T, ctx context.Context, inf *SharedInformer) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		inf.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Errorf("informer %s: Run did not return after cancel", inf.Name())
		}
	})
}

// waitUntil polls cond until it holds or timeout passes; describe says
// what was seen, for the failure message.
func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool, describe func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			msg := ""
			if describe != nil {
				msg = ": " + describe()
			}
			t.Fatalf("timed out after %v waiting for %s%s", timeout, what, msg)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// serverState lists ns from etcd: name → resourceVersion.
func (e *itEnv) serverState(t *testing.T, ctx context.Context) map[string]string {
	t.Helper()
	list, err := e.cms.List(ctx, e.ns, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	out := map[string]string{}
	for _, cm := range list.Items {
		out[cm.Name] = cm.ResourceVersion
	}
	return out
}

// cacheState is what inf's cache holds in ns: name → resourceVersion.
func cacheState(inf *SharedInformer, ns string) map[string]string {
	out := map[string]string{}
	for _, obj := range inf.GetIndexer().List() {
		cm := obj.(*corev1.ConfigMap)
		if cm.Namespace == ns {
			out[cm.Name] = cm.ResourceVersion
		}
	}
	return out
}

// waitConverged waits until the cache, and the view rec built from
// handler calls, equal a fresh list from the server.
func (e *itEnv) waitConverged(t *testing.T, ctx context.Context, inf *SharedInformer, rec *recorder) {
	t.Helper()
	var want, got, handled map[string]string
	waitUntil(t, 60*time.Second, "cache == server", func() bool {
		want = e.serverState(t, ctx)
		got = cacheState(inf, e.ns)
		if rec != nil {
			handled = rec.view(e.ns)
		} else {
			handled = want
		}
		return maps.Equal(want, got) && maps.Equal(want, handled)
	}, func() string {
		return fmt.Sprintf("\nserver  %v\ncache   %v\nhandler %v", want, got, handled)
	})
}

func (e *itEnv) create(t *testing.T, ctx context.Context, name string) *corev1.ConfigMap {
	t.Helper()
	cm, err := e.tryCreate(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	return cm
}

func (e *itEnv) update(t *testing.T, ctx context.Context, name, value string) {
	t.Helper()
	if err := e.tryUpdate(ctx, name, value); err != nil {
		t.Fatal(err)
	}
}

func (e *itEnv) remove(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	if err := e.tryRemove(ctx, name); err != nil {
		t.Fatal(err)
	}
}

// tryCreate, tryUpdate and tryRemove are for goroutines other than the
// test's, which must not call t.Fatal.
func (e *itEnv) tryCreate(ctx context.Context, name string) (*corev1.ConfigMap, error) {
	cm, err := e.cms.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name},
		Data:       map[string]string{"v": "0"},
	})
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", name, err)
	}
	return cm, nil
}

func (e *itEnv) tryUpdate(ctx context.Context, name, value string) error {
	patch := fmt.Appendf(nil, `{"data":{"v":%q}}`, value)
	if _, err := e.cms.Patch(ctx, e.ns, name, types.MergePatchType, patch); err != nil {
		return fmt.Errorf("update %s: %w", name, err)
	}
	return nil
}

func (e *itEnv) tryRemove(ctx context.Context, name string) error {
	if err := e.cms.Delete(ctx, e.ns, name, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("delete %s: %w", name, err)
	}
	return nil
}

// churn makes a round of changes named after round: creates, updates of
// what exists, and a delete.
func (e *itEnv) churn(t *testing.T, ctx context.Context, round string) {
	t.Helper()
	for i := range 4 {
		e.create(t, ctx, fmt.Sprintf("cm-%s-%d", round, i))
	}
	names := slices.Sorted(maps.Keys(e.serverState(t, ctx)))
	for i, name := range names {
		if i%2 == 0 {
			e.update(t, ctx, name, round)
		}
	}
	e.remove(t, ctx, names[len(names)-1])
}

// metric reads one sample of the server's /metrics, 0 if absent.
func metric(t *testing.T, env *testenv.Env, name, labels string) float64 {
	t.Helper()
	resp, err := env.Client().Get(env.URL + "/metrics")
	if err != nil {
		t.Fatalf("metrics: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("metrics: %s", resp.Status)
	}
	prefix := name + "{" + labels + "} "
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), prefix); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err != nil {
				t.Fatalf("metrics: %q: %v", sc.Text(), err)
			}
			return v
		}
	}
	return 0
}

// recorder is a handler that checks that each key's events come in
// resourceVersion order and builds its own view of the objects from them.
type recorder struct {
	mu         sync.Mutex
	state      map[string]string // key → resourceVersion, as the handler calls say
	lastRV     map[string]int64
	violations []string
	adds       int
	initial    int
	updates    int
	resyncs    int
	deletes    int
	tombstones []DeletedFinalStateUnknown
}

func newRecorder() *recorder {
	return &recorder{state: map[string]string{}, lastRV: map[string]int64{}}
}

func rvNumber(obj any) int64 {
	if d, ok := obj.(DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	rv, _ := strconv.ParseInt(obj.(*corev1.ConfigMap).ResourceVersion, 10, 64)
	return rv
}

// seeLocked checks rv against the key's last one: strictly newer for a
// change, not older for a resync or a tombstone.
func (r *recorder) seeLocked(what, key string, rv int64, strict bool) {
	last, ok := r.lastRV[key]
	if ok && (rv < last || (strict && rv == last)) {
		r.violations = append(r.violations, fmt.Sprintf("%s %s: resourceVersion %d after %d", what, key, rv, last))
	}
	r.lastRV[key] = max(rv, last)
}

func (r *recorder) OnAdd(obj any, isInInitialList bool) {
	key, _ := MetaNamespaceKeyFunc(obj)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.adds++
	if isInInitialList {
		r.initial++
	}
	r.seeLocked("add", key, rvNumber(obj), true)
	r.state[key] = obj.(*corev1.ConfigMap).ResourceVersion
}

func (r *recorder) OnUpdate(oldObj, newObj any) {
	key, _ := MetaNamespaceKeyFunc(newObj)
	r.mu.Lock()
	defer r.mu.Unlock()
	resync := rvNumber(oldObj) == rvNumber(newObj)
	if resync {
		r.resyncs++
	} else {
		r.updates++
	}
	r.seeLocked("update", key, rvNumber(newObj), !resync)
	r.state[key] = newObj.(*corev1.ConfigMap).ResourceVersion
}

func (r *recorder) OnDelete(obj any) {
	key, _ := MetaNamespaceKeyFunc(obj)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.deletes++
	tomb, isTomb := obj.(DeletedFinalStateUnknown)
	if isTomb {
		r.tombstones = append(r.tombstones, tomb)
	}
	r.seeLocked("delete", key, rvNumber(obj), !isTomb)
	delete(r.state, key)
}

// view is the handler-built state of ns: name → resourceVersion.
func (r *recorder) view(ns string) map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]string{}
	for key, rv := range r.state {
		if n, name, _ := SplitMetaNamespaceKey(key); n == ns {
			out[name] = rv
		}
	}
	return out
}

func (r *recorder) check(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, v := range r.violations {
		t.Errorf("out of order: %s", v)
	}
}

// traceLog records trace calls.
type traceLog struct {
	mu      sync.Mutex
	entries []traceEntry
}

type traceEntry struct {
	stage TraceStage
	attrs map[string]string
}

func (l *traceLog) fn() TraceFunc {
	return func(stage TraceStage, attrs ...slog.Attr) {
		e := traceEntry{stage: stage, attrs: map[string]string{}}
		for _, a := range attrs {
			e.attrs[a.Key] = a.Value.String()
		}
		l.mu.Lock()
		l.entries = append(l.entries, e)
		l.mu.Unlock()
	}
}

// count returns how many entries have stage and type typ.
func (l *traceLog) count(stage TraceStage, typ string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, e := range l.entries {
		if e.stage == stage && e.attrs[TraceAttrType] == typ {
			n++
		}
	}
	return n
}
