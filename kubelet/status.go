package kubelet

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/api"
)

// simulation is what happens to a pod's simulated containers in one step,
// decided by the kubelet from the pod, its annotations and its own memory.
type simulation struct {
	now    metav1.Time
	hostIP string
	podIP  string // given to a pod that starts now
	// exit, if set, makes every running container exit with this code now.
	exit *int32
	// unready keeps the containers, and so the pod, not ready.
	unready bool
	// stop stops every container, as a graceful deletion does.
	stop bool
	// refusal, if set, is why the node does not admit a pod not started
	// yet: it fails without running.
	refusal *refusal
	// backOff is the containers' restart back-off before this step.
	backOff backOff
	// runs are the containers' current runs as the kubelet saw them
	// start, to the nanosecond; a run missing from them (after a restart of
	// the kubelet) started when its status says, to the second.
	runs []containerRun
}

// refusal is why a node does not admit a pod, as the kubelet's admission
// says it.
type refusal struct {
	reason, message string
}

// podEvent is an Event the kubelet records about a pod after its status is
// written.
type podEvent struct {
	eventType, reason, message string
}

// runEvent is one run of a container starting or ending, for its log.
type runEvent struct {
	container string
	at        time.Time
	started   bool // false: ended, with exitCode
	exitCode  int32
	// runStart is when a run that ended started.
	runStart time.Time
}

// outcome is what one step leads to.
type outcome struct {
	status corev1.PodStatus
	// events tell what happened; story is a short account of it for the
	// log ("" when nothing but times changed).
	events []podEvent
	story  string
	// runs are the container runs that started or ended, in order.
	runs []runEvent
	// backOff is the restart back-off after the step.
	backOff backOff
	// wake is when something happens next if nothing changes meanwhile
	// (a run prints or ends, a back-off or a readiness delay passes, the
	// active deadline comes); zero when nothing will.
	wake time.Time
}

// The kubelet's words for what it does to a pod.
const (
	reasonDeadlineExceeded  = "DeadlineExceeded"
	messageDeadlineExceeded = "Pod was active on the node longer than the specified deadline"
	reasonCrashLoopBackOff  = "CrashLoopBackOff"
	reasonPodInitializing   = "PodInitializing"
	reasonContainerCreating = "ContainerCreating"
)

// exitKilled is the exit code of a container killed (SIGKILL) rather than
// ended by itself.
const exitKilled = 137

// nextStatus returns the status pod has after step and what happened on
// the way. It does not modify pod.
//
// The story of a pod, as a real kubelet and container runtime write it:
//   - A pod the node refuses (step.refusal) fails at once, with the
//     refusal's reason and "Pod was rejected: <message>".
//   - A pod admitted gets its IPs and startTime; its init containers run
//     one at a time, in order, each to completion (sidecars, init
//     containers with restartPolicy Always, only start), then every app
//     container starts. Until then it is Pending and not Initialized.
//   - Each run of a container does what its command says (see
//     containerScript): it ends by itself at its time, with its code, or
//     runs until stopped. An exit annotation ends every running container
//     now.
//   - A container that ended restarts if the restart policy says so
//     (Always; OnFailure with a non-zero code; init containers on
//     failure), at once or after its back-off (waiting CrashLoopBackOff
//     meanwhile): restartCount+1, lastState terminated. Otherwise it stays
//     terminated; an init container that failed under Never fails the
//     pod.
//   - The phase follows from the containers as the kubelet's getPhase
//     reads it; when it is final, sidecars still running are stopped.
//   - Past spec.activeDeadlineSeconds from startTime the containers are
//     killed and the pod fails, reason DeadlineExceeded.
//   - A stop (graceful deletion): the containers terminate with code 0 and
//     the pod ends Succeeded, as a kubelet ends a deleted pod.
//   - A container is ready while it runs and the pod is Running, once its
//     readiness probe's initialDelaySeconds have passed (the probe itself
//     always succeeds), unless told otherwise. PodScheduled and
//     PodReadyToStartContainers are True once the pod is admitted.
func nextStatus(pod *corev1.Pod, step simulation) outcome {
	s := &stepper{pod: pod, step: step, now: step.now.Time, st: *pod.Status.DeepCopy(), backOff: step.backOff.clone()}
	admitted := false
	switch {
	case step.refusal != nil && !started(pod):
		s.refuse()
		return s.outcome(fmt.Sprintf("%s → %s (%s)", pod.Status.Phase, s.st.Phase, step.refusal.reason))
	case !started(pod) && !step.stop:
		s.admit()
		admitted = true
	}

	switch {
	case step.stop:
		if n := s.killAll(0, true); n > 0 {
			s.tell("being deleted → stop %d container(s)", n)
		}
		if s.st.Phase != corev1.PodFailed {
			s.st.Phase = corev1.PodSucceeded
		}
	case s.pastDeadline():
		s.killAll(exitKilled, true)
		s.st.Phase, s.st.Reason, s.st.Message = corev1.PodFailed, reasonDeadlineExceeded, messageDeadlineExceeded
		s.event(corev1.EventTypeWarning, reasonDeadlineExceeded, messageDeadlineExceeded)
	default:
		s.advance()
		if step.exit != nil {
			s.exitAll(*step.exit)
			s.advance()
		}
		if !terminal(s.st.Phase) {
			s.st.Phase = podPhase(pod, &s.st)
			if terminal(s.st.Phase) {
				s.killAll(0, false) // sidecars, once nothing else runs
			}
		}
	}
	s.setReadiness()
	setConditions(pod, &s.st, step.now)

	if admitted {
		return s.outcome(fmt.Sprintf("%s → %s (ip %s)", pod.Status.Phase, s.st.Phase, step.podIP))
	}
	if s.st.Phase != pod.Status.Phase {
		s.tell("%s → %s", pod.Status.Phase, s.st.Phase)
	}
	wasReady, isReady := api.PodIsReady(pod), api.PodIsReady(&corev1.Pod{Status: s.st})
	if wasReady != isReady && s.st.Phase == corev1.PodRunning && pod.Status.Phase == corev1.PodRunning {
		s.tell("Ready %v → %v", wasReady, isReady)
	}
	return s.outcome(strings.Join(s.story, ", "))
}

// stepper is one step of nextStatus under way.
type stepper struct {
	pod     *corev1.Pod
	step    simulation
	now     time.Time
	st      corev1.PodStatus
	backOff backOff
	events  []podEvent
	story   []string
	runs    []runEvent
	wake    time.Time
}

func (s *stepper) outcome(story string) outcome {
	if terminal(s.st.Phase) || s.step.stop {
		s.wake = time.Time{}
	}
	return outcome{status: s.st, events: s.events, story: story, runs: s.runs, backOff: s.backOff, wake: s.wake}
}

func (s *stepper) tell(format string, args ...any) {
	s.story = append(s.story, fmt.Sprintf(format, args...))
}

func (s *stepper) event(eventType, reason, message string) {
	s.events = append(s.events, podEvent{eventType, reason, message})
}

// wakeAt asks for a step at t, unless one comes sooner.
func (s *stepper) wakeAt(t time.Time) {
	if s.wake.IsZero() || t.Before(s.wake) {
		s.wake = t
	}
}

// refuse fails the pod without running it, as the kubelet's admission
// rejects a pod.
func (s *stepper) refuse() {
	r := s.step.refusal
	s.st.Phase, s.st.Reason, s.st.Message = corev1.PodFailed, r.reason, "Pod was rejected: "+r.message
	s.event(corev1.EventTypeWarning, r.reason, r.message)
}

// admit takes the pod on: its IPs and startTime, every container waiting.
func (s *stepper) admit() {
	now := s.step.now
	s.st.Phase = corev1.PodPending
	s.st.StartTime = &now
	s.st.HostIP, s.st.HostIPs = s.step.hostIP, []corev1.HostIP{{IP: s.step.hostIP}}
	s.st.PodIP, s.st.PodIPs = s.step.podIP, []corev1.PodIP{{IP: s.step.podIP}}
	s.st.InitContainerStatuses = nil
	for _, c := range s.pod.Spec.InitContainers {
		cs := containerStatus(s.pod, &c)
		cs.State = waiting(reasonPodInitializing, "")
		s.st.InitContainerStatuses = append(s.st.InitContainerStatuses, cs)
	}
	reason := reasonContainerCreating
	if len(s.pod.Spec.InitContainers) > 0 {
		reason = reasonPodInitializing
	}
	s.st.ContainerStatuses = nil
	for _, c := range s.pod.Spec.Containers {
		cs := containerStatus(s.pod, &c)
		cs.State = waiting(reason, "")
		s.st.ContainerStatuses = append(s.st.ContainerStatuses, cs)
	}
}

func (s *stepper) pastDeadline() bool {
	ads := s.pod.Spec.ActiveDeadlineSeconds
	if ads == nil || s.st.StartTime == nil || terminal(s.st.Phase) {
		return false
	}
	deadline := s.st.StartTime.Add(time.Duration(*ads) * time.Second)
	if s.now.Before(deadline) {
		s.wakeAt(deadline)
		return false
	}
	s.tell("active for %ds → killed (%s)", *ads, reasonDeadlineExceeded)
	return true
}

// advance moves the containers along their runs up to now: the init
// containers in order, each done before the next starts, then the app
// containers.
func (s *stepper) advance() {
	policy := s.pod.Spec.RestartPolicy
	for i := range s.pod.Spec.InitContainers {
		c := &s.pod.Spec.InitContainers[i]
		cs := findStatus(s.st.InitContainerStatuses, c.Name)
		if cs == nil {
			return
		}
		if isSidecar(c) {
			s.container(c, cs, corev1.RestartPolicyAlways, true)
			if cs.State.Running == nil {
				return
			}
			continue
		}
		initPolicy := policy
		if policy == corev1.RestartPolicyAlways {
			initPolicy = corev1.RestartPolicyOnFailure // a completed init container is done
		}
		s.container(c, cs, initPolicy, true)
		if t := cs.State.Terminated; t == nil || t.ExitCode != 0 {
			return
		}
	}
	for i := range s.pod.Spec.Containers {
		c := &s.pod.Spec.Containers[i]
		if cs := findStatus(s.st.ContainerStatuses, c.Name); cs != nil {
			s.container(c, cs, policy, false)
		}
	}
}

// maxTransitions bounds what one container does in one step (start, end,
// restart, end, back off): with a back-off above zero it never needs
// more.
const maxTransitions = 6

// container moves one container along its runs up to now: a run that
// ends by itself ends at its time; a container to restart restarts now,
// or waits out its back-off; one waiting to start starts.
func (s *stepper) container(c *corev1.Container, cs *corev1.ContainerStatus, policy corev1.RestartPolicy, init bool) {
	for range maxTransitions {
		switch {
		case cs.State.Running != nil:
			sc := containerScript(s.pod, c)
			if init && !isSidecar(c) && !sc.ends && !sc.sleepsForever {
				// An init container whose command is not simulated is
				// taken to do its work at once.
				sc.ends, sc.exitCode = true, 0
			}
			started := s.runStart(cs)
			for _, l := range sc.lines {
				if at := started.Add(l.at); at.After(s.now) {
					s.wakeAt(at) // its log has more to say then
					break
				}
			}
			if !sc.ends {
				return
			}
			end := started.Add(sc.exitAfter)
			if end.After(s.now) {
				s.wakeAt(end)
				return
			}
			s.exit(cs, sc.exitCode, metav1.NewTime(end))
		case cs.State.Terminated != nil:
			if !restarts(policy, cs.State.Terminated.ExitCode) || !s.restart(c, cs, cs.State.Terminated.FinishedAt.Time) {
				return
			}
		case cs.LastTerminationState.Terminated != nil:
			if !s.restart(c, cs, cs.LastTerminationState.Terminated.FinishedAt.Time) {
				return
			}
		default:
			cs.State, cs.Started = running(s.step.now), new(true)
			s.runs = append(s.runs, runEvent{container: c.Name, at: s.now, started: true})
			for _, e := range startEvents(c) {
				s.event(e.eventType, e.reason, e.message)
			}
		}
	}
}

// restarts reports whether a container that exited with code restarts
// under policy.
func restarts(policy corev1.RestartPolicy, code int32) bool {
	return policy == corev1.RestartPolicyAlways || (policy == corev1.RestartPolicyOnFailure && code != 0)
}

// runStart is when a running container's current run started: the
// kubelet's own time of it, if it has one for that run (the same second
// as the status says), else the status's, whole seconds as the API keeps
// them.
func (s *stepper) runStart(cs *corev1.ContainerStatus) time.Time {
	says := cs.State.Running.StartedAt.Time
	for _, r := range s.step.runs {
		if r.container == cs.Name && !r.startedAt.IsZero() && r.startedAt.Truncate(time.Second).Equal(says.Truncate(time.Second)) {
			return r.startedAt
		}
	}
	return says
}

// exit ends the container's run with code at the time given.
func (s *stepper) exit(cs *corev1.ContainerStatus, code int32, at metav1.Time) {
	runStart := s.runStart(cs)
	cs.State = corev1.ContainerState{Terminated: terminated(cs, code, at)}
	cs.Started, cs.Ready = new(false), false
	s.runs = append(s.runs, runEvent{container: cs.Name, at: at.Time, exitCode: code, runStart: runStart})
	s.tell("container %s exited %d", cs.Name, code)
}

// restart starts the container again, whose last run finished at
// finished, unless its back-off has not passed: then it waits,
// CrashLoopBackOff. It reports whether it restarted.
func (s *stepper) restart(c *corev1.Container, cs *corev1.ContainerStatus, finished time.Time) bool {
	if cs.State.Terminated != nil {
		cs.LastTerminationState = corev1.ContainerState{Terminated: cs.State.Terminated}
	}
	wait, delay := s.backOff.wait(c.Name, finished, s.now)
	if wait > 0 {
		s.wakeAt(s.now.Add(wait))
		if w := cs.State.Waiting; w != nil && w.Reason == reasonCrashLoopBackOff {
			return false // waiting already
		}
		podName := fmt.Sprintf("%s_%s(%s)", s.pod.Name, s.pod.Namespace, s.pod.UID)
		cs.State = waiting(reasonCrashLoopBackOff, fmt.Sprintf("back-off %s restarting failed container=%s pod=%s", delay, c.Name, podName))
		cs.Started, cs.Ready = new(false), false
		s.event(corev1.EventTypeWarning, "BackOff", fmt.Sprintf("Back-off restarting failed container %s in pod %s", c.Name, podName))
		s.tell("container %s back-off %s", c.Name, delay)
		return false
	}
	s.backOff.restarted(c.Name, finished, s.now)
	cs.State, cs.Started = running(s.step.now), new(true)
	cs.RestartCount++
	s.runs = append(s.runs, runEvent{container: c.Name, at: s.now, started: true})
	for _, e := range startEvents(c)[1:] { // the image is still there
		s.event(e.eventType, e.reason, e.message)
	}
	s.tell("container %s restarted (restartCount %d)", c.Name, cs.RestartCount)
	return true
}

// exitAll ends every running container's run with code now.
func (s *stepper) exitAll(code int32) {
	for _, list := range [][]corev1.ContainerStatus{s.st.InitContainerStatuses, s.st.ContainerStatuses} {
		for i := range list {
			if list[i].State.Running != nil {
				s.exit(&list[i], code, s.step.now)
			}
		}
	}
}

// killAll ends every running container (sidecars included) with code now
// and returns how many it ended; events says to record Killing for the
// app containers.
func (s *stepper) killAll(code int32, events bool) int {
	n := 0
	kill := func(list []corev1.ContainerStatus, events bool) {
		for i := range list {
			cs := &list[i]
			if cs.State.Running == nil {
				continue
			}
			runStart := s.runStart(cs)
			cs.State = corev1.ContainerState{Terminated: terminated(cs, code, s.step.now)}
			cs.Started, cs.Ready = new(false), false
			s.runs = append(s.runs, runEvent{container: cs.Name, at: s.now, exitCode: code, runStart: runStart})
			if events {
				s.event(corev1.EventTypeNormal, "Killing", "Stopping container "+cs.Name)
			}
			n++
		}
	}
	kill(s.st.ContainerStatuses, events)
	kill(s.st.InitContainerStatuses, false)
	return n
}

// setReadiness sets each container's ready: running in a Running pod,
// its readiness delay passed, and not told otherwise.
func (s *stepper) setReadiness() {
	ready := s.st.Phase == corev1.PodRunning && !s.step.unready
	set := func(specs []corev1.Container, list []corev1.ContainerStatus, init bool) {
		for i := range specs {
			c := &specs[i]
			cs := findStatus(list, c.Name)
			switch {
			case cs == nil:
			case init && cs.State.Terminated != nil && cs.State.Terminated.ExitCode == 0 && !isSidecar(c):
				cs.Ready = true // a completed init container
			case cs.State.Running == nil:
				cs.Ready = false
			default:
				cs.Ready = ready && s.probeDelayPassed(c, cs)
			}
		}
	}
	set(s.pod.Spec.InitContainers, s.st.InitContainerStatuses, true)
	set(s.pod.Spec.Containers, s.st.ContainerStatuses, false)
}

// probeDelayPassed reports whether a running container's readiness probe,
// if it has one, is past its initialDelaySeconds.
func (s *stepper) probeDelayPassed(c *corev1.Container, cs *corev1.ContainerStatus) bool {
	if c.ReadinessProbe == nil {
		return true
	}
	at := s.runStart(cs).Add(time.Duration(c.ReadinessProbe.InitialDelaySeconds) * time.Second)
	if at.After(s.now) {
		s.wakeAt(at)
		return false
	}
	return true
}

// podPhase is the phase the containers' statuses make, as the kubelet's
// getPhase reads them: Pending while an init container has not completed
// (Failed if one failed under restartPolicy Never) or an app container
// waits to start for the first time; Running while one runs or restarts;
// Succeeded or Failed once all have ended for good.
func podPhase(pod *corev1.Pod, st *corev1.PodStatus) corev1.PodPhase {
	policy := pod.Spec.RestartPolicy
	for _, c := range pod.Spec.InitContainers {
		if isSidecar(&c) {
			continue
		}
		cs := findStatus(st.InitContainerStatuses, c.Name)
		switch {
		case cs == nil:
			return corev1.PodPending
		case cs.State.Terminated != nil && cs.State.Terminated.ExitCode == 0:
			continue
		case cs.State.Terminated != nil && policy == corev1.RestartPolicyNever:
			return corev1.PodFailed
		}
		return corev1.PodPending
	}
	var running, waiting, stopped, succeeded int
	for i := range st.ContainerStatuses {
		cs := &st.ContainerStatuses[i]
		switch {
		case cs.State.Running != nil:
			running++
		case cs.State.Terminated != nil:
			stopped++
			if cs.State.Terminated.ExitCode == 0 {
				succeeded++
			}
		case cs.LastTerminationState.Terminated != nil:
			stopped++
		default:
			waiting++
		}
	}
	switch {
	case waiting > 0:
		return corev1.PodPending
	case running > 0:
		return corev1.PodRunning
	case stopped == 0:
		return corev1.PodPending
	case policy == corev1.RestartPolicyAlways:
		return corev1.PodRunning // restarting
	case stopped == succeeded:
		return corev1.PodSucceeded
	case policy == corev1.RestartPolicyNever:
		return corev1.PodFailed
	}
	return corev1.PodRunning // OnFailure: restarting the failed
}

func terminal(phase corev1.PodPhase) bool {
	return phase == corev1.PodSucceeded || phase == corev1.PodFailed
}

// started reports whether the kubelet already admitted pod and took its
// containers on.
func started(pod *corev1.Pod) bool {
	return pod.Status.StartTime != nil && len(pod.Status.ContainerStatuses) == len(pod.Spec.Containers)
}

func isSidecar(c *corev1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

func findStatus(list []corev1.ContainerStatus, name string) *corev1.ContainerStatus {
	for i := range list {
		if list[i].Name == name {
			return &list[i]
		}
	}
	return nil
}

func containerStatus(pod *corev1.Pod, c *corev1.Container) corev1.ContainerStatus {
	return corev1.ContainerStatus{
		Name:        c.Name,
		Image:       c.Image,
		ImageID:     "sim://" + c.Image,
		ContainerID: fmt.Sprintf("sim://%s/%s", pod.UID, c.Name),
		Started:     new(false),
	}
}

func running(now metav1.Time) corev1.ContainerState {
	return corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}
}

func waiting(reason, message string) corev1.ContainerState {
	return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: message}}
}

// startEvents are the events of starting one container: pulled, created,
// started.
func startEvents(c *corev1.Container) []podEvent {
	return []podEvent{
		{corev1.EventTypeNormal, "Pulled", fmt.Sprintf("Container image %q already present on machine", c.Image)},
		{corev1.EventTypeNormal, "Created", "Created container: " + c.Name},
		{corev1.EventTypeNormal, "Started", "Started container " + c.Name},
	}
}

func exitReason(code int32) string {
	if code == 0 {
		return "Completed"
	}
	return "Error"
}

// terminated is the state a running container ends in.
func terminated(cs *corev1.ContainerStatus, code int32, at metav1.Time) *corev1.ContainerStateTerminated {
	return &corev1.ContainerStateTerminated{
		ExitCode:    code,
		Reason:      exitReason(code),
		StartedAt:   cs.State.Running.StartedAt,
		FinishedAt:  at,
		ContainerID: cs.ContainerID,
	}
}

// setConditions derives the pod's conditions from its phase and container
// statuses. A condition's lastTransitionTime moves only when its status
// does.
func setConditions(pod *corev1.Pod, st *corev1.PodStatus, now metav1.Time) {
	set := func(typ corev1.PodConditionType, ok bool, reason, message string) {
		status := corev1.ConditionFalse
		if ok {
			status = corev1.ConditionTrue
			reason, message = "", ""
		}
		setCondition(st, corev1.PodCondition{Type: typ, Status: status, Reason: reason, Message: message}, now)
	}
	set(corev1.PodReadyToStartContainers, !terminal(st.Phase), "", "")

	var incomplete []string
	for _, c := range pod.Spec.InitContainers {
		cs := findStatus(st.InitContainerStatuses, c.Name)
		done := cs != nil && cs.State.Terminated != nil && cs.State.Terminated.ExitCode == 0
		if isSidecar(&c) {
			done = cs != nil && (cs.State.Running != nil || (cs.State.Terminated != nil && terminal(st.Phase)))
		}
		if !done {
			incomplete = append(incomplete, c.Name)
		}
	}
	set(corev1.PodInitialized, len(incomplete) == 0, "ContainersNotInitialized",
		fmt.Sprintf("containers with incomplete status: [%s]", strings.Join(incomplete, " ")))

	var unready []string
	for _, cs := range st.ContainerStatuses {
		if !cs.Ready {
			unready = append(unready, cs.Name)
		}
	}
	reason, message := "ContainersNotReady", fmt.Sprintf("containers with unready status: [%s]", strings.Join(unready, " "))
	if st.Phase == corev1.PodSucceeded {
		reason, message = "PodCompleted", ""
	}
	set(corev1.ContainersReady, len(unready) == 0, reason, message)
	set(corev1.PodReady, len(unready) == 0, reason, message)
	if !hasCondition(st, corev1.PodScheduled) {
		set(corev1.PodScheduled, true, "", "")
	}
}

func hasCondition(st *corev1.PodStatus, typ corev1.PodConditionType) bool {
	for _, c := range st.Conditions {
		if c.Type == typ {
			return true
		}
	}
	return false
}

// setCondition sets c (with lastTransitionTime now when its status
// changes, or it is new) in st's conditions.
func setCondition(st *corev1.PodStatus, c corev1.PodCondition, now metav1.Time) {
	for i := range st.Conditions {
		old := &st.Conditions[i]
		if old.Type != c.Type {
			continue
		}
		c.LastTransitionTime = old.LastTransitionTime
		if old.Status != c.Status {
			c.LastTransitionTime = now
		}
		c.LastProbeTime = old.LastProbeTime
		*old = c
		return
	}
	c.LastTransitionTime = now
	st.Conditions = append(st.Conditions, c)
}

// waitingForVolumes is the status of a pod the node took on but whose
// volumes are not ready: Pending, its containers waiting
// ContainerCreating (init containers PodInitializing), not ready to start
// containers. It has no startTime nor IP yet: those come when it starts.
func waitingForVolumes(pod *corev1.Pod, now metav1.Time) corev1.PodStatus {
	st := *pod.Status.DeepCopy()
	st.Phase = corev1.PodPending
	st.InitContainerStatuses, st.ContainerStatuses = nil, nil
	for _, c := range pod.Spec.InitContainers {
		cs := containerStatus(pod, &c)
		cs.State = waiting(reasonPodInitializing, "")
		st.InitContainerStatuses = append(st.InitContainerStatuses, cs)
	}
	for _, c := range pod.Spec.Containers {
		cs := containerStatus(pod, &c)
		cs.State = waiting(reasonContainerCreating, "")
		st.ContainerStatuses = append(st.ContainerStatuses, cs)
	}
	setConditions(pod, &st, now)
	setCondition(&st, corev1.PodCondition{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionFalse}, now)
	return st
}
