package kubelet

import (
	"fmt"
	"strings"

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
}

// podEvent is an Event the kubelet records about a pod after its status is
// written.
type podEvent struct {
	eventType, reason, message string
}

// nextStatus returns the status pod has after step, the events that tell
// what happened, and a short story of it for the log ("" when nothing
// but times changed). It does not modify pod.
//
// The story of a pod, as a real kubelet writes it:
//   - Pending → Running: init containers (but sidecars) run to completion,
//     then every container starts; the pod gets its IPs and startTime.
//   - An exit: restartPolicy Always, or OnFailure with a non-zero code,
//     restarts the containers (restartCount+1, lastState terminated);
//     otherwise they stay terminated and the pod ends Succeeded (code 0)
//     or Failed.
//   - A stop (graceful deletion): the containers terminate with code 0 and
//     the pod ends Succeeded, as a kubelet ends a deleted pod.
//   - Ready and ContainersReady are True while the pod runs, unless told
//     otherwise; PodScheduled, Initialized and PodReadyToStartContainers
//     are True once it started.
func nextStatus(pod *corev1.Pod, step simulation) (corev1.PodStatus, []podEvent, string) {
	st := *pod.Status.DeepCopy()
	var events []podEvent
	var story []string
	now := step.now

	if !started(pod) && !step.stop {
		st.Phase = corev1.PodRunning
		st.StartTime = &now
		st.HostIP, st.HostIPs = step.hostIP, []corev1.HostIP{{IP: step.hostIP}}
		st.PodIP, st.PodIPs = step.podIP, []corev1.PodIP{{IP: step.podIP}}
		st.InitContainerStatuses = nil
		for _, c := range pod.Spec.InitContainers {
			cs := containerStatus(pod, &c)
			if isSidecar(&c) {
				cs.State = running(now)
				cs.Started = new(true)
			} else {
				cs.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
					ExitCode: 0, Reason: "Completed", StartedAt: now, FinishedAt: now, ContainerID: cs.ContainerID,
				}}
				cs.Ready = true
			}
			st.InitContainerStatuses = append(st.InitContainerStatuses, cs)
			events = append(events, startEvents(&c)...)
		}
		st.ContainerStatuses = nil
		for _, c := range pod.Spec.Containers {
			cs := containerStatus(pod, &c)
			cs.State = running(now)
			cs.Started = new(true)
			st.ContainerStatuses = append(st.ContainerStatuses, cs)
			events = append(events, startEvents(&c)...)
		}
		story = append(story, fmt.Sprintf("%s → Running (ip %s)", pod.Status.Phase, step.podIP))
	}

	switch {
	case step.stop:
		if n := terminateAll(&st, 0, now); n > 0 {
			for _, c := range pod.Spec.Containers {
				events = append(events, podEvent{corev1.EventTypeNormal, "Killing", "Stopping container " + c.Name})
			}
			story = append(story, fmt.Sprintf("being deleted → stop %d container(s)", n))
		}
		if st.Phase != corev1.PodFailed {
			st.Phase = corev1.PodSucceeded
		}
	case step.exit != nil && st.Phase == corev1.PodRunning:
		code := *step.exit
		policy := pod.Spec.RestartPolicy
		if policy == corev1.RestartPolicyAlways || (policy == corev1.RestartPolicyOnFailure && code != 0) {
			restartAll(&st, code, now)
			for _, c := range pod.Spec.Containers {
				events = append(events, startEvents(&c)[1:]...) // the image is still there
			}
			story = append(story, fmt.Sprintf("containers exited %d → restart (restartPolicy %s)", code, policy))
			break
		}
		terminateAll(&st, code, now)
		st.Phase = corev1.PodSucceeded
		if code != 0 {
			st.Phase = corev1.PodFailed
		}
		story = append(story, fmt.Sprintf("containers exited %d → %s (restartPolicy %s)", code, st.Phase, policy))
	}

	ready := st.Phase == corev1.PodRunning && !step.unready
	for i := range st.ContainerStatuses {
		cs := &st.ContainerStatuses[i]
		cs.Ready = ready && cs.State.Running != nil
	}
	for i := range st.InitContainerStatuses {
		if cs := &st.InitContainerStatuses[i]; cs.State.Running != nil {
			cs.Ready = ready
		}
	}
	setConditions(&st, now)
	wasReady, isReady := api.PodIsReady(pod), api.PodIsReady(&corev1.Pod{Status: st})
	if wasReady != isReady && st.Phase == corev1.PodRunning && pod.Status.Phase == corev1.PodRunning {
		story = append(story, fmt.Sprintf("Ready %v → %v", wasReady, isReady))
	}
	return st, events, strings.Join(story, ", ")
}

// started reports whether the kubelet already started pod's containers.
func started(pod *corev1.Pod) bool {
	return pod.Status.StartTime != nil && len(pod.Status.ContainerStatuses) == len(pod.Spec.Containers)
}

func isSidecar(c *corev1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

func containerStatus(pod *corev1.Pod, c *corev1.Container) corev1.ContainerStatus {
	return corev1.ContainerStatus{
		Name:        c.Name,
		Image:       c.Image,
		ImageID:     "sim://" + c.Image,
		ContainerID: fmt.Sprintf("sim://%s/%s", pod.UID, c.Name),
	}
}

func running(now metav1.Time) corev1.ContainerState {
	return corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}
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
func terminated(cs *corev1.ContainerStatus, code int32, now metav1.Time) *corev1.ContainerStateTerminated {
	return &corev1.ContainerStateTerminated{
		ExitCode:    code,
		Reason:      exitReason(code),
		StartedAt:   cs.State.Running.StartedAt,
		FinishedAt:  now,
		ContainerID: cs.ContainerID,
	}
}

// terminateAll stops every running container (sidecars included) with
// code and returns how many it stopped.
func terminateAll(st *corev1.PodStatus, code int32, now metav1.Time) int {
	n := 0
	for _, list := range [][]corev1.ContainerStatus{st.ContainerStatuses, st.InitContainerStatuses} {
		for i := range list {
			cs := &list[i]
			if cs.State.Running == nil {
				continue
			}
			cs.State = corev1.ContainerState{Terminated: terminated(cs, code, now)}
			cs.Started = new(false)
			cs.Ready = false
			n++
		}
	}
	return n
}

// restartAll has every running container exit with code and start again.
func restartAll(st *corev1.PodStatus, code int32, now metav1.Time) {
	for i := range st.ContainerStatuses {
		cs := &st.ContainerStatuses[i]
		if cs.State.Running == nil {
			continue
		}
		cs.LastTerminationState = corev1.ContainerState{Terminated: terminated(cs, code, now)}
		cs.State = running(now)
		cs.RestartCount++
	}
}

// setConditions derives the pod's conditions from its phase and container
// statuses. A condition's lastTransitionTime moves only when its status
// does.
func setConditions(st *corev1.PodStatus, now metav1.Time) {
	terminal := st.Phase == corev1.PodSucceeded || st.Phase == corev1.PodFailed
	set := func(typ corev1.PodConditionType, ok bool, reason, message string) {
		status := corev1.ConditionFalse
		if ok {
			status = corev1.ConditionTrue
			reason, message = "", ""
		}
		setCondition(st, corev1.PodCondition{Type: typ, Status: status, Reason: reason, Message: message}, now)
	}
	set(corev1.PodReadyToStartContainers, !terminal, "", "")
	set(corev1.PodInitialized, true, "", "")

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
