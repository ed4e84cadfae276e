package client_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/apiserver"
	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/internal/testenv"
)

// These tests run the client against a real minictl API server on an
// embedded etcd (internal/testenv): what they check is what a controller
// will see.

// setup starts a server and returns a client and a fresh namespace.
func setup(t *testing.T, opts testenv.Options) (*client.RESTClient, string) {
	t.Helper()
	env := testenv.StartWith(t, opts)
	rc, err := client.New(&client.Config{Server: env.URL, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "it"}}
	created, err := client.For[*corev1.Namespace](rc).Create(ctxFor(t), ns)
	if err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	if created.Kind != "Namespace" || created.UID == "" {
		t.Fatalf("created namespace = %+v", created)
	}
	return rc, ns.Name
}

// ctxFor is a context that ends with the test, or after a minute.
func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func configMap(ns, name string, labels map[string]string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}, Data: data}
}

func podSpec() corev1.PodSpec {
	return corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx:1.27"}}}
}

func TestIntegrationConfigMapCRUD(t *testing.T) {
	rc, ns := setup(t, testenv.Options{})
	ctx := ctxFor(t)
	cms := client.For[*corev1.ConfigMap](rc)

	created, err := cms.Create(ctx, configMap(ns, "web", nil, map[string]string{"color": "blue"}))
	if err != nil {
		t.Fatal(err)
	}
	if created.UID == "" || created.ResourceVersion == "" || created.Kind != "ConfigMap" || created.Data["color"] != "blue" {
		t.Fatalf("created = %+v", created)
	}
	if _, err := cms.Create(ctx, configMap(ns, "web", nil, nil)); !client.IsAlreadyExists(err) {
		t.Errorf("second create = %v, want AlreadyExists", err)
	}
	if _, err := cms.Create(ctx, configMap("no-such-ns", "web", nil, nil)); !client.IsNotFound(err) {
		t.Errorf("create in a missing namespace = %v, want NotFound", err)
	}
	if _, err := cms.Create(ctx, configMap(ns, "Not_Valid", nil, nil)); !client.IsInvalid(err) {
		t.Errorf("create with a bad name = %v, want Invalid", err)
	}

	got, err := cms.Get(ctx, ns, "web")
	if err != nil {
		t.Fatal(err)
	}
	if got.UID != created.UID || got.ResourceVersion != created.ResourceVersion {
		t.Errorf("get = %+v, want what create returned", got.ObjectMeta)
	}
	if _, err := cms.Get(ctx, ns, "missing"); !client.IsNotFound(err) {
		t.Errorf("get missing = %v, want NotFound", err)
	}

	// Update is a compare-and-swap on resourceVersion.
	got.Data["color"] = "green"
	updated, err := cms.Update(ctx, got)
	if err != nil {
		t.Fatal(err)
	}
	if updated.Data["color"] != "green" || updated.ResourceVersion == got.ResourceVersion {
		t.Errorf("updated = %+v", updated)
	}
	got.Data["color"] = "red" // got still carries the old resourceVersion
	if _, err := cms.Update(ctx, got); !client.IsConflict(err) {
		t.Errorf("stale update = %v, want Conflict", err)
	}

	// Patches: merge patch, then JSON patch.
	patched, err := cms.Patch(ctx, ns, "web", types.MergePatchType, []byte(`{"data":{"size":"L"},"metadata":{"labels":{"tier":"front"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if patched.Data["size"] != "L" || patched.Data["color"] != "green" || patched.Labels["tier"] != "front" {
		t.Errorf("merge patched = %+v", patched)
	}
	patched, err = cms.Patch(ctx, ns, "web", types.JSONPatchType, []byte(`[{"op":"replace","path":"/data/color","value":"black"},{"op":"remove","path":"/data/size"}]`))
	if err != nil {
		t.Fatal(err)
	}
	if patched.Data["color"] != "black" || len(patched.Data) != 1 || patched.Kind != "ConfigMap" {
		t.Errorf("json patched = %+v", patched)
	}
	if _, err := cms.Patch(ctx, ns, "web", types.JSONPatchType, []byte(`[{"op":"test","path":"/data/color","value":"pink"}]`)); err == nil || client.StatusCode(err) < 400 {
		t.Errorf("failed json patch test = %v, want an error Status", err)
	}
	if _, err := cms.Patch(ctx, ns, "missing", types.MergePatchType, []byte(`{}`)); !client.IsNotFound(err) {
		t.Errorf("patch missing = %v, want NotFound", err)
	}

	// Delete with preconditions: a wrong uid or resourceVersion is a
	// Conflict and deletes nothing.
	wrongUID := types.UID("not-the-uid")
	err = cms.Delete(ctx, ns, "web", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &wrongUID}})
	if !client.IsConflict(err) {
		t.Errorf("delete with a wrong uid = %v, want Conflict", err)
	}
	staleRV := created.ResourceVersion
	err = cms.Delete(ctx, ns, "web", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &staleRV}})
	if !client.IsConflict(err) {
		t.Errorf("delete with a stale resourceVersion = %v, want Conflict", err)
	}
	uid, rv := patched.UID, patched.ResourceVersion
	if err := cms.Delete(ctx, ns, "web", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}}); err != nil {
		t.Fatalf("delete with matching preconditions: %v", err)
	}
	if _, err := cms.Get(ctx, ns, "web"); !client.IsNotFound(err) {
		t.Errorf("get after delete = %v, want NotFound", err)
	}
	if err := cms.Delete(ctx, ns, "web", metav1.DeleteOptions{}); !client.IsNotFound(err) {
		t.Errorf("second delete = %v, want NotFound", err)
	}
}

func TestIntegrationDeletePropagationPolicy(t *testing.T) {
	rc, ns := setup(t, testenv.Options{})
	ctx := ctxFor(t)
	cms := client.For[*corev1.ConfigMap](rc)
	tests := []struct {
		policy    metav1.DeletionPropagation
		finalizer string // "" when the object goes at once
	}{
		{metav1.DeletePropagationBackground, ""},
		{metav1.DeletePropagationForeground, metav1.FinalizerDeleteDependents},
		{metav1.DeletePropagationOrphan, metav1.FinalizerOrphanDependents},
	}
	for _, tt := range tests {
		t.Run(string(tt.policy), func(t *testing.T) {
			name := strings.ToLower(string(tt.policy))
			if _, err := cms.Create(ctx, configMap(ns, name, nil, nil)); err != nil {
				t.Fatal(err)
			}
			policy := tt.policy
			if err := cms.Delete(ctx, ns, name, metav1.DeleteOptions{PropagationPolicy: &policy}); err != nil {
				t.Fatal(err)
			}
			got, err := cms.Get(ctx, ns, name)
			if tt.finalizer == "" {
				if !client.IsNotFound(err) {
					t.Fatalf("get after a background delete = %v, want NotFound", err)
				}
				return
			}
			// With no garbage collector running, the policy's finalizer
			// holds the object, marked for deletion.
			if err != nil {
				t.Fatal(err)
			}
			if got.DeletionTimestamp == nil || !slices.Contains(got.Finalizers, tt.finalizer) {
				t.Fatalf("after a %s delete: deletionTimestamp %v finalizers %v", tt.policy, got.DeletionTimestamp, got.Finalizers)
			}
			// Removing the finalizer, as the garbage collector would, lets
			// the object go.
			if _, err := cms.Patch(ctx, ns, name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)); err != nil {
				t.Fatal(err)
			}
			if _, err := cms.Get(ctx, ns, name); !client.IsNotFound(err) {
				t.Errorf("get after the finalizer is removed = %v, want NotFound", err)
			}
		})
	}
}

func TestIntegrationList(t *testing.T) {
	rc, ns := setup(t, testenv.Options{})
	ctx := ctxFor(t)
	cms := client.For[*corev1.ConfigMap](rc)
	var want []string
	for i := range 7 {
		name := fmt.Sprintf("cm-%d", i)
		tier := "back"
		if i%2 == 0 {
			tier = "front"
		}
		if _, err := cms.Create(ctx, configMap(ns, name, map[string]string{"app": "shop", "tier": tier}, nil)); err != nil {
			t.Fatal(err)
		}
		want = append(want, name)
	}
	if _, err := cms.Create(ctx, configMap("default", "elsewhere", map[string]string{"app": "shop", "tier": "front"}, nil)); err != nil {
		t.Fatal(err)
	}

	list, err := cms.List(ctx, ns, metav1.ListOptions{LabelSelector: "app=shop,tier=front"})
	if err != nil {
		t.Fatal(err)
	}
	if got := names(list.Items); !slices.Equal(got, []string{"cm-0", "cm-2", "cm-4", "cm-6"}) {
		t.Errorf("labelSelector tier=front: %v", got)
	}
	if list.ResourceVersion == "" || list.Continue != "" {
		t.Errorf("list meta: rv %q continue %q", list.ResourceVersion, list.Continue)
	}
	for _, cm := range list.Items {
		if cm.Kind != "ConfigMap" || cm.APIVersion != "v1" {
			t.Errorf("item TypeMeta = %+v", cm.TypeMeta)
		}
	}

	all, err := cms.List(ctx, "", metav1.ListOptions{LabelSelector: "tier=front"})
	if err != nil {
		t.Fatal(err)
	}
	if got := names(all.Items); !slices.Contains(got, "elsewhere") || len(got) != 5 {
		t.Errorf("all namespaces, tier=front: %v", got)
	}

	byName, err := cms.List(ctx, ns, metav1.ListOptions{FieldSelector: "metadata.name=cm-3"})
	if err != nil {
		t.Fatal(err)
	}
	if got := names(byName.Items); !slices.Equal(got, []string{"cm-3"}) {
		t.Errorf("fieldSelector metadata.name=cm-3: %v", got)
	}

	// Pages of 3: every object exactly once, in three pages.
	var paged []string
	opts := metav1.ListOptions{Limit: 3, LabelSelector: "app=shop"}
	pages := 0
	for {
		page, err := cms.List(ctx, ns, opts)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if len(page.Items) > 3 {
			t.Fatalf("page %d has %d items", pages, len(page.Items))
		}
		paged = append(paged, names(page.Items)...)
		if page.Continue == "" {
			break
		}
		if page.RemainingItemCount != nil && *page.RemainingItemCount <= 0 {
			t.Errorf("page %d: continue with remainingItemCount %d", pages, *page.RemainingItemCount)
		}
		opts.Continue = page.Continue
		if pages > 10 {
			t.Fatal("pagination does not end")
		}
	}
	slices.Sort(paged)
	if !slices.Equal(paged, want) || pages != 3 {
		t.Errorf("paged in %d pages: %v, want %v", pages, paged, want)
	}

	// A cluster-scoped list.
	nsList, err := client.For[*corev1.Namespace](rc).List(ctx, "", metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := names(nsList.Items); !slices.Contains(got, ns) || !slices.Contains(got, "default") {
		t.Errorf("namespaces: %v", got)
	}
}

func names[T metav1.Object](items []T) []string {
	out := make([]string, 0, len(items))
	for _, it := range items {
		out = append(out, it.GetName())
	}
	slices.Sort(out)
	return out
}

func TestIntegrationPodStatusAndBinding(t *testing.T) {
	rc, ns := setup(t, testenv.Options{})
	ctx := ctxFor(t)
	pods := client.For[*corev1.Pod](rc)

	pod, err := pods.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-1"}, Spec: podSpec()})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Status.Phase != corev1.PodPending {
		t.Errorf("new pod phase = %q, want Pending", pod.Status.Phase)
	}

	// UpdateStatus writes status; Update ignores it.
	pod.Status.Phase = corev1.PodRunning
	pod.Status.PodIP = "10.0.0.5"
	pod, err = pods.UpdateStatus(ctx, pod)
	if err != nil {
		t.Fatal(err)
	}
	if pod.Status.Phase != corev1.PodRunning || pod.Status.PodIP != "10.0.0.5" {
		t.Errorf("after UpdateStatus: %+v", pod.Status)
	}
	pod.Status.Phase = corev1.PodFailed
	pod.Labels = map[string]string{"app": "web"}
	pod, err = pods.Update(ctx, pod)
	if err != nil {
		t.Fatal(err)
	}
	if pod.Status.Phase != corev1.PodRunning || pod.Labels["app"] != "web" {
		t.Errorf("Update changed status or dropped labels: phase %q labels %v", pod.Status.Phase, pod.Labels)
	}
	stale := pod.DeepCopy()
	stale.ResourceVersion = "1"
	if _, err := pods.UpdateStatus(ctx, stale); !client.IsConflict(err) {
		t.Errorf("stale UpdateStatus = %v, want Conflict", err)
	}

	// A merge patch on the status subresource.
	pod, err = pods.Patch(ctx, ns, "web-1", types.MergePatchType, []byte(`{"status":{"message":"patched"}}`), "status")
	if err != nil {
		t.Fatal(err)
	}
	if pod.Status.Message != "patched" {
		t.Errorf("status message = %q", pod.Status.Message)
	}

	// Binding, once.
	bind := &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-1"},
		Target:     corev1.ObjectReference{Kind: "Node", Name: "node-1"},
	}
	if err := rc.Bind(ctx, bind); err != nil {
		t.Fatal(err)
	}
	pod, err = pods.Get(ctx, ns, "web-1")
	if err != nil {
		t.Fatal(err)
	}
	if pod.Spec.NodeName != "node-1" {
		t.Errorf("nodeName = %q after Bind", pod.Spec.NodeName)
	}
	if err := rc.Bind(ctx, bind); !client.IsConflict(err) {
		t.Errorf("second Bind = %v, want Conflict", err)
	}
	bind.Name = "missing"
	if err := rc.Bind(ctx, bind); !client.IsNotFound(err) {
		t.Errorf("Bind of a missing pod = %v, want NotFound", err)
	}
}

func TestIntegrationDeploymentScale(t *testing.T) {
	rc, ns := setup(t, testenv.Options{})
	ctx := ctxFor(t)
	deps := client.For[*appsv1.Deployment](rc)
	replicas := int32(2)
	labels := map[string]string{"app": "web"}
	dep, err := deps.Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: podSpec()},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if dep.Kind != "Deployment" || dep.APIVersion != "apps/v1" || dep.Generation != 1 {
		t.Errorf("created deployment: %+v generation %d", dep.TypeMeta, dep.Generation)
	}

	scale, err := deps.GetScale(ctx, ns, "web")
	if err != nil {
		t.Fatal(err)
	}
	if scale.Spec.Replicas != 2 || scale.Name != "web" || scale.Namespace != ns {
		t.Errorf("scale = %+v", scale)
	}
	scale.Spec.Replicas = 5
	scale, err = deps.UpdateScale(ctx, scale)
	if err != nil {
		t.Fatal(err)
	}
	if scale.Spec.Replicas != 5 {
		t.Errorf("updated scale = %+v", scale.Spec)
	}
	dep, err = deps.Get(ctx, ns, "web")
	if err != nil {
		t.Fatal(err)
	}
	if *dep.Spec.Replicas != 5 {
		t.Errorf("deployment replicas = %d after UpdateScale", *dep.Spec.Replicas)
	}

	dep.Status.ObservedGeneration = dep.Generation
	dep.Status.Replicas = 5
	dep, err = deps.UpdateStatus(ctx, dep)
	if err != nil {
		t.Fatal(err)
	}
	if dep.Status.Replicas != 5 || dep.Status.ObservedGeneration != dep.Generation {
		t.Errorf("status = %+v", dep.Status)
	}

	dep, err = deps.Patch(ctx, ns, "web", types.StrategicMergePatchType,
		[]byte(`{"spec":{"template":{"spec":{"containers":[{"name":"app","image":"nginx:1.28"}]}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if c := dep.Spec.Template.Spec.Containers; len(c) != 1 || c[0].Image != "nginx:1.28" {
		t.Errorf("containers after a strategic merge patch: %+v", c)
	}
	if err := deps.Delete(ctx, ns, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// next receives one event, failing the test when none comes in time.
func next[T api.Object](t *testing.T, w *client.Watcher[T]) client.Event[T] {
	t.Helper()
	select {
	case ev, ok := <-w.Events():
		if !ok {
			t.Fatalf("watch ended early: %v", w.Err())
		}
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no event in 10s")
	}
	panic("unreachable")
}

// ended waits for the events channel to close, draining what is left.
func ended[T api.Object](t *testing.T, w *client.Watcher[T]) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case _, ok := <-w.Events():
			if !ok {
				return
			}
		case <-deadline:
			t.Fatal("watch did not end in 10s")
		}
	}
}

func TestIntegrationWatch(t *testing.T) {
	rc, ns := setup(t, testenv.Options{})
	ctx := ctxFor(t)
	cms := client.For[*corev1.ConfigMap](rc)

	// Watch from the resourceVersion of the last change this watch cache
	// has seen, as an informer resumes from the last event it saw.
	seed, err := cms.Create(ctx, configMap(ns, "seed", nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	w, err := cms.Watch(ctx, ns, metav1.ListOptions{ResourceVersion: seed.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	created, err := cms.Create(ctx, configMap(ns, "web", nil, map[string]string{"v": "1"}))
	if err != nil {
		t.Fatal(err)
	}
	created.Data["v"] = "2"
	updated, err := cms.Update(ctx, created)
	if err != nil {
		t.Fatal(err)
	}
	if err := cms.Delete(ctx, ns, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	want := []struct {
		typ watch.EventType
		rv  string
		v   string
	}{
		{watch.Added, created.ResourceVersion, "1"},
		{watch.Modified, updated.ResourceVersion, "2"},
		{watch.Deleted, "", "2"},
	}
	for i, w1 := range want {
		ev := next(t, w)
		if ev.Type != w1.typ || ev.Object == nil || ev.Object.Name != "web" || ev.Object.Data["v"] != w1.v {
			t.Fatalf("event %d = %s %+v %+v, want %s", i, ev.Type, ev.Object, ev.Status, w1.typ)
		}
		if w1.rv != "" && ev.Object.ResourceVersion != w1.rv {
			t.Errorf("event %d: resourceVersion %s, want %s", i, ev.Object.ResourceVersion, w1.rv)
		}
		if ev.Object.Kind != "ConfigMap" {
			t.Errorf("event %d: kind %q", i, ev.Object.Kind)
		}
	}

	w.Stop()
	ended(t, w)
	if w.Err() != nil {
		t.Errorf("Err() after Stop = %v", w.Err())
	}
	w.Stop()
}

func TestIntegrationWatchInitialEventsAndSelectors(t *testing.T) {
	rc, ns := setup(t, testenv.Options{})
	ctx := ctxFor(t)
	pods := client.For[*corev1.Pod](rc)
	for _, name := range []string{"a", "b"} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"name": name}}, Spec: podSpec()}
		if _, err := pods.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
	}
	// No resourceVersion: the current state first, as ADDED events; the
	// label selector filters them and what follows.
	w, err := pods.Watch(ctx, "", metav1.ListOptions{LabelSelector: "name=b"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if ev := next(t, w); ev.Type != watch.Added || ev.Object.Name != "b" || ev.Object.Namespace != ns {
		t.Fatalf("initial event = %s %+v", ev.Type, ev.Object)
	}
	if _, err := pods.Patch(ctx, ns, "a", types.MergePatchType, []byte(`{"metadata":{"annotations":{"x":"y"}}}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := pods.Patch(ctx, ns, "b", types.MergePatchType, []byte(`{"metadata":{"annotations":{"x":"y"}}}`)); err != nil {
		t.Fatal(err)
	}
	if ev := next(t, w); ev.Type != watch.Modified || ev.Object.Name != "b" || ev.Object.Annotations["x"] != "y" {
		t.Fatalf("event = %s %+v, want b MODIFIED (a does not match)", ev.Type, ev.Object)
	}
}

func TestIntegrationWatchContextCancel(t *testing.T) {
	rc, ns := setup(t, testenv.Options{})
	deps := client.For[*appsv1.Deployment](rc)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w, err := deps.Watch(ctx, ns, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	cancel()
	ended(t, w)
	if w.Err() != nil {
		t.Errorf("Err() after cancel = %v", w.Err())
	}
}

func TestIntegrationWatchServerTimeout(t *testing.T) {
	rc, ns := setup(t, testenv.Options{})
	timeout := int64(1)
	w, err := client.For[*corev1.ConfigMap](rc).Watch(ctxFor(t), ns, metav1.ListOptions{TimeoutSeconds: &timeout})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	ended(t, w) // the server ends the watch after timeoutSeconds
	if w.Err() != nil {
		t.Errorf("Err() after the server's timeout = %v", w.Err())
	}
}

func TestIntegrationWatchTooOldIsGone(t *testing.T) {
	// A watch cache window of 2 events: after five changes, a watch from
	// the first revision cannot be replayed.
	rc, ns := setup(t, testenv.Options{Server: apiserver.Config{WatchCacheSize: 2}})
	ctx := ctxFor(t)
	cms := client.For[*corev1.ConfigMap](rc)
	first, err := cms.Create(ctx, configMap(ns, "churn", nil, map[string]string{"n": "0"}))
	if err != nil {
		t.Fatal(err)
	}
	cur := first
	for i := 1; i <= 5; i++ {
		cur.Data["n"] = fmt.Sprint(i)
		if cur, err = cms.Update(ctx, cur); err != nil {
			t.Fatal(err)
		}
	}
	// A list not older than the last update waits until the watch cache
	// has seen it, and so has let the first revision out of its window.
	if _, err := cms.List(ctx, ns, metav1.ListOptions{ResourceVersion: cur.ResourceVersion}); err != nil {
		t.Fatal(err)
	}

	w, err := cms.Watch(ctx, ns, metav1.ListOptions{ResourceVersion: first.ResourceVersion})
	if err != nil {
		if !client.IsGone(err) {
			t.Fatalf("watch from a too-old resourceVersion = %v, want Gone", err)
		}
		return // refused outright: as good as an ERROR event
	}
	defer w.Stop()
	ev := next(t, w)
	if ev.Type != watch.Error || ev.Status == nil || ev.Object != nil {
		t.Fatalf("event = %s %+v, want an ERROR event", ev.Type, ev)
	}
	if !client.IsGone(ev.Err()) || ev.Status.Code != 410 {
		t.Errorf("ERROR event status = %+v, want 410 Gone", ev.Status)
	}
	ended(t, w)

	// A watch from a current resourceVersion works again.
	w2, err := cms.Watch(ctx, ns, metav1.ListOptions{ResourceVersion: cur.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Stop()
	if err := cms.Delete(ctx, ns, "churn", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if ev := next(t, w2); ev.Type != watch.Deleted || ev.Object.Name != "churn" {
		t.Errorf("after relist: %s %+v", ev.Type, ev.Object)
	}
}

// TestIntegrationWatchFromListResourceVersion is the Reflector's path: list,
// then watch from the list's resourceVersion. That revision is etcd's
// latest, which may belong to another resource (here the namespace), so the
// server must catch its configmap watch cache up to it (an etcd progress
// notification).
func TestIntegrationWatchFromListResourceVersion(t *testing.T) {
	rc, ns := setup(t, testenv.Options{})
	ctx := ctxFor(t)
	cms := client.For[*corev1.ConfigMap](rc)
	list, err := cms.List(ctx, ns, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := cms.Watch(ctx, ns, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if _, err := cms.Create(ctx, configMap(ns, "web", nil, nil)); err != nil {
		t.Fatal(err)
	}
	ev := next(t, w)
	if ev.Type != watch.Added || ev.Object == nil || ev.Object.Name != "web" {
		t.Fatalf("event = %s %+v %+v, want web ADDED", ev.Type, ev.Object, ev.Status)
	}
}
