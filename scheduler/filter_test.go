package scheduler

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func testNode(name string, cpu, memory, pods string) *corev1.Node {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(cpu),
		corev1.ResourceMemory: resource.MustParse(memory),
		corev1.ResourcePods:   resource.MustParse(pods),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}},
		Status: corev1.NodeStatus{
			Capacity:    capacity,
			Allocatable: capacity.DeepCopy(),
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
}

func testPod(name, cpu, memory string) *corev1.Pod {
	requests := corev1.ResourceList{}
	if cpu != "" {
		requests[corev1.ResourceCPU] = resource.MustParse(cpu)
	}
	if memory != "" {
		requests[corev1.ResourceMemory] = resource.MustParse(memory)
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{
			SchedulerName: DefaultSchedulerName,
			Containers:    []corev1.Container{{Name: "app", Image: "nginx", Resources: corev1.ResourceRequirements{Requests: requests}}},
		},
	}
}

func TestFilter(t *testing.T) {
	tainted := func(n *corev1.Node, taints ...corev1.Taint) *corev1.Node {
		n.Spec.Taints = taints
		return n
	}
	withLabel := func(n *corev1.Node, k, v string) *corev1.Node {
		n.Labels[k] = v
		return n
	}
	notReady := func(n *corev1.Node, s corev1.ConditionStatus) *corev1.Node {
		n.Status.Conditions[0].Status = s
		return n
	}
	cordoned := func(n *corev1.Node) *corev1.Node {
		n.Spec.Unschedulable = true
		return n
	}
	tolerating := func(p *corev1.Pod, tols ...corev1.Toleration) *corev1.Pod {
		p.Spec.Tolerations = tols
		return p
	}
	selecting := func(p *corev1.Pod, sel map[string]string) *corev1.Pod {
		p.Spec.NodeSelector = sel
		return p
	}
	withAffinity := func(p *corev1.Pod, terms ...corev1.NodeSelectorTerm) *corev1.Pod {
		p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms},
		}}
		return p
	}
	gpu := corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}
	used := func(cpu string, pods int64) *nodeUsage {
		u := newNodeUsage()
		q := resource.MustParse(cpu)
		u.requested[corev1.ResourceCPU] = q.MilliValue()
		u.pods = pods
		return u
	}
	hostPort := func(p *corev1.Pod, port int32) *corev1.Pod {
		p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: port}}
		return p
	}
	portsUsed := func(port int32) *nodeUsage {
		u := newNodeUsage()
		u.add(usageOf(hostPort(testPod("other", "", ""), port)))
		return u
	}

	tests := []struct {
		name string
		pod  *corev1.Pod
		node *corev1.Node
		used *nodeUsage
		want []string
	}{
		{"fits", testPod("p", "1", "1Gi"), testNode("n", "4", "8Gi", "110"), nil, nil},
		{"cordoned", testPod("p", "", ""), cordoned(testNode("n", "4", "8Gi", "110")), nil,
			[]string{"node(s) were unschedulable"}},
		{"cordoned but tolerated", tolerating(testPod("p", "", ""),
			corev1.Toleration{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists}),
			cordoned(testNode("n", "4", "8Gi", "110")), nil, nil},
		{"untolerated taint", testPod("p", "", ""), tainted(testNode("n", "4", "8Gi", "110"), gpu), nil,
			[]string{"node(s) had untolerated taint {dedicated: gpu}"}},
		{"taint tolerated by value", tolerating(testPod("p", "", ""),
			corev1.Toleration{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}),
			tainted(testNode("n", "4", "8Gi", "110"), gpu), nil, nil},
		{"taint not tolerated by another value", tolerating(testPod("p", "", ""),
			corev1.Toleration{Key: "dedicated", Value: "db"}),
			tainted(testNode("n", "4", "8Gi", "110"), gpu), nil,
			[]string{"node(s) had untolerated taint {dedicated: gpu}"}},
		{"PreferNoSchedule is no bar", testPod("p", "", ""),
			tainted(testNode("n", "4", "8Gi", "110"), corev1.Taint{Key: "k", Effect: corev1.TaintEffectPreferNoSchedule}), nil, nil},
		{"not ready", testPod("p", "", ""), notReady(testNode("n", "4", "8Gi", "110"), corev1.ConditionFalse), nil,
			[]string{"node(s) had untolerated taint {node.kubernetes.io/not-ready: }"}},
		{"unknown", testPod("p", "", ""), notReady(testNode("n", "4", "8Gi", "110"), corev1.ConditionUnknown), nil,
			[]string{"node(s) had untolerated taint {node.kubernetes.io/unreachable: }"}},
		{"not ready but tolerated", tolerating(testPod("p", "", ""),
			corev1.Toleration{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}),
			notReady(testNode("n", "4", "8Gi", "110"), corev1.ConditionFalse), nil, nil},
		{"nodeSelector matches", selecting(testPod("p", "", ""), map[string]string{"disk": "ssd"}),
			withLabel(testNode("n", "4", "8Gi", "110"), "disk", "ssd"), nil, nil},
		{"nodeSelector does not match", selecting(testPod("p", "", ""), map[string]string{"disk": "ssd"}),
			withLabel(testNode("n", "4", "8Gi", "110"), "disk", "hdd"), nil,
			[]string{"node(s) didn't match Pod's node affinity/selector"}},
		{"affinity: one term of two matches", withAffinity(testPod("p", "", ""),
			corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"b"}}}},
			corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a", "c"}}}}),
			withLabel(testNode("n", "4", "8Gi", "110"), "zone", "a"), nil, nil},
		{"affinity: NotIn excludes", withAffinity(testPod("p", "", ""),
			corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"a"}}}}),
			withLabel(testNode("n", "4", "8Gi", "110"), "zone", "a"), nil,
			[]string{"node(s) didn't match Pod's node affinity/selector"}},
		{"affinity: matchFields on the name", withAffinity(testPod("p", "", ""),
			corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"n"}}}}),
			testNode("n", "4", "8Gi", "110"), nil, nil},
		{"affinity: an empty term matches nothing", withAffinity(testPod("p", "", ""), corev1.NodeSelectorTerm{}),
			testNode("n", "4", "8Gi", "110"), nil, []string{"node(s) didn't match Pod's node affinity/selector"}},
		{"insufficient cpu and memory", testPod("p", "5", "9Gi"), testNode("n", "4", "8Gi", "110"), nil,
			[]string{"Insufficient cpu", "Insufficient memory"}},
		{"cpu used by other pods", testPod("p", "1", ""), testNode("n", "4", "8Gi", "110"), used("3500m", 3),
			[]string{"Insufficient cpu"}},
		{"exactly full fits", testPod("p", "500m", ""), testNode("n", "4", "8Gi", "110"), used("3500m", 3), nil},
		{"too many pods", testPod("p", "", ""), testNode("n", "4", "8Gi", "2"), used("0", 2),
			[]string{"Too many pods"}},
		{"host port taken", hostPort(testPod("p", "", ""), 8080), testNode("n", "4", "8Gi", "110"), portsUsed(8080),
			[]string{"node(s) didn't have free ports for the requested pod ports"}},
		{"another host port is free", hostPort(testPod("p", "", ""), 8081), testNode("n", "4", "8Gi", "110"), portsUsed(8080), nil},
		{"host ports before resources", hostPort(testPod("p", "64", ""), 8080), testNode("n", "4", "8Gi", "110"), portsUsed(8080),
			[]string{"node(s) didn't have free ports for the requested pod ports"}},
		{"taint before resources", testPod("p", "64", ""), tainted(testNode("n", "4", "8Gi", "110"), gpu), nil,
			[]string{"node(s) had untolerated taint {dedicated: gpu}"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			used := tt.used
			if used == nil {
				used = newNodeUsage()
			}
			if got := filter(tt.pod, tt.node, used); !slices.Equal(got, tt.want) {
				t.Errorf("filter = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestFitErrorMessage(t *testing.T) {
	got := fitErrorMessage(3, map[string][]string{
		"a": {"node(s) had untolerated taint {dedicated: gpu}"},
		"b": {"Insufficient cpu", "Insufficient memory"},
		"c": {"Insufficient cpu"},
	})
	want := "0/3 nodes are available: 1 Insufficient memory, 1 node(s) had untolerated taint {dedicated: gpu}, 2 Insufficient cpu."
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	if got := fitErrorMessage(0, nil); got != "no nodes available to schedule pods" {
		t.Errorf("no nodes: %q", got)
	}
}

func TestPodRequests(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	req := func(cpu string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}
	}
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{
			{Name: "sidecar", Resources: req("200m"), RestartPolicy: &always},
			{Name: "migrate", Resources: req("2")}, // runs next to the sidecar: 2.2 at its peak
		},
		Containers: []corev1.Container{{Name: "a", Resources: req("500m")}, {Name: "b", Resources: req("500m")}},
		Overhead:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
	}}
	if got := podRequests(pod, false)[corev1.ResourceCPU]; got != 2300 {
		t.Errorf("cpu = %dm, want 2300m (init peak 2200m + overhead 100m)", got)
	}
	pod.Spec.InitContainers[1].Resources = req("100m")
	if got := podRequests(pod, false)[corev1.ResourceCPU]; got != 1300 {
		t.Errorf("cpu = %dm, want 1300m (containers 1000m + sidecar 200m + overhead 100m)", got)
	}

	empty := testPod("p", "", "")
	if got := podRequests(empty, false); got[corev1.ResourceCPU] != 0 || got[corev1.ResourceMemory] != 0 {
		t.Errorf("requests of a pod without any = %v", got)
	}
	if got := podRequests(empty, true); got[corev1.ResourceCPU] != 100 || got[corev1.ResourceMemory] != 200<<20 {
		t.Errorf("scoring requests of a pod without any = %v, want 100m and 200Mi", got)
	}
}

func TestLeastAllocatedPrefersTheEmptierNode(t *testing.T) {
	pod := testPod("p", "1", "1Gi")
	node := testNode("n", "4", "8Gi", "110")
	empty := leastAllocatedScore(pod, node, newNodeUsage())
	busy := newNodeUsage()
	busy.addPod(testPod("q", "2", "4Gi"))
	half := leastAllocatedScore(pod, node, busy)
	// Empty: cpu (4-1)/4 = 75, memory (8-1)/8 = 87 → 81. With 2 cpus and
	// 4Gi taken: 25 and 37 → 31.
	if empty != 81 || half != 31 {
		t.Errorf("scores = %d (empty), %d (half used); want 81 and 31", empty, half)
	}
	if got := selectHost([]scoredNode{{"b", 50}, {"c", 80}, {"a", 80}}); got != "a" {
		t.Errorf("selectHost = %s, want a (highest score, then first name)", got)
	}
}
