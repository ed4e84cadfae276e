package e2e

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/minictl/minictl/client"
)

// A ledger is the record the tests of durability and failover keep: writers
// create, update and delete ConfigMaps through one or more API servers
// while those servers (or what is under them) are killed, and the ledger
// holds every write they sent and what became of it. A write the API
// acknowledged has landed; one whose answer was lost (the server died, or
// answered 5xx) is resolved by reading the object back, which tells whether
// it landed. At the end, the cluster's objects and every watcher's events
// are checked against the ledger.
//
// Each ConfigMap belongs to one writer, whose every write is a
// compare-and-swap on the state it last saw land (create if absent, update
// and delete with the resourceVersion as precondition). So a lost write
// cannot hide: the next write on that object fails, and reading it back
// shows a state the ledger does not expect.
type ledger struct {
	t   *testing.T
	run string // the label value every object of this ledger carries

	mu     sync.Mutex
	keys   []*keyState
	ops    map[string]*op // by id
	failed []string       // what contradicts the ledger

	maxRV  atomic.Int64 // the highest resourceVersion acknowledged so far
	acked  atomic.Int64 // acknowledged writes
	sentBy atomic.Int64 // the latest time an acknowledged write was sent, in Unix nanoseconds
}

// op is one write.
type op struct {
	id  string
	typ watch.EventType // Added: a create; Modified: an update; Deleted: a delete
	key string
	// prev is the write whose state this one replaced: nil for a create.
	prev *op
	// rv is the write's resourceVersion, 0 while it is not known: a delete
	// is answered with a Status, so its revision is learned, if at all,
	// from a watcher that saw it.
	rv     int64
	acked  bool // the API answered success
	landed bool // it happened: acknowledged, or found when reading back
}

// keyState is one ConfigMap as its writer knows it.
type keyState struct {
	name string
	// cur is the last write that landed; nil, or a delete, when the object
	// is absent.
	cur *op
	// maybe are writes on cur whose answer was lost and whose effect was
	// not (yet) seen. At most one of them can land: each is a
	// compare-and-swap on cur.
	maybe []*op
	// history is every write that landed, in order.
	history []*op
}

func (k *keyState) exists() bool { return k.cur != nil && k.cur.typ != watch.Deleted }

const (
	ledgerNamespace = "default"
	ledgerLabel     = "ledger"
	opField         = "op" // the data key holding the id of the write that made this state
	endName         = "ledger-end"
	// resolveTimeout bounds reading an object back after a lost answer:
	// the API servers may be restarting or failing over meanwhile.
	resolveTimeout = 60 * time.Second
	// writeTimeout bounds one write; a write that takes longer is
	// resolved like one whose answer was lost.
	writeTimeout = 15 * time.Second
)

func newLedger(t *testing.T, run string) *ledger {
	return &ledger{t: t, run: run, ops: map[string]*op{}}
}

func (l *ledger) selector() string { return ledgerLabel + "=" + l.run }

// fail records something that contradicts the ledger; check reports it.
func (l *ledger) fail(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.failed = append(l.failed, fmt.Sprintf(format, args...))
}

// configMaps returns a ConfigMap client for each server URL. Their requests
// time out after writeTimeout.
func configMaps(t *testing.T, urls ...string) []*client.Client[*corev1.ConfigMap] {
	t.Helper()
	var out []*client.Client[*corev1.ConfigMap]
	for _, u := range urls {
		rc, err := client.New(&client.Config{Server: u, Timeout: writeTimeout, UserAgent: "ledger"})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, client.For[*corev1.ConfigMap](rc))
	}
	return out
}

// writers runs n writers, each over keys ConfigMaps of its own, until stop
// is closed; every write goes to the next of servers in turn. It returns a
// function that waits for them to stop and resolves every write whose
// answer was lost.
func (l *ledger) writers(ctx context.Context, stop <-chan struct{}, n, keys int, seed uint64, servers []*client.Client[*corev1.ConfigMap]) (wait func()) {
	var wg sync.WaitGroup
	for w := range n {
		ks := make([]*keyState, keys)
		for i := range ks {
			ks[i] = &keyState{name: fmt.Sprintf("w%d-k%d", w, i)}
		}
		l.mu.Lock()
		l.keys = append(l.keys, ks...)
		l.mu.Unlock()
		wr := &writer{l: l, id: w, keys: ks, servers: servers, next: w, rng: rand.New(rand.NewPCG(seed, uint64(w)))}
		wg.Go(func() { wr.run(ctx, stop) })
	}
	return wg.Wait
}

// writer is one writer's loop; only its goroutine touches its keys.
type writer struct {
	l       *ledger
	id      int
	keys    []*keyState
	servers []*client.Client[*corev1.ConfigMap]
	next    int // index of the server the next request goes to
	rng     *rand.Rand
	seq     int
}

func (w *writer) server() *client.Client[*corev1.ConfigMap] {
	s := w.servers[w.next%len(w.servers)]
	w.next++
	return s
}

func (w *writer) run(ctx context.Context, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			for _, k := range w.keys {
				w.resolve(ctx, k, true)
			}
			return
		case <-ctx.Done():
			return
		default:
		}
		k := w.keys[w.rng.IntN(len(w.keys))]
		if !w.write(ctx, k) {
			return
		}
	}
}

// write sends one write on k and records what became of it; false if the
// writer cannot go on.
func (w *writer) write(ctx context.Context, k *keyState) bool {
	w.seq++
	o := &op{id: fmt.Sprintf("w%d-%d", w.id, w.seq), key: k.name, prev: k.cur}
	switch {
	case !k.exists():
		o.typ = watch.Added
	case w.rng.IntN(4) == 0:
		o.typ = watch.Deleted
	default:
		o.typ = watch.Modified
	}
	floor, sent := w.l.maxRV.Load(), time.Now()
	rv, err := w.send(ctx, o)
	switch {
	case err == nil:
		if o.typ != watch.Deleted && rv <= floor {
			w.l.fail("%s: %s %s acknowledged at resourceVersion %d, after a write acknowledged at %d", o.id, o.typ, o.key, rv, floor)
		}
		w.l.ack(o, rv, sent)
		w.landed(k, o)
		return true
	case errors.Is(err, syscall.ECONNREFUSED) || client.IsTooManyRequests(err):
		// Refused before anything was done: the write never happened.
		return sleepCtx(ctx, 20*time.Millisecond)
	case client.IsNotFound(err) || client.IsConflict(err) || client.IsAlreadyExists(err):
		// Refused, so it did not happen; but it should have succeeded,
		// so an earlier write landed unseen, or was lost.
		return w.resolve(ctx, k, false)
	case client.StatusCode(err) >= 500 || client.StatusCode(err) == 0:
		if ctx.Err() != nil {
			return false
		}
		// The answer is lost: it may have happened.
		k.maybe = append(k.maybe, o)
		w.l.record(o)
		return w.resolve(ctx, k, false)
	default:
		w.l.fail("%s: %s %s: unexpected answer: %v", o.id, o.typ, o.key, err)
		return false
	}
}

// send sends o and returns the resourceVersion it was answered (0 for a
// delete).
func (w *writer) send(ctx context.Context, o *op) (int64, error) {
	s := w.server()
	switch o.typ {
	case watch.Deleted:
		rv := strconv.FormatInt(o.prev.rv, 10)
		return 0, s.Delete(ctx, ledgerNamespace, o.key, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
	case watch.Added:
		cm := w.l.object(o)
		got, err := s.Create(ctx, cm)
		if err != nil {
			return 0, err
		}
		return parseRV(got.ResourceVersion), nil
	default:
		cm := w.l.object(o)
		cm.ResourceVersion = strconv.FormatInt(o.prev.rv, 10)
		got, err := s.Update(ctx, cm)
		if err != nil {
			return 0, err
		}
		return parseRV(got.ResourceVersion), nil
	}
}

func (l *ledger) object(o *op) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: o.key, Namespace: ledgerNamespace, Labels: map[string]string{ledgerLabel: l.run}},
		Data:       map[string]string{opField: o.id},
	}
}

// landed makes o, which landed, k's current state: the writes that were
// waiting on the state before can no longer land.
func (w *writer) landed(k *keyState, o *op) {
	w.l.mu.Lock()
	defer w.l.mu.Unlock()
	o.landed = true
	w.l.ops[o.id] = o
	k.cur = o
	k.maybe = nil
	k.history = append(k.history, o)
}

func (l *ledger) record(o *op) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ops[o.id] = o
}

func (l *ledger) ack(o *op, rv int64, sent time.Time) {
	o.acked, o.rv = true, rv
	raise(&l.maxRV, rv)
	raise(&l.sentBy, sent.UnixNano())
	l.acked.Add(1)
}

// raise sets v to n if n is higher.
func raise(v *atomic.Int64, n int64) {
	for {
		cur := v.Load()
		if n <= cur || v.CompareAndSwap(cur, n) {
			return
		}
	}
}

// resolve reads k back and reconciles the ledger with what the API holds:
// the state it expects, or one a lost-answer write made. Anything else
// means a write that landed was lost. With final, the writes whose effect
// is still not seen are taken as never landed. It returns false if k could
// not be read within resolveTimeout.
func (w *writer) resolve(ctx context.Context, k *keyState, final bool) bool {
	ctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	defer cancel()
	var got *corev1.ConfigMap
	for {
		cm, err := w.server().Get(ctx, ledgerNamespace, k.name)
		if err == nil {
			got = cm
			break
		}
		if client.IsNotFound(err) {
			break
		}
		if ctx.Err() != nil {
			w.l.fail("%s: could not read it back within %s: %v", k.name, resolveTimeout, err)
			return false
		}
		if !sleepCtx(ctx, 50*time.Millisecond) {
			return false
		}
	}
	id := ""
	if got != nil {
		id = got.Data[opField]
	}
	switch {
	case got == nil && !k.exists(), got != nil && k.exists() && id == k.cur.id:
		// As the ledger expects.
	default:
		var found *op
		for _, m := range k.maybe {
			if (got == nil && m.typ == watch.Deleted) || (got != nil && m.typ != watch.Deleted && m.id == id) {
				found = m
			}
		}
		if found == nil {
			w.l.fail("%s: the API holds %s, but the last write that landed is %s", k.name, describe(got), describeOp(k.cur))
			return false
		}
		if got != nil {
			found.rv = parseRV(got.ResourceVersion)
		}
		w.landed(k, found)
	}
	if final {
		k.maybe = nil
	}
	return true
}

func describe(cm *corev1.ConfigMap) string {
	if cm == nil {
		return "no object"
	}
	return fmt.Sprintf("the state of write %s at resourceVersion %s", cm.Data[opField], cm.ResourceVersion)
}

func describeOp(o *op) string {
	if o == nil {
		return "none (it was never created)"
	}
	return fmt.Sprintf("%s (%s at %d, acknowledged: %v)", o.id, o.typ, o.rv, o.acked)
}

// checkStored lists the ledger's objects through c and checks that each
// object holds exactly the state of the last write that landed on it, and
// that no other object exists: no acknowledged create, update or delete is
// lost, and nothing happened that nobody wrote.
func (l *ledger) checkStored(ctx context.Context, c *client.Client[*corev1.ConfigMap]) {
	t := l.t
	t.Helper()
	list, err := c.List(ctx, ledgerNamespace, metav1.ListOptions{LabelSelector: l.selector()})
	if err != nil {
		t.Fatalf("list the ledger's objects: %v", err)
	}
	held := map[string]*corev1.ConfigMap{}
	for _, cm := range list.Items {
		held[cm.Name] = cm
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, k := range l.keys {
		cm := held[k.name]
		delete(held, k.name)
		switch {
		case !k.exists() && cm != nil:
			t.Errorf("%s: the API holds %s, but the last write that landed is %s", k.name, describe(cm), describeOp(k.cur))
		case k.exists() && (cm == nil || cm.Data[opField] != k.cur.id || parseRV(cm.ResourceVersion) != k.cur.rv):
			t.Errorf("%s: the API holds %s, but the last write that landed is %s", k.name, describe(cm), describeOp(k.cur))
		}
	}
	delete(held, endName)
	for name, cm := range held {
		t.Errorf("%s: the API holds %s, which no writer wrote", name, describe(cm))
	}
}

// report fails the test with everything that contradicted the ledger, and
// logs what the writers did.
func (l *ledger) report() {
	l.t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	landed, lost := 0, 0
	for _, o := range l.ops {
		if o.landed {
			landed++
		} else if !o.acked {
			lost++
		}
	}
	l.t.Logf("ledger %s: %d writes acknowledged, %d landed in all, %d whose answer was lost and that never landed", l.run, l.acked.Load(), landed, lost)
	for _, f := range l.failed {
		l.t.Error(f)
	}
}

// landedHistory returns a copy of every key's history, for the watch checks.
func (l *ledger) landedHistory() map[string][]*op {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string][]*op{}
	for _, k := range l.keys {
		out[k.name] = slices.Clone(k.history)
	}
	return out
}

// waitAck waits until a write sent after since is acknowledged, and returns
// how long after since that was; the test fails after timeout.
func (l *ledger) waitAck(since time.Time, timeout time.Duration, what string) time.Duration {
	l.t.Helper()
	deadline := since.Add(timeout)
	for {
		if time.Unix(0, l.sentBy.Load()).After(since) {
			return time.Since(since)
		}
		if time.Now().After(deadline) {
			l.t.Fatalf("no write acknowledged within %s of %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// writeEnd creates the end marker, after the writers stopped: every
// watcher ends once it has seen it. It returns its resourceVersion.
func (l *ledger) writeEnd(ctx context.Context, c *client.Client[*corev1.ConfigMap]) int64 {
	l.t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: endName, Namespace: ledgerNamespace, Labels: map[string]string{ledgerLabel: l.run}}}
	got, err := c.Create(ctx, cm)
	if err != nil {
		l.t.Fatalf("create the end marker: %v", err)
	}
	return parseRV(got.ResourceVersion)
}

func parseRV(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}

// sleepCtx sleeps d; false if ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
