package kubelet

import (
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/api"
)

func TestNextStatus(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Minute))
	always := corev1.ContainerRestartPolicyAlways
	pending := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "u1"},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyAlways,
			InitContainers: []corev1.Container{
				{Name: "init", Image: "busybox"},
				{Name: "proxy", Image: "envoy", RestartPolicy: &always},
			},
			Containers: []corev1.Container{{Name: "app", Image: "nginx"}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}
	start := simulation{now: t0, hostIP: "127.0.1.1", podIP: "10.88.1.2"}
	running, events, story := nextStatusParts(pending, start)

	t.Run("start", func(t *testing.T) {
		if running.Phase != corev1.PodRunning || running.PodIP != "10.88.1.2" || running.HostIP != "127.0.1.1" || !running.StartTime.Equal(&t0) {
			t.Errorf("phase %s, podIP %s, hostIP %s, startTime %v", running.Phase, running.PodIP, running.HostIP, running.StartTime)
		}
		if story != "Pending → Running (ip 10.88.1.2)" {
			t.Errorf("story = %q", story)
		}
		if init := running.InitContainerStatuses[0]; init.State.Terminated == nil || init.State.Terminated.Reason != "Completed" {
			t.Errorf("init container = %+v, want terminated Completed", init)
		}
		if sidecar := running.InitContainerStatuses[1]; sidecar.State.Running == nil || !sidecar.Ready {
			t.Errorf("sidecar = %+v, want running and ready", sidecar)
		}
		app := running.ContainerStatuses[0]
		if app.State.Running == nil || !app.Ready || app.ContainerID != "sim://u1/app" || app.ImageID != "sim://nginx" {
			t.Errorf("app = %+v", app)
		}
		for _, typ := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.PodReadyToStartContainers, corev1.ContainersReady, corev1.PodReady} {
			if !hasConditionStatus(running, typ, corev1.ConditionTrue) {
				t.Errorf("condition %s is not True: %+v", typ, running.Conditions)
			}
		}
		if len(events) != 9 || events[8].reason != "Started" || events[8].message != "Started container app" {
			t.Errorf("events = %+v, want pulled/created/started for each of 3 containers", events)
		}
	})

	started := pending.DeepCopy()
	started.Status = running

	t.Run("nothing to do is no change", func(t *testing.T) {
		again, events, story := nextStatusParts(started, simulation{now: t1})
		if !apiequality.Semantic.DeepEqual(again, running) || len(events) != 0 || story != "" {
			t.Errorf("a second step changed the status: %q, %+v", story, events)
		}
	})

	t.Run("unready", func(t *testing.T) {
		st, _, story := nextStatusParts(started, simulation{now: t1, unready: true})
		if !hasConditionStatus(st, corev1.PodReady, corev1.ConditionFalse) || st.ContainerStatuses[0].Ready || st.Phase != corev1.PodRunning {
			t.Errorf("unready: %+v", st)
		}
		c := podCondition(st, corev1.PodReady)
		if c.Reason != "ContainersNotReady" || c.Message != "containers with unready status: [app]" || !c.LastTransitionTime.Equal(&t1) {
			t.Errorf("Ready condition = %+v", c)
		}
		if story != "Ready true → false" {
			t.Errorf("story = %q", story)
		}
	})

	exit := func(code int32, policy corev1.RestartPolicy) corev1.PodStatus {
		p := started.DeepCopy()
		p.Spec.RestartPolicy = policy
		st, _, _ := nextStatusParts(p, simulation{now: t1, exit: &code})
		return st
	}
	for _, tt := range []struct {
		code     int32
		policy   corev1.RestartPolicy
		phase    corev1.PodPhase
		restarts int32
	}{
		{1, corev1.RestartPolicyAlways, corev1.PodRunning, 1},
		{0, corev1.RestartPolicyAlways, corev1.PodRunning, 1},
		{2, corev1.RestartPolicyOnFailure, corev1.PodRunning, 1},
		{0, corev1.RestartPolicyOnFailure, corev1.PodSucceeded, 0},
		{0, corev1.RestartPolicyNever, corev1.PodSucceeded, 0},
		{137, corev1.RestartPolicyNever, corev1.PodFailed, 0},
	} {
		st := exit(tt.code, tt.policy)
		app := st.ContainerStatuses[0]
		if st.Phase != tt.phase || app.RestartCount != tt.restarts {
			t.Errorf("exit %d, %s: phase %s, restarts %d; want %s, %d", tt.code, tt.policy, st.Phase, app.RestartCount, tt.phase, tt.restarts)
		}
		last := app.LastTerminationState.Terminated
		if tt.restarts == 0 {
			last = app.State.Terminated
		}
		if last == nil || last.ExitCode != tt.code || last.Reason != exitReason(tt.code) || !last.StartedAt.Equal(&t0) || !last.FinishedAt.Equal(&t1) {
			t.Errorf("exit %d, %s: termination %+v", tt.code, tt.policy, last)
		}
		if ready := api.PodIsReady(&corev1.Pod{Status: st}); ready != (tt.phase == corev1.PodRunning) {
			t.Errorf("exit %d, %s: ready = %v", tt.code, tt.policy, ready)
		}
	}

	t.Run("stop", func(t *testing.T) {
		st, events, _ := nextStatusParts(started, simulation{now: t1, stop: true})
		if st.Phase != corev1.PodSucceeded || st.ContainerStatuses[0].State.Terminated == nil || st.InitContainerStatuses[1].State.Terminated == nil {
			t.Errorf("stopped: %+v", st)
		}
		if c := podCondition(st, corev1.PodReady); c.Status != corev1.ConditionFalse || c.Reason != "PodCompleted" {
			t.Errorf("Ready condition = %+v, want False PodCompleted", c)
		}
		if len(events) != 1 || events[0].reason != "Killing" {
			t.Errorf("events = %+v, want one Killing", events)
		}
	})
}

func podCondition(st corev1.PodStatus, typ corev1.PodConditionType) corev1.PodCondition {
	for _, c := range st.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return corev1.PodCondition{}
}

func hasConditionStatus(st corev1.PodStatus, typ corev1.PodConditionType, status corev1.ConditionStatus) bool {
	return podCondition(st, typ).Status == status
}

func TestIPAllocator(t *testing.T) {
	var a ipAllocator
	inUse := map[netip.Addr]bool{netip.MustParseAddr("10.0.0.3"): true}
	used := func(ip netip.Addr) bool { return inUse[ip] }
	var got []string
	for range 4 {
		ip, err := a.allocate("10.0.0.0/29", used)
		if err != nil {
			t.Fatal(err)
		}
		inUse[ip] = true
		got = append(got, ip.String())
	}
	// .0 is the network, .1 the gateway, .3 taken, .7 the broadcast.
	want := []string{"10.0.0.2", "10.0.0.4", "10.0.0.5", "10.0.0.6"}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] || got[3] != want[3] {
		t.Errorf("allocated %v, want %v", got, want)
	}
	if _, err := a.allocate("10.0.0.0/29", used); err == nil {
		t.Error("allocated from a full range")
	}
	// Freed addresses come back round, the one freed last coming last.
	delete(inUse, netip.MustParseAddr("10.0.0.2"))
	delete(inUse, netip.MustParseAddr("10.0.0.5"))
	if ip, _ := a.allocate("10.0.0.0/29", used); ip.String() != "10.0.0.2" {
		t.Errorf("after wrap-around: %s, want 10.0.0.2", ip)
	}
	if _, err := a.allocate("10.0.0.0/31", used); err == nil {
		t.Error("allocated from a /31")
	}
}

func TestNodeNumber(t *testing.T) {
	for name, want := range map[string]int{"node-2": 2, "worker17": 17, "n-300": 44} {
		if got := nodeNumber(name); got != want {
			t.Errorf("nodeNumber(%q) = %d, want %d", name, got, want)
		}
	}
	if a, b := nodeNumber("alpha"), nodeNumber("alpha"); a != b || a < 0 || a > 255 {
		t.Errorf("nodeNumber(alpha) = %d then %d", a, b)
	}
}

// nextStatusParts is nextStatus's status, events and story.
func nextStatusParts(pod *corev1.Pod, step simulation) (corev1.PodStatus, []podEvent, string) {
	out := nextStatus(pod, step)
	return out.status, out.events, out.story
}

func TestNextStatusRunsTheCommandAndBacksOff(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "crash", UID: "u1"},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyAlways,
			Containers:    []corev1.Container{{Name: "app", Image: "busybox", Command: []string{"sh", "-c", "sleep 2; exit 1"}}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}
	b := backOff{base: 10 * time.Second, max: 40 * time.Second}
	// step runs the kubelet at t0+at and checks when it asks to wake.
	step := func(at, wake time.Duration) corev1.ContainerStatus {
		t.Helper()
		out := nextStatus(pod, simulation{now: metav1.NewTime(t0.Add(at)), hostIP: "127.0.1.1", podIP: "10.88.1.2", backOff: b})
		pod = pod.DeepCopy()
		pod.Status, b = out.status, out.backOff
		if want := t0.Add(wake); !out.wake.Equal(want) {
			t.Errorf("at %s: wake at %s, want %s", at, out.wake.Sub(t0), wake)
		}
		if pod.Status.Phase != corev1.PodRunning {
			t.Errorf("at %s: phase %s, want Running", at, pod.Status.Phase)
		}
		return pod.Status.ContainerStatuses[0]
	}
	running := func(cs corev1.ContainerStatus, since time.Duration, restarts int32) {
		t.Helper()
		if cs.State.Running == nil || !cs.State.Running.StartedAt.Time.Equal(t0.Add(since)) || cs.RestartCount != restarts {
			t.Errorf("container = %+v, want running since %s, restartCount %d", cs, since, restarts)
		}
	}
	backingOff := func(cs corev1.ContainerStatus, delay string, restarts int32, finished time.Duration) {
		t.Helper()
		w, last := cs.State.Waiting, cs.LastTerminationState.Terminated
		want := "back-off " + delay + " restarting failed container=app pod=crash_default(u1)"
		if w == nil || w.Reason != "CrashLoopBackOff" || w.Message != want || cs.RestartCount != restarts || cs.Ready {
			t.Errorf("container = %+v, want waiting CrashLoopBackOff %q, restartCount %d", cs, want, restarts)
		}
		if last == nil || last.ExitCode != 1 || last.Reason != "Error" || !last.FinishedAt.Time.Equal(t0.Add(finished)) {
			t.Errorf("lastState = %+v, want exit 1 Error at %s", last, finished)
		}
	}

	running(step(0, 2*time.Second), 0, 0)
	running(step(2*time.Second, 4*time.Second), 2*time.Second, 1) // the first exit restarts at once
	backingOff(step(4*time.Second, 14*time.Second), "10s", 1, 4*time.Second)
	backingOff(step(5*time.Second, 14*time.Second), "10s", 1, 4*time.Second) // nothing new
	running(step(14*time.Second, 16*time.Second), 14*time.Second, 2)
	backingOff(step(16*time.Second, 36*time.Second), "20s", 2, 16*time.Second)
	// A kubelet that wakes late restarts the container when it wakes.
	running(step(39*time.Second, 41*time.Second), 39*time.Second, 3)
	backingOff(step(41*time.Second, 81*time.Second), "40s", 3, 41*time.Second)
	backingOff(step(81*time.Second-time.Millisecond, 81*time.Second), "40s", 3, 41*time.Second)
	running(step(81*time.Second, 83*time.Second), 81*time.Second, 4)
	backingOff(step(83*time.Second, 123*time.Second), "40s", 4, 83*time.Second) // the maximum
}
