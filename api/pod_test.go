package api

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func minimalPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "app", Image: "nginx", Ports: []corev1.ContainerPort{{ContainerPort: 80}},
		}}},
	}
}

func TestDefaultPod(t *testing.T) {
	pod := minimalPod()
	Pods.Default(pod)
	spec, c := pod.Spec, pod.Spec.Containers[0]
	checks := []struct {
		name      string
		got, want any
	}{
		{"restartPolicy", spec.RestartPolicy, corev1.RestartPolicyAlways},
		{"dnsPolicy", spec.DNSPolicy, corev1.DNSClusterFirst},
		{"terminationGracePeriodSeconds", *spec.TerminationGracePeriodSeconds, int64(30)},
		{"schedulerName", spec.SchedulerName, "default-scheduler"},
		{"securityContext is {}", apiequality.Semantic.DeepEqual(spec.SecurityContext, &corev1.PodSecurityContext{}), true},
		{"enableServiceLinks", *spec.EnableServiceLinks, true},
		{"serviceAccountName", spec.ServiceAccountName, "default"},
		{"serviceAccount", spec.DeprecatedServiceAccount, "default"},
		{"terminationMessagePath", c.TerminationMessagePath, "/dev/termination-log"},
		{"terminationMessagePolicy", c.TerminationMessagePolicy, corev1.TerminationMessageReadFile},
		{"imagePullPolicy", c.ImagePullPolicy, corev1.PullAlways},
		{"port protocol", c.Ports[0].Protocol, corev1.ProtocolTCP},
		{"no tolerations (the DefaultTolerationSeconds admission adds them, on create)", len(spec.Tolerations), 0},
		{"priority left nil", spec.Priority == nil, true},
	}
	for _, ck := range checks {
		t.Run(ck.name, func(t *testing.T) {
			if ck.got != ck.want {
				t.Errorf("got %v, want %v", ck.got, ck.want)
			}
		})
	}
	// Defaulting twice changes nothing: the server defaults on update too.
	again := pod.DeepCopy()
	Pods.Default(again)
	if !apiequality.Semantic.DeepEqual(again, pod) {
		t.Errorf("a second Default changed the pod:\n%+v\nthen\n%+v", pod, again)
	}
	checkErrors(t, ValidateObjectMeta(Pods, pod))
	checkErrors(t, Pods.Validate(pod))
}

func TestDefaultPullPolicy(t *testing.T) {
	tests := []struct {
		image string
		want  corev1.PullPolicy
	}{
		{"nginx", corev1.PullAlways},
		{"nginx:latest", corev1.PullAlways},
		{"nginx:1.27", corev1.PullIfNotPresent},
		{"registry:5000/team/app", corev1.PullAlways},
		{"registry:5000/team/app:v2", corev1.PullIfNotPresent},
		{"nginx@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", corev1.PullIfNotPresent},
		{"nginx:latest@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", corev1.PullAlways},
	}
	for _, tt := range tests {
		t.Run(tt.image, func(t *testing.T) {
			if got := defaultPullPolicy(tt.image); got != tt.want {
				t.Errorf("defaultPullPolicy(%q) = %s, want %s", tt.image, got, tt.want)
			}
		})
	}
}

func TestDefaultPodKeepsWhatIsSet(t *testing.T) {
	pod := minimalPod()
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	pod.Spec.ServiceAccountName = "builder"
	pod.Spec.Containers[0].ImagePullPolicy = corev1.PullNever
	pod.Spec.Containers[0].Resources.Limits = corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("128Mi"),
	}
	pod.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}
	Pods.Default(pod)
	c := pod.Spec.Containers[0]
	if pod.Spec.RestartPolicy != corev1.RestartPolicyNever || pod.Spec.ServiceAccountName != "builder" || c.ImagePullPolicy != corev1.PullNever {
		t.Errorf("defaults overwrote set fields: %+v", pod.Spec)
	}
	cpu, mem := c.Resources.Requests[corev1.ResourceCPU], c.Resources.Requests[corev1.ResourceMemory]
	if cpu.String() != "100m" || mem.String() != "128Mi" {
		t.Errorf("requests = %v, want cpu 100m (as set) and memory 128Mi (from limits)", c.Resources.Requests)
	}
}

func TestPodTemplateDefaultsAreNotPodDefaults(t *testing.T) {
	spec := minimalPod().Spec
	spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	defaultPodSpec(&spec)
	if spec.EnableServiceLinks != nil || spec.ServiceAccountName != "" || len(spec.Tolerations) != 0 || spec.Containers[0].Resources.Requests != nil {
		t.Errorf("template got pod-only defaults: %+v", spec)
	}
	if spec.RestartPolicy != corev1.RestartPolicyAlways || spec.Containers[0].TerminationMessagePath == "" {
		t.Errorf("template missed PodSpec defaults: %+v", spec)
	}
}

func TestAddDefaultTolerations(t *testing.T) {
	secs := int64(60)
	tests := []struct {
		name     string
		existing []corev1.Toleration
		want     int // tolerations after
	}{
		{"none", nil, 2},
		{"tolerates not-ready already", []corev1.Toleration{{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &secs}}, 2},
		{"tolerates every taint", []corev1.Toleration{{Operator: corev1.TolerationOpExists}}, 1},
		{"tolerates unreachable with any effect", []corev1.Toleration{{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists}}, 2},
		{"NoSchedule toleration does not count", []corev1.Toleration{{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := minimalPod()
			pod.Spec.Tolerations = tt.existing
			AddDefaultTolerations(pod, 120)
			if len(pod.Spec.Tolerations) != tt.want {
				t.Fatalf("tolerations = %+v, want %d", pod.Spec.Tolerations, tt.want)
			}
			for _, tol := range pod.Spec.Tolerations[len(tt.existing):] {
				if *tol.TolerationSeconds != 120 {
					t.Errorf("added %+v, want tolerationSeconds 120", tol)
				}
			}
		})
	}
}

func TestPreparePod(t *testing.T) {
	pod := minimalPod()
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1", Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	Pods.Default(pod)
	Pods.PrepareForCreate(pod)
	if pod.Status.Phase != corev1.PodPending || pod.Status.PodIP != "" || len(pod.Status.Conditions) != 0 {
		t.Errorf("status after create = %+v, want only phase Pending", pod.Status)
	}
	if pod.Status.QOSClass != corev1.PodQOSBestEffort || pod.Generation != 1 {
		t.Errorf("qosClass %q generation %d, want BestEffort and 1", pod.Status.QOSClass, pod.Generation)
	}

	old := pod.DeepCopy()
	old.Status.Phase = corev1.PodRunning
	upd := pod.DeepCopy()
	upd.Status = corev1.PodStatus{Phase: corev1.PodFailed}
	upd.Spec.Containers[0].Image = "nginx:1.27"
	Pods.PrepareForUpdate(upd, old)
	if upd.Status.Phase != corev1.PodRunning {
		t.Errorf("update changed status to %q; a main-resource update keeps it", upd.Status.Phase)
	}
	if upd.Generation != 2 {
		t.Errorf("generation = %d after a spec change, want 2", upd.Generation)
	}

	gated := minimalPod()
	gated.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/wait"}}
	Pods.PrepareForCreate(gated)
	if c := gated.Status.Conditions; len(c) != 1 || c[0].Type != corev1.PodScheduled || c[0].Reason != corev1.PodReasonSchedulingGated {
		t.Errorf("gated pod conditions = %+v", c)
	}
}

func TestValidatePod(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(p *corev1.Pod)
		want   []string
	}{
		{"valid", func(p *corev1.Pod) {}, nil},
		{"no containers", func(p *corev1.Pod) { p.Spec.Containers = nil }, []string{"spec.containers: Required value"}},
		{"container without name", func(p *corev1.Pod) { p.Spec.Containers[0].Name = "" }, []string{"spec.containers[0].name: Required value"}},
		{"container name not a label", func(p *corev1.Pod) { p.Spec.Containers[0].Name = "App_1" }, []string{"spec.containers[0].name: Invalid value"}},
		{"container without image", func(p *corev1.Pod) { p.Spec.Containers[0].Image = "" }, []string{"spec.containers[0].image: Required value"}},
		{"duplicate container name", func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "app", Image: "busybox"})
		}, []string{"spec.containers[1].name: Duplicate value"}},
		{"init container shares a name", func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "app", Image: "busybox"}}
		}, []string{"spec.initContainers[0].name: Duplicate value"}},
		{"port out of range", func(p *corev1.Pod) { p.Spec.Containers[0].Ports[0].ContainerPort = 70000 }, []string{"spec.containers[0].ports[0].containerPort: Invalid value"}},
		{"port missing", func(p *corev1.Pod) { p.Spec.Containers[0].Ports[0].ContainerPort = 0 }, []string{"spec.containers[0].ports[0].containerPort: Required value"}},
		{"bad hostPort", func(p *corev1.Pod) { p.Spec.Containers[0].Ports[0].HostPort = -1 }, []string{"spec.containers[0].ports[0].hostPort: Invalid value"}},
		{"bad port protocol", func(p *corev1.Pod) { p.Spec.Containers[0].Ports[0].Protocol = "HTTP" }, []string{"spec.containers[0].ports[0].protocol: Unsupported value"}},
		{"bad restartPolicy", func(p *corev1.Pod) { p.Spec.RestartPolicy = "Sometimes" }, []string{"spec.restartPolicy: Unsupported value"}},
		{"bad dnsPolicy", func(p *corev1.Pod) { p.Spec.DNSPolicy = "Google" }, []string{"spec.dnsPolicy: Unsupported value"}},
		{"bad imagePullPolicy", func(p *corev1.Pod) { p.Spec.Containers[0].ImagePullPolicy = "Sometimes" }, []string{"spec.containers[0].imagePullPolicy: Unsupported value"}},
		{"request above limit", func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources = corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
			}
		}, []string{"spec.containers[0].resources.requests[cpu]: Invalid value"}},
		{"negative request", func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("-1")}
		}, []string{"spec.containers[0].resources.requests[memory]: Invalid value"}},
		{"unknown resource", func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"gpu": resource.MustParse("1")}
		}, []string{"spec.containers[0].resources.limits[gpu]: Invalid value"}},
		{"extended resource", func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"example.com/gpu": resource.MustParse("1")}
		}, nil},
		{"nodeName may be set", func(p *corev1.Pod) { p.Spec.NodeName = "node-1" }, nil},
		{"bad nodeName", func(p *corev1.Pod) { p.Spec.NodeName = "Node_1" }, []string{"spec.nodeName: Invalid value"}},
		{"mount of a missing volume", func(p *corev1.Pod) {
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
		}, []string{"spec.containers[0].volumeMounts[0].name: Not found"}},
		{"mount of a volume", func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "data"}}
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
		}, nil},
		{"duplicate volume", func(p *corev1.Pod) { p.Spec.Volumes = []corev1.Volume{{Name: "v"}, {Name: "v"}} }, []string{"spec.volumes[1].name: Duplicate value"}},
		{"bad toleration", func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists, Value: "v", Effect: "Sometimes"}}
		}, []string{"spec.tolerations[0].effect: Unsupported value", "spec.tolerations[0].value: Invalid value"}},
		{"activeDeadlineSeconds zero", func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptrTo(int64(0)) }, []string{"spec.activeDeadlineSeconds: Invalid value"}},
		{"bad env name", func(p *corev1.Pod) { p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "A=B"}} }, []string{"spec.containers[0].env[0].name: Invalid value"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := minimalPod()
			Pods.Default(pod)
			tt.mutate(pod)
			checkErrors(t, Pods.Validate(pod), tt.want...)
		})
	}
}

func TestValidatePodUpdate(t *testing.T) {
	base := func() *corev1.Pod {
		p := minimalPod()
		Pods.Default(p)
		AddDefaultTolerations(p, DefaultTolerationSeconds) // as created
		p.Spec.ActiveDeadlineSeconds = ptrTo(int64(600))
		return p
	}
	bound := base()
	bound.Spec.NodeName = "node-1"
	tests := []struct {
		name   string
		old    *corev1.Pod
		mutate func(p *corev1.Pod)
		want   []string
	}{
		{"no change", base(), func(p *corev1.Pod) {}, nil},
		{"image", base(), func(p *corev1.Pod) { p.Spec.Containers[0].Image = "nginx:1.27" }, nil},
		{"shorter activeDeadlineSeconds", base(), func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptrTo(int64(60)) }, nil},
		{"longer activeDeadlineSeconds", base(), func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptrTo(int64(6000)) },
			[]string{"spec.activeDeadlineSeconds: Invalid value"}},
		{"added toleration", base(), func(p *corev1.Pod) {
			p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpExists})
		}, nil},
		{"removed toleration", base(), func(p *corev1.Pod) { p.Spec.Tolerations = p.Spec.Tolerations[:1] },
			[]string{"spec.tolerations: Forbidden"}},
		{"nodeName set", base(), func(p *corev1.Pod) { p.Spec.NodeName = "node-1" }, nil},
		{"nodeName changed", bound, func(p *corev1.Pod) { p.Spec.NodeName = "node-2" }, []string{"spec.nodeName: Invalid value"}},
		{"restartPolicy changed", base(), func(p *corev1.Pod) { p.Spec.RestartPolicy = corev1.RestartPolicyNever }, []string{"spec: Forbidden"}},
		{"container added", base(), func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "b", Image: "b"})
		}, []string{"spec.containers: Forbidden"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := tt.old.DeepCopy()
			tt.mutate(pod)
			checkErrors(t, Pods.ValidateUpdate(pod, tt.old), tt.want...)
		})
	}

	t.Run("message names the changed field", func(t *testing.T) {
		old := base()
		pod := old.DeepCopy()
		pod.Spec.RestartPolicy = corev1.RestartPolicyNever
		errs := Pods.ValidateUpdate(pod, old)
		checkDetail(t, errs, "pod updates may not change fields other than")
		checkDetail(t, errs, "changed: spec.restartPolicy")
	})
}

func TestPodHelpers(t *testing.T) {
	phases := []struct {
		phase    corev1.PodPhase
		terminal bool
	}{
		{corev1.PodPending, false}, {corev1.PodRunning, false}, {corev1.PodSucceeded, true}, {corev1.PodFailed, true}, {corev1.PodUnknown, false},
	}
	for _, tt := range phases {
		t.Run(string(tt.phase), func(t *testing.T) {
			pod := &corev1.Pod{Status: corev1.PodStatus{Phase: tt.phase}}
			if got := IsPodTerminal(pod); got != tt.terminal {
				t.Errorf("IsPodTerminal = %v, want %v", got, tt.terminal)
			}
		})
	}

	ready := []struct {
		name  string
		conds []corev1.PodCondition
		want  bool
	}{
		{"no conditions", nil, false},
		{"ready true", []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}, {Type: corev1.PodReady, Status: corev1.ConditionTrue}}, true},
		{"ready false", []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}, false},
		{"only scheduled", []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}, false},
	}
	for _, tt := range ready {
		t.Run(tt.name, func(t *testing.T) {
			if got := PodIsReady(&corev1.Pod{Status: corev1.PodStatus{Conditions: tt.conds}}); got != tt.want {
				t.Errorf("PodIsReady = %v, want %v", got, tt.want)
			}
		})
	}

	cpu, mem := resource.MustParse("1"), resource.MustParse("1Gi")
	qos := []struct {
		name string
		res  corev1.ResourceRequirements
		want corev1.PodQOSClass
	}{
		{"nothing set", corev1.ResourceRequirements{}, corev1.PodQOSBestEffort},
		{"limits equal requests", corev1.ResourceRequirements{
			Limits:   corev1.ResourceList{corev1.ResourceCPU: cpu, corev1.ResourceMemory: mem},
			Requests: corev1.ResourceList{corev1.ResourceCPU: cpu, corev1.ResourceMemory: mem},
		}, corev1.PodQOSGuaranteed},
		{"only a cpu request", corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: cpu}}, corev1.PodQOSBurstable},
		{"requests below limits", corev1.ResourceRequirements{
			Limits:   corev1.ResourceList{corev1.ResourceCPU: cpu, corev1.ResourceMemory: mem},
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: mem},
		}, corev1.PodQOSBurstable},
	}
	for _, tt := range qos {
		t.Run(tt.name, func(t *testing.T) {
			pod := minimalPod()
			pod.Spec.Containers[0].Resources = tt.res
			if got := PodQOSClass(pod); got != tt.want {
				t.Errorf("PodQOSClass = %s, want %s", got, tt.want)
			}
		})
	}

	// Several containers: the class comes from the sums over all of them,
	// init containers included, and every container must limit both.
	guaranteed := corev1.ResourceRequirements{
		Limits:   corev1.ResourceList{corev1.ResourceCPU: cpu, corev1.ResourceMemory: mem},
		Requests: corev1.ResourceList{corev1.ResourceCPU: cpu, corev1.ResourceMemory: mem},
	}
	zero := resource.MustParse("0")
	several := []struct {
		name       string
		containers []corev1.ResourceRequirements
		init       []corev1.ResourceRequirements
		want       corev1.PodQOSClass
	}{
		{"two guaranteed containers", []corev1.ResourceRequirements{guaranteed, guaranteed}, nil, corev1.PodQOSGuaranteed},
		{"a second container without limits", []corev1.ResourceRequirements{guaranteed, {}}, nil, corev1.PodQOSBurstable},
		{"an init container without limits", []corev1.ResourceRequirements{guaranteed}, []corev1.ResourceRequirements{{}}, corev1.PodQOSBurstable},
		{"a guaranteed init container", []corev1.ResourceRequirements{guaranteed}, []corev1.ResourceRequirements{guaranteed}, corev1.PodQOSGuaranteed},
		{"zero quantities count as unset", []corev1.ResourceRequirements{{
			Limits:   corev1.ResourceList{corev1.ResourceCPU: zero, corev1.ResourceMemory: zero},
			Requests: corev1.ResourceList{corev1.ResourceCPU: zero},
		}}, nil, corev1.PodQOSBestEffort},
		{"limits without requests", []corev1.ResourceRequirements{{Limits: guaranteed.Limits}}, nil, corev1.PodQOSBurstable},
		{"requests summed over containers equal the limits", []corev1.ResourceRequirements{
			{Limits: guaranteed.Limits, Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: mem}},
			{Limits: guaranteed.Limits, Requests: corev1.ResourceList{corev1.ResourceMemory: mem}},
		}, nil, corev1.PodQOSGuaranteed},
		{"requests summed over containers below the limits", []corev1.ResourceRequirements{
			{Limits: guaranteed.Limits, Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: mem}},
			{Limits: guaranteed.Limits, Requests: guaranteed.Requests},
		}, nil, corev1.PodQOSBurstable},
		{"only memory requested and limited", []corev1.ResourceRequirements{{
			Limits:   corev1.ResourceList{corev1.ResourceMemory: mem},
			Requests: corev1.ResourceList{corev1.ResourceMemory: mem},
		}}, nil, corev1.PodQOSBurstable},
	}
	for _, tt := range several {
		t.Run(tt.name, func(t *testing.T) {
			pod := minimalPod()
			base := pod.Spec.Containers[0]
			pod.Spec.Containers = nil
			for i, res := range tt.containers {
				c := *base.DeepCopy()
				c.Name, c.Resources = fmt.Sprintf("c%d", i), res
				pod.Spec.Containers = append(pod.Spec.Containers, c)
			}
			for i, res := range tt.init {
				c := *base.DeepCopy()
				c.Name, c.Resources = fmt.Sprintf("init%d", i), res
				pod.Spec.InitContainers = append(pod.Spec.InitContainers, c)
			}
			if got := PodQOSClass(pod); got != tt.want {
				t.Errorf("PodQOSClass = %s, want %s", got, tt.want)
			}
		})
	}
}
