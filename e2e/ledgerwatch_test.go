package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/minictl/minictl/client"
)

// A ledger watcher is a client that watches the ledger's objects the way
// an informer's Reflector does: list, watch from the list's
// resourceVersion, and when the stream ends resume from the last
// resourceVersion it saw, or, told 410 Gone, list again. What it saw is
// checked against the ledger (checkWatch): the watch promise is that every
// change arrives exactly once, in order, except across a 410, where the
// new list shows the state as of its resourceVersion.

// watchLog is what one watcher saw.
type watchLog struct {
	name     string
	segments []*segment
	gone     int      // 410s answered
	resumes  int      // watches started from the last resourceVersion seen
	moved    int      // streams broken, after which it went on with the next server
	failed   []string // order violations, seen as they happened
	done     bool     // it saw the end marker
}

// segment is what a watcher saw from one list up to the next 410: the
// list, then events that must include every change after it.
type segment struct {
	from   int64             // the list's resourceVersion
	to     int64             // every change up to here has been delivered
	list   map[string]string // name → id of the write whose state was listed
	events []seenEvent
	// listed is when the list was answered; gone when a 410 ended the
	// segment (zero if none did).
	listed, gone time.Time
}

type seenEvent struct {
	typ  watch.EventType
	name string
	op   string // the write whose state the object holds
	rv   int64
}

// awaitWatchers waits up to 30s for the watchers in wg, each of which ends
// once it has seen the end marker; then it cancels those left, and fails.
func awaitWatchers(t *testing.T, wg *sync.WaitGroup, cancel context.CancelFunc) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		cancel()
		<-done
		t.Error("the watchers did not all reach the end marker within 30s")
	}
}

// watchOptions shape a watcher.
type watchOptions struct {
	// servers are tried in turn, starting with first, moving on to the next
	// when one cannot be reached or its stream breaks.
	servers []*client.Client[*corev1.ConfigMap]
	first   int
	// pause, if set, is how long the watcher waits before every other
	// resume, so that it falls behind compactions.
	pause time.Duration
	seed  uint64
}

// watch runs a watcher until it has seen the end marker or ctx ends.
func (l *ledger) watch(ctx context.Context, name string, opts watchOptions) *watchLog {
	w := &watcher{l: l, opts: opts, log: &watchLog{name: name}, rng: rand.New(rand.NewPCG(opts.seed, 7)), next: opts.first}
	relist := true
	for ctx.Err() == nil && !w.log.done {
		c := opts.servers[w.next%len(opts.servers)]
		if relist {
			if !w.list(ctx, c) {
				w.next++
				sleepCtx(ctx, 50*time.Millisecond)
				continue
			}
			relist = false
			if w.log.done {
				break
			}
		} else {
			w.log.resumes++
			if opts.pause > 0 && w.log.resumes%2 == 0 {
				sleepCtx(ctx, opts.pause)
			}
		}
		relist = w.stream(ctx, c)
	}
	return w.log
}

// watcher is one watcher's state; only its goroutine touches it.
type watcher struct {
	l    *ledger
	opts watchOptions
	log  *watchLog
	rng  *rand.Rand
	next int      // index of the server to use
	pos  int64    // every change up to pos has been delivered
	seg  *segment // the current segment
}

// gone records a 410, which ends the segment.
func (w *watcher) gone() {
	w.log.gone++
	w.seg.gone = time.Now()
}

func (w *watcher) violation(format string, args ...any) {
	w.log.failed = append(w.log.failed, fmt.Sprintf(format, args...))
}

// list lists the ledger's objects and starts a segment; false if c did not
// answer.
func (w *watcher) list(ctx context.Context, c *client.Client[*corev1.ConfigMap]) bool {
	list, err := c.List(ctx, ledgerNamespace, metav1.ListOptions{LabelSelector: w.l.selector()})
	if err != nil {
		return false
	}
	from := parseRV(list.ResourceVersion)
	if from < w.pos {
		w.violation("listed at resourceVersion %d after seeing every change up to %d", from, w.pos)
	}
	w.seg = &segment{from: from, to: from, list: map[string]string{}, listed: time.Now()}
	w.log.segments = append(w.log.segments, w.seg)
	w.pos = from
	for _, cm := range list.Items {
		w.seg.list[cm.Name] = cm.Data[opField]
	}
	_, w.log.done = w.seg.list[endName]
	return true
}

// stream watches from pos through c until the stream ends, and reports
// whether the watcher must list again (410 Gone).
func (w *watcher) stream(ctx context.Context, c *client.Client[*corev1.ConfigMap]) (relist bool) {
	timeout := int64(1 + w.rng.IntN(3)) // short, so that it resumes often
	s, err := c.Watch(ctx, ledgerNamespace, metav1.ListOptions{
		LabelSelector: w.l.selector(), ResourceVersion: strconv.FormatInt(w.pos, 10),
		AllowWatchBookmarks: true, TimeoutSeconds: &timeout,
	})
	if err != nil {
		if client.IsGone(err) {
			w.gone()
			return true
		}
		w.next++
		sleepCtx(ctx, 50*time.Millisecond)
		return false
	}
	defer s.Stop()
	for ev := range s.Events() {
		switch ev.Type {
		case watch.Added, watch.Modified, watch.Deleted:
			rv := parseRV(ev.Object.ResourceVersion)
			if rv <= w.pos {
				w.violation("%s %s at resourceVersion %d after every change up to %d was delivered", ev.Type, ev.Object.Name, rv, w.pos)
			}
			w.seg.events = append(w.seg.events, seenEvent{typ: ev.Type, name: ev.Object.Name, op: ev.Object.Data[opField], rv: rv})
			w.pos = max(w.pos, rv)
			w.seg.to = w.pos
			if ev.Type == watch.Added && ev.Object.Name == endName {
				w.log.done = true
				return false
			}
		case watch.Bookmark:
			rv := parseRV(ev.Object.ResourceVersion)
			if rv < w.pos {
				w.violation("bookmark at resourceVersion %d after a change at %d", rv, w.pos)
			}
			w.pos = max(w.pos, rv)
			w.seg.to = w.pos
		case watch.Error:
			if client.IsGone(ev.Err()) {
				w.gone()
				relist = true
			}
		}
	}
	if s.Err() != nil {
		w.next++ // its server went away: resume on the next
		w.log.moved++
	}
	return relist
}

// checkWatch checks what the watchers saw against the ledger, once the
// writers have stopped and every write is resolved; end is the end
// marker's resourceVersion.
//
//   - Every event is the effect of one write that landed, at that write's
//     resourceVersion, and no watcher sees one write twice.
//   - Within a segment, every write that landed after the list and up to
//     where the segment ends was delivered.
//   - A list holds, for each object, the state of the last write that
//     landed at or before the list's resourceVersion.
func (l *ledger) checkWatch(logs []*watchLog, end int64) {
	l.t.Helper()
	c := newWatchCheck(l, end)
	seen := make([]map[*op]bool, len(logs))
	for i, log := range logs {
		if !log.done {
			l.t.Errorf("watcher %s never saw the end marker", log.name)
		}
		for _, f := range log.failed {
			l.t.Errorf("watcher %s: %s", log.name, f)
		}
		seen[i] = c.events(log)
	}
	// Only now is every delete's revision known that some watcher saw.
	for i, log := range logs {
		for _, seg := range log.segments {
			for name, writes := range c.history {
				c.complete(log.name, seg, writes, seen[i])
				c.listed(log.name, seg, name, writes)
			}
		}
	}
}

// watchCheck is checkWatch's view of the ledger.
type watchCheck struct {
	t       *testing.T
	ops     map[string]*op   // every write, by id
	history map[string][]*op // the writes that landed, by object
	end     int64
	// deletes holds the delete of each state, by the id of the write that
	// made the state.
	deletes map[string]*op
	// deleteRV holds the revisions of deletes, learned from the watchers
	// that saw them, which must all agree.
	deleteRV map[*op]int64
	missed   int // writes reported missed, to report no more than a few
}

func newWatchCheck(l *ledger, end int64) *watchCheck {
	history := l.landedHistory()
	l.mu.Lock()
	defer l.mu.Unlock()
	c := &watchCheck{t: l.t, ops: l.ops, history: history, end: end, deletes: map[string]*op{}, deleteRV: map[*op]int64{}}
	for _, o := range l.ops {
		// Two deletes of one state may have been sent (the first one's
		// answer lost): at most one landed, and a DELETED event is that
		// one.
		if o.typ != watch.Deleted || o.prev == nil {
			continue
		}
		if d := c.deletes[o.prev.id]; d == nil || !d.landed {
			c.deletes[o.prev.id] = o
		}
	}
	return c
}

// writeOf returns the write that ev shows.
func (c *watchCheck) writeOf(ev seenEvent) (*op, error) {
	if ev.typ == watch.Deleted {
		if o := c.deletes[ev.op]; o != nil && o.key == ev.name {
			return o, nil
		}
		return nil, fmt.Errorf("DELETED %s at %d: no delete of the state of write %q was sent", ev.name, ev.rv, ev.op)
	}
	o := c.ops[ev.op]
	if o == nil || o.key != ev.name || o.typ != ev.typ {
		return nil, fmt.Errorf("%s %s at %d: holds write %q, which is no %s of %s", ev.typ, ev.name, ev.rv, ev.op, ev.typ, ev.name)
	}
	return o, nil
}

// rvOf is o's resourceVersion, 0 for a delete no watcher saw.
func (c *watchCheck) rvOf(o *op) int64 {
	if o.rv != 0 {
		return o.rv
	}
	return c.deleteRV[o]
}

// events checks that each of log's events is one write that landed, at
// its resourceVersion, delivered once; it returns the writes delivered.
func (c *watchCheck) events(log *watchLog) map[*op]bool {
	t := c.t
	t.Helper()
	seen := map[*op]bool{}
	for _, seg := range log.segments {
		for _, ev := range seg.events {
			if ev.name == endName {
				continue
			}
			o, err := c.writeOf(ev)
			if err != nil {
				t.Errorf("watcher %s: %v", log.name, err)
				continue
			}
			switch {
			case !o.landed:
				t.Errorf("watcher %s: %s %s at %d is write %s, which the API never acknowledged nor holds", log.name, ev.typ, ev.name, ev.rv, o.id)
			case seen[o]:
				t.Errorf("watcher %s: write %s (%s %s at %d) delivered twice", log.name, o.id, ev.typ, ev.name, ev.rv)
			case o.rv != 0 && o.rv != ev.rv:
				t.Errorf("watcher %s: write %s delivered at resourceVersion %d, acknowledged at %d", log.name, o.id, ev.rv, o.rv)
			case o.rv == 0:
				if rv, ok := c.deleteRV[o]; ok && rv != ev.rv {
					t.Errorf("watcher %s: write %s (delete %s) delivered at resourceVersion %d, to another watcher at %d", log.name, o.id, o.key, ev.rv, rv)
				}
				c.deleteRV[o] = ev.rv
			}
			seen[o] = true
		}
	}
	return seen
}

// complete checks that seg delivered every write of one object that
// landed after seg's list and up to where seg ends.
func (c *watchCheck) complete(watcher string, seg *segment, writes []*op, seen map[*op]bool) {
	c.t.Helper()
	for i, o := range writes {
		rv := c.rvOf(o)
		due := seg.from < rv && rv <= seg.to
		if rv == 0 {
			// A delete no watcher saw happened between the write before
			// it and the write after it.
			next := c.end
			if i+1 < len(writes) {
				next = c.rvOf(writes[i+1])
			}
			due = seg.from <= writes[i-1].rv && next <= seg.to
		}
		if due && !seen[o] {
			if c.missed++; c.missed <= 20 {
				c.t.Errorf("watcher %s: missed write %s (%s %s at %d), between its list at %d and %d", watcher, o.id, o.typ, o.key, rv, seg.from, seg.to)
			}
		}
	}
}

// listed checks that seg's list shows name as the last write at or before
// the list's resourceVersion left it.
func (c *watchCheck) listed(watcher string, seg *segment, name string, writes []*op) {
	c.t.Helper()
	// The states the list may show: the last write's at or before from,
	// and, when a delete no watcher saw follows it, absent too.
	want := map[string]bool{"": true} // "" is absent
	for i, o := range writes {
		rv := c.rvOf(o)
		if rv == 0 {
			if writes[i-1].rv <= seg.from {
				want[""] = true
			}
			continue
		}
		if rv > seg.from {
			break
		}
		clear(want)
		if o.typ == watch.Deleted {
			want[""] = true
		} else {
			want[o.id] = true
		}
	}
	if got := seg.list[name]; !want[got] {
		c.t.Errorf("watcher %s: its list at %d shows %s as write %q, want one of %v", watcher, seg.from, name, got, want)
	}
}
