package daemonset

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/minictl/minictl/controllers/internal/controllertest"
)

func TestOnePodOnEachEligibleNode(t *testing.T) {
	r := runController(t)
	r.createNode(t, newNode("n1", map[string]string{"disk": "ssd"}))
	r.createNode(t, newNode("n2", map[string]string{"disk": "ssd"}))
	r.createNode(t, newNode("hdd", map[string]string{"disk": "hdd"}))
	r.createNode(t, newNode("tainted", map[string]string{"disk": "ssd"}, corev1.Taint{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}))
	r.createNode(t, newNode("cordoned", map[string]string{"disk": "ssd"}, corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}))

	ds := newDS("agent")
	ds.Spec.Template.Spec.NodeSelector = map[string]string{"disk": "ssd"}
	ds = r.createDS(t, ds)
	pods := r.waitForNodes(t, ds, "n1", "n2", "cordoned")

	crs := r.revisions(t, ds)
	cr := crs[1]
	if len(crs) != 1 || cr == nil {
		t.Fatalf("revisions %v, want revision 1 only", crs)
	}
	hash := cr.Labels[appsv1.DefaultDaemonSetUniqueLabelKey]
	if cr.Name != "agent-"+hash || cr.Labels["app"] != "agent" {
		t.Errorf("revision %s labels %v, want agent-<hash> with the template's labels and the hash", cr.Name, cr.Labels)
	}
	var data map[string]map[string]map[string]any
	if err := json.Unmarshal(cr.Data.Raw, &data); err != nil || data["spec"]["template"]["$patch"] != "replace" {
		t.Errorf("revision data %s, want a $patch: replace of spec.template", cr.Data.Raw)
	}

	for node, p := range pods {
		terms := p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
		want := []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}
		if fmt.Sprint(terms) != fmt.Sprint(want) {
			t.Errorf("pod on %s: node affinity %v, want %v", node, terms, want)
		}
		if p.Labels[appsv1.DefaultDaemonSetUniqueLabelKey] != hash || p.Labels[TemplateGenerationLabel] != "1" || p.Labels["app"] != "agent" {
			t.Errorf("pod on %s: labels %v", node, p.Labels)
		}
		for _, key := range []string{corev1.TaintNodeNotReady, corev1.TaintNodeUnreachable, corev1.TaintNodeUnschedulable, corev1.TaintNodeDiskPressure} {
			if !slices.ContainsFunc(p.Spec.Tolerations, func(tol corev1.Toleration) bool { return tol.Key == key && tol.Operator == corev1.TolerationOpExists }) {
				t.Errorf("pod on %s: tolerations %v lack %s", node, p.Spec.Tolerations, key)
			}
		}
		if !strings.HasPrefix(p.Name, "agent-") {
			t.Errorf("pod name %s, want agent-<suffix>", p.Name)
		}
	}
	r.waitForStatus(t, "agent", "desired 3, current 3, up to date 3", func(s appsv1.DaemonSetStatus, ds *appsv1.DaemonSet) bool {
		return s.DesiredNumberScheduled == 3 && s.CurrentNumberScheduled == 3 && s.UpdatedNumberScheduled == 3 &&
			s.NumberReady == 0 && s.NumberUnavailable == 3 && s.NumberMisscheduled == 0 && s.ObservedGeneration == ds.Generation
	})
	r.markAllReady(t, pods)
	r.waitForStatus(t, "agent", "3 ready and available", func(s appsv1.DaemonSetStatus, _ *appsv1.DaemonSet) bool {
		return s.NumberReady == 3 && s.NumberAvailable == 3 && s.NumberUnavailable == 0
	})
	controllertest.Eventually(t, "3 SuccessfulCreate events", func() (bool, string) {
		return countEvents(r.recorder, "Normal SuccessfulCreate Created pod: agent-") == 3, fmt.Sprint(r.recorder.Events())
	})
}

func TestFollowsNodesComingGoingAndChanging(t *testing.T) {
	r := runController(t)
	r.createNode(t, newNode("n1", nil))
	ds := r.createDS(t, newDS("agent"))
	r.waitForNodes(t, ds, "n1")

	r.createNode(t, newNode("n2", nil))
	r.waitForNodes(t, ds, "n1", "n2")

	// A NoSchedule taint keeps new pods off, not the one already there.
	r.updateNode(t, "n2", func(n *corev1.Node) {
		n.Spec.Taints = []corev1.Taint{{Key: "maintenance", Effect: corev1.TaintEffectNoSchedule}}
	})
	r.createNode(t, newNode("n3", nil, corev1.Taint{Key: "maintenance", Effect: corev1.TaintEffectNoSchedule}))
	r.waitForStatus(t, "agent", "n2's pod misscheduled but kept, none on n3", func(s appsv1.DaemonSetStatus, _ *appsv1.DaemonSet) bool {
		return s.DesiredNumberScheduled == 1 && s.NumberMisscheduled == 1
	})
	r.waitForNodes(t, ds, "n1", "n2")

	// A NoExecute taint evicts it.
	r.updateNode(t, "n2", func(n *corev1.Node) {
		n.Spec.Taints = []corev1.Taint{{Key: "maintenance", Effect: corev1.TaintEffectNoExecute}}
	})
	r.waitForNodes(t, ds, "n1")

	// Tolerating the taint brings the pods back, on n2 and n3.
	r.updateDS(t, "agent", func(ds *appsv1.DaemonSet) {
		ds.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: "maintenance", Operator: corev1.TolerationOpExists}}
	})
	r.waitForNodes(t, ds, "n1", "n2", "n3")

	// An unbound pod pinned to a node that is gone is deleted.
	if err := r.nodes.Delete(testCtx(t), "", "n3", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	r.waitForNodes(t, ds, "n1", "n2")
	r.waitForStatus(t, "agent", "desired 2", func(s appsv1.DaemonSetStatus, _ *appsv1.DaemonSet) bool {
		return s.DesiredNumberScheduled == 2 && s.NumberMisscheduled == 0
	})
}

func TestReplacesFailedAndDeletedPods(t *testing.T) {
	r := runController(t)
	r.createNode(t, newNode("n1", nil))
	ds := r.createDS(t, newDS("agent"))
	first := r.waitForNodes(t, ds, "n1")["n1"]

	r.setPhase(t, first, corev1.PodFailed)
	var second *corev1.Pod
	controllertest.Eventually(t, "the failed pod replaced", func() (bool, string) {
		pods := r.ownedPods(t, ds)["n1"]
		if len(pods) != 1 || pods[0].Name == first.Name {
			return false, fmt.Sprintf("pods %d", len(pods))
		}
		second = pods[0]
		return true, ""
	})
	want := fmt.Sprintf("Warning FailedDaemonPod Found failed daemon pod default/%s on node n1, will try to kill it", first.Name)
	if countEvents(r.recorder, want) != 1 {
		t.Errorf("events %q, want %q", r.recorder.Events(), want)
	}

	if err := r.pods.Delete(testCtx(t), ns, second.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, "the deleted pod replaced", func() (bool, string) {
		pods := r.ownedPods(t, ds)["n1"]
		return len(pods) == 1 && pods[0].Name != second.Name, fmt.Sprintf("pods %d", len(pods))
	})
}

func TestRollingUpdateOneNodeAtATime(t *testing.T) {
	r := runController(t)
	nodes := []string{"n1", "n2", "n3"}
	for _, n := range nodes {
		r.createNode(t, newNode(n, nil))
	}
	ds := r.createDS(t, newDS("agent"))
	r.markAllReady(t, r.waitForNodes(t, ds, nodes...))
	r.waitForStatus(t, "agent", "3 available", func(s appsv1.DaemonSetStatus, _ *appsv1.DaemonSet) bool { return s.NumberAvailable == 3 })

	r.updateDS(t, "agent", func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.Containers[0].Image = "agent:2" })
	for step := 1; step <= 3; step++ {
		var fresh *corev1.Pod
		controllertest.Eventually(t, fmt.Sprintf("step %d: %d new pods, the rest old", step, step), func() (bool, string) {
			byNode := r.ownedPods(t, ds)
			var newPods, oldPods int
			fresh = nil
			for _, pods := range byNode {
				for _, p := range pods {
					if p.Spec.Containers[0].Image == "agent:2" {
						newPods++
						if p.Status.Phase != corev1.PodRunning {
							fresh = p
						}
					} else {
						oldPods++
					}
				}
			}
			// Never more than one node without an available pod: the
			// new pod comes only after the old one is gone.
			return newPods == step && oldPods == 3-step && fresh != nil, fmt.Sprintf("new %d old %d", newPods, oldPods)
		})
		// The rollout waits for the new pod to be available.
		if old := len(r.ownedPods(t, ds)); old != 3 {
			t.Fatalf("step %d: %d nodes with pods, want 3", step, old)
		}
		r.setPhase(t, fresh, corev1.PodRunning)
	}
	ds = r.waitForStatus(t, "agent", "rolled out", func(s appsv1.DaemonSetStatus, ds *appsv1.DaemonSet) bool {
		return s.UpdatedNumberScheduled == 3 && s.NumberAvailable == 3 && s.ObservedGeneration == ds.Generation
	})
	crs := r.revisions(t, ds)
	if len(crs) != 2 || crs[1] == nil || crs[2] == nil {
		t.Fatalf("revisions %v, want 1 and 2", crs)
	}
	for _, p := range r.waitForNodes(t, ds, nodes...) {
		if p.Labels[appsv1.DefaultDaemonSetUniqueLabelKey] != crs[2].Labels[appsv1.DefaultDaemonSetUniqueLabelKey] || p.Labels[TemplateGenerationLabel] != "2" {
			t.Errorf("pod %s labels %v, want revision 2's hash and generation 2", p.Name, p.Labels)
		}
	}

	// An undo, as kubectl does it: revision 1's data patched onto the
	// DaemonSet. Revision 1's template is current again, as revision 3.
	if _, err := r.dss.Patch(testCtx(t), ns, "agent", types.StrategicMergePatchType, crs[1].Data.Raw); err != nil {
		t.Fatalf("patch with revision 1: %v", err)
	}
	controllertest.Eventually(t, "revision 1 renumbered 3", func() (bool, string) {
		now := r.revisions(t, ds)
		return len(now) == 2 && now[3] != nil && now[3].Name == crs[1].Name && now[2] != nil,
			fmt.Sprintf("revisions %v", crNames(now))
	})
	r.waitForStatus(t, "agent", "the undo rolling out", func(s appsv1.DaemonSetStatus, ds *appsv1.DaemonSet) bool {
		return s.ObservedGeneration == ds.Generation && s.UpdatedNumberScheduled < 3
	})
}

func crNames(crs map[int64]*appsv1.ControllerRevision) map[int64]string {
	out := map[int64]string{}
	for n, cr := range crs {
		out[n] = cr.Name
	}
	return out
}

func TestRollingUpdateWithSurge(t *testing.T) {
	r := runController(t)
	r.createNode(t, newNode("n1", nil))
	r.createNode(t, newNode("n2", nil))
	ds := newDS("agent")
	ds.Spec.UpdateStrategy = appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: ptr(intstr.FromInt32(0)), MaxSurge: ptr(intstr.FromString("50%"))}}
	ds = r.createDS(t, ds)
	old := r.waitForNodes(t, ds, "n1", "n2")
	r.markAllReady(t, old)
	r.waitForStatus(t, "agent", "2 available", func(s appsv1.DaemonSetStatus, _ *appsv1.DaemonSet) bool { return s.NumberAvailable == 2 })

	r.updateDS(t, "agent", func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.Containers[0].Image = "agent:2" })
	var surged string
	controllertest.Eventually(t, "a new pod beside the old one on one node", func() (bool, string) {
		byNode := r.ownedPods(t, ds)
		var two []string
		for node, pods := range byNode {
			if len(pods) == 2 {
				two = append(two, node)
			}
		}
		if len(two) == 1 {
			surged = two[0]
		}
		return len(two) == 1 && len(byNode) == 2, fmt.Sprintf("nodes with two pods %v", two)
	})
	// Both old pods still run: nothing became unavailable.
	for node, p := range old {
		if cur, err := r.pods.Get(testCtx(t), ns, p.Name); err != nil || cur.DeletionTimestamp != nil {
			t.Errorf("old pod on %s gone before its replacement was available", node)
		}
	}
	for _, p := range r.ownedPods(t, ds)[surged] {
		if p.Spec.Containers[0].Image == "agent:2" {
			r.setPhase(t, p, corev1.PodRunning)
		}
	}
	controllertest.Eventually(t, "the surged node's old pod deleted, the other node surging", func() (bool, string) {
		byNode := r.ownedPods(t, ds)
		return len(byNode[surged]) == 1 && byNode[surged][0].Spec.Containers[0].Image == "agent:2" && len(byNode) == 2,
			fmt.Sprintf("pods on %s: %d", surged, len(byNode[surged]))
	})
}

func TestOnDeleteWaitsForTheUser(t *testing.T) {
	r := runController(t)
	r.createNode(t, newNode("n1", nil))
	r.createNode(t, newNode("n2", nil))
	ds := newDS("agent")
	ds.Spec.UpdateStrategy = appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType}
	ds = r.createDS(t, ds)
	pods := r.waitForNodes(t, ds, "n1", "n2")
	r.markAllReady(t, pods)

	r.updateDS(t, "agent", func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.Containers[0].Image = "agent:2" })
	r.waitForStatus(t, "agent", "2 revisions seen, none updated", func(s appsv1.DaemonSetStatus, ds *appsv1.DaemonSet) bool {
		return s.ObservedGeneration == ds.Generation && s.UpdatedNumberScheduled == 0 && s.CurrentNumberScheduled == 2
	})
	if err := r.pods.Delete(testCtx(t), ns, pods["n1"].Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	now := r.waitForNodes(t, ds, "n1", "n2")
	controllertest.Eventually(t, "n1's pod recreated from the new template", func() (bool, string) {
		now = r.waitForNodes(t, ds, "n1", "n2")
		return now["n1"].Spec.Containers[0].Image == "agent:2", now["n1"].Spec.Containers[0].Image
	})
	if now["n2"].Name != pods["n2"].Name {
		t.Errorf("n2's pod replaced under OnDelete")
	}
}

func TestHistoryIsTrimmedToTheLimit(t *testing.T) {
	r := runController(t)
	ds := newDS("agent")
	ds.Spec.RevisionHistoryLimit = ptr(int32(1))
	ds = r.createDS(t, ds)
	for i := 1; i <= 4; i++ {
		if i > 1 {
			r.updateDS(t, "agent", func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.Containers[0].Image = fmt.Sprintf("agent:%d", i) })
		}
		controllertest.Eventually(t, fmt.Sprintf("revision %d", i), func() (bool, string) {
			crs := r.revisions(t, ds)
			return crs[int64(i)] != nil, fmt.Sprint(crNames(crs))
		})
	}
	controllertest.Eventually(t, "revisions 3 and 4 left", func() (bool, string) {
		crs := r.revisions(t, ds)
		return len(crs) == 2 && crs[3] != nil && crs[4] != nil, fmt.Sprint(crNames(crs))
	})
}

func ptr[T any](v T) *T { return &v }
