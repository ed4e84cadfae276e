package api

import (
	"reflect"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

var tableNow = time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)

func ago(d time.Duration) metav1.Time { return metav1.NewTime(tableNow.Add(-d)) }

// TestEveryResourcePrints checks that each kind's row has one cell per
// column, for an empty object too, so kubectl never gets a ragged table.
func TestEveryResourcePrints(t *testing.T) {
	for _, res := range Resources() {
		obj := res.NewObject()
		obj.SetName("x")
		obj.SetCreationTimestamp(ago(time.Hour))
		row := res.TableRow(obj, tableNow)
		cols := res.TableColumns()
		if len(row.Cells) != len(cols) {
			t.Errorf("%s: %d cells for %d columns: %v", res.Plural, len(row.Cells), len(cols), row.Cells)
		}
		if cols[0].Name != "Name" && res != Events {
			t.Errorf("%s: first column %q, want Name", res.Plural, cols[0].Name)
		}
		for i, c := range row.Cells {
			switch c.(type) {
			case string, int64:
			default:
				t.Errorf("%s: cell %d (%s) is a %T; cells are strings or int64", res.Plural, i, cols[i].Name, c)
			}
		}
	}
}

func TestDefaultTable(t *testing.T) {
	lr := LimitRanges.NewObject()
	lr.SetName("limits")
	lr.SetCreationTimestamp(metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600))))
	row := LimitRanges.TableRow(lr, tableNow)
	if want := []any{"limits", "2026-01-02T02:04:05Z"}; !reflect.DeepEqual(row.Cells, want) {
		t.Errorf("cells %v, want %v", row.Cells, want)
	}
	if cols := LimitRanges.TableColumns(); cols[1].Name != "Created At" || cols[1].Type != "date" {
		t.Errorf("columns %v", cols)
	}
}

func running(name string, ready bool, restarts int32) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, Ready: ready, RestartCount: restarts,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: ago(time.Minute)}}}
}

func TestPodStatusColumns(t *testing.T) {
	two := []corev1.Container{{Name: "a"}, {Name: "b"}}
	always := corev1.ContainerRestartPolicyAlways
	cases := []struct {
		name                   string
		pod                    corev1.Pod
		ready, status, restart string
	}{
		{
			name:  "pending",
			pod:   corev1.Pod{Spec: corev1.PodSpec{Containers: two}, Status: corev1.PodStatus{Phase: corev1.PodPending}},
			ready: "0/2", status: "Pending", restart: "0",
		},
		{
			name: "running",
			pod: corev1.Pod{Spec: corev1.PodSpec{Containers: two}, Status: corev1.PodStatus{Phase: corev1.PodRunning,
				ContainerStatuses: []corev1.ContainerStatus{running("a", true, 0), running("b", true, 0)}}},
			ready: "2/2", status: "Running", restart: "0",
		},
		{
			name: "crash loop with restarts",
			pod: corev1.Pod{Spec: corev1.PodSpec{Containers: two}, Status: corev1.PodStatus{Phase: corev1.PodRunning,
				ContainerStatuses: []corev1.ContainerStatus{
					running("a", true, 0),
					{Name: "b", RestartCount: 4,
						State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
						LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, FinishedAt: ago(3 * time.Minute)}}},
				}}},
			ready: "1/2", status: "CrashLoopBackOff", restart: "4 (3m ago)",
		},
		{
			name: "exit code without a reason",
			pod: corev1.Pod{Spec: corev1.PodSpec{Containers: two[:1]}, Status: corev1.PodStatus{Phase: corev1.PodFailed,
				ContainerStatuses: []corev1.ContainerStatus{{Name: "a", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 3}}}}}},
			ready: "0/1", status: "ExitCode:3", restart: "0",
		},
		{
			name: "completed",
			pod: corev1.Pod{Spec: corev1.PodSpec{Containers: two[:1]}, Status: corev1.PodStatus{Phase: corev1.PodSucceeded,
				ContainerStatuses: []corev1.ContainerStatus{{Name: "a", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed"}}}}}},
			ready: "0/1", status: "Completed", restart: "0",
		},
		{
			name: "init container running",
			pod: corev1.Pod{Spec: corev1.PodSpec{InitContainers: []corev1.Container{{Name: "i1"}, {Name: "i2"}}, Containers: two[:1]},
				Status: corev1.PodStatus{Phase: corev1.PodPending, InitContainerStatuses: []corev1.ContainerStatus{
					{Name: "i1", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}},
					{Name: "i2", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}},
				}}},
			ready: "0/1", status: "Init:1/2", restart: "0",
		},
		{
			name: "init container failed",
			pod: corev1.Pod{Spec: corev1.PodSpec{InitContainers: []corev1.Container{{Name: "i1"}}, Containers: two[:1]},
				Status: corev1.PodStatus{Phase: corev1.PodPending, InitContainerStatuses: []corev1.ContainerStatus{
					{Name: "i1", RestartCount: 2, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}},
				}}},
			ready: "0/1", status: "Init:CrashLoopBackOff", restart: "2",
		},
		{
			name: "sidecar counts as a container",
			pod: corev1.Pod{Spec: corev1.PodSpec{InitContainers: []corev1.Container{{Name: "proxy", RestartPolicy: &always}}, Containers: two[:1]},
				Status: corev1.PodStatus{Phase: corev1.PodRunning,
					Conditions:            []corev1.PodCondition{{Type: corev1.PodInitialized, Status: corev1.ConditionTrue}},
					InitContainerStatuses: []corev1.ContainerStatus{{Name: "proxy", Ready: true, Started: ptrTo(true), State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}},
					ContainerStatuses:     []corev1.ContainerStatus{running("a", true, 0)},
				}},
			ready: "2/2", status: "Running", restart: "0",
		},
		{
			name: "terminating",
			pod: corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: ptrTo(ago(0))}, Spec: corev1.PodSpec{Containers: two[:1]},
				Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{running("a", true, 0)}}},
			ready: "1/1", status: "Terminating", restart: "0",
		},
		{
			name: "node lost",
			pod: corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: ptrTo(ago(0))}, Spec: corev1.PodSpec{Containers: two[:1]},
				Status: corev1.PodStatus{Phase: corev1.PodRunning, Reason: "NodeLost"}},
			ready: "0/1", status: "Unknown", restart: "0",
		},
		{
			name: "scheduling gated",
			pod: corev1.Pod{Spec: corev1.PodSpec{Containers: two[:1]}, Status: corev1.PodStatus{Phase: corev1.PodPending,
				Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonSchedulingGated}}}},
			ready: "0/1", status: "SchedulingGated", restart: "0",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.pod.Name = "p"
			tc.pod.CreationTimestamp = ago(90 * time.Second)
			row := Pods.TableRow(&tc.pod, tableNow)
			got := []any{row.Cells[1], row.Cells[2], row.Cells[3]}
			if want := []any{tc.ready, tc.status, tc.restart}; !reflect.DeepEqual(got, want) {
				t.Errorf("READY STATUS RESTARTS = %v, want %v", got, want)
			}
			if row.Cells[4] != "90s" {
				t.Errorf("AGE = %v, want 90s", row.Cells[4])
			}
		})
	}
}

func TestPodWideColumnsAndConditions(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", CreationTimestamp: ago(2 * time.Hour)},
		Spec:       corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "a"}}, ReadinessGates: []corev1.PodReadinessGate{{ConditionType: "lb"}, {ConditionType: "dns"}}},
		Status: corev1.PodStatus{Phase: corev1.PodSucceeded, PodIPs: []corev1.PodIP{{IP: "10.0.0.7"}},
			Conditions: []corev1.PodCondition{{Type: "lb", Status: corev1.ConditionTrue}, {Type: "dns", Status: corev1.ConditionFalse}}},
	}
	row := Pods.TableRow(pod, tableNow)
	if want := []any{"10.0.0.7", "node-1", "<none>", "1/2"}; !reflect.DeepEqual(row.Cells[5:], want) {
		t.Errorf("wide cells %v, want %v", row.Cells[5:], want)
	}
	if len(row.Conditions) != 1 || row.Conditions[0].Type != metav1.RowCompleted || row.Conditions[0].Reason != "Succeeded" {
		t.Errorf("conditions %v, want Completed/Succeeded", row.Conditions)
	}
	if row.Cells[4] != "120m" {
		t.Errorf("AGE = %v, want 120m", row.Cells[4])
	}
}

func TestWorkloadAndClusterRows(t *testing.T) {
	three := int32(3)
	template := corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}, {Name: "log", Image: "busybox"}}}}
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	cases := []struct {
		name string
		res  *Resource
		obj  Object
		want []any
	}{
		{
			name: "deployment", res: Deployments,
			obj: &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", CreationTimestamp: ago(5 * 24 * time.Hour)},
				Spec:   appsv1.DeploymentSpec{Replicas: &three, Selector: selector, Template: template},
				Status: appsv1.DeploymentStatus{ReadyReplicas: 2, UpdatedReplicas: 3, AvailableReplicas: 2}},
			want: []any{"web", "2/3", int64(3), int64(2), "5d", "web,log", "nginx:1.27,busybox", "app=web"},
		},
		{
			name: "replicaset", res: ReplicaSets,
			obj: &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web-1", CreationTimestamp: ago(time.Minute)},
				Spec:   appsv1.ReplicaSetSpec{Replicas: &three, Selector: selector, Template: template},
				Status: appsv1.ReplicaSetStatus{Replicas: 3, ReadyReplicas: 1}},
			want: []any{"web-1", int64(3), int64(3), int64(1), "60s", "web,log", "nginx:1.27,busybox", "app=web"},
		},
		{
			name: "replicationcontroller", res: ReplicationControllers,
			obj: &corev1.ReplicationController{ObjectMeta: metav1.ObjectMeta{Name: "web", CreationTimestamp: ago(time.Minute)},
				Spec:   corev1.ReplicationControllerSpec{Replicas: &three, Selector: map[string]string{"app": "web"}, Template: &template},
				Status: corev1.ReplicationControllerStatus{Replicas: 2, ReadyReplicas: 1}},
			want: []any{"web", int64(3), int64(2), int64(1), "60s", "web,log", "nginx:1.27,busybox", "app=web"},
		},
		{
			name: "poddisruptionbudget", res: PodDisruptionBudgets,
			obj: &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "web", CreationTimestamp: ago(time.Minute)},
				Spec:   policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &intstr.IntOrString{Type: intstr.String, StrVal: "25%"}, Selector: selector},
				Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 1}},
			want: []any{"web", "N/A", "25%", int64(1), "60s"},
		},
		{
			name: "node", res: Nodes,
			obj: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", CreationTimestamp: ago(time.Hour),
				Labels: map[string]string{"node-role.kubernetes.io/control-plane": "", "kubernetes.io/role": "worker"}},
				Spec: corev1.NodeSpec{Unschedulable: true},
				Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
					Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}},
					NodeInfo:  corev1.NodeSystemInfo{KubeletVersion: "v1.36.0", OSImage: "sim"}}},
			want: []any{"n1", "Ready,SchedulingDisabled", "control-plane,worker", "60m", "v1.36.0", "10.0.0.1", "<none>", "sim", "<unknown>", "<unknown>"},
		},
		{
			name: "node not ready", res: Nodes,
			obj: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2", CreationTimestamp: ago(time.Hour)},
				Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown}}}},
			want: []any{"n2", "NotReady", "<none>", "60m", "", "<none>", "<none>", "<unknown>", "<unknown>", "<unknown>"},
		},
		{
			name: "load balancer service", res: Services,
			obj: &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", CreationTimestamp: ago(time.Hour)},
				Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ClusterIPs: []string{"10.96.0.10"}, Selector: map[string]string{"app": "web"},
					Ports: []corev1.ServicePort{{Port: 80, NodePort: 30080, Protocol: corev1.ProtocolTCP}, {Port: 53, Protocol: corev1.ProtocolUDP}}}},
			want: []any{"web", "LoadBalancer", "10.96.0.10", "<pending>", "80:30080/TCP,53/UDP", "60m", "app=web"},
		},
		{
			name: "endpoints", res: Endpoints,
			obj: &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "web", CreationTimestamp: ago(time.Hour)},
				Subsets: []corev1.EndpointSubset{{
					Addresses: []corev1.EndpointAddress{{IP: "10.0.0.1"}, {IP: "10.0.0.2"}, {IP: "10.0.0.3"}},
					Ports:     []corev1.EndpointPort{{Port: 80}, {Port: 443}},
				}}},
			want: []any{"web", "10.0.0.1:80,10.0.0.2:80,10.0.0.3:80 + 3 more...", "60m"},
		},
		{
			name: "event", res: Events,
			obj: &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "web.1"}, Type: "Normal", Reason: "Scheduled", Message: "assigned\n",
				InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "web"}, Source: corev1.EventSource{Component: "scheduler"},
				FirstTimestamp: ago(10 * time.Minute), LastTimestamp: ago(2 * time.Minute), Count: 3},
			want: []any{"2m", "Normal", "Scheduled", "pod/web", "", "scheduler", "assigned", "10m", int64(3), "web.1"},
		},
		{
			name: "quota", res: ResourceQuotas,
			obj: &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "q", CreationTimestamp: ago(time.Hour)},
				Status: corev1.ResourceQuotaStatus{
					Hard: corev1.ResourceList{"pods": resource.MustParse("10"), "limits.cpu": resource.MustParse("2"), "requests.cpu": resource.MustParse("1")},
					Used: corev1.ResourceList{"pods": resource.MustParse("3")}}},
			want: []any{"q", "60m", "pods: 3/10, requests.cpu: 0/1", "limits.cpu: 0/2"},
		},
		{
			name: "namespace", res: Namespaces,
			obj:  &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "demo", CreationTimestamp: ago(400 * 24 * time.Hour)}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating}},
			want: []any{"demo", "Terminating", "400d"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.res.TableRow(tc.obj, tableNow).Cells; !reflect.DeepEqual(got, tc.want) {
				t.Errorf("cells\n got %#v\nwant %#v", got, tc.want)
			}
		})
	}
}
