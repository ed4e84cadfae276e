package informer

import (
	"context"
	"log/slog"

	"k8s.io/apimachinery/pkg/api/meta"
)

// TraceStage names one step on the path of a change from the API server to a
// controller's reconcile. Following one key through the stages in a log
// shows a learner exactly where time goes and where a change was dropped.
type TraceStage string

// The stages, in the order a change passes them.
const (
	StageReflectorReceived TraceStage = "reflector received"
	StageDeltaFIFOQueued   TraceStage = "deltafifo queued"
	StageDeltaFIFOPopped   TraceStage = "deltafifo popped"
	StageIndexerUpdated    TraceStage = "indexer updated"
	StageHandlerCalled     TraceStage = "handler called"
	StageKeyEnqueued       TraceStage = "key enqueued"
	StageReconciled        TraceStage = "worker reconciled"
)

// Attribute keys used by trace lines, so that every stage spells them alike.
const (
	TraceAttrStage           = "stage"
	TraceAttrResource        = "resource"
	TraceAttrKey             = "key"
	TraceAttrType            = "type"
	TraceAttrResourceVersion = "resourceVersion"
)

// TraceFunc receives one call per stage a change passes. A nil TraceFunc
// means tracing is off; callers check for nil before building attributes, so
// off costs nothing. It is called synchronously, sometimes with a queue's
// lock held: it must be quick and must not call back into the informer.
type TraceFunc func(stage TraceStage, attrs ...slog.Attr)

// tracer is a TraceFunc and the switch that says whether anyone follows
// the stages now (nil: always). Stages are built and reported only while
// it is on, so a tracer that is set but switched off costs one call of
// active per stage.
type tracer struct {
	f      TraceFunc
	active func() bool
}

func (t tracer) on() bool { return t.f != nil && (t.active == nil || t.active()) }

// With returns a TraceFunc that adds attrs (typically the resource name) to
// every call of f. With on a nil TraceFunc returns nil, so tracing stays off.
func (f TraceFunc) With(attrs ...slog.Attr) TraceFunc {
	if f == nil || len(attrs) == 0 {
		return f
	}
	fixed := append([]slog.Attr(nil), attrs...)
	return func(stage TraceStage, more ...slog.Attr) {
		all := make([]slog.Attr, 0, len(fixed)+len(more))
		f(stage, append(append(all, fixed...), more...)...)
	}
}

// SlogTracer returns a TraceFunc that logs one structured line per stage:
//
//	msg="informer stage" stage="deltafifo queued" resource=pods key=default/web type=Added resourceVersion=42
//
// Lines are logged at Info level: turning tracing on is the decision to see
// them. A nil logger means slog.Default().
func SlogTracer(logger *slog.Logger) TraceFunc {
	if logger == nil {
		logger = slog.Default()
	}
	return func(stage TraceStage, attrs ...slog.Attr) {
		ctx := context.Background()
		if !logger.Enabled(ctx, slog.LevelInfo) {
			return
		}
		all := make([]slog.Attr, 0, len(attrs)+1)
		all = append(all, slog.String(TraceAttrStage, string(stage)))
		logger.LogAttrs(ctx, slog.LevelInfo, "informer stage", append(all, attrs...)...)
	}
}

// traceAttrs returns the key, delta type and resourceVersion attributes of
// one object, looking through tombstones.
func traceAttrs(key string, typ DeltaType, obj any) []slog.Attr {
	attrs := []slog.Attr{slog.String(TraceAttrKey, key), slog.String(TraceAttrType, string(typ))}
	if d, ok := obj.(DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if obj == nil {
		return attrs
	}
	if m, err := meta.Accessor(obj); err == nil {
		attrs = append(attrs, slog.String(TraceAttrResourceVersion, m.GetResourceVersion()))
	}
	return attrs
}
