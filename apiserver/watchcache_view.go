package apiserver

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/minictl/minictl/api"
)

// cacheView is a watch cache as one served version of its resource sees
// it: what get, list and watch return are that version's objects. A
// resource served at one version has one view, of the objects as stored.
// The rest of the cache (its revision, waits, bookmarks, the writers'
// offers) is the same for every version.
type cacheView struct {
	*watchCache
	view int // the version's index in the cache's views
}

// viewOf returns c as res, one of the versions it serves, sees it.
func (c *watchCache) viewOf(res *api.Resource) *cacheView {
	for i, v := range c.views {
		if v == res {
			return &cacheView{watchCache: c, view: i}
		}
	}
	panic("watch cache of " + c.res.GroupResource().String() + " does not serve " + res.APIVersion())
}

// get returns the object at key as the view's version sees it (nil if
// there is none), and whether the cache is filled.
func (v *cacheView) get(key string) (*cachedObject, bool) {
	o, ready := v.watchCache.get(key)
	if o != nil {
		o = o.at(v.view)
	}
	return o, ready
}

// list is watchCache.list at the view's version.
func (v *cacheView) list(f *filter) ([]*cachedObject, int64) {
	g := *f
	g.view = v.view
	return v.watchCache.list(&g)
}

// watch is watchCache.watch at the view's version.
func (v *cacheView) watch(ctx context.Context, from int64, initial bool, f filter, bookmarks, jsonLines bool) ([]watchItem, int64, *cacheWatcher, error) {
	f.view = v.view
	return v.watchCache.watch(ctx, from, initial, f, bookmarks, jsonLines)
}

// conversionError is why o, read through a view, cannot be served: its
// conversion to the view's version failed (nil if it did not).
func conversionError(o *cachedObject) error {
	if o == nil || o.err == nil {
		return nil
	}
	if _, ok := o.err.(apierrors.APIStatus); ok {
		return o.err
	}
	return apierrors.NewInternalError(o.err)
}
