package e2e

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/internal/minitest"
)

// TestDaemonSet runs a DaemonSet on the built binary: one Running pod on
// every node but the one tainted NoExecute (not NoSchedule: a pod the
// controller made before its informer saw a NoSchedule taint would stay
// Pending, as in kube, while a NoExecute taint makes it go); a node that joins later
// (a kubelet started as its own process) gets its pod, which goes when
// the node does; a template change replaces the pods one node at a time;
// a selector that does not match the template is refused naming the
// field; and deleting the DaemonSet takes its pods and revisions with it.
func TestDaemonSet(t *testing.T) {
	// No cloud: node-4 below is a kubelet of its own with no machine behind
	// it, and in a cloud cluster the cloud-node-lifecycle controller deletes
	// such a node the first time it is late with a heartbeat, as kube's does.
	c := up(t, minitest.FreeAddr(t), t.TempDir(), "--fast", "--nodes", "3", "--cloud-provider=")
	rc := c.client(t)
	ctx := context.Background()
	dss, pods, nodes := client.For[*appsv1.DaemonSet](rc), client.For[*corev1.Pod](rc), client.For[*corev1.Node](rc)
	crs := client.For[*appsv1.ControllerRevision](rc)

	// The refusal first: it must change nothing.
	code, status := c.do(http.MethodPost, "/apis/apps/v1/namespaces/default/daemonsets", "application/json",
		`{"apiVersion":"apps/v1","kind":"DaemonSet","metadata":{"name":"bad"},
		  "spec":{"selector":{"matchLabels":{"app":"agent"}},
		          "template":{"metadata":{"labels":{"app":"other"}},"spec":{"containers":[{"name":"a","image":"agent:1"}]}}}}`)
	if code != http.StatusUnprocessableEntity || field(status, "reason") != "Invalid" ||
		!strings.Contains(fmt.Sprint(field(status, "message")), "spec.template.metadata.labels") ||
		!strings.Contains(fmt.Sprint(field(status, "message")), "`selector` does not match template `labels`") {
		t.Fatalf("mismatched selector: %d %v", code, status)
	}
	if _, err := dss.Get(ctx, "default", "bad"); !client.IsNotFound(err) {
		t.Fatalf("the refused DaemonSet exists: %v", err)
	}

	eventually(t, "3 nodes", func() (bool, string) {
		l, err := nodes.List(ctx, "", metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		return len(l.Items) == 3, fmt.Sprintf("%d nodes", len(l.Items))
	})
	taint(t, nodes, "node-2", corev1.Taint{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoExecute})

	labels := map[string]string{"app": "agent"}
	ds, err := dss.Create(ctx, &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "default"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "agent:1"}}},
			},
		},
	})
	if err != nil {
		t.Fatal(err)
	}

	// onNodes waits until each of want runs one Running, Ready pod of the
	// DaemonSet with image, bound there, and no other node runs one.
	onNodes := func(image string, want ...string) map[string]*corev1.Pod {
		t.Helper()
		var byNode map[string]*corev1.Pod
		eventually(t, fmt.Sprintf("one running %s pod on each of %v", image, want), func() (bool, string) {
			byNode = map[string]*corev1.Pod{}
			var got []string
			for _, p := range livePods(t, pods, "agent") {
				got = append(got, p.Spec.NodeName+":"+p.Spec.Containers[0].Image+":"+string(p.Status.Phase))
				if p.Spec.Containers[0].Image == image && p.Status.Phase == corev1.PodRunning && api.PodIsReady(p) {
					byNode[p.Spec.NodeName] = p
				}
			}
			have := slices.Sorted(func(yield func(string) bool) {
				for n := range byNode {
					if !yield(n) {
						return
					}
				}
			})
			return slices.Equal(have, want) && len(got) == len(want), fmt.Sprintf("pods %v", got)
		})
		return byNode
	}
	first := onNodes("agent:1", "node-1", "node-3")
	for node, p := range first {
		if ref := metav1.GetControllerOf(p); ref == nil || ref.Kind != "DaemonSet" || ref.UID != ds.UID {
			t.Errorf("pod on %s: controller %+v", node, ref)
		}
	}

	// A fourth node, its kubelet a process of its own, gets its pod.
	kubelet := minitest.Start(t, false, "kubelet", "--server", c.URL, "--name", "node-4", "--fast")
	onNodes("agent:1", "node-1", "node-3", "node-4")
	waitDS(t, dss, "3 desired, 3 available", func(s appsv1.DaemonSetStatus) bool {
		return s.DesiredNumberScheduled == 3 && s.NumberAvailable == 3 && s.UpdatedNumberScheduled == 3
	})

	// A rolling update: one node at a time (maxUnavailable 1), so at every
	// moment at least 2 of the 3 nodes run a ready pod.
	cur, err := dss.Get(ctx, "default", "agent")
	if err != nil {
		t.Fatal(err)
	}
	cur.Spec.Template.Spec.Containers[0].Image = "agent:2"
	if _, err := dss.Update(ctx, cur); err != nil {
		t.Fatal(err)
	}
	minReady := 3
	deadline := time.Now().Add(clusterTimeout)
	for {
		live := livePods(t, pods, "agent")
		ready, updated := 0, 0
		for _, p := range live {
			if p.Status.Phase == corev1.PodRunning && api.PodIsReady(p) {
				ready++
				if p.Spec.Containers[0].Image == "agent:2" {
					updated++
				}
			}
		}
		minReady = min(minReady, ready)
		if updated == 3 && len(live) == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("rollout did not finish: %d ready, %d updated of %d pods", ready, updated, len(live))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if minReady < 2 {
		t.Errorf("ready pods dropped to %d during the rollout; maxUnavailable 1 allows no fewer than 2", minReady)
	}
	onNodes("agent:2", "node-1", "node-3", "node-4")
	waitDS(t, dss, "rolled out", func(s appsv1.DaemonSetStatus) bool {
		return s.UpdatedNumberScheduled == 3 && s.NumberAvailable == 3
	})
	history, err := crs.List(ctx, "default", metav1.ListOptions{LabelSelector: "app=agent"})
	if err != nil || len(history.Items) != 2 {
		t.Fatalf("revisions: %v, %v; want 2", history, err)
	}

	// The fourth node goes away (its kubelet stopped, its Node deleted):
	// its pod goes with it, and the DaemonSet wants one pod fewer.
	if err := kubelet.Stop(); err != nil {
		t.Errorf("the node-4 kubelet did not exit cleanly: %v\n%s", err, kubelet.Stderr)
	}
	if err := nodes.Delete(ctx, "", "node-4", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	onNodes("agent:2", "node-1", "node-3")
	waitDS(t, dss, "2 desired, 2 available", func(s appsv1.DaemonSetStatus) bool {
		return s.DesiredNumberScheduled == 2 && s.NumberAvailable == 2 && s.NumberMisscheduled == 0
	})

	// Deleting the DaemonSet takes its pods and revisions with it.
	if err := dss.Delete(ctx, "default", "agent", metav1.DeleteOptions{PropagationPolicy: ptrTo(metav1.DeletePropagationBackground)}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "pods and revisions collected", func() (bool, string) {
		left, err := crs.List(ctx, "default", metav1.ListOptions{LabelSelector: "app=agent"})
		if err != nil {
			return false, err.Error()
		}
		live := livePods(t, pods, "agent")
		return len(live) == 0 && len(left.Items) == 0, fmt.Sprintf("%d pods, %d revisions", len(live), len(left.Items))
	})
}

// taint adds taint to the node name, as kubectl taint does.
func taint(t *testing.T, nodes *client.Client[*corev1.Node], name string, taint corev1.Taint) {
	t.Helper()
	eventually(t, "taint "+name, func() (bool, string) {
		n, err := nodes.Get(context.Background(), "", name)
		if err != nil {
			return false, err.Error()
		}
		n.Spec.Taints = append(n.Spec.Taints, taint)
		_, err = nodes.Update(context.Background(), n)
		return err == nil, fmt.Sprint(err)
	})
}

func waitDS(t *testing.T, dss *client.Client[*appsv1.DaemonSet], what string, ok func(appsv1.DaemonSetStatus) bool) {
	t.Helper()
	eventually(t, what, func() (bool, string) {
		ds, err := dss.Get(context.Background(), "default", "agent")
		if err != nil {
			return false, err.Error()
		}
		return ds.Status.ObservedGeneration == ds.Generation && ok(ds.Status), fmt.Sprintf("%+v", ds.Status)
	})
}
