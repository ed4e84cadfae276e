package resourcequota

import (
	"fmt"
	"strconv"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/informer"
)

// source is one quotable kind's shared informer, seen without its Go type:
// what the controller needs to measure a namespace's use of that kind.
type source struct {
	res *api.Resource
	// list returns the namespace's objects from the cache. They are the
	// cache's own: read them, never change them.
	list func(namespace string) []api.Object
	// synced reports whether the cache is filled and the controller's
	// handler has seen its contents.
	synced func() bool
	// revision is the etcd revision the cache reflects (its informer's
	// last resourceVersion).
	revision func() int64
}

// openSource takes res's informer from the shared factory, by descriptor,
// and registers h on it. Any resource of the catalogue has one, Go type or
// not; a kind that has a Go type shares the informer other controllers take
// by type.
func openSource(f *informer.SharedInformerFactory, res *api.Resource, h informer.ResourceEventHandler) (*source, error) {
	inf := informer.ForResource(f, res)
	reg, err := inf.AddEventHandler(h)
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", res.GroupResource(), err)
	}
	lister := inf.Lister()
	return &source{
		res:    res,
		synced: reg.HasSynced,
		revision: func() int64 {
			rv, _ := strconv.ParseInt(inf.LastSyncResourceVersion(), 10, 64)
			return rv
		},
		list: func(namespace string) []api.Object { return lister.ByNamespace(namespace).List(nil) },
	}, nil
}
