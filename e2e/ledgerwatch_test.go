package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
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
}

type seenEvent struct {
	typ  watch.EventType
	name string
	op   string // the write whose state the object holds
	rv   int64
}

// watchOptions shape a watcher.
type watchOptions struct {
	// servers are tried in turn, starting with first, moving on to the next
	// when one cannot be reached or its stream breaks.
	servers []*client.Client[*corev1.ConfigMap]
	first   int
	// maxPause, if set, makes the watcher wait up to this long before some
	// resumes, so that it falls behind compactions and restarts.
	maxPause time.Duration
	seed     uint64
}

// watch runs a watcher until it has seen the end marker or ctx ends.
func (l *ledger) watch(ctx context.Context, name string, opts watchOptions) *watchLog {
	log := &watchLog{name: name}
	rng := rand.New(rand.NewPCG(opts.seed, 7))
	next := opts.first
	var pos int64 // every change up to pos has been delivered
	var seg *segment
	relist := true
	violation := func(format string, args ...any) {
		log.failed = append(log.failed, fmt.Sprintf(format, args...))
	}
	for ctx.Err() == nil {
		c := opts.servers[next%len(opts.servers)]
		if relist {
			list, err := c.List(ctx, ledgerNamespace, metav1.ListOptions{LabelSelector: l.selector()})
			if err != nil {
				next++
				sleepCtx(ctx, 50*time.Millisecond)
				continue
			}
			from := parseRV(list.ResourceVersion)
			if from < pos {
				violation("listed at resourceVersion %d after seeing every change up to %d", from, pos)
			}
			seg = &segment{from: from, to: from, list: map[string]string{}}
			log.segments = append(log.segments, seg)
			pos, relist = from, false
			for _, cm := range list.Items {
				seg.list[cm.Name] = cm.Data[opField]
			}
			if _, ok := seg.list[endName]; ok {
				log.done = true
				return log
			}
		} else {
			log.resumes++
			if opts.maxPause > 0 && rng.IntN(3) == 0 {
				sleepCtx(ctx, rand.N(opts.maxPause))
			}
		}
		timeout := int64(1 + rng.IntN(3)) // short, so that it resumes often
		w, err := c.Watch(ctx, ledgerNamespace, metav1.ListOptions{
			LabelSelector: l.selector(), ResourceVersion: strconv.FormatInt(pos, 10),
			AllowWatchBookmarks: true, TimeoutSeconds: &timeout,
		})
		if err != nil {
			if client.IsGone(err) {
				log.gone++
				relist = true
			} else {
				next++
				sleepCtx(ctx, 50*time.Millisecond)
			}
			continue
		}
		for ev := range w.Events() {
			switch ev.Type {
			case watch.Added, watch.Modified, watch.Deleted:
				rv := parseRV(ev.Object.ResourceVersion)
				if rv <= pos {
					violation("%s %s at resourceVersion %d after every change up to %d was delivered", ev.Type, ev.Object.Name, rv, pos)
				}
				seg.events = append(seg.events, seenEvent{typ: ev.Type, name: ev.Object.Name, op: ev.Object.Data[opField], rv: rv})
				pos, seg.to = max(pos, rv), max(pos, rv)
				if ev.Type == watch.Added && ev.Object.Name == endName {
					w.Stop()
					log.done = true
					return log
				}
			case watch.Bookmark:
				rv := parseRV(ev.Object.ResourceVersion)
				if rv < pos {
					violation("bookmark at resourceVersion %d after a change at %d", rv, pos)
				}
				pos, seg.to = max(pos, rv), max(pos, rv)
			case watch.Error:
				if client.IsGone(ev.Err()) {
					log.gone++
					relist = true
				}
			}
		}
		if w.Err() != nil {
			next++ // its server went away: resume on the next
			log.moved++
		}
		w.Stop()
	}
	return log
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
	t := l.t
	t.Helper()
	history := l.landedHistory()
	l.mu.Lock()
	ops := l.ops
	l.mu.Unlock()
	deletes := map[string]*op{} // the delete of a state, by the id of that state's write
	for _, o := range ops {
		if o.typ == watch.Deleted && o.prev != nil {
			deletes[o.prev.id] = o
		}
	}
	// A delete's resourceVersion is known once a watcher saw it: all must
	// agree on it.
	deleteRV := map[*op]int64{}
	writeOf := func(ev seenEvent) (*op, error) {
		if ev.typ == watch.Deleted {
			if o := deletes[ev.op]; o != nil && o.key == ev.name {
				return o, nil
			}
			return nil, fmt.Errorf("DELETED %s at %d: no delete of the state of write %q was sent", ev.name, ev.rv, ev.op)
		}
		o := ops[ev.op]
		if o == nil || o.key != ev.name || o.typ != ev.typ {
			return nil, fmt.Errorf("%s %s at %d: holds write %q, which is no %s of %s", ev.typ, ev.name, ev.rv, ev.op, ev.typ, ev.name)
		}
		return o, nil
	}
	for _, log := range logs {
		if !log.done {
			t.Errorf("watcher %s never saw the end marker", log.name)
		}
		for _, f := range log.failed {
			t.Errorf("watcher %s: %s", log.name, f)
		}
		seen := map[*op]bool{}
		for _, seg := range log.segments {
			for _, ev := range seg.events {
				if ev.name == endName {
					continue
				}
				o, err := writeOf(ev)
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
					if rv, ok := deleteRV[o]; ok && rv != ev.rv {
						t.Errorf("watcher %s: write %s (delete %s) delivered at resourceVersion %d, to another watcher at %d", log.name, o.id, o.key, ev.rv, rv)
					}
					deleteRV[o] = ev.rv
				}
				seen[o] = true
			}
		}
	}
	rvOf := func(o *op) int64 {
		if o.rv != 0 {
			return o.rv
		}
		return deleteRV[o]
	}
	missed := 0
	for _, log := range logs {
		seen := map[string]bool{}
		for _, seg := range log.segments {
			for _, ev := range seg.events {
				if o, err := writeOf(ev); err == nil {
					seen[o.id] = true
				}
			}
		}
		for _, seg := range log.segments {
			for name, writes := range history {
				for i, o := range writes {
					// A delete nobody saw happened somewhere between the
					// write before it and the write after it.
					rv := rvOf(o)
					due := seg.from < rv && rv <= seg.to
					if rv == 0 {
						hi := end
						if i+1 < len(writes) {
							hi = rvOf(writes[i+1])
						}
						due = seg.from <= writes[i-1].rv && hi <= seg.to
					}
					if due && !seen[o.id] {
						if missed++; missed <= 20 {
							t.Errorf("watcher %s: missed write %s (%s %s at %d), between its list at %d and %d", log.name, o.id, o.typ, name, rvOf(o), seg.from, seg.to)
						}
					}
				}
				l.checkListed(log.name, seg, name, writes, rvOf)
			}
		}
	}
}

// checkListed checks that seg's list shows name as the last write at or
// before the list's resourceVersion left it.
func (l *ledger) checkListed(watcher string, seg *segment, name string, writes []*op, rvOf func(*op) int64) {
	t := l.t
	t.Helper()
	// The states the list may show: the last write's at or before from,
	// and, when a delete of unknown revision follows it, absent too.
	want := map[string]bool{"": true} // "" is absent
	for i, o := range writes {
		rv := rvOf(o)
		if rv == 0 { // a delete nobody saw: before or after from
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
		t.Errorf("watcher %s: its list at %d shows %s as write %q, want one of %v", watcher, seg.from, name, got, want)
	}
}
