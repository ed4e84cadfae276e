package kubelet

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/client/record"
	"github.com/minictl/minictl/kubelet/containerlog"
)

// shPod is a pod on node-1 whose one container runs sh -c script.
func shPod(name string, policy corev1.RestartPolicy, script string) *corev1.Pod {
	pod := newPod(name, "node-1")
	pod.Spec.RestartPolicy = policy
	pod.Spec.Containers[0].Image = "busybox"
	pod.Spec.Containers[0].Command = []string{"sh", "-c", script}
	return pod
}

func finished(pod *corev1.Pod) bool { return api.IsPodTerminal(pod) }

func deleteNow() metav1.DeleteOptions {
	return metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))}
}

func TestCommandsRunToTheirExit(t *testing.T) {
	rc := newClient(t)
	startKubelet(t, rc, "node-1", nil)

	createPod(t, rc, shPod("ok", corev1.RestartPolicyNever, "sleep 1; exit 0"))
	createPod(t, rc, shPod("fails", corev1.RestartPolicyNever, "exit 3"))

	running := waitPod(t, rc, "ok", "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	if cs := running.Status.ContainerStatuses[0]; cs.State.Running == nil || !cs.Ready {
		t.Errorf("sleeping container = %+v, want running and ready", cs)
	}
	ok := waitPod(t, rc, "ok", "finished", finished)
	cs := ok.Status.ContainerStatuses[0]
	if ok.Status.Phase != corev1.PodSucceeded || cs.State.Terminated == nil || cs.State.Terminated.ExitCode != 0 || cs.State.Terminated.Reason != "Completed" {
		t.Errorf("sleep 1; exit 0: phase %s, container %+v; want Succeeded, exit 0 Completed", ok.Status.Phase, cs)
	}
	if d := cs.State.Terminated.FinishedAt.Sub(cs.State.Terminated.StartedAt.Time); d < 0 || d > 2*time.Second {
		t.Errorf("sleep 1 ran %s", d)
	}

	failed := waitPod(t, rc, "fails", "finished", finished)
	cs = failed.Status.ContainerStatuses[0]
	if failed.Status.Phase != corev1.PodFailed || cs.State.Terminated == nil || cs.State.Terminated.ExitCode != 3 || cs.State.Terminated.Reason != "Error" || cs.RestartCount != 0 {
		t.Errorf("exit 3: phase %s, container %+v; want Failed, exit 3 Error, no restart", failed.Status.Phase, cs)
	}
}

func TestOnFailureRestartsOnlyFailures(t *testing.T) {
	rc := newClient(t)
	startKubelet(t, rc, "node-1", nil)
	createPod(t, rc, shPod("done", corev1.RestartPolicyOnFailure, "echo done"))
	createPod(t, rc, shPod("retry", corev1.RestartPolicyOnFailure, "sleep 0.1; exit 1"))

	done := waitPod(t, rc, "done", "finished", finished)
	if cs := done.Status.ContainerStatuses[0]; done.Status.Phase != corev1.PodSucceeded || cs.RestartCount != 0 {
		t.Errorf("exit 0 under OnFailure: phase %s, restartCount %d; want Succeeded, 0", done.Status.Phase, cs.RestartCount)
	}
	retry := waitPod(t, rc, "retry", "restarted twice", func(p *corev1.Pod) bool {
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount >= 2
	})
	if retry.Status.Phase != corev1.PodRunning {
		t.Errorf("exit 1 under OnFailure: phase %s, want Running (restarting)", retry.Status.Phase)
	}
	if last := retry.Status.ContainerStatuses[0].LastTerminationState.Terminated; last == nil || last.ExitCode != 1 || last.Reason != "Error" {
		t.Errorf("lastState = %+v, want terminated exit 1 Error", last)
	}
}

func TestCrashLoopBackOff(t *testing.T) {
	rc := newClient(t)
	events := &record.FakeRecorder{}
	startKubelet(t, rc, "node-1", func(o *Options) { o.Recorder = events })
	created := createPod(t, rc, shPod("crash", corev1.RestartPolicyAlways, "echo oops; exit 1"))

	// The first exit restarts at once; the second waits the base back-off,
	// the next twice that.
	var seen []string
	var last int32
	waitPod(t, rc, "crash", "in CrashLoopBackOff after 3 restarts", func(p *corev1.Pod) bool {
		if len(p.Status.ContainerStatuses) != 1 {
			return false
		}
		cs := p.Status.ContainerStatuses[0]
		if w := cs.State.Waiting; w != nil && w.Reason == reasonCrashLoopBackOff {
			msg := fmt.Sprintf("%d: %s", cs.RestartCount, w.Message)
			if len(seen) == 0 || seen[len(seen)-1] != msg {
				seen = append(seen, msg)
			}
			if l := cs.LastTerminationState.Terminated; l == nil || l.ExitCode != 1 || l.Reason != "Error" || l.FinishedAt.IsZero() {
				t.Errorf("lastState while backing off = %+v", l)
			}
			if p.Status.Phase != corev1.PodRunning || api.PodIsReady(p) {
				t.Errorf("while backing off: phase %s, ready %v; want Running, not ready", p.Status.Phase, api.PodIsReady(p))
			}
		}
		if cs.RestartCount < last {
			t.Errorf("restartCount went from %d to %d", last, cs.RestartCount)
		}
		last = cs.RestartCount
		return cs.RestartCount >= 3 && cs.State.Waiting != nil
	})
	// Each back-off seen is the base doubled once per restart before it,
	// up to the maximum (polling may miss the short ones).
	podName := fmt.Sprintf("crash_default(%s)", created.UID)
	if len(seen) == 0 {
		t.Fatal("no CrashLoopBackOff seen")
	}
	for _, msg := range seen {
		var n int32
		fmt.Sscanf(msg, "%d:", &n)
		delay := min(testBackOff<<(n-1), 4*testBackOff)
		if want := fmt.Sprintf("%d: back-off %s restarting failed container=app pod=%s", n, delay, podName); msg != want {
			t.Errorf("waiting message %q, want %q", msg, want)
		}
	}
	// Events follow the status writes.
	waitFor(t, "BackOff and Started events", func() (bool, error) {
		return len(events.WithReason("BackOff")) > 0 && len(events.WithReason("Started")) >= 3, nil
	})
	if backOff := events.WithReason("BackOff")[0]; backOff != "Warning BackOff Back-off restarting failed container app in pod "+podName {
		t.Errorf("BackOff event = %q", backOff)
	}
}

func TestBackOffStartsOverAfterALongRun(t *testing.T) {
	b := backOff{base: time.Second, max: 4 * time.Second}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	if w, _ := b.wait("app", at(0), at(0)); w != 0 {
		t.Errorf("first exit waits %s", w)
	}
	b.restarted("app", at(0), at(0))
	if w, d := b.wait("app", at(0.5), at(0.5)); w != time.Second || d != time.Second {
		t.Errorf("second exit: wait %s, back-off %s; want 1s, 1s", w, d)
	}
	b.restarted("app", at(0.5), at(1.5))
	for range 5 {
		b.restarted("app", at(1.5), at(1.5))
	}
	if w, d := b.wait("app", at(2), at(2)); d != 4*time.Second || w != 4*time.Second {
		t.Errorf("after many restarts: wait %s, back-off %s; want the 4s maximum", w, d)
	}
	// A run of more than twice the maximum forgets the back-off.
	if w, _ := b.wait("app", at(1.5+8.5), at(10)); w != 0 {
		t.Errorf("after a long run, wait %s, want none", w)
	}
	b.restarted("app", at(10), at(10))
	if _, d := b.wait("app", at(10.1), at(10.1)); d != time.Second {
		t.Errorf("back-off after a long run = %s, want the base again", d)
	}
}

func TestInitContainersRunInOrder(t *testing.T) {
	rc := newClient(t)
	startKubelet(t, rc, "node-1", nil)
	pod := newPod("web", "node-1")
	pod.Spec.InitContainers = []corev1.Container{
		{Name: "migrate", Image: "busybox", Command: []string{"sh", "-c", "sleep 1"}},
		{Name: "check", Image: "busybox", Command: []string{"true"}},
	}
	createPod(t, rc, pod)

	pending := waitPod(t, rc, "web", "initializing", func(p *corev1.Pod) bool { return p.Status.StartTime != nil })
	if pending.Status.Phase != corev1.PodPending {
		t.Errorf("while initializing: phase %s, want Pending", pending.Status.Phase)
	}
	c := podCondition(pending.Status, corev1.PodInitialized)
	if c.Status != corev1.ConditionFalse || c.Reason != "ContainersNotInitialized" || c.Message != "containers with incomplete status: [migrate check]" {
		t.Errorf("Initialized = %+v", c)
	}
	ics := pending.Status.InitContainerStatuses
	if len(ics) != 2 || ics[0].State.Running == nil || ics[1].State.Waiting == nil || ics[1].State.Waiting.Reason != "PodInitializing" {
		t.Errorf("init containers while the first runs = %+v", ics)
	}
	if app := pending.Status.ContainerStatuses[0]; app.State.Waiting == nil || app.State.Waiting.Reason != "PodInitializing" {
		t.Errorf("app while initializing = %+v", app)
	}

	running := waitPod(t, rc, "web", "Running", runningAndReady)
	ics = running.Status.InitContainerStatuses
	first, second := ics[0].State.Terminated, ics[1].State.Terminated
	if first == nil || second == nil || first.ExitCode != 0 || second.ExitCode != 0 {
		t.Fatalf("init containers once running = %+v", ics)
	}
	app := running.Status.ContainerStatuses[0].State.Running
	if second.StartedAt.Before(&first.FinishedAt) || app.StartedAt.Before(&second.FinishedAt) {
		t.Errorf("out of order: migrate %v–%v, check %v–%v, app from %v",
			first.StartedAt, first.FinishedAt, second.StartedAt, second.FinishedAt, app.StartedAt)
	}
	if condition(running, corev1.PodInitialized) != corev1.ConditionTrue {
		t.Errorf("Initialized is not True once running")
	}
}

func TestFailingInitContainer(t *testing.T) {
	rc := newClient(t)
	startKubelet(t, rc, "node-1", nil)
	withInit := func(name string, policy corev1.RestartPolicy) *corev1.Pod {
		pod := newPod(name, "node-1")
		pod.Spec.RestartPolicy = policy
		pod.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "busybox", Command: []string{"false"}}}
		return pod
	}
	createPod(t, rc, withInit("never", corev1.RestartPolicyNever))
	createPod(t, rc, withInit("always", corev1.RestartPolicyAlways))

	never := waitPod(t, rc, "never", "finished", finished)
	if never.Status.Phase != corev1.PodFailed {
		t.Errorf("init failed under Never: phase %s, want Failed", never.Status.Phase)
	}
	if init := never.Status.InitContainerStatuses[0]; init.State.Terminated == nil || init.State.Terminated.ExitCode != 1 || init.RestartCount != 0 {
		t.Errorf("init = %+v, want terminated exit 1, not restarted", init)
	}
	if app := never.Status.ContainerStatuses[0]; app.State.Waiting == nil || app.State.Waiting.Reason != "PodInitializing" {
		t.Errorf("app of a pod whose init failed = %+v, want waiting PodInitializing", app)
	}

	always := waitPod(t, rc, "always", "init restarted", func(p *corev1.Pod) bool {
		return len(p.Status.InitContainerStatuses) == 1 && p.Status.InitContainerStatuses[0].RestartCount >= 2
	})
	if always.Status.Phase != corev1.PodPending || always.Status.ContainerStatuses[0].State.Running != nil {
		t.Errorf("init failing under Always: phase %s, app %+v; want Pending, app not started", always.Status.Phase, always.Status.ContainerStatuses[0])
	}
}

func TestActiveDeadlineSeconds(t *testing.T) {
	rc := newClient(t)
	events := &record.FakeRecorder{}
	startKubelet(t, rc, "node-1", func(o *Options) { o.Recorder = events })
	pod := shPod("slow", corev1.RestartPolicyAlways, "sleep infinity")
	pod.Spec.ActiveDeadlineSeconds = new(int64(1))
	createPod(t, rc, pod)

	got := waitPod(t, rc, "slow", "finished", finished)
	if got.Status.Phase != corev1.PodFailed || got.Status.Reason != "DeadlineExceeded" ||
		got.Status.Message != "Pod was active on the node longer than the specified deadline" {
		t.Errorf("phase %s, reason %q, message %q", got.Status.Phase, got.Status.Reason, got.Status.Message)
	}
	if cs := got.Status.ContainerStatuses[0]; cs.State.Terminated == nil {
		t.Errorf("container = %+v, want terminated", cs)
	}
	if active := got.Status.ContainerStatuses[0].State.Terminated.FinishedAt.Sub(got.Status.StartTime.Time); active < time.Second {
		t.Errorf("killed %s after start, before the deadline", active)
	}
	// The event follows the status write.
	waitFor(t, "a DeadlineExceeded event", func() (bool, error) {
		return len(events.WithReason("DeadlineExceeded")) == 1, nil
	})
}

func TestHostPortTakenIsRefused(t *testing.T) {
	rc := newClient(t)
	startKubelet(t, rc, "node-1", nil)
	withPort := func(name string, port int32) *corev1.Pod {
		pod := newPod(name, "node-1")
		pod.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: port}}
		return pod
	}
	createPod(t, rc, withPort("first", 8080))
	waitPod(t, rc, "first", "Running", runningAndReady)
	createPod(t, rc, withPort("second", 8080))
	createPod(t, rc, withPort("other", 8081))

	second := waitPod(t, rc, "second", "finished", finished)
	if second.Status.Phase != corev1.PodFailed || second.Status.Reason != "NodePorts" ||
		second.Status.Message != "Pod was rejected: Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports" {
		t.Errorf("phase %s, reason %q, message %q", second.Status.Phase, second.Status.Reason, second.Status.Message)
	}
	if second.Status.PodIP != "" || len(second.Status.ContainerStatuses) != 0 {
		t.Errorf("a refused pod got an IP %q or containers %+v", second.Status.PodIP, second.Status.ContainerStatuses)
	}
	waitPod(t, rc, "other", "Running", runningAndReady)

	// Once the first is gone, the port is free again.
	if err := client.For[*corev1.Pod](rc).Delete(context.Background(), "default", "first", deleteNow()); err != nil {
		t.Fatal(err)
	}
	createPod(t, rc, withPort("third", 8080))
	waitPod(t, rc, "third", "Running", runningAndReady)
}

func TestReadinessInitialDelay(t *testing.T) {
	rc := newClient(t)
	startKubelet(t, rc, "node-1", nil)
	pod := newPod("probed", "node-1")
	pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{
		Name: "slow", Image: "nginx",
		ReadinessProbe: &corev1.Probe{InitialDelaySeconds: 3, ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{}}},
	})
	pod.Spec.Containers[1].ReadinessProbe.TCPSocket.Port.IntVal = 80
	createPod(t, rc, pod)

	running := waitPod(t, rc, "probed", "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	if api.PodIsReady(running) {
		t.Fatal("Ready before the readiness probe's initial delay")
	}
	if app, slow := running.Status.ContainerStatuses[0], running.Status.ContainerStatuses[1]; !app.Ready || slow.Ready {
		t.Errorf("ready: app %v (no probe), slow %v (delay 3s); want true, false", app.Ready, slow.Ready)
	}
	ready := waitPod(t, rc, "probed", "Ready", runningAndReady)
	started := ready.Status.ContainerStatuses[1].State.Running.StartedAt
	if c := podCondition(ready.Status, corev1.PodReady); c.LastTransitionTime.Sub(started.Time) < 2*time.Second {
		t.Errorf("Ready at %v, container started at %v: the 3s delay did not pass", c.LastTransitionTime, started)
	}
}

func TestContainerLogs(t *testing.T) {
	rc := newClient(t)
	k := startKubelet(t, rc, "node-1", nil)
	pod := shPod("talk", corev1.RestartPolicyOnFailure, `echo "hello, $WHO"; sleep 0.5; echo bye; exit 2`)
	pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "WHO", Value: "world"}}
	created := createPod(t, rc, pod)

	waitPod(t, rc, "talk", "restarted", func(p *corev1.Pod) bool {
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount >= 1
	})
	var previous []string
	waitFor(t, "the first run's log, ended", func() (bool, error) {
		previous = logLines(t, k, created.UID, "app", "previous")
		return len(previous) == 4, nil
	})
	want := []string{`[minictl] started: sh -c "echo \"hello, $WHO\"; sleep 0.5; echo bye; exit 2"`, "hello, world", "bye", "[minictl] exited with code 2"}
	if strings.Join(previous, "\n") != strings.Join(want, "\n") {
		t.Errorf("previous run's log:\n got %q\nwant %q", previous, want)
	}

	if err := client.For[*corev1.Pod](rc).Delete(context.Background(), "default", "talk", deleteNow()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the logs of a pod gone forgotten", func() (bool, error) {
		return logLines(t, k, created.UID, "app", "current") == nil, nil
	})
}

// freshRun waits until the kubelet has started each container of pod and
// written the line it begins a run's log with (it does so just after the
// status saying the container runs), then begins a new run of each, empty,
// for a test to print into.
func freshRun(t *testing.T, k *Kubelet, pod *corev1.Pod, containers ...string) {
	t.Helper()
	for _, c := range containers {
		waitFor(t, "the kubelet's start line of "+c, func() (bool, error) {
			lines := logLines(t, k, pod.UID, c, "current")
			return len(lines) > 0 && strings.HasPrefix(lines[0], "[minictl] started"), nil
		})
		k.logs.Start(pod.UID, c)
	}
}

// logLines reads the lines of one run ("current" or "previous") of a
// container from the kubelet's logs, nil if there is none.
func logLines(t *testing.T, k *Kubelet, uid types.UID, container, run string) []string {
	t.Helper()
	var b strings.Builder
	err := k.logs.Read(context.Background(), uid, container, containerlog.Options{Previous: run == "previous"}, &b)
	if errors.Is(err, containerlog.ErrNoPreviousRun) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	if b.Len() == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
}

func TestRestartedKubeletEndsARunOnTime(t *testing.T) {
	rc := newClient(t)
	ctx, cancel := context.WithCancel(context.Background())
	first, err := New(Options{Client: rc, NodeName: "node-1", Logger: testLogger(),
		HeartbeatInterval: testHeartbeat, StatusUpdateInterval: testStatus})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- first.Run(ctx) }()
	createPod(t, rc, shPod("job", corev1.RestartPolicyNever, "sleep 2; exit 4"))
	waitPod(t, rc, "job", "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("first kubelet: %v", err)
	}

	// The next kubelet reads the run's start from the status and ends it
	// when it is due, not again from its own start.
	startKubelet(t, rc, "node-1", nil)
	got := waitPod(t, rc, "job", "finished", finished)
	cs := got.Status.ContainerStatuses[0]
	end := cs.State.Terminated
	if got.Status.Phase != corev1.PodFailed || end == nil || end.ExitCode != 4 || cs.RestartCount != 0 {
		t.Fatalf("phase %s, container %+v; want Failed, exit 4, no restart", got.Status.Phase, cs)
	}
	if d := end.FinishedAt.Sub(end.StartedAt.Time); d != 2*time.Second {
		t.Errorf("the run lasted %s, want the 2s it sleeps", d)
	}
}

// A run lasts what its script says to the nanosecond, though a status
// keeps its times in whole seconds: the kubelet times a run from when it
// started it, not from the second its status says.
func TestRunsLastWhatTheirScriptsSay(t *testing.T) {
	rc := newClient(t)
	k := startKubelet(t, rc, "node-1", nil)
	created := createPod(t, rc, shPod("timed", corev1.RestartPolicyNever, "echo one; sleep 1.5; echo two; exit 0"))
	waitPod(t, rc, "timed", "Succeeded", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })

	// The kubelet logs a step's runs once the status that reports them is
	// written: the exit line follows the Succeeded status, a moment later.
	var b strings.Builder
	for deadline := time.Now().Add(10 * time.Second); ; {
		b.Reset()
		if err := k.logs.Read(context.Background(), created.UID, "app", containerlog.Options{Timestamps: true}, &b); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(b.String(), "[minictl] exited with code") || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	at := map[string]time.Time{}
	for _, line := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		stamp, text, _ := strings.Cut(line, " ")
		ts, err := time.Parse(time.RFC3339Nano, stamp)
		if err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		at[text] = ts
	}
	if got := at["two"].Sub(at["one"]); got != 1500*time.Millisecond {
		t.Errorf("two came %v after one, want 1.5s:\n%s", got, b.String())
	}
	if got := at["[minictl] exited with code 0"].Sub(at["one"]); got != 1500*time.Millisecond {
		t.Errorf("the run ended %v after it began, want 1.5s:\n%s", got, b.String())
	}
}

// A settled pod's status is held once, in the informer's cache: the
// kubelet keeps the status it wrote only until its informer has heard it
// back, and then answers with the informer's.
func TestSettledPodStatusIsHeldOnce(t *testing.T) {
	rc := newClient(t)
	k := startKubelet(t, rc, "node-1", nil)
	created := createPod(t, rc, shPod("still", corev1.RestartPolicyNever, "sleep 3600"))
	running := waitPod(t, rc, "still", "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })

	waitFor(t, "the kubelet to let go of the status it wrote", func() (bool, error) {
		k.mu.Lock()
		defer k.mu.Unlock()
		m, ok := k.memos["default/still"]
		return ok && m.uid == created.UID && m.status == nil, nil
	})
	cached, err := k.podLister.Get("default", "still")
	if err != nil {
		t.Fatal(err)
	}
	got := k.podStatus(cached)
	if got != &cached.Status {
		t.Errorf("podStatus is a copy, want the informer's own")
	}
	if got.Phase != corev1.PodRunning || got.PodIP != running.Status.PodIP || len(got.ContainerStatuses) != 1 || got.ContainerStatuses[0].State.Running == nil {
		t.Errorf("podStatus = phase %s ip %s containers %+v; want the running pod's", got.Phase, got.PodIP, got.ContainerStatuses)
	}
}
