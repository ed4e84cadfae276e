package informer

import (
	"fmt"
	"maps"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

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
