package apiserver

import (
	"context"
	"slices"
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
	caches    map[*api.Resource]*cacheView
	openapi   *openAPIDocs // built on first request
	// terminating holds the custom resources whose definition is being
	// deleted: they take no new objects.
	terminating map[*api.Resource]bool
}

// serving returns the current snapshot of what the server serves.
func (s *Server) serving() *served { return s.live.Load() }

// newServed builds a snapshot of resources, with a new store and watch
// cache view for each resource not in prev (nil: none), and prev's for the
// others. The new versions of one custom resource share one new watch
// cache.
func (s *Server) newServed(resources api.Catalogue, prev *served) *served {
	v := &served{
		resources:   resources,
		stores:      make(map[*api.Resource]*resourceStore, len(resources)),
		caches:      make(map[*api.Resource]*cacheView, len(resources)),
		openapi:     &openAPIDocs{},
		terminating: map[*api.Resource]bool{},
	}
	versions := map[*api.Resource][]*api.Resource{} // new resources by the resource as stored
	for _, res := range resources {
		if res.CreateOnly || res.ReadOnly {
			continue // answered, never stored: no store, no watch cache
		}
		if prev != nil {
			if c, ok := prev.caches[res]; ok {
				v.caches[res], v.stores[res] = c, prev.stores[res]
				v.terminating[res] = prev.terminating[res]
				continue
			}
		}
		stored := res.StoredAs()
		if res != stored {
			versions[stored] = append(versions[stored], res)
		} else if _, ok := versions[stored]; !ok {
			versions[stored] = nil
		}
	}
	for stored, others := range versions {
		// The watch cache reads etcd; each version's store writes it, and
		// tells the cache what it writes and starts updates from its state.
		conv := s.converterFor(stored)
		cache := newWatchCache(stored, s.store, watchCacheOptions{
			capacity: s.cacheSize, maxBytes: s.cacheMaxBytes, window: s.cacheWindow, buffer: s.watcherBuffer, log: s.log, metrics: s.metrics,
			historyLost: s.noteHistoryLost, versions: others, conv: conv, uncached: s.uncached[stored],
		})
		for _, res := range append(others, stored) {
			if !slices.Contains(resources, res) {
				continue // a storage version that is not served
			}
			view := cache.viewOf(res)
			v.caches[res] = view
			v.stores[res] = newResourceStore(res, s.store, cache, view.view, conv, s.metrics)
			if res == api.Services {
				v.stores[res].removed = s.releaseService
			}
			if res == api.Events {
				v.stores[res].ttl = s.eventTTL
			}
		}
	}
	return v
}

// watchCaches returns every watch cache of the snapshot, once each.
func (v *served) watchCaches() []*watchCache {
	seen := map[*watchCache]bool{}
	var out []*watchCache
	for _, res := range v.resources {
		if res.CreateOnly || res.ReadOnly {
			continue
		}
		if c := v.caches[res].watchCache; !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	return out
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
