package replicaset

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/client/record"
	"github.com/minictl/minictl/controllers/internal/controller"
	"github.com/minictl/minictl/controllers/internal/controllertest"
	"github.com/minictl/minictl/informer"
)

// These tests run the controller against a real API server on a real etcd
// (internal/testenv). No kubelet or scheduler runs: pods stay Pending and
// unscheduled, so a delete removes them at once, and a test that needs
// ready pods plays the kubelet with UpdateStatus.

const ns = "default"

// apiEnv is a running API server and clients of it.
type apiEnv struct {
	env  *controllertest.Env
	rc   *client.RESTClient
	pods *client.Client[*corev1.Pod]
	rss  *client.Client[*appsv1.ReplicaSet]
}

func startAPI(t *testing.T) *apiEnv {
	t.Helper()
	env := controllertest.Start(t)
	rc := env.Client
	return &apiEnv{env: env, rc: rc, pods: client.For[*corev1.Pod](rc), rss: client.For[*appsv1.ReplicaSet](rc)}
}

// running is a controller running with a shared informer factory.
type running struct {
	*apiEnv
	ctrl     *Controller[*appsv1.ReplicaSet]
	recorder *record.FakeRecorder
}

// runController starts an API server and the controller on it, with two
// workers; both stop when the test ends.
func runController(t *testing.T) *running {
	t.Helper()
	return runControllerLogging(t, controllertest.Logger(t))
}

// runControllerLogging is runController with the controller logging to log.
func runControllerLogging(t *testing.T, log *slog.Logger) *running {
	t.Helper()
	a := startAPI(t)
	rec := &record.FakeRecorder{}
	c, err := New(Options{Common: controller.Common{Client: a.rc, Informers: a.env.Informers, Recorder: rec, Logger: log}})
	if err != nil {
		t.Fatal(err)
	}
	controllertest.Run(t, a.env.Informers, 2, c)
	return &running{apiEnv: a, ctrl: c, recorder: rec}
}

// testCtx bounds a test's own requests.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func newRS(name string, replicas int32) *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "app", Image: "nginx:1.27",
				}}},
			},
		},
	}
}

func newPod(name string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx:1.27"}}},
	}
}

func (a *apiEnv) createRS(t *testing.T, rs *appsv1.ReplicaSet) *appsv1.ReplicaSet {
	t.Helper()
	out, err := a.rss.Create(testCtx(t), rs)
	if err != nil {
		t.Fatalf("create replicaset: %v", err)
	}
	return out
}

// listPods returns the pods in ns whose labels match sel ("app=web").
func (a *apiEnv) listPods(t *testing.T, sel string) []*corev1.Pod {
	t.Helper()
	list, err := a.pods.List(testCtx(t), ns, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		t.Fatalf("list pods: %v", err)
	}
	return list.Items
}

// ownedPods returns the pods rs controls.
func (a *apiEnv) ownedPods(t *testing.T, rs *appsv1.ReplicaSet) []*corev1.Pod {
	t.Helper()
	list, err := a.pods.List(testCtx(t), ns, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list pods: %v", err)
	}
	var out []*corev1.Pod
	for _, p := range list.Items {
		if ref := metav1.GetControllerOf(p); ref != nil && ref.UID == rs.UID {
			out = append(out, p)
		}
	}
	return out
}

// waitForOwnedPods waits until rs controls exactly n pods, and returns them.
func (a *apiEnv) waitForOwnedPods(t *testing.T, rs *appsv1.ReplicaSet, n int) []*corev1.Pod {
	t.Helper()
	var pods []*corev1.Pod
	controllertest.Eventually(t, fmt.Sprintf("%d pods owned by %s", n, rs.Name), func() (bool, string) {
		pods = a.ownedPods(t, rs)
		return len(pods) == n, fmt.Sprintf("%d pods", len(pods))
	})
	return pods
}

// markReady plays the kubelet: pod becomes Running and Ready.
func (a *apiEnv) markReady(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	for {
		cur, err := a.pods.Get(testCtx(t), pod.Namespace, pod.Name)
		if err != nil {
			t.Fatalf("get pod %s: %v", pod.Name, err)
		}
		cur.Status.Phase = corev1.PodRunning
		cur.Status.Conditions = []corev1.PodCondition{{
			Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now(),
		}}
		_, err = a.pods.UpdateStatus(testCtx(t), cur)
		if client.IsConflict(err) {
			continue
		}
		if err != nil {
			t.Fatalf("mark pod %s ready: %v", pod.Name, err)
		}
		return
	}
}

// scale sets the replicas of the ReplicaSet name, retrying conflicts with
// the controller's status writes.
func (a *apiEnv) scale(t *testing.T, name string, replicas int32) {
	t.Helper()
	for {
		cur, err := a.rss.Get(testCtx(t), ns, name)
		if err != nil {
			t.Fatal(err)
		}
		cur.Spec.Replicas = &replicas
		_, err = a.rss.Update(testCtx(t), cur)
		if client.IsConflict(err) {
			continue
		}
		if err != nil {
			t.Fatalf("scale %s to %d: %v", name, replicas, err)
		}
		return
	}
}

func ownerUIDs(pod *corev1.Pod) []string {
	var out []string
	for _, r := range pod.OwnerReferences {
		out = append(out, string(r.UID))
	}
	return out
}

// countEvents counts the recorded events that start with prefix
// ("Normal SuccessfulCreate").
func countEvents(rec *record.FakeRecorder, prefix string) int {
	n := 0
	for _, e := range rec.Events() {
		if strings.HasPrefix(e, prefix) {
			n++
		}
	}
	return n
}

// newTestController is the controller without informers, for tests that
// call sync directly: they fill the returned indexers themselves, so the
// cache is exactly as stale as the test wants.
func newTestController(t *testing.T, opts Options) (*Controller[*appsv1.ReplicaSet], informer.Indexer, informer.Indexer) {
	t.Helper()
	rsIndexer := informer.NewIndexer(nil, informer.Indexers{informer.NamespaceIndex: informer.MetaNamespaceIndexFunc})
	podIndexer := informer.NewIndexer(nil, informer.Indexers{
		informer.NamespaceIndex:       informer.MetaNamespaceIndexFunc,
		controller.ControllerUIDIndex: controller.ControllerUIDIndexFunc,
	})
	if opts.Logger == nil {
		opts.Logger = controllertest.Logger(t)
	}
	opts.Common = opts.WithDefaults(Name)
	c := newController(opts, ReplicaSets, rsIndexer, podIndexer)
	t.Cleanup(c.queue.ShutDown)
	return c, rsIndexer, podIndexer
}
