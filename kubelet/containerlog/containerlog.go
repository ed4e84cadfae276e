// Package containerlog keeps what the simulated containers of one node
// printed: for each container of each pod, the lines of its current run
// and of the run before it (what `kubectl logs --previous` shows), as a
// container runtime keeps a container's log files.
//
// The kubelet's container simulation writes (Start, Print, End, Forget);
// the kubelet's HTTP server reads (Read), as a kubelet reads the files
// back for `kubectl logs`.
//
// Design, one line per part:
//
//   - containerlog.go: Logs, the runs of every container, and how they
//     are written.
//   - read.go: Read, a run read back with kube's PodLogOptions (tail,
//     since, timestamps, limitBytes, previous, follow).
//
// Properties:
//
//   - A run keeps at most MaxRunBytes of text; beyond it the oldest lines
//     go first, as a rotated log file.
//   - A reader that follows a run is woken by every Print to it and by its
//     end, never by a timer: End, a new Start of the container and Forget
//     of its pod all end the run, and so every follower of it.
//   - Reading never blocks a writer for longer than a copy of the lines
//     it has not seen yet.
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
	// mu guards containers and every run in it.
	mu         sync.Mutex
	containers map[containerKey]*containerLog
	// created is closed, and replaced, when a container gets its first
	// run: how a follower of a container not started yet waits.
	created chan struct{}
}

type containerKey struct {
	uid       types.UID
	container string
}

// containerLog is one container's current run and the run before it.
type containerLog struct {
	current, previous *run
}

// run is one run of a container. Invariant: lines are the lines printed
// after the first dropped ones; bytes is their size, newlines counted.
type run struct {
	lines   []Line
	dropped int // lines dropped from the front to stay within MaxRunBytes
	bytes   int
	ended   bool
	// changed is closed, and replaced, when the run gets a line or ends:
	// how followers wait.
	changed chan struct{}
}

func newRun() *run { return &run{changed: make(chan struct{})} }

// notifyLocked wakes every follower of r.
func (r *run) notifyLocked() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// endLocked ends r, once.
func (r *run) endLocked() {
	if r != nil && !r.ended {
		r.ended = true
		r.notifyLocked()
	}
}

// New returns empty logs.
func New() *Logs {
	return &Logs{containers: map[containerKey]*containerLog{}, created: make(chan struct{})}
}

// newRunLocked makes a new current run for c.
func (l *Logs) newRunLocked(c *containerLog) {
	if c.current == nil {
		close(l.created)
		l.created = make(chan struct{})
	}
	c.current = newRun()
}

// Start begins a new run of container in the pod with uid: the run
// before, if any, ends and becomes its previous run.
func (l *Logs) Start(uid types.UID, container string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := containerKey{uid, container}
	c := l.containers[k]
	if c == nil {
		c = &containerLog{}
		l.containers[k] = c
	}
	c.current.endLocked()
	if c.current != nil {
		c.previous = c.current
	}
	l.newRunLocked(c)
}

// Print appends a line the current run of container printed at the time
// given; a container not started yet is started.
func (l *Logs) Print(uid types.UID, container string, at time.Time, text string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := containerKey{uid, container}
	c := l.containers[k]
	if c == nil {
		c = &containerLog{}
		l.containers[k] = c
	}
	if c.current == nil {
		l.newRunLocked(c)
	}
	r := c.current
	r.lines = append(r.lines, Line{Time: at, Text: text})
	r.bytes += len(text) + 1
	for r.bytes > MaxRunBytes && len(r.lines) > 1 {
		r.bytes -= len(r.lines[0].Text) + 1
		r.lines[0] = Line{}
		r.lines = r.lines[1:]
		r.dropped++
	}
	r.notifyLocked()
}

// End marks the current run of container as ended: it prints nothing
// more, and whoever follows its log reaches the end.
func (l *Logs) End(uid types.UID, container string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c := l.containers[containerKey{uid, container}]; c != nil {
		c.current.endLocked()
	}
}

// Forget drops the logs of every container of the pod with uid: the pod
// is gone, and whoever follows one of its logs reaches the end.
func (l *Logs) Forget(uid types.UID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, c := range l.containers {
		if k.uid == uid {
			c.current.endLocked()
			delete(l.containers, k)
		}
	}
}
