package informer

import (
	"fmt"
	"maps"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/apiserver"
	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/internal/testenv"
)

func TestFactorySharesOneInformerAndOneWatchPerResource(t *testing.T) {
	e := startIT(t, testenv.Options{})
	ctx := testCtx(t)
	e.create(t, ctx, "before-start")
	f := NewSharedInformerFactory(e.rc, FactoryOptions{Logger: testLogger(t)})
	t.Cleanup(f.Shutdown)

	// Two controllers ask for ConfigMaps.
	a := For[*corev1.ConfigMap](f)
	b := For[*corev1.ConfigMap](f)
	if a != b {
		t.Fatal("For returned two informers for one resource")
	}
	f.Start(ctx)
	if got, want := f.WaitForCacheSync(ctx), map[string]bool{"configmaps": true}; !maps.Equal(got, want) {
		t.Fatalf("WaitForCacheSync = %v, want %v", got, want)
	}

	const watchers = "apiserver_registered_watchers"
	waitUntil(t, 10*time.Second, "one configmaps watch", func() bool {
		return metric(t, e.env, watchers, `resource="configmaps"`) == 1
	}, func() string { return fmt.Sprint(metric(t, e.env, watchers, `resource="configmaps"`)) })

	// Both see the same cache, kept current.
	e.create(t, ctx, "after-start")
	waitUntil(t, 10*time.Second, "both objects in the cache", func() bool {
		return len(b.Lister().ByNamespace(e.ns).List(labels.Everything())) == 2
	}, nil)
	if _, err := a.Lister().Get(e.ns, "after-start"); err != nil {
		t.Errorf("lister: %v", err)
	}
	if n := metric(t, e.env, watchers, `resource="configmaps"`); n != 1 {
		t.Errorf("%v configmaps watches, want 1", n)
	}

	// A filtered informer is another informer, started by the next Start.
	named := ForWith[*corev1.ConfigMap](f, "name=after-start", func(o *metav1.ListOptions) {
		o.FieldSelector = "metadata.name=after-start"
	})
	if named == a || ForWith[*corev1.ConfigMap](f, "name=after-start", nil) != named {
		t.Fatal("ForWith: want one informer per key, distinct from For's")
	}
	f.Start(ctx)
	synced := f.WaitForCacheSync(ctx)
	if !synced["configmaps[name=after-start]"] || len(synced) != 2 {
		t.Fatalf("WaitForCacheSync = %v", synced)
	}
	if got := named.GetIndexer().ListKeys(); len(got) != 1 || got[0] != e.ns+"/after-start" {
		t.Errorf("filtered informer holds %v", got)
	}
	waitUntil(t, 10*time.Second, "two configmaps watches", func() bool {
		return metric(t, e.env, watchers, `resource="configmaps"`) == 2
	}, nil)

	// Shutdown stops everything: the server sees the watches go.
	f.Shutdown()
	waitUntil(t, 10*time.Second, "no configmaps watch", func() bool {
		return metric(t, e.env, watchers, `resource="configmaps"`) == 0
	}, nil)
	For[*corev1.Pod](f)
	f.Start(ctx) // after Shutdown: does nothing
	if _, started := f.WaitForCacheSync(ctx)["pods"]; started {
		t.Error("Start after Shutdown started an informer")
	}
}

// A resource asked for by type and by descriptor is one informer: one
// watch, one cache of the kind's Go type.
func TestForResourceSharesTheTypedInformer(t *testing.T) {
	e := startIT(t, testenv.Options{})
	ctx := testCtx(t)
	e.create(t, ctx, "cfg")
	f := NewSharedInformerFactory(e.rc, FactoryOptions{Logger: testLogger(t)})
	t.Cleanup(f.Shutdown)

	dynamic := ForResource(f, api.ConfigMaps)
	typed := For[*corev1.ConfigMap](f)
	if dynamic.SharedInformer != typed.SharedInformer || ForResource(f, api.ConfigMaps) != dynamic {
		t.Fatal("For and ForResource returned different informers for one resource")
	}
	f.Start(ctx)
	if got, want := f.WaitForCacheSync(ctx), map[string]bool{"configmaps": true}; !maps.Equal(got, want) {
		t.Fatalf("WaitForCacheSync = %v, want %v", got, want)
	}
	obj, err := dynamic.Lister().Get(e.ns, "cfg")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := obj.(*corev1.ConfigMap); !ok {
		t.Fatalf("ForResource's cache holds a %T, want *corev1.ConfigMap", obj)
	}
	if n := metric(t, e.env, "apiserver_registered_watchers", `resource="configmaps"`); n != 1 {
		t.Errorf("%v configmaps watches, want 1", n)
	}
}

// An informer by descriptor caches a kind nobody compiled in.
func TestForResourceWithoutGoType(t *testing.T) {
	widgets := testenv.Widgets()
	e := startIT(t, testenv.Options{Server: apiserver.Config{Resources: api.Resources().With(widgets)}})
	ctx := testCtx(t)
	f := NewSharedInformerFactory(e.rc, FactoryOptions{Logger: testLogger(t)})
	t.Cleanup(f.Shutdown)
	inf := ForResource(f, widgets)
	f.Start(ctx)
	if !WaitForCacheSync(ctx, inf.HasSynced) {
		t.Fatal("widgets cache did not sync")
	}

	w := &unstructured.Unstructured{}
	w.SetName("w1")
	w.SetNamespace(e.ns)
	if _, err := client.ForResource(e.rc, widgets).Create(ctx, w); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "the widget in the cache", func() bool {
		_, err := inf.Lister().Get(e.ns, "w1")
		return err == nil
	}, nil)
	got, _ := inf.Lister().Get(e.ns, "w1")
	if u, ok := got.(*unstructured.Unstructured); !ok || u.GetKind() != "Widget" {
		t.Fatalf("cached %T %v", got, got)
	}
	_, err := inf.Lister().Get(e.ns, "nope")
	if !apierrors.IsNotFound(err) || err.Error() != `widgets.example.com "nope" not found` {
		t.Errorf("lister Get of a missing widget: %v", err)
	}
}

// countingHandler counts the adds it is told about.
type countingHandler struct{ adds atomic.Int64 }

func (h *countingHandler) OnAdd(any, bool)   { h.adds.Add(1) }
func (h *countingHandler) OnUpdate(_, _ any) {}
func (h *countingHandler) OnDelete(any)      {}
func (h *countingHandler) count() int64      { return h.adds.Load() }

// Subscriptions to a resource that may stop being served share its one
// informer; each Close takes its handler away, and the last one stops the
// informer, unless ForResource handed it out too.
func TestSubscriptionsShareOneInformerAndTheLastStopsIt(t *testing.T) {
	widgets := testenv.Widgets()
	e := startIT(t, testenv.Options{Server: apiserver.Config{Resources: api.Resources().With(widgets)}})
	ctx := testCtx(t)
	f := NewSharedInformerFactory(e.rc, FactoryOptions{Logger: testLogger(t)})
	t.Cleanup(f.Shutdown)
	watches := func() float64 { return metric(t, e.env, "apiserver_registered_watchers", `resource="widgets"`) }
	create := func(name string) {
		t.Helper()
		w := &unstructured.Unstructured{}
		w.SetName(name)
		w.SetNamespace(e.ns)
		if _, err := client.ForResource(e.rc, widgets).Create(ctx, w); err != nil {
			t.Fatal(err)
		}
	}

	var ha, hb countingHandler
	a, err := f.Subscribe(widgets, &ha)
	if err != nil {
		t.Fatal(err)
	}
	b, err := f.Subscribe(widgets, &hb)
	if err != nil {
		t.Fatal(err)
	}
	if a.Informer != b.Informer {
		t.Fatal("two subscriptions to one resource got two informers")
	}
	f.Start(ctx)
	if !WaitForCacheSync(ctx, a.HasSynced, b.HasSynced) {
		t.Fatal("subscriptions did not sync")
	}
	waitUntil(t, 10*time.Second, "one widgets watch", func() bool { return watches() == 1 }, nil)

	create("w1")
	waitUntil(t, 10*time.Second, "both handlers told of w1", func() bool { return ha.count() == 1 && hb.count() == 1 }, nil)

	// Closing one takes only its handler away.
	a.Close()
	create("w2")
	waitUntil(t, 10*time.Second, "b told of w2", func() bool { return hb.count() == 2 }, nil)
	if n := ha.count(); n != 1 {
		t.Errorf("a closed subscription's handler was told of %d adds, want 1", n)
	}
	if n := watches(); n != 1 {
		t.Errorf("%v widgets watches after one of two subscriptions closed, want 1", n)
	}

	// The last one stops the informer: the server sees its watch go.
	b.Close()
	b.Close() // twice: nothing
	waitUntil(t, 10*time.Second, "no widgets watch", func() bool { return watches() == 0 }, nil)

	// A later subscription gets a new informer; one ForResource handed out
	// outlives its subscriptions.
	kept := ForResource(f, widgets)
	if kept == b.Informer {
		t.Fatal("a stopped informer was handed out again")
	}
	c, err := f.Subscribe(widgets, &countingHandler{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Informer != kept {
		t.Fatal("Subscribe did not share ForResource's informer")
	}
	f.Start(ctx)
	waitUntil(t, 10*time.Second, "one widgets watch again", func() bool { return watches() == 1 }, nil)
	c.Close()
	create("w3")
	waitUntil(t, 10*time.Second, "the kept informer sees w3", func() bool {
		_, err := kept.Lister().Get(e.ns, "w3")
		return err == nil
	}, nil)
}

func TestFactoryTransformAppliesToEveryInformer(t *testing.T) {
	e := startIT(t, testenv.Options{})
	ctx := testCtx(t)
	e.create(t, ctx, "one")
	f := NewSharedInformerFactory(e.rc, FactoryOptions{Logger: testLogger(t), Transform: StripManagedFields})
	t.Cleanup(f.Shutdown)
	all := For[*corev1.ConfigMap](f)
	named := ForWith[*corev1.ConfigMap](f, "name=one", func(o *metav1.ListOptions) { o.FieldSelector = "metadata.name=one" })
	f.Start(ctx)
	f.WaitForCacheSync(ctx)
	for _, inf := range []*Informer[*corev1.ConfigMap]{all, named} {
		cm, err := inf.Lister().Get(e.ns, "one")
		if err != nil {
			t.Fatalf("%s: %v", inf.Name(), err)
		}
		if cm.ManagedFields != nil {
			t.Errorf("%s caches managedFields %v", inf.Name(), cm.ManagedFields)
		}
	}
}
