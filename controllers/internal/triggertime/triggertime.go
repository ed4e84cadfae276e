// Package triggertime is the endpoints and endpointslice controllers'
// shared account of when the change behind a sync happened.
package triggertime

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Tracker works out, for each sync of a service, when the change that
// caused it happened: the value of the endpoints.kubernetes.io/last-change-trigger-time
// annotation, which lets whoever reads the Endpoints or the EndpointSlices measure how long the
// change took to reach them (upstream's TriggerTimeTracker).
//
// A pod's trigger time is when its Ready condition last changed; the
// service's is its creation. A sync's trigger time is the earliest of
// those that moved since the last sync of the same service that took
// effect: what a sync saw is remembered only once its write succeeded (or
// nothing needed writing), so a write that failed, say against a cache
// that was behind, leaves the change to be measured by its retry. Pod
// deletions leave no time behind and are not measured, as upstream.
//
// Syncs of one service never overlap (the workqueue sees to it); mu only
// guards the map between services.
type Tracker struct {
	mu     sync.Mutex
	states map[string]State // by service key
}

// State is what one sync saw, remembered once the sync took effect.
type State struct {
	pods    map[string]time.Time // pod name → its trigger time at the last sync
	service time.Time
}

// New returns a tracker that knows no service yet.
func New() *Tracker {
	return &Tracker{states: map[string]State{}}
}

// Compute returns the trigger time of this sync of svc, zero when none is
// known, and what it saw, for Remember once the sync has taken effect.
func (tt *Tracker) Compute(key string, svc *corev1.Service, pods []*corev1.Pod) (time.Time, State) {
	tt.mu.Lock()
	last, known := tt.states[key]
	tt.mu.Unlock()

	next := State{pods: make(map[string]time.Time, len(pods)), service: svc.CreationTimestamp.Time}
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

	if !known {
		return svc.CreationTimestamp.Time, next // a service seen for the first time
	}
	return earliest, next
}

// Remember records what a sync of key saw, once that sync took effect.
func (tt *Tracker) Remember(key string, seen State) {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	tt.states[key] = seen
}

// Drop drops what was remembered of a deleted service.
func (tt *Tracker) Drop(key string) {
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
