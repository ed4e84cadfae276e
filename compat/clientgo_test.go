package compat

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
)

// clientset is client-go's typed clientset for the test cluster, built
// the way a program outside the cluster builds it.
func clientset(t *testing.T) *kubernetes.Clientset {
	t.Helper()
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: env.url, QPS: 200, Burst: 400})
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func createNamespace(t *testing.T, cs *kubernetes.Clientset, name string) {
	t.Helper()
	ctx := context.Background()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{}) })
}

func TestClientGoTyped(t *testing.T) {
	ctx := context.Background()
	cs := clientset(t)
	const ns = "compat-typed"
	createNamespace(t, cs, ns)
	cms := cs.CoreV1().ConfigMaps(ns)

	// Create, get.
	created, err := cms.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "settings", Labels: map[string]string{"app": "web"}},
		Data:       map[string]string{"color": "blue"},
	}, metav1.CreateOptions{FieldManager: "compat-test"})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if created.UID == "" || created.ResourceVersion == "" || created.CreationTimestamp.IsZero() {
		t.Errorf("created object lacks server-set metadata: %+v", created.ObjectMeta)
	}
	got, err := cms.Get(ctx, "settings", metav1.GetOptions{})
	if err != nil || got.Data["color"] != "blue" || got.ResourceVersion != created.ResourceVersion {
		t.Fatalf("get: %v %+v", err, got)
	}
	// Sent back as it came, the object carries its resourceVersion, which a
	// create may not: kube-apiserver's storage refuses it before it looks
	// for the name.
	if _, err := cms.Create(ctx, created, metav1.CreateOptions{}); err == nil ||
		!strings.Contains(err.Error(), "resourceVersion should not be set on objects to be created") {
		t.Errorf("create of the created object: %v, want kube-apiserver's refusal of its resourceVersion", err)
	}
	again := created.DeepCopy()
	again.ResourceVersion = ""
	if _, err := cms.Create(ctx, again, metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		t.Errorf("second create: %v, want AlreadyExists", err)
	}

	// Update with conflict retry: the first attempt carries a stale
	// resourceVersion (someone wrote in between) and gets 409; the retry
	// reads again and wins.
	stale := got.DeepCopy()
	got.Data["color"] = "green"
	if _, err := cms.Update(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update: %v", err)
	}
	attempts := 0
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		attempts++
		cur := stale
		if attempts > 1 {
			var err error
			if cur, err = cms.Get(ctx, "settings", metav1.GetOptions{}); err != nil {
				return err
			}
		}
		cur.Data["size"] = "large"
		_, err := cms.Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil || attempts != 2 {
		t.Fatalf("RetryOnConflict: %v after %d attempts, want success on the second", err, attempts)
	}
	got, _ = cms.Get(ctx, "settings", metav1.GetOptions{})
	if got.Data["color"] != "green" || got.Data["size"] != "large" {
		t.Errorf("after retry: %v, want both writes", got.Data)
	}

	// Patches of every kind client-go sends.
	for _, p := range []struct {
		typ  types.PatchType
		body string
	}{
		{types.MergePatchType, `{"data":{"merge":"yes"}}`},
		{types.StrategicMergePatchType, `{"metadata":{"labels":{"tier":"front"}}}`},
		{types.JSONPatchType, `[{"op":"replace","path":"/data/color","value":"red"}]`},
	} {
		if _, err := cms.Patch(ctx, "settings", p.typ, []byte(p.body), metav1.PatchOptions{FieldManager: "compat-test"}); err != nil {
			t.Errorf("%s patch: %v", p.typ, err)
		}
	}
	got, _ = cms.Get(ctx, "settings", metav1.GetOptions{})
	if got.Data["merge"] != "yes" || got.Labels["tier"] != "front" || got.Data["color"] != "red" {
		t.Errorf("after patches: %v %v", got.Data, got.Labels)
	}
	list, err := cms.List(ctx, metav1.ListOptions{LabelSelector: "app=web,tier=front"})
	if err != nil || len(list.Items) != 1 {
		t.Errorf("list by labels: %v, %d items", err, len(list.Items))
	}

	// A deployment through the apps client and its scale subresource.
	deploys := cs.AppsV1().Deployments(ns)
	if _, err := deploys.Create(ctx, deployment("web", 1), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create deployment: %v", err)
	}
	// The deployment controller writes status meanwhile: a Scale read
	// before that is stale, as in Kubernetes, so this retries too.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		sc, err := deploys.GetScale(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if sc.Spec.Replicas != 1 && sc.Spec.Replicas != 4 {
			t.Errorf("scale %+v, want 1 replica", sc.Spec)
		}
		sc.Spec.Replicas = 4
		_, err = deploys.UpdateScale(ctx, "web", sc, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("update scale: %v", err)
	}
	if d, err := deploys.Get(ctx, "web", metav1.GetOptions{}); err != nil {
		t.Errorf("get after scale: %v", err)
	} else if *d.Spec.Replicas != 4 {
		t.Errorf("replicas %d after scale, want 4", *d.Spec.Replicas)
	}

	// Delete, with DeleteOptions in the body as client-go sends them.
	if err := cms.Delete(ctx, "settings", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &created.UID}, PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := cms.Get(ctx, "settings", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("get after delete: %v, want NotFound", err)
	}
	if err := cms.Delete(ctx, "settings", metav1.DeleteOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("second delete: %v, want NotFound", err)
	}
}

func deployment(name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}},
			},
		},
	}
}

// counter counts what an informer's handler is told.
type counter struct {
	adds, updates, deletes atomic.Int64
}

func (c *counter) handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { c.adds.Add(1) },
		UpdateFunc: func(_, _ any) { c.updates.Add(1) },
		DeleteFunc: func(any) { c.deletes.Add(1) },
	}
}

// TestClientGoInformers runs client-go's shared informers for pods,
// deployments and nodes through churn, and checks that each cache ends
// equal to a fresh list.
func TestClientGoInformers(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cs := clientset(t)
	const ns = "compat-informers"
	createNamespace(t, cs, ns)

	factory := informers.NewSharedInformerFactory(cs, 0)
	podInf := factory.Core().V1().Pods().Informer()
	deployInf := factory.Apps().V1().Deployments().Informer()
	nodeInf := factory.Core().V1().Nodes().Informer()
	var pods, deploys counter
	if _, err := podInf.AddEventHandler(pods.handler()); err != nil {
		t.Fatal(err)
	}
	if _, err := deployInf.AddEventHandler(deploys.handler()); err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	defer func() {
		cancel() // Shutdown waits for the informers, which stop with ctx
		factory.Shutdown()
	}()
	syncCtx, syncCancel := context.WithTimeout(ctx, 30*time.Second)
	defer syncCancel()
	if !cache.WaitForCacheSync(syncCtx.Done(), podInf.HasSynced, deployInf.HasSynced, nodeInf.HasSynced) {
		t.Fatal("informers did not sync within 30s")
	}

	// Churn: 30 pods created, relabelled, and 20 of them deleted; a
	// deployment created and scaled. The pods can be placed nowhere, so
	// their deletion is immediate and nothing else changes them for long.
	const n = 30
	podsAPI := cs.CoreV1().Pods(ns)
	for i := range n {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("churn-%02d", i), Labels: map[string]string{"round": "1"}},
			Spec: corev1.PodSpec{
				NodeSelector: map[string]string{"compat.minictl.io/nowhere": "true"},
				Containers:   []corev1.Container{{Name: "c", Image: "busybox"}},
			},
		}
		if _, err := podsAPI.Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create pod %d: %v", i, err)
		}
	}
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, deployment("churn", 1), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create deployment: %v", err)
	}
	for i := range n {
		patch := []byte(`{"metadata":{"labels":{"round":"2"}}}`)
		if _, err := podsAPI.Patch(ctx, fmt.Sprintf("churn-%02d", i), types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatalf("patch pod %d: %v", i, err)
		}
	}
	for i := range 20 {
		if err := podsAPI.Delete(ctx, fmt.Sprintf("churn-%02d", i), metav1.DeleteOptions{}); err != nil {
			t.Fatalf("delete pod %d: %v", i, err)
		}
	}
	if _, err := cs.AppsV1().Deployments(ns).Patch(ctx, "churn", types.MergePatchType, []byte(`{"spec":{"replicas":0}}`), metav1.PatchOptions{}); err != nil {
		t.Fatalf("scale deployment: %v", err)
	}

	// The handlers heard it all; the caches end equal to fresh lists.
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return pods.adds.Load() >= n && pods.updates.Load() >= n && pods.deletes.Load() >= 20 &&
			deploys.adds.Load() >= 1 && deploys.updates.Load() >= 1, nil
	})
	if err != nil {
		t.Errorf("pod events: %d adds, %d updates, %d deletes (want >= %d, %d, 20); deployment events: %d adds, %d updates",
			pods.adds.Load(), pods.updates.Load(), pods.deletes.Load(), n, n, deploys.adds.Load(), deploys.updates.Load())
	}
	equalToList(t, "pods", podInf.GetStore(), func() ([]metav1.Object, error) {
		l, err := podsAPI.List(ctx, metav1.ListOptions{})
		return objects(l, err, func(l *corev1.PodList) []corev1.Pod { return l.Items })
	}, ns)
	equalToList(t, "deployments", deployInf.GetStore(), func() ([]metav1.Object, error) {
		l, err := cs.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
		return objects(l, err, func(l *appsv1.DeploymentList) []appsv1.Deployment { return l.Items })
	}, ns)
	equalToList(t, "nodes", nodeInf.GetStore(), func() ([]metav1.Object, error) {
		l, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		return objects(l, err, func(l *corev1.NodeList) []corev1.Node { return l.Items })
	}, "")
	if got := len(podInf.GetIndexer().List()); got < n-20 {
		t.Errorf("pod cache holds %d pods, want at least the %d left", got, n-20)
	}
}

func objects[L any, T any](list *L, err error, items func(*L) []T) ([]metav1.Object, error) {
	if err != nil {
		return nil, err
	}
	var out []metav1.Object
	for _, it := range items(list) {
		out = append(out, any(&it).(metav1.Object))
	}
	return out, nil
}

// equalToList waits until the informer's store (restricted to namespace ns,
// if given) holds exactly what a fresh list returns: the same names at the
// same resourceVersions.
func equalToList(t *testing.T, what string, store cache.Store, list func() ([]metav1.Object, error), ns string) {
	t.Helper()
	versions := func(objs []metav1.Object) map[string]string {
		m := map[string]string{}
		for _, o := range objs {
			if ns == "" || o.GetNamespace() == ns {
				m[o.GetNamespace()+"/"+o.GetName()] = o.GetResourceVersion()
			}
		}
		return m
	}
	var cached, fresh map[string]string
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		var objs []metav1.Object
		for _, o := range store.List() {
			objs = append(objs, o.(metav1.Object))
		}
		cached = versions(objs)
		l, err := list()
		if err != nil {
			return false, err
		}
		fresh = versions(l)
		return maps.Equal(cached, fresh), nil
	})
	if err != nil {
		t.Errorf("%s: cache %v\nlist  %v (%v)", what, summary(cached), summary(fresh), err)
	}
}

func summary(m map[string]string) string {
	keys := slices.Sorted(maps.Keys(m))
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s@%s ", k, m[k])
	}
	return b.String()
}
