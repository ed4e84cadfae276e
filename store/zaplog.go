package store

import (
	"context"
	"log/slog"
	"maps"
	"slices"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// newZapLogger returns a zap logger, as etcd's server and client want, that
// writes into log when log is enabled for debug, and nowhere otherwise.
// etcd narrates its internals, errors included, in words meant for etcd's
// operators (a normal stop logs "serving ... failed"); what matters to a
// Store's user surfaces as the Store's own errors and health.
func newZapLogger(log *slog.Logger) *zap.Logger {
	if !log.Enabled(context.Background(), slog.LevelDebug) {
		return zap.NewNop()
	}
	return zap.New(&slogCore{log: log, min: zapcore.InfoLevel})
}

// slogCore is a zapcore.Core that hands each entry to a slog.Logger.
type slogCore struct {
	log *slog.Logger
	min zapcore.Level
}

func (c *slogCore) Enabled(l zapcore.Level) bool { return l >= c.min }

func (c *slogCore) With(fields []zapcore.Field) zapcore.Core {
	return &slogCore{log: c.log.With(attrs(fields)...), min: c.min}
}

func (c *slogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *slogCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	level := slog.LevelError
	switch {
	case e.Level <= zapcore.DebugLevel:
		level = slog.LevelDebug
	case e.Level == zapcore.InfoLevel:
		level = slog.LevelInfo
	case e.Level == zapcore.WarnLevel:
		level = slog.LevelWarn
	}
	args := attrs(fields)
	if e.LoggerName != "" {
		args = append(args, slog.String("logger", e.LoggerName))
	}
	c.log.Log(context.Background(), level, e.Message, args...)
	return nil
}

func (c *slogCore) Sync() error { return nil }

// attrs turns zap fields into slog arguments, in a stable order.
func attrs(fields []zapcore.Field) []any {
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range fields {
		f.AddTo(enc)
	}
	out := make([]any, 0, len(enc.Fields))
	for _, k := range slices.Sorted(maps.Keys(enc.Fields)) {
		out = append(out, slog.Any(k, enc.Fields[k]))
	}
	return out
}
