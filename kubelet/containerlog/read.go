package containerlog

import (
	"context"
	"errors"
	"io"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// TimestampFormat is the time that prefixes each line when Options ask for
// Timestamps: RFC 3339 with nanoseconds, always nine digits, in UTC, as
// the kubelet writes it.
const TimestampFormat = "2006-01-02T15:04:05.000000000Z07:00"

// ErrNoPreviousRun is what Read returns for the previous run of a
// container that has had only one.
var ErrNoPreviousRun = errors.New("no previous run")

// Options say what Read writes of a run, with the meaning of kube's
// PodLogOptions.
type Options struct {
	// Previous reads the run before the current one.
	Previous bool
	// Follow keeps writing the lines the run prints after those it had,
	// until the run ends (or the context does).
	Follow bool
	// Timestamps prefixes each line with its time (TimestampFormat) and a
	// space.
	Timestamps bool
	// TailLines, if set, starts with the last so many lines of the run
	// instead of its first; 0 writes none of those it had.
	TailLines *int64
	// Since, if set, leaves out the lines printed before it (after
	// TailLines picked the lines, as the kubelet does).
	Since time.Time
	// LimitBytes, if set, stops after writing so many bytes, timestamps
	// included, even in the middle of a line.
	LimitBytes *int64
}

// flusher is a writer that holds what it is given until flushed, as an
// http.ResponseWriter does.
type flusher interface{ Flush() }

// Read writes the lines of container's current run (or, with
// opts.Previous, the run before it) in the pod with uid to w, one line per
// line printed, each ending in a newline. With opts.Follow it then writes
// each line as it is printed, until the run ends or ctx does; a container
// that has printed nothing yet is waited for. If w can be flushed, Read
// flushes it after each batch of lines.
//
// It returns nil once it has written what opts ask for, ErrNoPreviousRun
// when opts.Previous names a run that never was, ctx's error when ctx
// ended a follow, or w's error.
func (l *Logs) Read(ctx context.Context, uid types.UID, container string, opts Options, w io.Writer) error {
	out := &lineWriter{w: w, timestamps: opts.Timestamps, remaining: -1}
	if opts.LimitBytes != nil {
		out.remaining = *opts.LimitBytes
	}
	k := containerKey{uid, container}

	// Wait for the run to exist, if following a container not started.
	l.mu.Lock()
	var r *run
	for {
		c := l.containers[k]
		switch {
		case opts.Previous && (c == nil || c.previous == nil):
			l.mu.Unlock()
			return ErrNoPreviousRun
		case opts.Previous:
			r = c.previous
		case c != nil && c.current != nil:
			r = c.current
		}
		if r != nil {
			break
		}
		if !opts.Follow {
			l.mu.Unlock()
			return nil
		}
		created := l.created
		l.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-created:
		}
		l.mu.Lock()
	}

	// next is the index, counted from the run's first line ever, of the
	// first line not written yet.
	next := r.dropped
	if opts.TailLines != nil {
		next = max(r.dropped, r.dropped+len(r.lines)-int(min(*opts.TailLines, int64(len(r.lines)))))
	}
	for {
		// Lines dropped while the reader was writing are lost to it,
		// as to a reader of a rotated file.
		next = max(next, r.dropped)
		batch := append([]Line(nil), r.lines[next-r.dropped:]...)
		next += len(batch)
		ended, changed := r.ended, r.changed
		l.mu.Unlock()

		done, err := out.write(batch, opts.Since)
		if err != nil || done || !opts.Follow || ended {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
		l.mu.Lock()
	}
}

// lineWriter writes lines as a container log is read back: each with its
// timestamp if asked, within a budget of bytes.
type lineWriter struct {
	w          io.Writer
	timestamps bool
	remaining  int64 // bytes left to write; -1: no limit
	buf        []byte
}

// write writes the lines not before since, in one write to w, and flushes
// w. done says the byte budget is spent: nothing more is to be written.
func (lw *lineWriter) write(lines []Line, since time.Time) (done bool, err error) {
	lw.buf = lw.buf[:0]
	for _, line := range lines {
		if !since.IsZero() && line.Time.Before(since) {
			continue
		}
		if lw.timestamps {
			lw.buf = line.Time.UTC().AppendFormat(lw.buf, TimestampFormat)
			lw.buf = append(lw.buf, ' ')
		}
		lw.buf = append(lw.buf, line.Text...)
		lw.buf = append(lw.buf, '\n')
		if lw.remaining >= 0 && int64(len(lw.buf)) >= lw.remaining {
			lw.buf, done = lw.buf[:lw.remaining], true
			break
		}
	}
	if len(lw.buf) == 0 {
		return done, nil
	}
	if lw.remaining >= 0 {
		lw.remaining -= int64(len(lw.buf))
	}
	if _, err := lw.w.Write(lw.buf); err != nil {
		return true, err
	}
	if f, ok := lw.w.(flusher); ok {
		f.Flush()
	}
	return done, nil
}
