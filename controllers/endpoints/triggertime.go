package endpoints

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// triggerTimes works out, for each sync of a service, when the change that
// caused it happened: the value of the endpoints.kubernetes.io/last-change-trigger-time
// annotation, which lets whoever reads the Endpoints measure how long the
// change took to reach them (upstream's TriggerTimeTracker).
//
// A pod's trigger time is when its Ready condition last changed; the
// service's is its creation. A sync's trigger time is the earliest of
// those that moved since the previous sync of the same service. Pod
// deletions leave no time behind and are not measured, as upstream.
//
// Syncs of one service never overlap (the workqueue sees to it); mu only
// guards the map between services.
type triggerTimes struct {
	mu     sync.Mutex
	states map[string]triggerState // by service key
}

type triggerState struct {
	pods    map[string]time.Time // pod name → its trigger time at the last sync
	service time.Time
}

func newTriggerTimes() *triggerTimes {
	return &triggerTimes{states: map[string]triggerState{}}
}

// compute returns the trigger time of this sync of svc, zero when none is
// known, and remembers what it saw for the next one.
func (tt *triggerTimes) compute(key string, svc *corev1.Service, pods []*corev1.Pod) time.Time {
	tt.mu.Lock()
	last, known := tt.states[key]
	tt.mu.Unlock()

	next := triggerState{pods: make(map[string]time.Time, len(pods)), service: svc.CreationTimestamp.Time}
	var earliest time.Time
	moved := func(t time.Time) {
		if earliest.IsZero() || t.Before(earliest) {
			earliest = t
		}
	}
	for _, pod := range pods {
		t := readySince(pod)
		if t.IsZero() {
			continue
		}
		next.pods[pod.Name] = t
		if t.After(last.pods[pod.Name]) {
			moved(t)
		}
	}
	if next.service.After(last.service) {
		moved(next.service)
	}

	tt.mu.Lock()
	tt.states[key] = next
	tt.mu.Unlock()
	if !known {
		return svc.CreationTimestamp.Time // a service seen for the first time
	}
	return earliest
}

// forget drops what was remembered of a deleted service.
func (tt *triggerTimes) forget(key string) {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	delete(tt.states, key)
}

// readySince is when pod's Ready condition last changed; zero without one.
func readySince(pod *corev1.Pod) time.Time {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}
