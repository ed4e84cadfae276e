package informer

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The property: whatever a reflector feeds a DeltaFIFO (adds, updates,
// deletes, relists, resyncs) and however pops interleave with it, draining
// the queue into an Indexer leaves the Indexer equal to the last state the
// "server" announced. Along the way, the queue holds every key at most once,
// and every popped Deltas is non-empty, belongs to one key and never has two
// deletions in a row. With a transform, every object popped or cached has
// been transformed exactly once: relists, deletions and resyncs included.

// fifoRun drives a DeltaFIFO and an Indexer from a byte program and checks
// them against a model map of the server's state.
type fifoRun struct {
	t      testing.TB
	fifo   *DeltaFIFO
	cache  Indexer
	server map[string]*corev1.ConfigMap // the model: the last state announced
	rv     int
	fed    bool // whether Add, Update, Delete or Replace was called
	// transformed says the DeltaFIFO has countTransforms as its
	// transform.
	transformed bool
}

// transformCount is the annotation countTransforms counts in.
const transformCount = "test/transforms"

// countTransforms is a transform that returns a copy of a ConfigMap with
// its managedFields dropped and one more transform counted; anything else
// is an error, so that a tombstone handed to it fails the run.
func countTransforms(obj any) (any, error) {
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return nil, fmt.Errorf("transform given %T", obj)
	}
	cp := cm.DeepCopy()
	stripped, err := StripManagedFields(cp)
	if err != nil {
		return nil, err
	}
	cp = stripped.(*corev1.ConfigMap)
	n, _ := strconv.Atoi(cp.Annotations[transformCount])
	if cp.Annotations == nil {
		cp.Annotations = map[string]string{}
	}
	cp.Annotations[transformCount] = strconv.Itoa(n + 1)
	return cp, nil
}

var fuzzKeys = []string{"ns/a", "ns/b", "ns/c", "other/a", "cluster-d", "cluster-e"}

func newFIFORun(t testing.TB) *fifoRun {
	cache := NewIndexer(nil, Indexers{NamespaceIndex: MetaNamespaceIndexFunc})
	return &fifoRun{
		t:      t,
		fifo:   NewDeltaFIFO(DeltaFIFOOptions{KnownObjects: cache}),
		cache:  cache,
		server: map[string]*corev1.ConfigMap{},
	}
}

// newTransformedFIFORun is newFIFORun with countTransforms as the
// DeltaFIFO's transform.
func newTransformedFIFORun(t testing.TB) *fifoRun {
	r := newFIFORun(t)
	r.fifo = NewDeltaFIFO(DeltaFIFOOptions{KnownObjects: r.cache, Transformer: countTransforms})
	r.transformed = true
	return r
}

// checkTransformed checks that obj, or the object in a tombstone, was
// transformed once, if the run transforms.
func (r *fifoRun) checkTransformed(obj any) error {
	if !r.transformed {
		return nil
	}
	if d, ok := obj.(DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	cm := obj.(*corev1.ConfigMap)
	if n := cm.Annotations[transformCount]; n != "1" || cm.ManagedFields != nil {
		return fmt.Errorf("%s/%s transformed %q times, managedFields %v; want once, none", cm.Namespace, cm.Name, n, cm.ManagedFields)
	}
	return nil
}

// object returns a new version of key's object.
func (r *fifoRun) object(key string) *corev1.ConfigMap {
	r.rv++
	ns, name, err := SplitMetaNamespaceKey(key)
	if err != nil {
		r.t.Fatal(err)
	}
	obj := cm(ns, name, strconv.Itoa(r.rv))
	obj.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "test", Operation: metav1.ManagedFieldsOperationUpdate}}
	return obj
}

// run interprets program: each byte is an operation, some take the next byte
// as an argument.
func (r *fifoRun) run(program []byte) {
	for i := 0; i < len(program); i++ {
		op := program[i]
		arg := byte(0)
		if i+1 < len(program) {
			arg = program[i+1]
		}
		key := fuzzKeys[int(arg)%len(fuzzKeys)]
		if op%9 <= 4 {
			r.fed = true
		}
		switch op % 9 {
		case 0: // add (or re-add) an object
			obj := r.object(key)
			r.server[key] = obj
			r.check(r.fifo.Add(obj))
			i++
		case 1: // update an object
			obj := r.object(key)
			r.server[key] = obj
			r.check(r.fifo.Update(obj))
			i++
		case 2: // delete: the watch event carries the final state
			obj := r.object(key)
			delete(r.server, key)
			r.check(r.fifo.Delete(obj))
			i++
		case 3: // relist with new versions of the keys in arg's bits
			var list []any
			server := map[string]*corev1.ConfigMap{}
			for b, k := range fuzzKeys {
				if arg&(1<<b) != 0 {
					obj := r.object(k)
					server[k] = obj
					list = append(list, obj)
				}
			}
			r.server = server
			r.check(r.fifo.Replace(list, strconv.Itoa(r.rv)))
			i++
		case 4: // relist with nothing changed
			var list []any
			for _, obj := range r.server {
				list = append(list, obj)
			}
			r.check(r.fifo.Replace(list, strconv.Itoa(r.rv)))
		case 5:
			r.check(r.fifo.Resync())
		case 6, 7:
			r.popOne()
		case 8:
			r.drain()
		}
		r.checkQueue()
	}
	r.drain()
	r.checkCache()
	if got := r.fifo.HasSynced(); got != r.fed {
		r.t.Fatalf("HasSynced = %v after draining, want %v", got, r.fed)
	}
}

func (r *fifoRun) check(err error) {
	r.t.Helper()
	if err != nil {
		r.t.Fatal(err)
	}
}

func (r *fifoRun) drain() {
	for r.fifo.Len() > 0 {
		r.popOne()
	}
}

// popOne pops one key into the cache, as an informer does.
func (r *fifoRun) popOne() {
	if r.fifo.Len() == 0 {
		return
	}
	_, err := r.fifo.Pop(context.Background(), func(d Deltas, _ bool) error {
		if len(d) == 0 {
			return fmt.Errorf("popped empty Deltas")
		}
		key, err := r.fifo.KeyOf(d)
		if err != nil {
			return err
		}
		for i, delta := range d {
			k, err := r.fifo.KeyOf(delta.Object)
			if err != nil {
				return err
			}
			if k != key {
				return fmt.Errorf("deltas of %s hold %s", key, k)
			}
			if err := r.checkTransformed(delta.Object); err != nil {
				return err
			}
			if i > 0 && delta.Type == Deleted && d[i-1].Type == Deleted {
				return fmt.Errorf("deltas of %s: two deletions in a row", key)
			}
			switch delta.Type {
			case Deleted:
				err = r.cache.Delete(delta.Object)
			default:
				err = r.cache.Update(delta.Object)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	r.check(err)
}

// checkQueue checks the DeltaFIFO's invariants from the inside.
func (r *fifoRun) checkQueue() {
	r.t.Helper()
	f := r.fifo
	f.lock.Lock()
	defer f.lock.Unlock()
	seen := map[string]bool{}
	for _, key := range f.queue {
		if seen[key] {
			r.t.Fatalf("key %s is in the queue twice: %v", key, f.queue)
		}
		seen[key] = true
		if len(f.items[key]) == 0 {
			r.t.Fatalf("queued key %s has no deltas", key)
		}
	}
	if len(f.items) != len(f.queue) {
		r.t.Fatalf("%d items but %d queued keys", len(f.items), len(f.queue))
	}
}

// checkCache checks that the drained cache equals the server's state.
func (r *fifoRun) checkCache() {
	r.t.Helper()
	keys := r.cache.ListKeys()
	if len(keys) != len(r.server) {
		r.t.Fatalf("cache has keys %v, server has %d objects", keys, len(r.server))
	}
	for key, want := range r.server {
		obj, ok, err := r.cache.GetByKey(key)
		if err != nil || !ok {
			r.t.Fatalf("cache lacks %s (%v)", key, err)
		}
		if got := obj.(*corev1.ConfigMap).ResourceVersion; got != want.ResourceVersion {
			r.t.Fatalf("cache has %s at rv %s, server at %s", key, got, want.ResourceVersion)
		}
		if err := r.checkTransformed(obj); err != nil {
			r.t.Fatalf("cache: %v", err)
		}
	}
	for _, ns := range r.cache.ListIndexFuncValues(NamespaceIndex) {
		objs, _ := r.cache.ByIndex(NamespaceIndex, ns)
		for _, o := range objs {
			if o.(*corev1.ConfigMap).Namespace != ns {
				r.t.Fatalf("namespace index %q holds %v", ns, o)
			}
		}
	}
}

func FuzzDeltaFIFO(f *testing.F) {
	f.Add([]byte{0, 0, 1, 0, 6, 2, 0, 8})
	f.Add([]byte{3, 0xff, 6, 2, 1, 3, 0x01, 8})
	f.Add([]byte{0, 1, 6, 2, 1, 0, 1, 3, 0, 5, 6, 4, 8})
	f.Add([]byte{3, 0x0f, 0, 4, 5, 2, 0, 2, 0, 3, 0x30, 7, 5, 8})
	f.Fuzz(func(t *testing.T, program []byte) {
		if len(program) > 4096 {
			program = program[:4096]
		}
		newFIFORun(t).run(program)
		newTransformedFIFORun(t).run(program)
	})
}

// TestDeltaFIFORandomized runs the fuzz property over seeded random
// programs, so that every plain `go test` checks it.
func TestDeltaFIFORandomized(t *testing.T) {
	for seed := uint64(1); seed <= 200; seed++ {
		rng := rand.New(rand.NewPCG(seed, seed*7919))
		program := make([]byte, 50+rng.IntN(400))
		for i := range program {
			program[i] = byte(rng.UintN(256))
		}
		t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) {
			newFIFORun(t).run(program)
		})
		t.Run(strconv.FormatUint(seed, 10)+"/transformed", func(t *testing.T) {
			newTransformedFIFORun(t).run(program)
		})
	}
}
