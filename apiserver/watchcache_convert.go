package apiserver

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/clock"
)

// How a watch cache that serves several versions of a custom resource
// (see watchCache) gives each object its form at every version, and what
// it does when a conversion fails.
//
// An object is converted as it comes in, before the cache is locked: once
// per version, as kube-apiserver, with one cache per version, converts
// each change once for each. A conversion that fails (a conversion webhook
// that is down, or answers nonsense) leaves that version's form marked
// with the error: its readers get the error as a 500, and its watchers an
// ERROR event that ends their watch. The cache tries every failed form
// again, with a backoff, and swaps each one that converts into the cached
// object, which the cache's state and its window of events share, so that
// a client that comes back (a list, or a watch from before the change) is
// served the change, as if the webhook had never failed.
//
// The cache converts in its one goroutine, so a webhook that answers slowly
// delays every version's events, up to its timeout for each conversion;
// one that is down fails fast. kube-apiserver's caches wait the same way,
// but each for its own version only.

const (
	firstConversionRetry = time.Second
	maxConversionRetry   = 30 * time.Second
)

// newCachedObject decodes a stored value, and converts it to every other
// version the cache serves.
func (c *watchCache) newCachedObject(ctx context.Context, key string, value []byte, rev int64) (*cachedObject, error) {
	obj, err := decodeFromStorage(c.res, value, rev)
	if err != nil {
		return nil, err
	}
	return c.fromStored(ctx, key, obj, stampedProtobuf(value, rev))
}

// fromStored is obj, as decoded from etcd, as the cache holds it: in the
// storage version, with its form at every other version. An object stored
// in an earlier storage version that cannot be converted now is held as
// decoded, with the error, which every version's readers get until it
// converts. pb, when not nil, is obj's protobuf.
func (c *watchCache) fromStored(ctx context.Context, key string, obj api.Object, pb []byte) (*cachedObject, error) {
	stored, err := fromStored(ctx, c.conv, c.res, obj)
	if err != nil {
		c.log.Warn("cannot convert a stored object to the storage version; trying again later", "key", key, "err", err)
		o := unconverted(key, obj, err)
		o.views = make([]atomic.Pointer[cachedObject], len(c.views)-1)
		for i := range o.views {
			o.views[i].Store(unconverted(key, obj, err))
		}
		c.failed[o] = struct{}{}
		return o, nil
	}
	if stored != obj {
		pb = nil // not the object pb encodes
	}
	o, err := c.wrap(c.res, key, stored, pb)
	if err != nil {
		return nil, err
	}
	c.convert(ctx, o)
	return o, nil
}

// unconverted is obj, which could not be converted for err, as a cached
// object whose readers get err.
func unconverted(key string, obj api.Object, err error) *cachedObject {
	rv, _ := strconv.ParseInt(obj.GetResourceVersion(), 10, 64)
	return &cachedObject{key: key, namespace: obj.GetNamespace(), rv: rv, decoded: obj, labels: pack(obj.GetLabels()), err: err}
}

// convert gives o, as stored, its form at every other version the cache
// serves.
func (c *watchCache) convert(ctx context.Context, o *cachedObject) {
	if len(c.views) == 1 || o.err != nil {
		return
	}
	o.views = make([]atomic.Pointer[cachedObject], len(c.views)-1)
	for i := range o.views {
		v := c.view(ctx, o, i+1)
		if v.err != nil {
			c.failed[o] = struct{}{}
		}
		o.views[i].Store(v)
	}
}

// view is o, as stored, at the cache's view-th version.
func (c *watchCache) view(ctx context.Context, o *cachedObject, view int) *cachedObject {
	res := c.views[view]
	obj, err := convertTo(ctx, c.conv, res, o.object())
	var v *cachedObject
	if err == nil {
		v, err = c.wrap(res, o.key, obj, nil)
	}
	if err != nil {
		c.log.Warn("cannot convert an object to a served version; trying again later", "key", o.key, "version", res.Version, "err", err)
		return unconverted(o.key, o.object(), err)
	}
	return v
}

// retryConversions tries every failed conversion again. A form that now
// converts is swapped into its object; an object stored in an earlier
// version that now converts replaces the cached one, if that is still
// current. Objects neither current nor in the window are forgotten.
func (c *watchCache) retryConversions(ctx context.Context) {
	for _, o := range slices.Collect(maps.Keys(c.failed)) {
		c.mu.RLock()
		current, inWindow := c.objects[o.key] == o, o.rv > c.oldest
		c.mu.RUnlock()
		if !current && !inWindow {
			delete(c.failed, o)
			continue
		}
		if o.err != nil { // the stored form itself
			if !current {
				delete(c.failed, o)
				continue
			}
			delete(c.failed, o)
			n, err := c.fromStored(ctx, o.key, o.objectCopy(), nil)
			if err != nil {
				c.failed[o] = struct{}{}
				continue
			}
			c.mu.Lock()
			if c.objects[o.key] == o {
				c.objects[o.key] = n
			}
			c.mu.Unlock()
			continue
		}
		converted := true
		for i := range o.views {
			if o.views[i].Load().err == nil {
				continue
			}
			if v := c.view(ctx, o, i+1); v.err == nil {
				o.views[i].Store(v)
			} else {
				converted = false
			}
		}
		if converted {
			delete(c.failed, o)
		}
	}
}

// conversionRetry times the retries of failed conversions: armed while
// some are pending, with a backoff that doubles while they keep failing.
type conversionRetry struct {
	c       *watchCache
	timer   clock.Timer // nil: not armed
	backoff time.Duration
}

func (c *watchCache) newConversionRetry() *conversionRetry {
	return &conversionRetry{c: c, backoff: firstConversionRetry}
}

// due is the channel that fires when a retry is due; nil (never) when no
// conversion failed.
func (r *conversionRetry) due() <-chan time.Time {
	if r.timer == nil {
		if len(r.c.failed) == 0 {
			return nil
		}
		r.timer = r.c.clock.NewTimer(r.backoff)
	}
	return r.timer.C()
}

// done records a retry: the next waits twice as long, or the first
// backoff again once nothing is left to retry.
func (r *conversionRetry) done(allConverted bool) {
	r.timer = nil
	if allConverted {
		r.backoff = firstConversionRetry
	} else {
		r.backoff = min(2*r.backoff, maxConversionRetry)
	}
}

func (r *conversionRetry) stop() {
	if r.timer != nil {
		r.timer.Stop()
	}
}
