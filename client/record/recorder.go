package record

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/clock"
)

// Defaults of Options, client-go's values.
const (
	DefaultQueueSize     = 1000
	DefaultRetryInterval = 10 * time.Second
	// maxTries bounds the attempts to write one event when the server
	// cannot be reached.
	maxTries = 12
)

// Options configure a Recorder.
type Options struct {
	// Component is the source of the events: source.component and
	// reportingComponent ("replicaset-controller", "default-scheduler").
	Component string
	// Host is where the component runs: source.host and reportingInstance
	// (the kubelet gives its node name).
	Host string
	// Logger gets a debug line per event, and one line per interval that
	// says how many were lost; nil discards.
	Logger *slog.Logger
	// Clock stamps events and times the waits between retries; nil is the
	// real clock.
	Clock clock.Clock
	// QueueSize is how many events may wait for the sender before new ones
	// are dropped; 0 is DefaultQueueSize.
	QueueSize int
	// RetryInterval is the wait between attempts to write an event the
	// server could not be reached for; 0 is DefaultRetryInterval. The first
	// wait is a random part of it, so that recorders restarted together do
	// not retry together.
	RetryInterval time.Duration
}

// Recorder records Events about objects. Eventf only queues; the goroutine
// of Run correlates and writes. See the package doc for its properties.
type Recorder struct {
	events  *client.Client[*corev1.Event]
	opts    Options
	log     *slog.Logger
	queue   chan *corev1.Event
	corr    *correlator // used by the Run goroutine only
	losses  *lossLog
	running atomic.Bool // a Run is in progress
	dropped atomic.Uint64

	mu sync.Mutex
	// lastNanos is the timestamp in the last event name made; names use
	// max(now, lastNanos+1) so that no two events of one recorder share a
	// name, even on a coarse or frozen clock.
	lastNanos int64
	// pending counts events queued or being written; idle is closed iff
	// pending == 0.
	pending int
	idle    chan struct{}
}

// NewRecorder returns a recorder writing through rc. Nothing is sent until
// Run is called; events recorded before that wait in the queue.
func NewRecorder(rc *client.RESTClient, opts Options) *Recorder {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	opts.Clock = clock.Or(opts.Clock)
	if opts.QueueSize <= 0 {
		opts.QueueSize = DefaultQueueSize
	}
	if opts.RetryInterval <= 0 {
		opts.RetryInterval = DefaultRetryInterval
	}
	idle := make(chan struct{})
	close(idle)
	return &Recorder{
		events: client.For[*corev1.Event](rc),
		opts:   opts,
		log:    opts.Logger,
		queue:  make(chan *corev1.Event, opts.QueueSize),
		corr:   newCorrelator(),
		losses: &lossLog{log: opts.Logger, clock: opts.Clock, queueSize: opts.QueueSize},
		idle:   idle,
	}
}

// Event records an event about obj. eventType is corev1.EventTypeNormal or
// corev1.EventTypeWarning; reason is a short UpperCamelCase word a program
// can match ("FailedScheduling"); message is for humans.
func (r *Recorder) Event(obj api.Object, eventType, reason, message string) {
	r.record(obj, eventType, reason, message)
}

// Eventf is Event with the message formatted by fmt.Sprintf.
func (r *Recorder) Eventf(obj api.Object, eventType, reason, messageFmt string, args ...any) {
	r.record(obj, eventType, reason, fmt.Sprintf(messageFmt, args...))
}

// Dropped returns how many events were lost because the queue was full.
func (r *Recorder) Dropped() uint64 { return r.dropped.Load() }

func (r *Recorder) record(obj api.Object, eventType, reason, message string) {
	if obj == nil {
		r.log.Error("event about a nil object dropped", "reason", reason, "message", message)
		return
	}
	if eventType != corev1.EventTypeNormal && eventType != corev1.EventTypeWarning {
		r.log.Error("event with an unsupported type dropped", "type", eventType,
			"object", objectName(obj), "reason", reason, "message", message)
		return
	}
	ev := r.makeEvent(obj, eventType, reason, message)
	r.log.Debug("event", "object", objectName(obj), "kind", ev.InvolvedObject.Kind,
		"type", eventType, "reason", reason, "message", message)
	r.enqueue(ev)
}

// enqueue hands ev to the sender, or drops it when the queue is full: the
// caller never waits.
func (r *Recorder) enqueue(ev *corev1.Event) {
	r.mu.Lock()
	r.addPendingLocked(1)
	r.mu.Unlock()
	select {
	case r.queue <- ev:
	default:
		r.done()
		r.dropped.Add(1)
		r.losses.lost(ev)
	}
}

// done marks one pending event as handled.
func (r *Recorder) done() {
	r.mu.Lock()
	r.addPendingLocked(-1)
	r.mu.Unlock()
}

func (r *Recorder) addPendingLocked(n int) {
	if r.pending == 0 && n > 0 {
		r.idle = make(chan struct{})
	}
	r.pending += n
	if r.pending == 0 {
		close(r.idle)
	}
}

// WaitIdle waits until every event recorded so far has been written, given
// up on or dropped, or until ctx is done. It is for tests and for a
// graceful shutdown: call it before cancelling Run's context.
func (r *Recorder) WaitIdle(ctx context.Context) error {
	r.mu.Lock()
	idle := r.idle
	r.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("record: wait for idle: %w", ctx.Err())
	}
}

// makeEvent builds the Event as Kubernetes names and fills it. Cluster-
// scoped objects have their events in the default namespace.
func (r *Recorder) makeEvent(obj api.Object, eventType, reason, message string) *corev1.Event {
	now := r.opts.Clock.Now()
	r.mu.Lock()
	nanos := max(now.UnixNano(), r.lastNanos+1)
	r.lastNanos = nanos
	r.mu.Unlock()
	namespace := obj.GetNamespace()
	if namespace == "" {
		namespace = metav1.NamespaceDefault
	}
	ts := metav1.NewTime(now)
	return &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{
			Name:      fmt.Sprintf("%s.%016x", obj.GetName(), nanos),
			Namespace: namespace,
		},
		InvolvedObject:      reference(obj),
		Reason:              reason,
		Message:             message,
		Source:              corev1.EventSource{Component: r.opts.Component, Host: r.opts.Host},
		FirstTimestamp:      ts,
		LastTimestamp:       ts,
		Count:               1,
		Type:                eventType,
		ReportingController: r.opts.Component,
		ReportingInstance:   r.opts.Host,
	}
}

// reference is the involvedObject of an event about obj. Kind and
// apiVersion come from obj's TypeMeta, or from the api catalogue when
// TypeMeta is empty (as it is on objects built in code).
func reference(obj api.Object) corev1.ObjectReference {
	gvk := obj.GetObjectKind().GroupVersionKind()
	kind, apiVersion := gvk.Kind, gvk.GroupVersion().String()
	if kind == "" {
		if res, ok := api.ForObject(obj); ok {
			kind, apiVersion = res.Kind, res.APIVersion()
		}
	}
	return corev1.ObjectReference{
		Kind:            kind,
		APIVersion:      apiVersion,
		Namespace:       obj.GetNamespace(),
		Name:            obj.GetName(),
		UID:             obj.GetUID(),
		ResourceVersion: obj.GetResourceVersion(),
	}
}

func objectName(obj api.Object) string {
	if ns := obj.GetNamespace(); ns != "" {
		return ns + "/" + obj.GetName()
	}
	return obj.GetName()
}

// Run writes the queued events until ctx is done, then returns; events
// still queued stay queued for a later Run. Only one Run may be in progress
// at a time: a second one panics, as it would write events out of order.
func (r *Recorder) Run(ctx context.Context) {
	if !r.running.CompareAndSwap(false, true) {
		panic("record: Run called while another Run is in progress")
	}
	defer r.running.Store(false)
	flush := r.opts.Clock.NewTimer(lossLogInterval)
	defer func() { flush.Stop() }()
	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-r.queue:
			r.send(ctx, ev)
			r.done()
		case <-flush.C():
			r.losses.flush() // the losses since the last line, if a flood ended
			flush = r.opts.Clock.NewTimer(lossLogInterval)
		}
	}
}

// send correlates ev and writes the result, retrying while the server
// cannot be reached, at most maxTries times and never past ctx.
func (r *Recorder) send(ctx context.Context, ev *corev1.Event) {
	out, key, repeat := r.corr.correlate(ev)
	for try := 1; ; try++ {
		stored, err := r.write(ctx, out, repeat)
		if err == nil {
			r.corr.remember(key, stored)
			return
		}
		logAttrs := []any{"event", out.Namespace + "/" + out.Name, "reason", out.Reason, "message", out.Message, "err", err}
		switch {
		case ctx.Err() != nil:
			r.log.Debug("event not written: the recorder is stopping", logAttrs...)
			return
		case client.IsAlreadyExists(err):
			r.log.Debug("event not written: it exists", logAttrs...)
			return
		case !retryable(err):
			r.log.Error("event not written", logAttrs...)
			return
		case try == maxTries:
			r.log.Error("event not written: giving up", append(logAttrs, "tries", try)...)
			return
		}
		wait := r.opts.RetryInterval
		if try == 1 {
			wait = time.Duration(rand.Int64N(int64(wait)) + 1)
		}
		r.log.Debug("event not written: will retry", append(logAttrs, "after", wait)...)
		t := r.opts.Clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
}

// write creates ev, or, for a repeat, patches the existing event's count,
// lastTimestamp and message, creating it anew when it has gone (expired or
// deleted) meanwhile.
func (r *Recorder) write(ctx context.Context, ev *corev1.Event, repeat bool) (*corev1.Event, error) {
	if repeat {
		patch, err := json.Marshal(map[string]any{
			"count":         ev.Count,
			"lastTimestamp": ev.LastTimestamp,
			"message":       ev.Message,
		})
		if err != nil {
			return nil, fmt.Errorf("record: encode patch: %w", err)
		}
		stored, err := r.events.Patch(ctx, ev.Namespace, ev.Name, types.MergePatchType, patch)
		if !client.IsNotFound(err) {
			return stored, err
		}
	}
	ev = ev.DeepCopy()
	ev.ResourceVersion = ""
	return r.events.Create(ctx, ev)
}

// retryable reports whether a failed write may succeed later: the server
// could not be reached or asked us to come back. Any other answer is final.
func retryable(err error) bool {
	if client.StatusCode(err) == 0 {
		return true // no answer from the server
	}
	switch client.StatusCode(err) {
	case http.StatusTooManyRequests, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return client.IsServerTimeout(err)
}
