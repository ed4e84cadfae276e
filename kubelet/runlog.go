package kubelet

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// ran keeps what a step did once its status is written: the status the
// API server answered (nil when nothing needed writing: the informer's pod
// has it), the containers' back-off, and their logs: each run that started
// begins a log with a line saying what runs, each line its script printed
// by now is added, and each run that ended says how and is ended.
func (k *Kubelet) ran(key string, pod *corev1.Pod, out outcome, written *corev1.PodStatus, now time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	m := k.memoLocked(key, pod.UID)
	m.backOff = out.backOff
	m.status = written
	if old, ok := k.logged[key]; ok && old != pod.UID {
		k.logs.Forget(old) // an earlier pod of that name
	}
	k.logged[key] = pod.UID
	for _, r := range out.runs {
		c := specContainer(pod, r.container)
		if c == nil {
			continue
		}
		if r.started {
			*m.run(c.Name) = containerRun{container: c.Name, startedAt: r.at}
			k.logs.Start(pod.UID, c.Name)
			k.logs.Print(pod.UID, c.Name, r.at, startLine(pod, c, isRegularInit(pod, c.Name)))
			continue
		}
		k.printDueLocked(m, pod, c, r.runStart, r.at)
		k.logs.Print(pod.UID, c.Name, r.at, fmt.Sprintf("[minictl] exited with code %d", r.exitCode))
		k.logs.End(pod.UID, c.Name)
	}
	for _, list := range [][]corev1.ContainerStatus{out.status.InitContainerStatuses, out.status.ContainerStatuses} {
		for _, cs := range list {
			if c := specContainer(pod, cs.Name); c != nil && cs.State.Running != nil {
				k.printDueLocked(m, pod, c, cs.State.Running.StartedAt.Time, now)
			}
		}
	}
}

// podStatus is pod's status as the kubelet knows it: the one it last
// wrote while its informer has not heard that back, else the informer's.
func (k *Kubelet) podStatus(pod *corev1.Pod) *corev1.PodStatus {
	k.mu.Lock()
	defer k.mu.Unlock()
	if m, ok := k.memos[pod.Namespace+"/"+pod.Name]; ok && m.uid == pod.UID && m.status != nil {
		return m.status
	}
	return &pod.Status
}

// printDueLocked prints the lines of c's current run, started at start,
// that are due by until and not printed yet.
func (k *Kubelet) printDueLocked(m *podMemo, pod *corev1.Pod, c *corev1.Container, start, until time.Time) {
	lines := containerScript(pod, c).lines
	run := m.run(c.Name)
	for ; run.printed < len(lines); run.printed++ {
		line := lines[run.printed]
		at := start.Add(line.at)
		if at.After(until) {
			return
		}
		k.logs.Print(pod.UID, c.Name, at, line.text)
	}
}

func isRegularInit(pod *corev1.Pod, name string) bool {
	for i := range pod.Spec.InitContainers {
		if c := &pod.Spec.InitContainers[i]; c.Name == name {
			return !isSidecar(c)
		}
	}
	return false
}

func specContainer(pod *corev1.Pod, name string) *corev1.Container {
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	return nil
}

// startLine is the first line of a run's log: what runs, and whether
// minictl simulates it. What it does not simulate runs until stopped, or
// completes at once in a (regular) init container.
func startLine(pod *corev1.Pod, c *corev1.Container, init bool) string {
	notSimulated := "runs until stopped"
	if init {
		notSimulated = "taken to complete at once"
	}
	if len(c.Command) == 0 && len(c.Args) == 0 {
		return fmt.Sprintf("[minictl] started %s: its command is not simulated, %s", c.Image, notSimulated)
	}
	words := make([]string, 0, len(c.Command)+len(c.Args))
	for _, w := range append(append([]string(nil), c.Command...), c.Args...) {
		if w == "" || strings.ContainsAny(w, " \t\n\"'\\;&|$#") {
			w = strconv.Quote(w)
		}
		words = append(words, w)
	}
	line := "[minictl] started: " + strings.Join(words, " ")
	if sc := containerScript(pod, c); !sc.ends && !sc.sleepsForever {
		line += " (from where it is not simulated, " + notSimulated + ")"
	}
	const maxLine = 512
	if len(line) > maxLine {
		line = line[:maxLine] + "…"
	}
	return line
}
