package resourcequota

import (
	"context"
	"fmt"
	"strconv"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/client"
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

	// own is the informer the source runs itself, for a kind without a
	// Go type (which may stop being served); nil: the factory's shared
	// informer. cancel and done are set once it runs: cancel stops it,
	// done is closed when its Run has returned.
	own    *informer.Informer[api.Object]
	cancel context.CancelFunc
	done   chan struct{}
}

// openSource registers h on an informer of res: the shared factory's, by
// descriptor, for a kind with a Go type (it shares the informer other
// controllers take by type); a new one the source owns for any other kind,
// which start runs. Any resource the server serves has one.
func openSource(f *informer.SharedInformerFactory, rc *client.RESTClient, res *api.Resource, h informer.ResourceEventHandler) (*source, error) {
	var inf, own *informer.Informer[api.Object]
	if res.Unstructured() {
		own = informer.NewInformer(client.ForResource(rc, res), "", nil,
			informer.SharedInformerOptions{Name: res.GroupResource().String()})
		inf = own
	} else {
		inf = informer.ForResource(f, res)
	}
	reg, err := inf.AddEventHandler(h)
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", res.GroupResource(), err)
	}
	lister := inf.Lister()
	return &source{
		res:    res,
		own:    own,
		synced: reg.HasSynced,
		revision: func() int64 {
			rv, _ := strconv.ParseInt(inf.LastSyncResourceVersion(), 10, 64)
			return rv
		},
		list: func(namespace string) []api.Object { return lister.ByNamespace(namespace).List(nil) },
	}, nil
}

// start runs the informer the source owns, if any, until ctx is done or
// stop.
func (s *source) start(ctx context.Context) {
	if s.own == nil || s.done != nil {
		return
	}
	ctx, s.cancel = context.WithCancel(ctx)
	s.done = make(chan struct{})
	go func() {
		defer close(s.done)
		s.own.Run(ctx)
	}()
}

// stop stops the informer the source owns, if it runs, and waits for it.
func (s *source) stop() {
	if s.cancel == nil {
		return
	}
	s.cancel()
	<-s.done
}
