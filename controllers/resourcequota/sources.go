package resourcequota

import (
	"fmt"
	"strconv"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/informer"
)

// source is one quotable kind's informer, seen without its Go type: what
// the controller needs to measure a namespace's use of that kind.
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
	// sub is the controller's subscription to the kind's shared informer:
	// closed when the kind is no longer served, or with Run.
	sub *informer.Subscription
}

// openSource subscribes h to the factory's informer of res, any resource
// the server serves; the factory's next Start runs it.
func openSource(f *informer.SharedInformerFactory, res *api.Resource, h informer.ResourceEventHandler) (*source, error) {
	sub, err := f.Subscribe(res, h)
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", res.GroupResource(), err)
	}
	inf := sub.Informer
	lister := inf.Lister()
	return &source{
		res:    res,
		sub:    sub,
		synced: sub.HasSynced,
		revision: func() int64 {
			rv, _ := strconv.ParseInt(inf.LastSyncResourceVersion(), 10, 64)
			return rv
		},
		list: func(namespace string) []api.Object { return lister.ByNamespace(namespace).List(nil) },
	}, nil
}

// stop closes the subscription: the handler is called no more, and the
// informer stops if nothing else uses it.
func (s *source) stop() { s.sub.Close() }
