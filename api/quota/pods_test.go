package quota

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/api"
)

// container returns a container with requests and limits given as lists.
func container(name string, requests, limits corev1.ResourceList) corev1.Container {
	return corev1.Container{Name: name, Image: "busybox", Resources: corev1.ResourceRequirements{Requests: requests, Limits: limits}}
}

func sidecar(name string, requests, limits corev1.ResourceList) corev1.Container {
	c := container(name, requests, limits)
	always := corev1.ContainerRestartPolicyAlways
	c.RestartPolicy = &always
	return c
}

func podWith(containers []corev1.Container, initContainers ...corev1.Container) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "team-a"},
		Spec:       corev1.PodSpec{Containers: containers, InitContainers: initContainers},
	}
}

var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func TestPodUsage(t *testing.T) {
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want corev1.ResourceList
	}{
		{
			name: "no resources: counted, nothing else",
			pod:  podWith([]corev1.Container{container("app", nil, nil)}),
			want: list("pods", "1", "count/pods", "1"),
		},
		{
			name: "requests and limits summed over containers; cpu and memory alias requests",
			pod: podWith([]corev1.Container{
				container("app", list("cpu", "100m", "memory", "256Mi"), list("cpu", "0.5", "memory", "512Mi")),
				container("log", list("cpu", "0.2", "memory", "256Mi"), list("cpu", "500m", "memory", "512Mi")),
			}),
			want: list("pods", "1", "count/pods", "1",
				"cpu", "300m", "requests.cpu", "300m", "limits.cpu", "1",
				"memory", "512Mi", "requests.memory", "512Mi", "limits.memory", "1Gi"),
		},
		{
			name: "a limit alone is not a request",
			pod:  podWith([]corev1.Container{container("app", nil, list("cpu", "1"))}),
			want: list("pods", "1", "count/pods", "1", "limits.cpu", "1"),
		},
		{
			name: "init container larger than the app containers sets the floor",
			pod: podWith(
				[]corev1.Container{
					container("a", list("cpu", "100m", "memory", "100Mi"), nil),
					container("b", list("cpu", "100m", "memory", "100Mi"), nil),
				},
				container("migrate", list("cpu", "500m", "memory", "50Mi"), nil),
				container("seed", list("cpu", "300m"), nil),
			),
			// cpu: max(100m+100m, 500m, 300m) = 500m; memory: max(200Mi, 50Mi) = 200Mi.
			want: list("pods", "1", "count/pods", "1",
				"cpu", "500m", "requests.cpu", "500m", "memory", "200Mi", "requests.memory", "200Mi"),
		},
		{
			name: "init containers smaller than the app containers change nothing",
			pod: podWith(
				[]corev1.Container{container("app", list("cpu", "1"), list("cpu", "2"))},
				container("init", list("cpu", "100m"), list("cpu", "200m")),
			),
			want: list("pods", "1", "count/pods", "1", "cpu", "1", "requests.cpu", "1", "limits.cpu", "2"),
		},
		{
			name: "sidecars run beside the app and beside later init containers",
			pod: podWith(
				[]corev1.Container{container("app", list("cpu", "100m"), nil)},
				sidecar("proxy", list("cpu", "200m"), nil),
				container("migrate", list("cpu", "250m"), nil),
			),
			// running: 100m + 200m = 300m; while migrate runs: 250m + 200m = 450m.
			want: list("pods", "1", "count/pods", "1", "cpu", "450m", "requests.cpu", "450m"),
		},
		{
			name: "overhead adds to requests and to set limits only",
			pod: func() *corev1.Pod {
				p := podWith([]corev1.Container{container("app", list("cpu", "100m", "memory", "64Mi"), list("cpu", "200m"))})
				p.Spec.Overhead = list("cpu", "10m", "memory", "8Mi")
				return p
			}(),
			want: list("pods", "1", "count/pods", "1",
				"cpu", "110m", "requests.cpu", "110m", "limits.cpu", "210m",
				"memory", "72Mi", "requests.memory", "72Mi"),
		},
		{
			name: "pod-level resources override the container sums",
			pod: func() *corev1.Pod {
				p := podWith([]corev1.Container{container("app", list("cpu", "100m", "memory", "64Mi"), nil)})
				p.Spec.Resources = &corev1.ResourceRequirements{Requests: list("cpu", "1"), Limits: list("cpu", "2", "memory", "1Gi")}
				return p
			}(),
			want: list("pods", "1", "count/pods", "1",
				"cpu", "1", "requests.cpu", "1", "limits.cpu", "2",
				"memory", "64Mi", "requests.memory", "64Mi", "limits.memory", "1Gi"),
		},
		{
			name: "ephemeral storage, hugepages and extended resources",
			pod: podWith([]corev1.Container{container("app",
				list("ephemeral-storage", "1Gi", "hugepages-2Mi", "4Mi", "example.com/gpu", "1"),
				list("ephemeral-storage", "2Gi", "hugepages-2Mi", "4Mi", "example.com/gpu", "1"))}),
			want: list("pods", "1", "count/pods", "1",
				"ephemeral-storage", "1Gi", "requests.ephemeral-storage", "1Gi", "limits.ephemeral-storage", "2Gi",
				"hugepages-2Mi", "4Mi", "requests.hugepages-2Mi", "4Mi",
				"requests.example.com/gpu", "1"),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := PodUsageAt(tc.pod, now)
			if !Equals(got, tc.want) {
				t.Errorf("PodUsage =\n  %s\nwant\n  %s", Format(got), Format(tc.want))
			}
		})
	}
}

func TestPodUsagePrintsExactly(t *testing.T) {
	pod := podWith([]corev1.Container{
		container("a", list("cpu", "0.1", "memory", "512Mi"), nil),
		container("b", list("cpu", "0.2", "memory", "512Mi"), nil),
	})
	got := PodUsageAt(pod, now)
	cpu, mem := got["requests.cpu"], got["requests.memory"]
	if cpu.String() != "300m" || mem.String() != "1Gi" {
		t.Errorf("requests.cpu=%s requests.memory=%s, want 300m and 1Gi", cpu.String(), mem.String())
	}
}

func TestEndedPodsAreCountedButNotCharged(t *testing.T) {
	grace := int64(30)
	charged := podWith([]corev1.Container{container("app", list("cpu", "1", "memory", "1Gi"), list("cpu", "1"))})
	terminating := func(deletedAt time.Time) *corev1.Pod {
		p := charged.DeepCopy()
		p.DeletionTimestamp = &metav1.Time{Time: deletedAt}
		p.DeletionGracePeriodSeconds = &grace
		return p
	}
	withPhase := func(phase corev1.PodPhase) *corev1.Pod {
		p := charged.DeepCopy()
		p.Status.Phase = phase
		return p
	}
	countOnly := list("count/pods", "1")
	full := list("count/pods", "1", "pods", "1", "cpu", "1", "requests.cpu", "1", "limits.cpu", "1", "memory", "1Gi", "requests.memory", "1Gi")
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want corev1.ResourceList
	}{
		{"running", withPhase(corev1.PodRunning), full},
		{"succeeded", withPhase(corev1.PodSucceeded), countOnly},
		{"failed", withPhase(corev1.PodFailed), countOnly},
		{"being deleted, within its grace period", terminating(now), full},
		{"being deleted, exactly at the end of the grace", terminating(now.Add(-30 * time.Second)), full},
		{"being deleted, grace period over", terminating(now.Add(-31 * time.Second)), countOnly},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := PodUsageAt(tc.pod, now); !Equals(got, tc.want) {
				t.Errorf("PodUsage = %s, want %s", Format(got), Format(tc.want))
			}
		})
	}
}

func TestPodScopes(t *testing.T) {
	deadline := int64(60)
	bestEffort := podWith([]corev1.Container{container("app", nil, nil)})
	burstable := podWith([]corev1.Container{container("app", list("cpu", "100m"), nil)})
	job := bestEffort.DeepCopy()
	job.Spec.ActiveDeadlineSeconds = &deadline
	high := burstable.DeepCopy()
	high.Spec.PriorityClassName = "high"
	crossNS := burstable.DeepCopy()
	crossNS.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
			Weight: 1, PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: "zone", Namespaces: []string{"other"}},
		}},
	}}

	scope := func(s corev1.ResourceQuotaScope) corev1.ScopedResourceSelectorRequirement {
		return corev1.ScopedResourceSelectorRequirement{ScopeName: s, Operator: corev1.ScopeSelectorOpExists}
	}
	priorityIn := corev1.ScopedResourceSelectorRequirement{
		ScopeName: corev1.ResourceQuotaScopePriorityClass, Operator: corev1.ScopeSelectorOpIn, Values: []string{"high", "critical"},
	}
	priorityNotIn := priorityIn
	priorityNotIn.Operator = corev1.ScopeSelectorOpNotIn

	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		sel  corev1.ScopedResourceSelectorRequirement
		want bool
	}{
		{"BestEffort: no requests or limits", bestEffort, scope(corev1.ResourceQuotaScopeBestEffort), true},
		{"BestEffort: a request", burstable, scope(corev1.ResourceQuotaScopeBestEffort), false},
		{"NotBestEffort: a request", burstable, scope(corev1.ResourceQuotaScopeNotBestEffort), true},
		{"Terminating: active deadline", job, scope(corev1.ResourceQuotaScopeTerminating), true},
		{"Terminating: none", bestEffort, scope(corev1.ResourceQuotaScopeTerminating), false},
		{"NotTerminating: none", bestEffort, scope(corev1.ResourceQuotaScopeNotTerminating), true},
		{"NotTerminating: active deadline", job, scope(corev1.ResourceQuotaScopeNotTerminating), false},
		{"PriorityClass exists", high, scope(corev1.ResourceQuotaScopePriorityClass), true},
		{"PriorityClass exists: none", burstable, scope(corev1.ResourceQuotaScopePriorityClass), false},
		{"PriorityClass In", high, priorityIn, true},
		{"PriorityClass In: none", burstable, priorityIn, false},
		{"PriorityClass NotIn", high, priorityNotIn, false},
		{"PriorityClass NotIn: none", burstable, priorityNotIn, true},
		{"CrossNamespacePodAffinity", crossNS, scope(corev1.ResourceQuotaScopeCrossNamespacePodAffinity), true},
		{"CrossNamespacePodAffinity: none", burstable, scope(corev1.ResourceQuotaScopeCrossNamespacePodAffinity), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := podMatchesScope(tc.pod, tc.sel)
			if err != nil || got != tc.want {
				t.Errorf("podMatchesScope = %v, %v; want %v", got, err, tc.want)
			}
		})
	}

	bad := corev1.ScopedResourceSelectorRequirement{ScopeName: corev1.ResourceQuotaScopePriorityClass, Operator: "Near"}
	if _, err := podMatchesScope(high, bad); err == nil {
		t.Error("an unknown operator should be an error")
	}
}

func TestPodConstraints(t *testing.T) {
	pod := podWith(
		[]corev1.Container{
			container("app", list("cpu", "100m", "memory", "64Mi"), list("cpu", "200m")),
			container("log", list("memory", "64Mi"), nil),
		},
		container("init", list("cpu", "100m", "memory", "64Mi"), list("cpu", "100m", "memory", "64Mi")),
	)
	for _, tc := range []struct {
		name     string
		required []corev1.ResourceName
		want     string
	}{
		{"nothing cpu or memory", []corev1.ResourceName{"pods", "count/pods", "requests.storage"}, ""},
		{"requests.memory: every container has one", []corev1.ResourceName{"requests.memory"}, ""},
		{"requests.cpu", []corev1.ResourceName{"requests.cpu", "pods"}, "must specify requests.cpu for: log"},
		{"limits too", []corev1.ResourceName{"requests.cpu", "limits.cpu", "limits.memory"},
			"must specify limits.cpu for: log; limits.memory for: app,log; requests.cpu for: log"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Constraints(api.Pods, pod, tc.required)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("Constraints = %q, want %q", got, tc.want)
			}
		})
	}
}
