package informer

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/minictl/minictl/apiserver"
	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/internal/testenv"
)

// rounds is how many times each failure scenario is repeated on one
// informer: recovering once is not enough, it must recover every time.
const rounds = 3

// newTestInformer returns a ConfigMap informer on e, with a recorder
// handler and a trace log, running until the test ends.
func (e *itEnv) newTestInformer(t *testing.T, ctx context.Context, lw ListerWatcher) (*SharedInformer, *recorder, *traceLog) {
	t.Helper()
	if lw == nil {
		lw = NewListWatch(e.cms, e.ns, nil)
	}
	tl := &traceLog{}
	inf := NewSharedInformer(lw, SharedInformerOptions{
		Name: "configmaps", Trace: tl.fn(), Logger: testLogger(t), Reflector: fastReflector(),
	})
	rec := newRecorder()
	reg, err := inf.AddEventHandler(rec)
	if err != nil {
		t.Fatal(err)
	}
	runInformer(t, ctx, inf)
	if !WaitForCacheSync(ctx, inf.HasSynced, reg.HasSynced) {
		t.Fatal("informer did not sync")
	}
	return inf, rec, tl
}

func TestInformerSurvivesServerRestart(t *testing.T) {
	e := startIT(t, testenv.Options{})
	ctx := testCtx(t)
	e.churn(t, ctx, "init")
	inf, rec, _ := e.newTestInformer(t, ctx, nil)
	e.waitConverged(t, ctx, inf, rec)

	for round := range rounds {
		e.churn(t, ctx, fmt.Sprintf("before%d", round))
		e.env.RestartServer() // mid-stream: the informer may not have seen every change
		e.churn(t, ctx, fmt.Sprintf("after%d", round))
		e.waitConverged(t, ctx, inf, rec)
	}
	rec.check(t)
}

func TestInformerSurvivesWatchCut(t *testing.T) {
	// A server that closes any watcher with more than one event pending.
	e := startIT(t, testenv.Options{Server: apiserver.Config{WatcherBuffer: 1}})
	ctx := testCtx(t)
	e.churn(t, ctx, "init")
	inf, rec, tl := e.newTestInformer(t, ctx, nil)
	listsAtStart := tl.count(StageReflectorReceived, TraceTypeList)

	const terminated = "apiserver_terminated_watchers_total"
	for round := range rounds {
		before := metric(t, e.env, terminated, `resource="configmaps"`)
		// Bursts of concurrent writes until the server has cut our watch.
		for burst := 0; metric(t, e.env, terminated, `resource="configmaps"`) == before; burst++ {
			if burst == 50 {
				t.Fatal("the server never closed the watch")
			}
			var wg sync.WaitGroup
			for i := range 10 {
				wg.Go(func() {
					if _, err := e.tryCreate(ctx, fmt.Sprintf("burst-%d-%d-%d", round, burst, i)); err != nil {
						t.Error(err)
					}
				})
			}
			wg.Wait()
		}
		e.waitConverged(t, ctx, inf, rec)
	}
	// The events were still in the server's window: resuming sufficed.
	if n := tl.count(StageReflectorReceived, TraceTypeList); n != listsAtStart {
		t.Errorf("relisted after a watch cut: %d LIST traces, want %d", n, listsAtStart)
	}
	rec.check(t)
}

// gateLW wraps a ListerWatcher and can cut and refuse watches, the way a
// network partition would, while lists still work.
type gateLW struct {
	ListerWatcher
	mu      sync.Mutex
	closed  bool
	cancels map[*context.CancelFunc]struct{}
	gone    atomic.Int32 // ERROR events with code 410 seen
}

func newGateLW(lw ListerWatcher) *gateLW {
	return &gateLW{ListerWatcher: lw, cancels: map[*context.CancelFunc]struct{}{}}
}

func (g *gateLW) Watch(ctx context.Context, opts metav1.ListOptions) (WatchStream, error) {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil, errors.New("gate: connection refused")
	}
	ctx, cancel := context.WithCancel(ctx)
	g.cancels[&cancel] = struct{}{}
	g.mu.Unlock()
	w, err := g.ListerWatcher.Watch(ctx, opts)
	if err != nil {
		cancel()
		return nil, err
	}
	return &gatedStream{WatchStream: w, gate: g, cancel: &cancel}, nil
}

// cut ends every open watch and refuses new ones until open.
func (g *gateLW) cut() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = true
	for c := range g.cancels {
		(*c)()
	}
}

func (g *gateLW) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = false
}

type gatedStream struct {
	WatchStream
	gate   *gateLW
	cancel *context.CancelFunc
}

func (s *gatedStream) Next() (WatchEvent, bool) {
	ev, ok := s.WatchStream.Next()
	if ok && ev.Type == watch.Error && ev.Status != nil && ev.Status.Code == http.StatusGone {
		s.gate.gone.Add(1)
	}
	return ev, ok
}

func (s *gatedStream) Stop() {
	s.WatchStream.Stop()
	s.gate.mu.Lock()
	delete(s.gate.cancels, s.cancel)
	s.gate.mu.Unlock()
	(*s.cancel)()
}

func TestInformerRelistsAfterCompaction(t *testing.T) {
	e := startIT(t, testenv.Options{})
	ctx := testCtx(t)
	e.churn(t, ctx, "init")
	gate := newGateLW(NewListWatch(e.cms, e.ns, nil))
	inf, rec, tl := e.newTestInformer(t, ctx, gate)
	e.waitConverged(t, ctx, inf, rec)

	for round := range rounds {
		lists := tl.count(StageReflectorReceived, TraceTypeList)
		gone := gate.gone.Load()

		gate.cut() // the informer misses what follows
		e.churn(t, ctx, fmt.Sprintf("missed%d", round))
		rev, err := e.env.Store.Revision(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.env.Store.Compact(ctx, rev); err != nil {
			t.Fatal(err)
		}
		gate.open()

		e.waitConverged(t, ctx, inf, rec)
		if gate.gone.Load() == gone {
			t.Errorf("round %d: the watch never got 410 Gone", round)
		}
		if tl.count(StageReflectorReceived, TraceTypeList) == lists {
			t.Errorf("round %d: converged without a relist", round)
		}
	}
	rec.check(t)
}

func TestInformerDeletedWhileDisconnectedGetsTombstones(t *testing.T) {
	e := startIT(t, testenv.Options{})
	ctx := testCtx(t)
	inf, rec, _ := e.newTestInformer(t, ctx, nil)

	for round := range rounds {
		e.churn(t, ctx, fmt.Sprintf("round%d", round))
		e.waitConverged(t, ctx, inf, rec)
		victims := map[string]string{} // name → the resourceVersion the cache has
		for name, rv := range cacheState(inf, e.ns) {
			if len(victims) < 2 {
				victims[name] = rv
			}
		}
		rec.mu.Lock()
		tombsBefore := len(rec.tombstones)
		rec.mu.Unlock()

		// Behind the server's back: delete from etcd and compact, so
		// that no watch can replay the deletions.
		e.env.StopServer()
		for name := range victims {
			if _, err := e.env.Store.Delete(ctx, "/registry/core/configmaps/"+e.ns+"/"+name, 0); err != nil {
				t.Fatal(err)
			}
		}
		rev, err := e.env.Store.Revision(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.env.Store.Compact(ctx, rev); err != nil {
			t.Fatal(err)
		}
		e.env.RestartServer()

		e.waitConverged(t, ctx, inf, rec)
		rec.mu.Lock()
		tombs := append([]DeletedFinalStateUnknown(nil), rec.tombstones[tombsBefore:]...)
		rec.mu.Unlock()
		if len(tombs) != len(victims) {
			t.Fatalf("round %d: %d tombstones, want %d: %+v", round, len(tombs), len(victims), tombs)
		}
		for _, tomb := range tombs {
			cm, ok := tomb.Obj.(*corev1.ConfigMap)
			if !ok {
				t.Fatalf("tombstone %s carries %T", tomb.Key, tomb.Obj)
			}
			want, ok := victims[cm.Name]
			if !ok || tomb.Key != e.ns+"/"+cm.Name || cm.ResourceVersion != want {
				t.Errorf("tombstone %s: object %s at %s; want one of %v", tomb.Key, cm.Name, cm.ResourceVersion, victims)
			}
		}
	}
	rec.check(t)
}

func TestHandlersSeeEachKeyInResourceVersionOrder(t *testing.T) {
	e := startIT(t, testenv.Options{})
	ctx := testCtx(t)
	inf, rec, _ := e.newTestInformer(t, ctx, nil)
	// A second handler, to check that handlers do not share an order.
	rec2 := newRecorder()
	if _, err := inf.AddEventHandler(rec2); err != nil {
		t.Fatal(err)
	}

	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 5 {
				name := fmt.Sprintf("w%d-%d", w, i)
				_, err := e.tryCreate(ctx, name)
				for v := range 3 {
					err = errors.Join(err, e.tryUpdate(ctx, name, strconv.Itoa(v+1)))
				}
				if i%2 == 1 {
					err = errors.Join(err, e.tryRemove(ctx, name))
					_, errCreate := e.tryCreate(ctx, name)
					err = errors.Join(err, errCreate)
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	e.waitConverged(t, ctx, inf, rec)
	e.waitConverged(t, ctx, inf, rec2)
	rec.check(t)
	rec2.check(t)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	// 20 creates and 8 re-creates, 3 updates each of 20 names, 8 deletes:
	// every change, none merged, none doubled.
	if rec.adds != 28 || rec.updates != 60 || rec.deletes != 8 {
		t.Errorf("adds %d updates %d deletes %d; want 28, 60, 8", rec.adds, rec.updates, rec.deletes)
	}
}

func TestSlowHandlerDoesNotDelayOthers(t *testing.T) {
	e := startIT(t, testenv.Options{})
	ctx := testCtx(t)
	inf := NewSharedInformer(NewListWatch(e.cms, e.ns, nil), SharedInformerOptions{Name: "configmaps"})

	release := make(chan struct{})
	var slowCalls atomic.Int32
	if _, err := inf.AddEventHandler(ResourceEventHandlerFuncs{AddFunc: func(any, bool) {
		slowCalls.Add(1)
		<-release
	}}); err != nil {
		t.Fatal(err)
	}
	var fastCalls atomic.Int32
	if _, err := inf.AddEventHandler(ResourceEventHandlerFuncs{AddFunc: func(any, bool) {
		fastCalls.Add(1)
	}}); err != nil {
		t.Fatal(err)
	}
	runInformer(t, ctx, inf)
	defer close(release) // before runInformer's cleanup waits for the handlers

	const n = 20
	for i := range n {
		e.create(t, ctx, fmt.Sprintf("cm-%d", i))
	}
	waitUntil(t, 30*time.Second, "the fast handler to see every add",
		func() bool { return fastCalls.Load() == n && len(inf.GetIndexer().List()) == n },
		func() string {
			return fmt.Sprintf("fast %d, cached %d", fastCalls.Load(), len(inf.GetIndexer().List()))
		})
	if got := slowCalls.Load(); got != 1 {
		t.Errorf("slow handler: %d calls, want 1 (still blocked in the first)", got)
	}
}

func TestBookmarksMoveLastSyncResourceVersion(t *testing.T) {
	e := startIT(t, testenv.Options{Server: apiserver.Config{BookmarkInterval: 200 * time.Millisecond}})
	ctx := testCtx(t)
	for _, ns := range []string{"watched", "elsewhere"} {
		if _, err := client.For[*corev1.Namespace](e.rc).Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	e.ns = "watched"
	inf, _, tl := e.newTestInformer(t, ctx, nil)
	lists := tl.count(StageReflectorReceived, TraceTypeList)

	// A change the informer's watch does not carry...
	other := *e
	other.ns = "elsewhere"
	cm := other.create(t, ctx, "unseen")
	want, _ := strconv.ParseInt(cm.ResourceVersion, 10, 64)
	// ...still moves its resourceVersion, by bookmark.
	waitUntil(t, 10*time.Second, "a bookmark past "+cm.ResourceVersion, func() bool {
		got, _ := strconv.ParseInt(inf.LastSyncResourceVersion(), 10, 64)
		return got >= want
	}, func() string { return "at " + inf.LastSyncResourceVersion() })
	if tl.count(StageReflectorReceived, string(watch.Bookmark)) == 0 {
		t.Error("no BOOKMARK traced")
	}
	if n := tl.count(StageReflectorReceived, TraceTypeList); n != lists {
		t.Errorf("relisted (%d LIST traces, want %d): the resourceVersion did not move by bookmark", n, lists)
	}
	if got := len(inf.GetIndexer().List()); got != 0 {
		t.Errorf("cache holds %d objects, want 0", got)
	}
}

func TestLateHandlerGetsCurrentContents(t *testing.T) {
	e := startIT(t, testenv.Options{})
	ctx := testCtx(t)
	for i := range 5 {
		e.create(t, ctx, fmt.Sprintf("cm-%d", i))
	}
	inf, _, _ := e.newTestInformer(t, ctx, nil)

	late := newRecorder()
	reg, err := inf.AddEventHandler(late)
	if err != nil {
		t.Fatal(err)
	}
	if !WaitForCacheSync(ctx, reg.HasSynced) {
		t.Fatal("late handler did not sync")
	}
	late.mu.Lock()
	adds, initial := late.adds, late.initial
	late.mu.Unlock()
	if adds != 5 || initial != 5 {
		t.Errorf("late handler: %d adds, %d in the initial list; want 5, 5", adds, initial)
	}
	e.create(t, ctx, "cm-new")
	e.waitConverged(t, ctx, inf, late)
	late.mu.Lock()
	defer late.mu.Unlock()
	if late.adds != 6 || late.initial != 5 {
		t.Errorf("after a create: %d adds, %d initial; want 6, 5", late.adds, late.initial)
	}
}

func TestResyncCallsOnUpdateWithTheSameObject(t *testing.T) {
	e := startIT(t, testenv.Options{})
	ctx := testCtx(t)
	e.create(t, ctx, "a")
	e.create(t, ctx, "b")
	inf := NewSharedInformer(NewListWatch(e.cms, e.ns, nil), SharedInformerOptions{Name: "configmaps"})
	resyncing, quiet := newRecorder(), newRecorder()
	if _, err := inf.AddEventHandlerWithResync(resyncing, 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if _, err := inf.AddEventHandler(quiet); err != nil {
		t.Fatal(err)
	}
	runInformer(t, ctx, inf)
	waitUntil(t, 10*time.Second, "two resyncs of both objects", func() bool {
		resyncing.mu.Lock()
		defer resyncing.mu.Unlock()
		return resyncing.resyncs >= 4
	}, nil)
	resyncing.check(t)
	quiet.mu.Lock()
	defer quiet.mu.Unlock()
	if quiet.resyncs != 0 {
		t.Errorf("a handler without a resync period got %d resyncs", quiet.resyncs)
	}
}

func TestTransformStripsManagedFieldsFromCacheAndHandlers(t *testing.T) {
	e := startIT(t, testenv.Options{})
	ctx := testCtx(t)
	e.churn(t, ctx, "init")

	var transforms atomic.Int64
	inf := NewSharedInformer(NewListWatch(e.cms, e.ns, nil), SharedInformerOptions{
		Name: "configmaps", Logger: testLogger(t), Reflector: fastReflector(),
	})
	if err := inf.SetTransform(func(obj any) (any, error) {
		transforms.Add(1)
		return StripManagedFields(obj)
	}); err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	var mu sync.Mutex
	var handed []string // what handlers were given with managedFields
	seen := func(obj any) {
		if d, ok := obj.(DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if cm := obj.(*corev1.ConfigMap); cm.ManagedFields != nil {
			mu.Lock()
			handed = append(handed, cm.Name)
			mu.Unlock()
		}
	}
	if _, err := inf.AddEventHandler(ResourceEventHandlerFuncs{
		AddFunc:    func(obj any, initial bool) { seen(obj); rec.OnAdd(obj, initial) },
		UpdateFunc: func(oldObj, newObj any) { seen(oldObj); seen(newObj); rec.OnUpdate(oldObj, newObj) },
		DeleteFunc: func(obj any) { seen(obj); rec.OnDelete(obj) },
	}); err != nil {
		t.Fatal(err)
	}
	runInformer(t, ctx, inf)
	if !WaitForCacheSync(ctx, inf.HasSynced) {
		t.Fatal("informer did not sync")
	}
	if err := inf.SetTransform(StripManagedFields); err == nil {
		t.Error("SetTransform after Run succeeded; want an error")
	}

	// The cache still equals a fresh list, through changes and a restart.
	e.waitConverged(t, ctx, inf, rec)
	e.churn(t, ctx, "next")
	e.env.RestartServer()
	e.churn(t, ctx, "after")
	e.waitConverged(t, ctx, inf, rec)
	rec.check(t)

	if transforms.Load() == 0 {
		t.Fatal("the transform was never called")
	}
	mu.Lock()
	if len(handed) > 0 {
		t.Errorf("handlers were given objects with managedFields: %v", handed)
	}
	mu.Unlock()
	var name string
	for _, obj := range inf.GetIndexer().List() {
		cm := obj.(*corev1.ConfigMap)
		if cm.ManagedFields != nil {
			t.Errorf("cached %s has managedFields %v", cm.Name, cm.ManagedFields)
		}
		name = cm.Name
	}

	// The server still has them, and an update written from the stripped
	// copy keeps them: a client that sends no managedFields leaves the
	// server's alone.
	live, err := e.cms.Get(ctx, e.ns, name)
	if err != nil {
		t.Fatal(err)
	}
	if len(live.ManagedFields) == 0 {
		t.Fatalf("server's %s has no managedFields", name)
	}
	waitUntil(t, 30*time.Second, "cache at the live version", func() bool {
		obj, ok, _ := inf.GetIndexer().GetByKey(e.ns + "/" + name)
		return ok && obj.(*corev1.ConfigMap).ResourceVersion == live.ResourceVersion
	}, func() string { return live.ResourceVersion })
	obj, _, _ := inf.GetIndexer().GetByKey(e.ns + "/" + name)
	cp := obj.(*corev1.ConfigMap).DeepCopy()
	cp.Data = map[string]string{"from": "cache"}
	out, err := e.cms.Update(ctx, cp)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.ManagedFields) < len(live.ManagedFields) {
		t.Errorf("update from a stripped copy left managedFields %v; had %v", out.ManagedFields, live.ManagedFields)
	}
}
