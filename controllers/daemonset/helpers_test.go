package daemonset

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

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/client/record"
	"github.com/minictl/minictl/controllers/internal/controller"
	"github.com/minictl/minictl/controllers/internal/controllertest"
)

// These tests run the controller against a real API server on a real etcd
// (internal/testenv). No kubelet or scheduler runs: nodes are created
// directly, pods stay unbound (pinned to their node by affinity) and
// Pending, so a delete removes them at once, and a test that needs ready
// or failed pods plays the kubelet with UpdateStatus.

const ns = "default"

type running struct {
	pods     *client.Client[*corev1.Pod]
	nodes    *client.Client[*corev1.Node]
	dss      *client.Client[*appsv1.DaemonSet]
	crs      *client.Client[*appsv1.ControllerRevision]
	recorder *record.FakeRecorder
}

// runController starts an API server and the controller on it, with two
// workers; both stop when the test ends.
func runController(t *testing.T) *running {
	t.Helper()
	env := controllertest.Start(t)
	rec := &record.FakeRecorder{}
	c, err := New(Options{Common: controller.Common{Client: env.Client, Informers: env.Informers, Recorder: rec, Logger: controllertest.Logger(t)}})
	if err != nil {
		t.Fatal(err)
	}
	controllertest.Run(t, env.Informers, 2, c)
	return &running{
		pods: client.For[*corev1.Pod](env.Client), nodes: client.For[*corev1.Node](env.Client),
		dss: client.For[*appsv1.DaemonSet](env.Client), crs: client.For[*appsv1.ControllerRevision](env.Client),
		recorder: rec,
	}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func newDS(name string) *appsv1.DaemonSet {
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "agent:1"}}},
			},
		},
	}
}

func newNode(name string, labels map[string]string, taints ...corev1.Taint) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.NodeSpec{Taints: taints}}
}

func (r *running) createNode(t *testing.T, node *corev1.Node) {
	t.Helper()
	if _, err := r.nodes.Create(testCtx(t), node); err != nil {
		t.Fatalf("create node %s: %v", node.Name, err)
	}
}

func (r *running) createDS(t *testing.T, ds *appsv1.DaemonSet) *appsv1.DaemonSet {
	t.Helper()
	out, err := r.dss.Create(testCtx(t), ds)
	if err != nil {
		t.Fatalf("create daemonset: %v", err)
	}
	return out
}

// updateDS applies change to the DaemonSet name, retrying conflicts with
// the controller's status writes.
func (r *running) updateDS(t *testing.T, name string, change func(*appsv1.DaemonSet)) *appsv1.DaemonSet {
	t.Helper()
	for {
		cur, err := r.dss.Get(testCtx(t), ns, name)
		if err != nil {
			t.Fatal(err)
		}
		change(cur)
		out, err := r.dss.Update(testCtx(t), cur)
		if client.IsConflict(err) {
			continue
		}
		if err != nil {
			t.Fatalf("update daemonset %s: %v", name, err)
		}
		return out
	}
}

func (r *running) updateNode(t *testing.T, name string, change func(*corev1.Node)) {
	t.Helper()
	for {
		cur, err := r.nodes.Get(testCtx(t), "", name)
		if err != nil {
			t.Fatal(err)
		}
		change(cur)
		_, err = r.nodes.Update(testCtx(t), cur)
		if client.IsConflict(err) {
			continue
		}
		if err != nil {
			t.Fatalf("update node %s: %v", name, err)
		}
		return
	}
}

// ownedPods returns the live pods ds controls, by the node each is pinned to.
func (r *running) ownedPods(t *testing.T, ds *appsv1.DaemonSet) map[string][]*corev1.Pod {
	t.Helper()
	list, err := r.pods.List(testCtx(t), ns, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list pods: %v", err)
	}
	out := map[string][]*corev1.Pod{}
	for _, p := range list.Items {
		if ref := metav1.GetControllerOf(p); ref == nil || ref.UID != ds.UID || p.DeletionTimestamp != nil {
			continue
		}
		node, err := targetNode(p)
		if err != nil {
			t.Errorf("pod %s names no node: %v", p.Name, err)
		}
		out[node] = append(out[node], p)
	}
	return out
}

// waitForNodes waits until ds has exactly one pod on each of nodes and on
// no other node, and returns them by node.
func (r *running) waitForNodes(t *testing.T, ds *appsv1.DaemonSet, nodes ...string) map[string]*corev1.Pod {
	t.Helper()
	slices.Sort(nodes)
	var out map[string]*corev1.Pod
	controllertest.Eventually(t, fmt.Sprintf("one pod on each of %v", nodes), func() (bool, string) {
		byNode := r.ownedPods(t, ds)
		out = map[string]*corev1.Pod{}
		var got []string
		for node, pods := range byNode {
			got = append(got, fmt.Sprintf("%s×%d", node, len(pods)))
			if len(pods) == 1 {
				out[node] = pods[0]
			}
		}
		slices.Sort(got)
		want := make([]string, len(nodes))
		for i, n := range nodes {
			want[i] = n + "×1"
		}
		return slices.Equal(got, want), fmt.Sprintf("pods per node %v", got)
	})
	return out
}

// setPhase plays the kubelet: the pod becomes phase, Ready when Running.
func (r *running) setPhase(t *testing.T, pod *corev1.Pod, phase corev1.PodPhase) {
	t.Helper()
	for {
		cur, err := r.pods.Get(testCtx(t), pod.Namespace, pod.Name)
		if err != nil {
			t.Fatalf("get pod %s: %v", pod.Name, err)
		}
		cur.Status.Phase = phase
		ready := corev1.ConditionFalse
		if phase == corev1.PodRunning {
			ready = corev1.ConditionTrue
		}
		cur.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: ready, LastTransitionTime: metav1.Now()}}
		_, err = r.pods.UpdateStatus(testCtx(t), cur)
		if client.IsConflict(err) {
			continue
		}
		if err != nil {
			t.Fatalf("set pod %s %s: %v", pod.Name, phase, err)
		}
		return
	}
}

func (r *running) markAllReady(t *testing.T, pods map[string]*corev1.Pod) {
	t.Helper()
	for _, p := range pods {
		r.setPhase(t, p, corev1.PodRunning)
	}
}

// waitForStatus waits until the DaemonSet name's status satisfies ok.
func (r *running) waitForStatus(t *testing.T, name, what string, ok func(appsv1.DaemonSetStatus, *appsv1.DaemonSet) bool) *appsv1.DaemonSet {
	t.Helper()
	var ds *appsv1.DaemonSet
	controllertest.Eventually(t, what, func() (bool, string) {
		var err error
		ds, err = r.dss.Get(testCtx(t), ns, name)
		if err != nil {
			return false, err.Error()
		}
		return ok(ds.Status, ds), fmt.Sprintf("status %+v generation %d", ds.Status, ds.Generation)
	})
	return ds
}

// revisions returns the ControllerRevisions ds controls, by number.
func (r *running) revisions(t *testing.T, ds *appsv1.DaemonSet) map[int64]*appsv1.ControllerRevision {
	t.Helper()
	list, err := r.crs.List(testCtx(t), ns, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64]*appsv1.ControllerRevision{}
	for _, cr := range list.Items {
		if ref := metav1.GetControllerOf(cr); ref != nil && ref.UID == ds.UID {
			out[cr.Revision] = cr
		}
	}
	return out
}

func countEvents(rec *record.FakeRecorder, prefix string) int {
	n := 0
	for _, e := range rec.Events() {
		if strings.HasPrefix(e, prefix) {
			n++
		}
	}
	return n
}
