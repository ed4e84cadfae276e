package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/minictl/minictl/api"
)

// Event is one change a watch reports.
type Event[T api.Object] struct {
	Type watch.EventType // watch.Added, Modified, Deleted, Bookmark or Error
	// Object is the object after the change (before deletion, for
	// Deleted). For Bookmark only its resourceVersion is meaningful. It is
	// the zero T (nil) for Error.
	Object T
	// Status says what went wrong, for Error only: a Status with code 410
	// (IsGone on Err()) means the requested resourceVersion is too old to
	// replay; relist.
	Status *metav1.Status
}

// Err returns the Status of an Error event as a *StatusError, and nil for
// every other event.
func (e Event[T]) Err() error {
	if e.Type != watch.Error || e.Status == nil {
		return nil
	}
	return &StatusError{ErrStatus: *e.Status}
}

// Watcher delivers the events of one watch stream, in the order the server
// sent them. It owns one goroutine, which decodes the stream, and the
// response body; both are gone once Events is closed.
//
// Events is closed when the stream ends: after Stop, when the context given
// to Watch is cancelled, when the server ends the response, or when the
// stream cannot be decoded. Err then says why. An Error event does not end
// the stream by itself; the server normally ends it right after.
//
// Events is unbuffered: the decoder does not read ahead of the consumer, so
// a consumer that stops receiving holds the stream (and the server's
// buffer for it) where it is. Call Stop when done.
type Watcher[T api.Object] struct {
	events chan Event[T]
	cancel context.CancelFunc
	body   io.ReadCloser
	res    *api.Resource
	// protobuf: the stream is protobuf frames, not JSON lines.
	protobuf bool

	closeOnce sync.Once
	done      chan struct{} // closed when the decoder goroutine has returned

	mu  sync.Mutex
	err error // why the stream ended; written once, before events is closed
}

// NewStreamWatcher returns a Watcher decoding body, a kube-style watch stream
// (one {"type":..,"object":..} JSON document after another). It is what
// Client.Watch uses on the response body, and what tests use to feed a
// consumer a stream of their own making (an io.Pipe, a strings.Reader).
// The Watcher closes body, and Stop relies on Close unblocking a Read in
// progress, as it does for an HTTP response body and an io.Pipe. It panics
// when T is not a served resource, as For does.
func NewStreamWatcher[T api.Object](ctx context.Context, body io.ReadCloser) *Watcher[T] {
	var zero T
	res, ok := api.ForObject(zero)
	if !ok {
		panic(fmt.Sprintf("client.NewStreamWatcher: %T is not a served resource", zero))
	}
	ctx, cancel := context.WithCancel(ctx)
	return newWatcher[T](ctx, cancel, res, body, false)
}

// newWatcher starts the decoder of a JSON stream, or of a protobuf one
// (api/protobuf.go). cancel must cancel ctx; the Watcher calls it when the
// stream ends.
func newWatcher[T api.Object](ctx context.Context, cancel context.CancelFunc, res *api.Resource, body io.ReadCloser, protobuf bool) *Watcher[T] {
	w := &Watcher[T]{
		events:   make(chan Event[T]),
		cancel:   cancel,
		body:     body,
		res:      res,
		protobuf: protobuf,
		done:     make(chan struct{}),
	}
	// A cancelled ctx closes the body, so that a Read blocked on a body
	// that does not watch ctx (a pipe in a test) returns too.
	stopAfter := context.AfterFunc(ctx, w.closeBody)
	go w.run(ctx, stopAfter)
	return w
}

// Events returns the channel of events, closed when the stream ends.
func (w *Watcher[T]) Events() <-chan Event[T] { return w.events }

// Stop ends the watch and returns once the decoder goroutine has returned
// and the body is closed. Events not yet received are dropped. It is
// idempotent and safe from any goroutine, including one that is ranging
// over Events.
func (w *Watcher[T]) Stop() {
	w.cancel()
	w.closeBody() // unblocks a Read on a body that does not watch ctx
	<-w.done
}

// Err returns why the stream ended: nil after Stop, a cancelled context or a
// clean end of the response, otherwise the read or decode error (a stream
// cut in the middle of an event is io.ErrUnexpectedEOF). It is nil while
// the stream is open.
func (w *Watcher[T]) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

func (w *Watcher[T]) closeBody() {
	w.closeOnce.Do(func() { _ = w.body.Close() })
}

// run decodes events until the stream ends, then records why, releases the
// body and context, and closes events.
func (w *Watcher[T]) run(ctx context.Context, stopAfter func() bool) {
	defer close(w.done)
	decode := w.decodeAll
	if w.protobuf {
		decode = w.decodeFrames
	}
	err := decode(ctx)
	if ctx.Err() != nil {
		err = nil // Stop or the caller's cancel: not a failure
	}
	stopAfter()
	w.cancel()
	w.closeBody()
	w.mu.Lock()
	w.err = err
	w.mu.Unlock()
	close(w.events)
}

// wireEvent is metav1.WatchEvent with the object left raw until its type is
// known.
type wireEvent struct {
	Type   watch.EventType `json:"type"`
	Object json.RawMessage `json:"object"`
}

func (w *Watcher[T]) decodeAll(ctx context.Context) error {
	// Servers write one event per line (kube-apiserver and minictl do).
	// While the lines look like that, each event's object is decoded
	// straight from its line; the first line that does not (an ERROR
	// event, another layout, a cut stream) hands the rest of the stream,
	// that line included, to a general JSON decoder.
	r := bufio.NewReaderSize(w.body, 32<<10)
	for {
		line, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			head := bytes.Clone(line) // line is r's buffer, which the next read reuses
			var rest []byte
			rest, err = r.ReadBytes('\n')
			line = append(head, rest...)
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("watch %s: decode: %w", w.res.Plural, err)
		}
		if len(line) == 0 && err != nil {
			return nil // the server ended the response between events
		}
		ev, ok := w.lineEvent(line)
		if !ok {
			return w.decodeStream(ctx, io.MultiReader(bytes.NewReader(bytes.Clone(line)), r))
		}
		if !w.deliver(ctx, ev) {
			return nil
		}
	}
}

// lineEvent decodes one line holding exactly one ADDED, MODIFIED, DELETED
// or BOOKMARK event laid out as servers write them:
// {"type":"ADDED","object":{...}} and a newline. It reports false for
// anything else.
func (w *Watcher[T]) lineEvent(line []byte) (Event[T], bool) {
	const head = `{"type":"`
	rest, ok := bytes.CutPrefix(line, []byte(head))
	if !ok {
		return Event[T]{}, false
	}
	q := bytes.IndexByte(rest, '"')
	if q < 0 {
		return Event[T]{}, false
	}
	typ := watch.EventType(rest[:q])
	switch typ {
	case watch.Added, watch.Modified, watch.Deleted, watch.Bookmark:
	default:
		return Event[T]{}, false
	}
	obj, ok := bytes.CutPrefix(rest[q:], []byte(`","object":`))
	if !ok {
		return Event[T]{}, false
	}
	if obj, ok = bytes.CutSuffix(obj, []byte("}\n")); !ok {
		return Event[T]{}, false
	}
	ev, err := w.event(wireEvent{Type: typ, Object: obj})
	if err != nil {
		return Event[T]{}, false // let the general decoder say what is wrong
	}
	return ev, true
}

// decodeStream decodes a stream of JSON events in any layout.
func (w *Watcher[T]) decodeStream(ctx context.Context, r io.Reader) error {
	dec := json.NewDecoder(r)
	for {
		var we wireEvent
		if err := dec.Decode(&we); err != nil {
			if errors.Is(err, io.EOF) {
				return nil // the server ended the response between events
			}
			return fmt.Errorf("watch %s: decode: %w", w.res.Plural, err)
		}
		ev, err := w.event(we)
		if err != nil {
			return fmt.Errorf("watch %s: %w", w.res.Plural, err)
		}
		if !w.deliver(ctx, ev) {
			return nil
		}
	}
}

// decodeFrames decodes a protobuf watch stream, one frame per event.
//
// A watch is idle most of its life, blocked in a read, and a process may
// hold thousands of them (every simulated kubelet watches its pods and its
// Node). So nothing per event is kept between events: the frame is read
// straight from the body (itself buffered by the connection) into a buffer
// from a pool, decoded, and the buffer goes back to the pool. Decoding
// copies what it keeps.
func (w *Watcher[T]) decodeFrames(ctx context.Context) error {
	for {
		bp := frameBuffers.Get().(*[]byte)
		typ, env, b, err := api.ReadProtobufWatchFrame(w.body, *bp)
		var ev Event[T]
		if err == nil {
			ev, err = w.protobufEvent(watch.EventType(typ), env)
			if err != nil {
				err = fmt.Errorf("watch %s: %w", w.res.Plural, err)
			}
		} else if !errors.Is(err, io.EOF) {
			err = fmt.Errorf("watch %s: decode: %w", w.res.Plural, err)
		}
		putFrameBuffer(bp, b)
		if errors.Is(err, io.EOF) {
			return nil // the server ended the response between events
		}
		if err != nil {
			return err
		}
		if !w.deliver(ctx, ev) {
			return nil
		}
	}
}

// frameBuffers are the buffers protobuf watch frames are read into, shared
// by every watch of the process.
var frameBuffers = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledFrame bounds the buffers kept in frameBuffers: a rare huge
// object's buffer is left to the garbage collector.
const maxPooledFrame = 1 << 20

func putFrameBuffer(bp *[]byte, b []byte) {
	if cap(b) > maxPooledFrame {
		return
	}
	*bp = b[:0]
	frameBuffers.Put(bp)
}

// protobufEvent decodes the object of one protobuf event; env is the
// object with its envelope. Decoding copies what it keeps out of env.
func (w *Watcher[T]) protobufEvent(typ watch.EventType, env []byte) (Event[T], error) {
	_, _, msg, err := api.ProtobufObject(env)
	if err != nil {
		return Event[T]{Type: typ}, fmt.Errorf("%s event: %w", typ, err)
	}
	return w.decodeEvent(typ, msg, api.UnmarshalProtobuf)
}

// deliver hands ev to the consumer; false once ctx is done.
func (w *Watcher[T]) deliver(ctx context.Context, ev Event[T]) bool {
	select {
	case w.events <- ev:
		return true
	case <-ctx.Done():
		return false
	}
}

// event decodes the object of one JSON wire event.
func (w *Watcher[T]) event(we wireEvent) (Event[T], error) {
	if len(we.Object) == 0 || string(we.Object) == "null" {
		return Event[T]{Type: we.Type}, fmt.Errorf("%s event without an object", we.Type)
	}
	return w.decodeEvent(we.Type, we.Object, func(data []byte, into runtime.Object) error { return decodeJSON(data, into) })
}

// decodeEvent decodes data, an event's object encoded as unmarshal reads
// it (JSON or protobuf), according to the event's type: an object of the
// watched kind, or the Status of an ERROR.
func (w *Watcher[T]) decodeEvent(typ watch.EventType, data []byte, unmarshal func([]byte, runtime.Object) error) (Event[T], error) {
	ev := Event[T]{Type: typ}
	switch typ {
	case watch.Added, watch.Modified, watch.Deleted, watch.Bookmark:
		obj := w.res.New().(T)
		if err := unmarshal(data, obj); err != nil {
			return ev, fmt.Errorf("decode %s object: %w", typ, err)
		}
		obj.GetObjectKind().SetGroupVersionKind(w.res.GroupVersion().WithKind(w.res.Kind))
		ev.Object = obj
	case watch.Error:
		st := &metav1.Status{}
		if err := unmarshal(data, st); err != nil {
			return ev, fmt.Errorf("decode ERROR status: %w", err)
		}
		ev.Status = st
	default:
		return ev, fmt.Errorf("unknown event type %q", typ)
	}
	return ev, nil
}
