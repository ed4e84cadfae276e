package apiserver

import (
	"context"
	"sync"

	"github.com/minictl/minictl/api"
)

// served is one consistent view of what the server serves: the catalogue
// (the built-ins first, then the resources of every established
// CustomResourceDefinition, crd.go), each resource's store and watch
// cache, and the OpenAPI documents built from them. Requests, discovery,
// OpenAPI and flow control each read one snapshot (Server.serving) and
// never see half of a change; a definition that comes or goes swaps in a
// new snapshot. A snapshot is never modified once it is published.
type served struct {
	resources api.Catalogue
	stores    map[*api.Resource]*resourceStore
	caches    map[*api.Resource]*watchCache
	openapi   *openAPIDocs // built on first request
	// terminating holds the custom resources whose definition is being
	// deleted: they take no new objects.
	terminating map[*api.Resource]bool
}

// serving returns the current snapshot of what the server serves.
func (s *Server) serving() *served { return s.live.Load() }

// newServed builds a snapshot of resources, with a new store and watch
// cache for each resource not in prev (nil: none), and prev's for the
// others.
func (s *Server) newServed(resources api.Catalogue, prev *served) *served {
	v := &served{
		resources:   resources,
		stores:      make(map[*api.Resource]*resourceStore, len(resources)),
		caches:      make(map[*api.Resource]*watchCache, len(resources)),
		openapi:     &openAPIDocs{},
		terminating: map[*api.Resource]bool{},
	}
	for _, res := range resources {
		if prev != nil {
			if c, ok := prev.caches[res]; ok {
				v.caches[res], v.stores[res] = c, prev.stores[res]
				v.terminating[res] = prev.terminating[res]
				continue
			}
		}
		// The watch cache reads etcd; the resource store writes it, and
		// tells the cache what it writes and starts updates from its state.
		cache := newWatchCache(res, s.store, watchCacheOptions{
			capacity: s.cacheSize, buffer: s.watcherBuffer, log: s.log, metrics: s.metrics,
			historyLost: s.noteHistoryLost,
		})
		v.caches[res] = cache
		v.stores[res] = newResourceStore(res, s.store, cache, s.metrics)
	}
	return v
}

// runningCaches runs watch caches, each until its own context or the
// server's ends: the built-ins' for the server's life, a custom resource's
// while it is served.
type runningCaches struct {
	wg sync.WaitGroup
}

// start runs c until ctx ends; the returned stop ends it and waits, after
// which every watcher of c has ended.
func (rc *runningCaches) start(ctx context.Context, c *watchCache) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	rc.wg.Add(1)
	go func() {
		defer rc.wg.Done()
		defer close(done)
		c.run(ctx)
	}()
	return func() {
		cancel()
		<-done
	}
}

// wait waits for every cache started to stop.
func (rc *runningCaches) wait() { rc.wg.Wait() }
