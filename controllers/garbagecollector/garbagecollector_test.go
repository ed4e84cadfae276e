package garbagecollector

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/client/record"
	"github.com/minictl/minictl/controllers/internal/controller"
	"github.com/minictl/minictl/controllers/internal/controllertest"
	"github.com/minictl/minictl/informer"
	"github.com/minictl/minictl/internal/testenv"
)

// fixture is a real API server with the garbage collector running against
// it through a shared informer factory.
type fixture struct {
	rc       *client.RESTClient
	cms      *client.Client[*corev1.ConfigMap]
	gc       *Controller
	recorder *record.FakeRecorder
}

func start(t *testing.T) *fixture {
	t.Helper()
	f := newFixture(t)
	f.startGC(t)
	return f
}

// newFixture starts the API server only; startGC starts the collector.
func newFixture(t *testing.T) *fixture {
	t.Helper()
	rc := controllertest.StartWith(t, controllertest.Options{}).Client
	return &fixture{rc: rc, cms: client.For[*corev1.ConfigMap](rc), recorder: &record.FakeRecorder{}}
}

func (f *fixture) startGC(t *testing.T) {
	t.Helper()
	rc, rec := f.rc, f.recorder
	factory := informer.NewSharedInformerFactory(rc, informer.FactoryOptions{})
	gc, err := New(Options{Common: controller.Common{Client: rc, Informers: factory, Recorder: rec, Logger: controllertest.Logger(t)}})
	if err != nil {
		t.Fatal(err)
	}
	controllertest.Run(t, factory, 3, gc)
	f.gc = gc
}

func TestBackgroundDeletesDependents(t *testing.T) {
	f := start(t)
	ctx := t.Context()
	owner := f.createCM(t, "owner")
	f.createCM(t, "dep-1", ownerRef(owner, false))
	f.createCM(t, "dep-2", ownerRef(owner, true))
	f.createCM(t, "bystander")

	f.deleteCM(t, "owner", metav1.DeletePropagationBackground)
	waitFor(t, "both dependents to be deleted", func() bool {
		return f.gone(ctx, "dep-1") && f.gone(ctx, "dep-2")
	})
	if f.gone(ctx, "bystander") {
		t.Fatal("a configmap without owners was deleted")
	}
	f.wantEvents(t, "GarbageCollected", 2)
}

func TestOrphanKeepsDependentsWithoutTheReference(t *testing.T) {
	f := start(t)
	ctx := t.Context()
	owner := f.createCM(t, "owner")
	other := f.createCM(t, "other-owner")
	f.createCM(t, "dep-1", ownerRef(owner, true))
	f.createCM(t, "dep-2", ownerRef(owner, false), ownerRef(other, false))

	f.deleteCM(t, "owner", metav1.DeletePropagationOrphan)
	waitFor(t, "the owner to be gone", func() bool { return f.gone(ctx, "owner") })
	// The finalizer comes off only after every dependent let go.
	if refs := f.ownerNames(t, "dep-1"); len(refs) != 0 {
		t.Errorf("dep-1 owners = %v, want none", refs)
	}
	if refs := f.ownerNames(t, "dep-2"); !slices.Equal(refs, []string{"other-owner"}) {
		t.Errorf("dep-2 owners = %v, want [other-owner]", refs)
	}
}

func TestForegroundOwnerWaitsForBlockingDependents(t *testing.T) {
	f := start(t)
	ctx := t.Context()
	owner := f.createCM(t, "owner")
	f.createCM(t, "dep-quick", ownerRef(owner, true))
	f.createCM(t, "dep-nonblocking", ownerRef(owner, false))
	held := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: "dep-held", Namespace: "default",
		OwnerReferences: []metav1.OwnerReference{ownerRef(owner, true)},
		Finalizers:      []string{"example.com/hold"},
	}}
	if _, err := f.cms.Create(ctx, held); err != nil {
		t.Fatal(err)
	}

	f.deleteCM(t, "owner", metav1.DeletePropagationForeground)
	waitFor(t, "the free dependents to be deleted and the held one to be terminating", func() bool {
		if !f.gone(ctx, "dep-quick") || !f.gone(ctx, "dep-nonblocking") {
			return false
		}
		cm, err := f.cms.Get(ctx, "default", "dep-held")
		return err == nil && cm.DeletionTimestamp != nil
	})
	got, err := f.cms.Get(ctx, "default", "owner")
	if err != nil {
		t.Fatalf("the owner went before its blocking dependent: %v", err)
	}
	if got.DeletionTimestamp == nil || !slices.Contains(got.Finalizers, metav1.FinalizerDeleteDependents) {
		t.Fatalf("owner = %+v, want deletionTimestamp and the foregroundDeletion finalizer", got.ObjectMeta)
	}

	// Let the held dependent go: then the owner goes too.
	if _, err := f.cms.Patch(ctx, "default", "dep-held", types.MergePatchType,
		[]byte(`{"metadata":{"finalizers":null}}`)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the owner to be gone", func() bool { return f.gone(ctx, "owner") && f.gone(ctx, "dep-held") })
	f.wantEvents(t, "DependentsDeleted", 1)
}

func TestForegroundCascadesThroughTheTree(t *testing.T) {
	f := start(t)
	ctx := t.Context()
	top := f.createCM(t, "top")
	mid := f.createCM(t, "mid", ownerRef(top, true))
	f.createCM(t, "leaf", ownerRef(mid, true))

	f.deleteCM(t, "top", metav1.DeletePropagationForeground)
	waitFor(t, "the whole tree to be gone", func() bool {
		return f.gone(ctx, "top") && f.gone(ctx, "mid") && f.gone(ctx, "leaf")
	})
	// mid has a dependent of its own, so it went in the foreground too:
	// both owners waited for the tree below them.
	f.wantEvents(t, "DependentsDeleted", 2)
}

func TestOwnerDeletedWhileCollectorWasDown(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	owner := f.createCM(t, "owner")
	f.createCM(t, "dep", ownerRef(owner, false))
	f.deleteCM(t, "owner", metav1.DeletePropagationBackground)

	f.startGC(t)
	waitFor(t, "the dependent to be deleted", func() bool { return f.gone(ctx, "dep") })
}

func TestDependentWithAnotherOwnerKeepsLiving(t *testing.T) {
	f := start(t)
	ctx := t.Context()
	a := f.createCM(t, "owner-a")
	b := f.createCM(t, "owner-b")
	f.createCM(t, "dep", ownerRef(a, true), ownerRef(b, true))

	f.deleteCM(t, "owner-a", metav1.DeletePropagationBackground)
	waitFor(t, "dep to lose its reference to owner-a", func() bool {
		cm, err := f.cms.Get(ctx, "default", "dep")
		if err != nil {
			t.Fatalf("dep: %v", err)
		}
		return len(cm.OwnerReferences) == 1
	})
	if refs := f.ownerNames(t, "dep"); !slices.Equal(refs, []string{"owner-b"}) {
		t.Fatalf("dep owners = %v, want [owner-b]", refs)
	}
	f.wantEvents(t, "OwnerRefRemoved", 1)
}

func TestReferenceToAbsentOwnerIsCollected(t *testing.T) {
	f := start(t)
	ctx := t.Context()
	f.createCM(t, "never-owned", metav1.OwnerReference{
		APIVersion: "v1", Kind: "ConfigMap", Name: "never", UID: "00000000-0000-0000-0000-000000000001",
	})
	// An owner of the right name but another uid counts as absent.
	impostor := f.createCM(t, "impostor")
	ref := ownerRef(impostor, false)
	ref.UID = "00000000-0000-0000-0000-000000000002"
	f.createCM(t, "wrong-uid", ref)

	waitFor(t, "both dependents to be deleted", func() bool {
		return f.gone(ctx, "never-owned") && f.gone(ctx, "wrong-uid")
	})
	if f.gone(ctx, "impostor") {
		t.Fatal("the object that only shares the owner's name was deleted")
	}
}

func TestReplicaSetPodsAreCollected(t *testing.T) {
	f := start(t)
	ctx := t.Context()
	labels := map[string]string{"app": "web"}
	rs, err := client.For[*appsv1.ReplicaSet](f.rc).Create(ctx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: appsv1.ReplicaSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx:1.27"}}},
			},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	pods := client.For[*corev1.Pod](f.rc)
	yes := true
	for i := range 3 {
		_, err := pods.Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Name: fmt.Sprintf("web-%d", i), Namespace: "default", Labels: labels,
				OwnerReferences: []metav1.OwnerReference{{
					APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID,
					Controller: &yes, BlockOwnerDeletion: &yes,
				}},
			},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx:1.27"}}},
		})
		if err != nil {
			t.Fatal(err)
		}
	}

	policy := metav1.DeletePropagationBackground
	if err := client.For[*appsv1.ReplicaSet](f.rc).Delete(ctx, "default", "web",
		metav1.DeleteOptions{PropagationPolicy: &policy}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the replicaset's pods to be deleted", func() bool {
		list, err := pods.List(ctx, "default", metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return len(list.Items) == 0
	})
}

// A kind the server serves, which the collector is not told about, is
// found through discovery, collected as a dependent and resolved as an
// owner.
func TestCollectsAKindFoundThroughDiscovery(t *testing.T) {
	widgets := testenv.Widgets()
	resources := api.Resources().With(widgets)
	rc := controllertest.StartWith(t, controllertest.Options{Resources: resources}).Client
	factory := informer.NewSharedInformerFactory(rc, informer.FactoryOptions{})
	gc, err := New(Options{Common: controller.Common{Client: rc, Informers: factory, Logger: controllertest.Logger(t)}})
	if err != nil {
		t.Fatal(err)
	}
	controllertest.Run(t, factory, 2, gc)
	f := &fixture{rc: rc, cms: client.For[*corev1.ConfigMap](rc)}
	ctx := t.Context()
	wc := client.ForResource(rc, widgets)
	newWidget := func(name string, owners ...metav1.OwnerReference) api.Object {
		w := &unstructured.Unstructured{}
		w.SetName(name)
		w.SetNamespace("default")
		w.SetOwnerReferences(owners)
		created, err := wc.Create(ctx, w)
		if err != nil {
			t.Fatal(err)
		}
		return created
	}

	// A widget owned by a configmap goes with it.
	owner := f.createCM(t, "owner")
	newWidget("owned", ownerRef(owner, true))
	f.deleteCM(t, "owner", metav1.DeletePropagationBackground)
	// A configmap owned by a widget goes with it, deleted in the
	// foreground: the widget waits for it.
	w := newWidget("owner")
	yes := true
	f.createCM(t, "dep", metav1.OwnerReference{APIVersion: "example.com/v1", Kind: "Widget", Name: "owner", UID: w.GetUID(), BlockOwnerDeletion: &yes})
	foreground := metav1.DeletePropagationForeground
	if err := wc.Delete(ctx, "default", "owner", metav1.DeleteOptions{PropagationPolicy: &foreground}); err != nil {
		t.Fatal(err)
	}

	waitFor(t, "the widgets and the configmap they owned or owned them to be gone", func() bool {
		_, errOwned := wc.Get(ctx, "default", "owned")
		_, errOwner := wc.Get(ctx, "default", "owner")
		return client.IsNotFound(errOwned) && client.IsNotFound(errOwner) && f.gone(ctx, "dep")
	})
}

// hidingDiscovery is the server's discovery, less the resources of group
// hidden while hide is set: a kind that stops being served.
type hidingDiscovery struct {
	rc     *client.RESTClient
	hidden string
	hide   atomic.Bool
}

func (d *hidingDiscovery) ServerPreferredResources(ctx context.Context) (client.ServedResources, error) {
	served, err := d.rc.ServerPreferredResources(ctx)
	if !d.hide.Load() {
		return served, err
	}
	return slices.DeleteFunc(served, func(s client.ServedResource) bool { return s.Resource.Group == d.hidden }), err
}

// Every deletable resource discovery lists is watched; a kind that stops
// being served has its monitor stopped, its informer's goroutines gone;
// one that comes back is watched again, and collected.
func TestMonitorsFollowDiscovery(t *testing.T) {
	widgets := testenv.Widgets()
	rc := controllertest.StartWith(t, controllertest.Options{Resources: api.Resources().With(widgets)}).Client
	disc := &hidingDiscovery{rc: rc, hidden: "example.com"}
	factory := informer.NewSharedInformerFactory(rc, informer.FactoryOptions{})
	gc, err := New(Options{
		Common:    controller.Common{Client: rc, Informers: factory, Logger: controllertest.Logger(t)},
		Discovery: disc, ResyncPeriod: 50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	controllertest.Run(t, factory, 2, gc)
	watched := func(gr string) (*monitor, bool) {
		gc.mu.Lock()
		defer gc.mu.Unlock()
		for _, m := range gc.monitors {
			if m.res.GroupResource().String() == gr {
				return m, true
			}
		}
		return nil, false
	}
	waitFor(t, "every deletable resource to be watched", func() bool {
		for _, gr := range []string{"pods", "configmaps", "replicasets.apps", "leases.coordination.k8s.io", "widgets.example.com"} {
			if _, ok := watched(gr); !ok {
				return false
			}
		}
		_, binding := watched("bindings")
		return !binding
	})
	m, _ := watched("widgets.example.com")
	waitFor(t, "the server to see one widgets watch", func() bool { return controllertest.ServerWatches(t, rc, "widgets") == 1 })

	disc.hide.Store(true)
	waitFor(t, "the widgets monitor to stop", func() bool {
		_, ok := watched("widgets.example.com")
		return !ok
	})
	// The informer stopped with the monitor: its watch is gone.
	waitFor(t, "the server to see no widgets watch", func() bool { return controllertest.ServerWatches(t, rc, "widgets") == 0 })

	disc.hide.Store(false)
	waitFor(t, "widgets to be watched again", func() bool {
		m2, ok := watched("widgets.example.com")
		return ok && m2 != m && m2.sub.HasSynced()
	})
	f := &fixture{rc: rc, cms: client.For[*corev1.ConfigMap](rc)}
	owner := f.createCM(t, "owner")
	w := &unstructured.Unstructured{}
	w.SetName("owned")
	w.SetNamespace("default")
	w.SetOwnerReferences([]metav1.OwnerReference{ownerRef(owner, false)})
	wc := client.ForResource(rc, widgets)
	if _, err := wc.Create(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	f.deleteCM(t, "owner", metav1.DeletePropagationBackground)
	waitFor(t, "the widget owned by the configmap to be collected", func() bool {
		_, err := wc.Get(t.Context(), "default", "owned")
		return client.IsNotFound(err)
	})

}

// An owner reference to a kind the collector has not seen in discovery
// makes it read discovery again at once, not at the next resync: a
// configmap owned by a widget that does not exist goes, although widgets
// were not served when the collector started and it resyncs hourly.
func TestAMissReadsDiscoveryAgain(t *testing.T) {
	rc := controllertest.StartWith(t, controllertest.Options{Resources: api.Resources().With(testenv.Widgets())}).Client
	disc := &hidingDiscovery{rc: rc, hidden: "example.com"}
	disc.hide.Store(true)
	factory := informer.NewSharedInformerFactory(rc, informer.FactoryOptions{})
	gc, err := New(Options{
		Common:    controller.Common{Client: rc, Informers: factory, Logger: controllertest.Logger(t)},
		Discovery: disc, ResyncPeriod: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	controllertest.Run(t, factory, 2, gc)
	waitFor(t, "the first discovery", func() bool { return gc.resyncs.Load() > 0 })

	disc.hide.Store(false)
	f := &fixture{rc: rc, cms: client.For[*corev1.ConfigMap](rc)}
	f.createCM(t, "dep", metav1.OwnerReference{APIVersion: "example.com/v1", Kind: "Widget", Name: "gone", UID: "no-such-widget"})
	waitFor(t, "the configmap owned by a missing widget to be collected", func() bool { return f.gone(t.Context(), "dep") })
}

// A custom object owned by a pod goes with the pod.
func TestCollectsACustomObjectOwnedByAPod(t *testing.T) {
	widgets := testenv.Widgets()
	rc := controllertest.StartWith(t, controllertest.Options{Resources: api.Resources().With(widgets)}).Client
	factory := informer.NewSharedInformerFactory(rc, informer.FactoryOptions{})
	gc, err := New(Options{Common: controller.Common{Client: rc, Informers: factory, Logger: controllertest.Logger(t)}})
	if err != nil {
		t.Fatal(err)
	}
	controllertest.Run(t, factory, 2, gc)
	ctx := t.Context()
	pods := client.For[*corev1.Pod](rc)
	pod, err := pods.Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "owner", Namespace: "default"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	w := &unstructured.Unstructured{}
	w.SetName("owned")
	w.SetNamespace("default")
	w.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}})
	wc := client.ForResource(rc, widgets)
	if _, err := wc.Create(ctx, w); err != nil {
		t.Fatal(err)
	}
	if err := pods.Delete(ctx, "default", "owner", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the pod to be gone", func() bool {
		_, err := pods.Get(ctx, "default", "owner")
		return client.IsNotFound(err)
	})
	waitFor(t, "the widget owned by the pod to be collected", func() bool {
		_, err := wc.Get(ctx, "default", "owned")
		return client.IsNotFound(err)
	})
}

// TestEventsAreNotCollected: an Event whose owner is gone stays, as
// kube-controller-manager's collector leaves Events alone; a ConfigMap
// owned by the same owner, deleted in the same pass, shows that the
// collector did act on that owner.
func TestEventsAreNotCollected(t *testing.T) {
	f := start(t)
	ctx := t.Context()
	owner := f.createCM(t, "owner")
	events := client.For[*corev1.Event](f.rc)
	if _, err := events.Create(ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "owned", Namespace: "default", OwnerReferences: []metav1.OwnerReference{ownerRef(owner, false)}},
		InvolvedObject: corev1.ObjectReference{Kind: "ConfigMap", Namespace: "default", Name: "owner", UID: owner.UID},
		Reason:         "Test", Message: "owned by a configmap", Type: corev1.EventTypeNormal,
	}); err != nil {
		t.Fatal(err)
	}
	f.createCM(t, "witness", ownerRef(owner, false))

	f.deleteCM(t, "owner", metav1.DeletePropagationBackground)
	waitFor(t, "the configmap owned by the deleted owner to be collected", func() bool { return f.gone(ctx, "witness") })
	if _, err := events.Get(ctx, "default", "owned"); err != nil {
		t.Fatalf("the event owned by the deleted configmap: %v, want it kept", err)
	}
}

// createCM creates configmap default/name with the given owners.
func (f *fixture) createCM(t *testing.T, name string, owners ...metav1.OwnerReference) *corev1.ConfigMap {
	t.Helper()
	cm, err := f.cms.Create(t.Context(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", OwnerReferences: owners},
	})
	if err != nil {
		t.Fatalf("create configmap %s: %v", name, err)
	}
	return cm
}

func (f *fixture) deleteCM(t *testing.T, name string, policy metav1.DeletionPropagation) {
	t.Helper()
	if err := f.cms.Delete(t.Context(), "default", name, metav1.DeleteOptions{PropagationPolicy: &policy}); err != nil {
		t.Fatalf("delete configmap %s: %v", name, err)
	}
}

func (f *fixture) gone(ctx context.Context, name string) bool {
	_, err := f.cms.Get(ctx, "default", name)
	return client.IsNotFound(err)
}

func (f *fixture) ownerNames(t *testing.T, name string) []string {
	t.Helper()
	cm, err := f.cms.Get(t.Context(), "default", name)
	if err != nil {
		t.Fatalf("get configmap %s: %v", name, err)
	}
	var names []string
	for _, ref := range cm.OwnerReferences {
		names = append(names, ref.Name)
	}
	return names
}

func ownerRef(owner *corev1.ConfigMap, block bool) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID,
		BlockOwnerDeletion: &block,
	}
}

// wantEvents checks that the collector recorded n events of reason. It
// records an event after the write it reports, so the count is awaited
// before it is checked.
func (f *fixture) wantEvents(t *testing.T, reason string, n int) {
	t.Helper()
	poll := controllertest.Poll{Timeout: 20 * time.Second, Interval: 20 * time.Millisecond}
	poll.Until(t, fmt.Sprintf("%d %s events", n, reason), func() (bool, string) {
		return len(f.recorder.WithReason(reason)) >= n, fmt.Sprintf("recorded %q", f.recorder.Events())
	})
	if got := len(f.recorder.WithReason(reason)); got != n {
		t.Errorf("%s events = %d, want %d: %q", reason, got, n, f.recorder.Events())
	}
}

// waitFor waits up to 20s for cond, asking every 20ms.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll := controllertest.Poll{Timeout: 20 * time.Second, Interval: 20 * time.Millisecond}
	poll.Until(t, what, func() (bool, string) { return cond(), "" })
}
