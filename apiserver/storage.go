package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/store"
)

// Storage is what the API server needs of etcd: keys, opaque values and
// revisions, as package store provides them; a *store.Store satisfies it.
// The server reaches etcd only through it.
//
// The contract is store's (see its package documentation): one revision
// counter that only grows; Create, Update and Delete are compare-and-swap
// and fail with store.ErrExists, store.ErrNotFound or store.ErrConflict;
// reads without a revision see every write that returned before them; a
// watch delivers every change under its prefix from its revision, in
// order, or ends with an event whose Err is set (store.ErrHistoryReset if
// etcd lost the history it followed). Every call has a deadline, and fails
// with store.ErrUnavailable while etcd is known not to answer.
type Storage interface {
	Get(ctx context.Context, key string) (*store.KeyValue, error)
	List(ctx context.Context, prefix string, opts store.ListOptions) (*store.ListResult, error)
	Create(ctx context.Context, key string, value []byte) (int64, error)
	Update(ctx context.Context, key string, value []byte, expectedRevision int64) (int64, error)
	Delete(ctx context.Context, key string, expectedRevision int64) (int64, error)
	Watch(ctx context.Context, prefix string, fromRevision int64) <-chan store.WatchEvent
	// CreateExpiring and UpdateExpiring are Create and Update of a key
	// etcd deletes by itself some ttl after the write (0: never), as
	// Events expire (--event-ttl).
	CreateExpiring(ctx context.Context, key string, value []byte, ttl time.Duration) (int64, error)
	UpdateExpiring(ctx context.Context, key string, value []byte, expectedRevision int64, ttl time.Duration) (int64, error)

	// Revision is the revision of the latest write.
	Revision(ctx context.Context) (int64, error)
	// CompactedRevision is the oldest revision still kept: a watch from
	// before it cannot be served.
	CompactedRevision() int64
	// RequestProgress asks for a progress event on every open watch on
	// prefix, so that each learns the current revision without a change of
	// its own.
	RequestProgress(ctx context.Context, prefix string) error
	// Health is nil while etcd answers, and an error wrapping
	// store.ErrUnavailable within seconds of it not answering; meanwhile
	// every call fails at once with it.
	Health() error
}

var _ Storage = (*store.Store)(nil)

// resourceStore is one resource's view of etcd: it turns objects into keys
// and JSON values and back, maps storage errors to Kubernetes Statuses, and
// implements read-modify-write as Kubernetes' GuaranteedUpdate does. A
// custom resource's version other than its storage version converts what it
// writes and reads (conversion.go).
type resourceStore struct {
	res     *api.Resource
	store   Storage
	prefix  string // registryPrefix(res)
	metrics *metrics
	// cache is the resource's watch cache, which the writes start from and
	// tell what they write; view is res's index among the versions it
	// holds (watchCache.views).
	cache writeCache
	view  int
	// conv converts between res and the version it is stored in; nil for
	// a resource stored as it is served.
	conv converter
	// fields returns the resource's field managers, built on the first
	// write.
	fields func() (*fieldManagers, error)
	// removed, if set, is told of every object remove deleted: a
	// Service's allocations are given back (servicealloc.go).
	removed func(ctx context.Context, obj api.Object)
	// ttl, if set, is how long an object lives after its last write
	// before etcd deletes it: Events' --event-ttl, as in kube-apiserver.
	ttl time.Duration
}

// writeCache is what a resourceStore needs of its resource's watch cache,
// a *watchCache.
type writeCache interface {
	// current returns the cached object under key, as stored (view 0), or
	// nil when the cache has none or is not filled yet: where an update
	// starts, before it reads etcd.
	current(key string) *cachedObject
	// offer tells the cache what this server is about to write under key:
	// an object and its stored bytes. When etcd's watch reports that
	// value, the cache takes the object instead of decoding the value and
	// encoding the object again. withdraw drops the offer when the write
	// fails.
	offer(key string, o *offered) (withdraw func())
}

// newResourceStore makes res's store; res is the view-th version cache
// holds, converted to and from storage by conv.
func newResourceStore(res *api.Resource, st Storage, cache writeCache, view int, conv converter, m *metrics) *resourceStore {
	return &resourceStore{
		res: res, store: st, prefix: registryPrefix(res), metrics: m, cache: cache, view: view, conv: conv,
		fields: sync.OnceValues(func() (*fieldManagers, error) { return newFieldManagers(res) }),
	}
}

// encode is the value to store for obj, an object of rs's version: in the
// storage version, without a resourceVersion.
func (rs *resourceStore) encode(ctx context.Context, obj api.Object) ([]byte, error) {
	if converts(rs.res) {
		var err error
		if obj, err = convertTo(ctx, rs.conv, rs.res.Storage, obj); err != nil {
			return nil, err
		}
	}
	data, err := encodeForStorage(rs.res.StoredAs(), obj)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return data, nil
}

// decode reads a stored value, at revision rev, as rs's version.
func (rs *resourceStore) decode(ctx context.Context, data []byte, rev int64) (api.Object, error) {
	obj, err := decodeFromStorage(rs.res.StoredAs(), data, rev)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	if obj, err = fromStored(ctx, rs.conv, rs.res.StoredAs(), obj); err != nil {
		return nil, err
	}
	if !converts(rs.res) {
		return obj, nil
	}
	return convertTo(ctx, rs.conv, rs.res, obj)
}

// registryPrefix is where res's objects live: "/registry/<group>/<plural>/";
// the core group is "core".
func registryPrefix(res *api.Resource) string {
	group := res.Group
	if group == "" {
		group = "core"
	}
	return "/registry/" + group + "/" + res.Plural + "/"
}

// key is where one object lives: /registry/<group>/<plural>/<namespace>/<name>,
// or /registry/<group>/<plural>/<name> for cluster-scoped kinds.
func (rs *resourceStore) key(namespace, name string) string {
	if rs.res.Namespaced {
		return rs.prefix + namespace + "/" + name
	}
	return rs.prefix + name
}

// listPrefix is the prefix of every key in one namespace, or of all keys.
func (rs *resourceStore) listPrefix(namespace string) string {
	if rs.res.Namespaced && namespace != "" {
		return rs.prefix + namespace + "/"
	}
	return rs.prefix
}

// storageError maps a store error to the Status a client expects.
func (rs *resourceStore) storageError(err error, name string) error {
	return storageError(rs.res, err, name)
}

// storageError maps a store error, met reading or writing res's object
// name ("" for a list or watch), to the Status a client expects.
func storageError(res *api.Resource, err error, name string) error {
	gr := res.GroupResource()
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrNotFound):
		return apierrors.NewNotFound(gr, name)
	case errors.Is(err, store.ErrExists):
		return apierrors.NewAlreadyExists(gr, name)
	case errors.Is(err, store.ErrConflict):
		return errConflict(res, name)
	case errors.Is(err, store.ErrCompacted):
		return apierrors.NewResourceExpired(fmt.Sprintf("the resourceVersion is too old: %v", err))
	case errors.Is(err, store.ErrUnavailable):
		return newStorageUnavailable()
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return newRequestTimeout(err)
	}
	if _, ok := err.(apierrors.APIStatus); ok {
		return err
	}
	return apierrors.NewInternalError(err)
}

func errConflict(res *api.Resource, name string) error {
	return apierrors.NewConflict(res.GroupResource(), name,
		errors.New("the object has been modified; please apply your changes to the latest version and try again"))
}

func (rs *resourceStore) observe(op string, start time.Time) {
	rs.metrics.storageLatency.WithLabelValues(op, rs.res.Plural).Observe(time.Since(start).Seconds())
}

// get reads the current object from etcd (a consistent read).
func (rs *resourceStore) get(ctx context.Context, namespace, name string) (api.Object, error) {
	defer rs.observe("get", time.Now())
	kv, err := rs.store.Get(ctx, rs.key(namespace, name))
	if err != nil {
		return nil, rs.storageError(err, name)
	}
	return rs.decode(ctx, kv.Value, kv.Revision)
}

// create writes obj if no object has its key yet, and returns the
// created object's JSON, resourceVersion included. It hands obj to the
// watch cache (see offer): once create succeeds, or fails in a way that
// leaves unknown whether etcd applied the write, the caller must not
// change obj. Only an AlreadyExists error, which etcd's comparison
// decided, gives obj back.
func (rs *resourceStore) create(ctx context.Context, obj api.Object) ([]byte, error) {
	o, rev, _, err := rs.createAlong(ctx, obj, nil)
	if err != nil {
		return nil, err
	}
	return rs.createdJSON(ctx, o, rev)
}

// createKept is create for a caller that keeps obj, to answer with it: the
// watch cache is handed a copy, and obj becomes the object written (see
// written).
func (rs *resourceStore) createKept(ctx context.Context, obj api.Object) error {
	o, rev, _, err := rs.createAlong(ctx, obj.DeepCopyObject().(api.Object), nil)
	if err != nil {
		return err
	}
	ans, err := rs.written(ctx, obj, o.data, rev)
	if err != nil {
		return err
	}
	setObject(obj, ans)
	return nil
}

// createdJSON is the JSON a create, whose write o was stored at rev,
// answers with.
func (rs *resourceStore) createdJSON(ctx context.Context, o *offered, rev int64) ([]byte, error) {
	if rs.protobuf() {
		ans, err := rs.decode(ctx, o.data, rev) // what etcd holds (see written)
		if err != nil {
			return nil, err
		}
		raw, err := marshalObject(ans)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		return raw, nil
	}
	if raw, ok := o.stamped(rev); ok && !converts(rs.res) {
		return raw, nil // the same bytes the watch cache holds
	}
	// data has no shape to splice into. takeOffered splices the same data
	// and gives up on the same answer without touching o.obj, so it is
	// still only ours to copy.
	stamped := o.obj.DeepCopyObject().(api.Object)
	stamped.SetResourceVersion(strconv.FormatInt(rev, 10))
	raw, err := json.Marshal(stamped)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return raw, nil
}

// written is the answer to a write of obj, which was stored as data at
// rev. A kind stored as protobuf answers with data decoded, as
// kube-apiserver answers a write with what it stored: protobuf cannot
// tell an empty list or map from none, and neither can the answer, nor
// any later read. Otherwise it is obj, with the resourceVersion rev.
func (rs *resourceStore) written(ctx context.Context, obj api.Object, data []byte, rev int64) (api.Object, error) {
	if rs.protobuf() {
		return rs.decode(ctx, data, rev)
	}
	obj.SetResourceVersion(strconv.FormatInt(rev, 10))
	return obj, nil
}

// createAlong is create, writing the keys of along with the object in
// one transaction: all of them or none. It returns what was written and
// the revision it was written at. When some of along's keys are present,
// nothing is written, obj is given back, and it returns those keys with
// an AlreadyExists error about them.
func (rs *resourceStore) createAlong(ctx context.Context, obj api.Object, along []store.KeyValue) (*offered, int64, []string, error) {
	defer rs.observe("create", time.Now())
	data, err := rs.encode(ctx, obj)
	if err != nil {
		return nil, 0, nil, err
	}
	key := rs.key(obj.GetNamespace(), obj.GetName())
	o := &offered{obj: obj, data: data}
	var present []string
	rev, err := rs.write(key, o, func() (int64, error) {
		if len(along) == 0 {
			return rs.store.CreateExpiring(ctx, key, data, rs.ttl)
		}
		var rev int64
		var err error
		rev, present, err = createAll(ctx, rs.store, append(slices.Clip(along), store.KeyValue{Key: key, Value: data}))
		if slices.Contains(present, key) {
			present = nil // the name is taken: that is the answer
		}
		return rev, err
	})
	if len(present) > 0 {
		return nil, 0, present, apierrors.NewAlreadyExists(rs.res.GroupResource(), strings.Join(present, ", "))
	}
	if err != nil {
		return nil, 0, nil, rs.storageError(err, obj.GetName())
	}
	return o, rev, nil, nil
}

// allCreator is a Storage that creates several keys in one transaction,
// as *store.Store does.
type allCreator interface {
	CreateAll(ctx context.Context, kvs []store.KeyValue) (int64, []string, error)
}

// createAll creates every key of kvs or none, and names the present ones.
// A Storage without transactions of several keys creates them in turn
// and deletes what it created when one is present: the same answer, not
// atomic if the server stops halfway (repair then finds the leftovers).
func createAll(ctx context.Context, st Storage, kvs []store.KeyValue) (int64, []string, error) {
	if c, ok := st.(allCreator); ok {
		return c.CreateAll(ctx, kvs)
	}
	var rev int64
	for i, kv := range kvs {
		r, err := st.Create(ctx, kv.Key, kv.Value)
		if err != nil {
			for _, done := range kvs[:i] {
				st.Delete(context.WithoutCancel(ctx), done.Key, 0)
			}
			if errors.Is(err, store.ErrExists) {
				return 0, []string{kv.Key}, err
			}
			return 0, nil, err
		}
		rev = r
	}
	return rev, nil, nil
}

// write runs write, which stores o's data under key; first, if rs
// offers its writes, it offers the watch cache o (see offer), whose
// object the caller hands over.
func (rs *resourceStore) write(key string, o *offered, write func() (int64, error)) (int64, error) {
	if !rs.offers() {
		return write()
	}
	withdraw := rs.cache.offer(key, o)
	rev, err := write()
	if err != nil {
		withdraw()
	}
	return rev, err
}

// offers reports whether rs offers the watch cache what it writes (see
// offer). An object served at another version than it is stored in is
// not offered: its stored bytes are not what the cache serves. Nor is a
// stored-as-protobuf object the cache holds decoded (see takeOffered):
// the cache decodes what etcd holds.
func (rs *resourceStore) offers() bool {
	return !converts(rs.res) && takesOffers(rs.res, rs.protobuf())
}

// protobuf reports whether rs's objects are stored as protobuf (see
// storesProtobuf).
func (rs *resourceStore) protobuf() bool { return storesProtobuf(rs.res.StoredAs()) }

// asStored makes obj, for a dry run, which stores nothing, what storing it
// and reading it back gives, as kube-apiserver's dry-run storage copies
// the object through its storage codec: for a kind stored as protobuf,
// without what protobuf cannot tell apart (see written).
func (rs *resourceStore) asStored(ctx context.Context, obj api.Object) error {
	if !rs.protobuf() {
		return nil
	}
	data, err := rs.encode(ctx, obj)
	if err != nil {
		return err
	}
	back, err := rs.decode(ctx, data, 0)
	if err != nil {
		return err
	}
	back.SetResourceVersion(obj.GetResourceVersion())
	setObject(obj, back)
	return nil
}

// setObject makes dst, an object its caller holds, src: the same type.
func setObject(dst, src api.Object) {
	if dst != src {
		reflect.ValueOf(dst).Elem().Set(reflect.ValueOf(src).Elem())
	}
}

// updateFunc computes the next state of an object from its current one. It
// receives a private copy and may modify and return it. Returning an error
// aborts the update with that error.
type updateFunc func(cur api.Object) (api.Object, error)

// update reads, modifies and writes one object, retrying when another
// writer got in between (etcd compare-and-swap on the mod revision). A
// caller that wants its own resourceVersion honoured checks it inside fn,
// which then fails with a Conflict instead of being retried. An update that
// changes nothing writes nothing and returns the current object, as in
// Kubernetes. A dry run computes the result and writes nothing.
//
// Like kube-apiserver's GuaranteedUpdate with the watch cache's object, the
// first attempt starts from the cached state, saving a read from etcd; the
// compare-and-swap makes that safe. Because the cache may be a little
// behind, the cached state is only a guess: if fn fails on it, or finds
// nothing to change, or the write conflicts, the object is read from etcd
// and fn runs again on that, so every outcome is one a fresh read gives.
// One exception saves that second run: when fn found nothing to change
// and etcd still holds the very value the guess was (same mod revision,
// same bytes, which fn's result encodes to), the guess was the current
// object, and fn's answer on it is the answer.
func (rs *resourceStore) update(ctx context.Context, namespace, name string, dry bool, fn updateFunc) (api.Object, error) {
	defer rs.observe("update", time.Now())
	key := rs.key(namespace, name)
	var cached *cachedObject // as stored
	if !dry {
		cached = rs.cache.current(key)
		if cached != nil && cached.at(rs.view).err != nil {
			cached = nil // not convertible from memory: see what etcd says
		}
	}
	// unchangedGuess is fn's result on the cached guess when it changed
	// nothing, at revision guessRev, encoded as guessData.
	var unchangedGuess api.Object
	var guessRev int64
	var guessData []byte
	for {
		var cur api.Object
		var rev int64
		var stored []byte // the current value as read from etcd; nil when cur is the cached guess
		if cached != nil {
			cur, rev = cached.at(rs.view).objectCopy(), cached.rv
		} else {
			kv, err := rs.store.Get(ctx, key)
			if err != nil {
				return nil, rs.storageError(err, name)
			}
			if unchangedGuess != nil && kv.Revision == guessRev && bytes.Equal(kv.Value, guessData) {
				return rs.written(ctx, unchangedGuess, guessData, guessRev)
			}
			unchangedGuess = nil
			if cur, err = rs.decode(ctx, kv.Value, kv.Revision); err != nil {
				return nil, err
			}
			rev, stored = kv.Revision, kv.Value
			if rs.protobuf() && !storedProtobuf(stored) {
				// Written as JSON, before built-in kinds were stored as
				// protobuf: compared as it would be written now, so that
				// an update that changes nothing writes nothing here too.
				if again, err := rs.encode(ctx, cur); err == nil {
					stored = again
				}
			}
		}
		next, err := fn(cur)
		if err != nil {
			if cached != nil {
				cached = nil // perhaps only because the guess was stale
				continue
			}
			return nil, err
		}
		data, err := rs.encode(ctx, next)
		if err != nil {
			return nil, err
		}
		if cached != nil && unchanged(data, rev, cached) {
			cached = nil // nothing to change in the guess: is that so in etcd?
			unchangedGuess, guessRev, guessData = next, rev, data
			continue
		}
		if dry || (stored != nil && bytes.Equal(data, stored)) {
			return rs.written(ctx, next, data, rev)
		}
		o := &offered{data: data}
		if rs.offers() {
			o.obj = next.DeepCopyObject().(api.Object) // next is the caller's answer
		}
		newRev, err := rs.write(key, o, func() (int64, error) { return rs.store.UpdateExpiring(ctx, key, data, rev, rs.ttl) })
		if cached != nil && (errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound)) {
			// etcd's comparison refused the guess (stale, or the object is
			// gone): decide again on what etcd holds. Any other error may
			// have come after etcd applied the write, so it is answered as
			// it is, never retried on top of a write that may have happened.
			cached = nil
			continue
		}
		if errors.Is(err, store.ErrConflict) {
			continue // someone else wrote first: recompute from their state
		}
		if err != nil {
			return nil, rs.storageError(err, name)
		}
		return rs.written(ctx, next, data, newRev)
	}
}

// unchanged reports whether data, an object as encodeForStorage wrote it,
// is the object cached, at revision rev, as the watch cache serves it.
func unchanged(data []byte, rev int64, cached *cachedObject) bool {
	if storedProtobuf(data) {
		held, err := cached.protobuf(cached.res)
		stamped := stampedProtobuf(data, rev)
		return err == nil && stamped != nil && bytes.Equal(stamped, held)
	}
	raw, err := cached.json()
	if err != nil {
		return false
	}
	withRV, ok := withResourceVersion(data, rev)
	return ok && bytes.Equal(withRV, raw)
}

// remove deletes the object if it is still at revision rv.
func (rs *resourceStore) remove(ctx context.Context, obj api.Object) (int64, error) {
	defer rs.observe("delete", time.Now())
	rv, err := strconv.ParseInt(obj.GetResourceVersion(), 10, 64)
	if err != nil {
		return 0, apierrors.NewInternalError(fmt.Errorf("object %s has no resourceVersion", obj.GetName()))
	}
	rev, err := rs.store.Delete(ctx, rs.key(obj.GetNamespace(), obj.GetName()), rv)
	if err != nil {
		return 0, rs.storageError(err, obj.GetName())
	}
	if rs.removed != nil {
		rs.removed(ctx, obj)
	}
	return rev, nil
}
