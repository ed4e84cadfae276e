// Package containerlog keeps what the simulated containers of one node
// printed: for each container of each pod, the lines of its current run
// and of the run before it (what `kubectl logs --previous` shows), as a
// container runtime keeps a container's log files.
//
// The kubelet's container simulation writes (Start, Print, End); the
// kubelet's HTTP server reads.
package containerlog

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// MaxRunBytes bounds the text one run of a container keeps; beyond it the
// oldest lines go first, as a rotated log file.
const MaxRunBytes = 1 << 20

// Line is one line a container printed, and when.
type Line struct {
	Time time.Time
	Text string
}

// Logs is the logs of one node's containers. The zero value is not
// usable; use New.
type Logs struct {
	mu         sync.Mutex
	containers map[containerKey]*containerLog
}

type containerKey struct {
	uid       types.UID
	container string
}

// containerLog is one container's current run and the run before it.
type containerLog struct {
	current, previous *run
}

type run struct {
	lines []Line
	bytes int
	ended bool
}

// New returns empty logs.
func New() *Logs {
	return &Logs{containers: map[containerKey]*containerLog{}}
}

// Start begins a new run of container in the pod with uid: the run
// before, if any, becomes its previous run.
func (l *Logs) Start(uid types.UID, container string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := containerKey{uid, container}
	c := l.containers[k]
	if c == nil {
		c = &containerLog{}
		l.containers[k] = c
	}
	c.previous, c.current = c.current, &run{}
}

// Print appends a line the current run of container printed at the time
// given; a container not started yet is started.
func (l *Logs) Print(uid types.UID, container string, at time.Time, text string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := containerKey{uid, container}
	c := l.containers[k]
	if c == nil || c.current == nil {
		c = &containerLog{current: &run{}}
		l.containers[k] = c
	}
	r := c.current
	r.lines = append(r.lines, Line{Time: at, Text: text})
	r.bytes += len(text) + 1
	for r.bytes > MaxRunBytes && len(r.lines) > 1 {
		r.bytes -= len(r.lines[0].Text) + 1
		r.lines = r.lines[1:]
	}
}

// End marks the current run of container as ended: it prints nothing
// more, and whoever follows its log reaches the end.
func (l *Logs) End(uid types.UID, container string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c := l.containers[containerKey{uid, container}]; c != nil && c.current != nil {
		c.current.ended = true
	}
}

// Forget drops the logs of every container of the pod with uid: the pod
// is gone.
func (l *Logs) Forget(uid types.UID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k := range l.containers {
		if k.uid == uid {
			delete(l.containers, k)
		}
	}
}
