// Package timeline turns the control plane's log into the story a learner
// follows: one line per decision, "time component object what-it-saw →
// what-it-did", on the terminal and to every `minictl trace` attached to
// the API server.
//
// Components log their decisions as ordinary slog records at Info level: the
// message is the human wording ("want 3, have 2 → create 1") and the
// attributes are the data. The timeline reads only these attributes:
//
//   - controller (or else component): who decided; the logger a component
//     is given already carries it, under its kube-controller-manager name;
//   - object: what it decided about, "namespace/name" or "name";
//   - node: where, for a decision about a pod on a node (the kubelet's
//     node, the node a pod is evicted from); the line shows "(on node-1)";
//   - stage: an informer pipeline stage (see informer.TraceStage).
//
// Everything else (from, to, want, have, ...) is there for whoever reads
// the log as data (--log-format json). Records at Debug are raw detail,
// shown only on request. The Handler formats records and publishes them on
// a Bus; a Bus with no subscribers costs one atomic load per record.
package timeline

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Entry is one line of the timeline.
type Entry struct {
	Time      time.Time `json:"time"`
	Level     string    `json:"level"`
	Component string    `json:"component"`
	Object    string    `json:"object,omitempty"`
	Message   string    `json:"message"`
	// Stage is set for informer pipeline stages (see informer.TraceStage);
	// they are published only to subscribers that ask for them.
	Stage string `json:"stage,omitempty"`
}

// Namespace is the namespace part of the entry's object, if it has one.
func (e *Entry) Namespace() string {
	if i := strings.IndexByte(e.Object, '/'); i > 0 {
		return e.Object[:i]
	}
	return ""
}

// The attribute keys the timeline reads (see the package doc).
const (
	keyController = "controller"
	keyComponent  = "component"
	keyObject     = "object"
	keyNode       = "node"
	keyStage      = "stage"
	keyErr        = "err"
)

// FromRecord builds the entry of a record from its attributes and those of
// its logger (attrs): the component is the "controller" attribute, or else
// "component", or else "minictl"; the object is the "object" attribute; a
// "node" other than the object itself is shown before the message as
// "(on node)". A warning's or an error's "err" follows its message, so
// that what went wrong (a 403 from RBAC, a refused write) is on the line.
func FromRecord(r slog.Record, attrs []slog.Attr) Entry {
	e := Entry{Time: r.Time, Level: r.Level.String(), Message: r.Message}
	var controller, component, node, errText string
	visit := func(a slog.Attr) bool {
		switch a.Key {
		case keyController:
			controller = a.Value.String()
		case keyComponent:
			component = a.Value.String()
		case keyObject:
			e.Object = a.Value.String()
		case keyNode:
			node = a.Value.String()
		case keyStage:
			e.Stage = a.Value.String()
		case keyErr:
			errText = a.Value.String()
		}
		return true
	}
	for _, a := range attrs {
		visit(a)
	}
	r.Attrs(visit)
	e.Component = cmp.Or(controller, component, "minictl")
	if node != "" && node != e.Object {
		e.Message = "(on " + node + ") " + e.Message
	}
	if errText != "" && r.Level >= slog.LevelWarn {
		e.Message += ": " + errText
	}
	return e
}

// Filter selects entries for one subscriber.
type Filter struct {
	Component string // exact component, "" for all
	Namespace string // the object's namespace, "" for all
	Object    string // substring of the object ("default/web"), "" for all
	Stages    bool   // include informer pipeline stages
}

// Match reports whether f selects e.
func (f *Filter) Match(e *Entry) bool {
	if e.Stage != "" && !f.Stages {
		return false
	}
	if f.Component != "" && e.Component != f.Component {
		return false
	}
	if f.Namespace != "" && e.Namespace() != f.Namespace {
		return false
	}
	if f.Object != "" && !strings.Contains(e.Object, f.Object) {
		return false
	}
	return true
}

// Bus fans entries out to subscribers, each with a buffer of its own; a
// subscriber that falls behind loses entries rather than slowing the
// control plane.
type Bus struct {
	subscribers atomic.Int32
	mu          sync.Mutex
	subs        map[*subscription]struct{}
}

type subscription struct {
	filter Filter
	ch     chan Entry
}

// NewBus returns an empty bus.
func NewBus() *Bus { return &Bus{subs: map[*subscription]struct{}{}} }

// Active reports whether anyone listens; publishers check it first.
func (b *Bus) Active() bool { return b != nil && b.subscribers.Load() > 0 }

// Publish offers e to every subscriber whose filter selects it.
func (b *Bus) Publish(e Entry) {
	if !b.Active() {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for s := range b.subs {
		if !s.filter.Match(&e) {
			continue
		}
		select {
		case s.ch <- e:
		default: // a slow reader loses lines, never slows the cluster
		}
	}
}

// Subscribe returns a channel of the entries f selects, closed when ctx
// ends.
func (b *Bus) Subscribe(ctx context.Context, f Filter) <-chan Entry {
	s := &subscription{filter: f, ch: make(chan Entry, 1024)}
	b.mu.Lock()
	b.subs[s] = struct{}{}
	b.subscribers.Add(1)
	b.mu.Unlock()
	out := make(chan Entry)
	go func() {
		defer close(out)
		defer func() {
			b.mu.Lock()
			delete(b.subs, s)
			b.subscribers.Add(-1)
			b.mu.Unlock()
		}()
		for {
			select {
			case <-ctx.Done():
				return
			case e := <-s.ch:
				select {
				case out <- e:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out
}

// Format is how a Handler writes records.
type Format string

const (
	FormatTimeline Format = "timeline" // one aligned line per decision
	FormatText     Format = "text"     // slog's key=value lines
	FormatJSON     Format = "json"     // slog's JSON lines
)

// Options configure a Handler.
type Options struct {
	Format Format
	Level  slog.Leveler // what is written to w; default Info
	Color  bool         // colour the timeline (on a terminal)
	Bus    *Bus         // where decisions are also published; may be nil
}

// Handler writes records to w in the chosen format and publishes every
// Info-or-above record (and every pipeline stage) to the bus.
type Handler struct {
	opts  Options
	w     *lockedWriter
	inner slog.Handler // for text and json
	attrs []slog.Attr
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// NewHandler returns a Handler writing to w.
func NewHandler(w io.Writer, opts Options) *Handler {
	if opts.Level == nil {
		opts.Level = slog.LevelInfo
	}
	if opts.Format == "" {
		opts.Format = FormatTimeline
	}
	lw := &lockedWriter{w: w}
	h := &Handler{opts: opts, w: lw}
	ho := &slog.HandlerOptions{Level: opts.Level}
	switch opts.Format {
	case FormatJSON:
		h.inner = slog.NewJSONHandler(lw, ho)
	case FormatText:
		h.inner = slog.NewTextHandler(lw, ho)
	}
	return h
}

// Enabled is true for what is written or published.
func (h *Handler) Enabled(_ context.Context, l slog.Level) bool {
	return l >= h.opts.Level.Level() || h.opts.Bus.Active()
}

// Handle writes and publishes one record.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	isStage := false
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == keyStage {
			isStage = true
		}
		return true
	})
	if h.opts.Bus.Active() && (r.Level >= slog.LevelInfo || isStage) {
		h.opts.Bus.Publish(FromRecord(r, h.attrs))
	}
	if r.Level < h.opts.Level.Level() {
		return nil
	}
	if h.inner != nil {
		return h.inner.Handle(ctx, r)
	}
	e := FromRecord(r, h.attrs)
	_, err := io.WriteString(h.w, Line(e, h.opts.Color))
	return err
}

// WithAttrs and WithGroup keep the handler's formatting.
func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	n := *h
	n.attrs = append(append([]slog.Attr{}, h.attrs...), attrs...)
	if h.inner != nil {
		n.inner = h.inner.WithAttrs(attrs)
	}
	return &n
}

func (h *Handler) WithGroup(name string) slog.Handler {
	n := *h
	if h.inner != nil {
		n.inner = h.inner.WithGroup(name)
	}
	return &n
}

// componentColors give each component a colour of its own on a terminal.
var componentColors = map[string]string{
	"replicaset": "36", "replicationcontroller": "36", "deployment": "34", "scheduler": "35", "kubelet": "32",
	"garbagecollector": "33", "nodelifecycle": "31", "namespace": "94", "endpoint": "96",
	"resourcequota": "93", "podgc": "90", "serviceaccount": "90", "nodeipam": "90", "disruption": "95",
	"daemonset": "92", "job": "91", "cronjob": "91", "ttl-after-finished": "90",
	"csrsigning": "33", "csrapproving": "33", "csrcleaner": "90", "bootstrapsigner": "90", "tokencleaner": "90",
}

// Line formats one entry as a timeline line:
// "15:04:05.000  replicaset       default/web            want 3, have 2 → create 1".
func Line(e Entry, color bool) string {
	obj := e.Object
	if obj == "" {
		obj = "-"
	}
	msg := e.Message
	if e.Stage != "" {
		msg = "[" + e.Stage + "] " + msg
	}
	comp := fmt.Sprintf("%-18s", e.Component)
	if color {
		c, ok := componentColors[e.Component]
		if !ok {
			c = "37"
		}
		comp = "\x1b[" + c + "m" + comp + "\x1b[0m"
		if e.Level == slog.LevelWarn.String() || e.Level == slog.LevelError.String() {
			msg = "\x1b[31m" + msg + "\x1b[0m"
		}
	}
	return fmt.Sprintf("%s  %s %-28s %s\n", e.Time.Format("15:04:05.000"), comp, obj, msg)
}

// MarshalLine encodes an entry as one JSON line, for the trace stream.
func MarshalLine(e Entry) []byte {
	b, _ := json.Marshal(e)
	return append(b, '\n')
}
