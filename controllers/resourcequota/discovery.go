package resourcequota

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/client"
)

// Discovery is where the controller learns what the server serves;
// *client.RESTClient is one.
type Discovery interface {
	ServerPreferredResources(ctx context.Context) (client.ServedResources, error)
}

// DefaultDiscoveryPeriod is how often discovery is read again, as
// kube-controller-manager's quota controller does (every 30 s).
const DefaultDiscoveryPeriod = 30 * time.Second

// quotableVerbs are what a resource must serve for a quota to count it,
// as kube's quota controller asks.
var quotableVerbs = []string{"create", "list", "watch", "delete"}

// discoveryLoop reads discovery every discovery period until ctx is done.
// When the served kinds change, every quota is measured again: one that
// counts a kind just served has its source opened.
func (c *Controller) discoveryLoop(ctx context.Context) {
	for {
		timer := c.clock.NewTimer(c.discoveryPeriod)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C():
		}
		c.mu.Lock()
		changed, err := c.discoverLocked(ctx)
		c.mu.Unlock()
		if err != nil {
			if ctx.Err() == nil { // a stop cut it short: nothing failed
				c.log.Warn("discovery failed → count the kinds found before", slog.Any("err", err))
			}
			continue
		}
		if changed {
			for _, q := range c.quotaLister.List(nil) {
				c.enqueue(q)
			}
		}
	}
}

// discoverLocked reads discovery into c.resources, and reports whether
// the kinds changed. A kind already watched keeps its entry (and so its
// source); the source of a kind no longer served is stopped, unless its
// group version could not be read. When discovery fails, nothing changes.
func (c *Controller) discoverLocked(ctx context.Context) (bool, error) {
	served, err := c.discovery.ServerPreferredResources(ctx)
	failed := map[schema.GroupVersion]bool{}
	if err != nil {
		gerr, partial := client.IsGroupDiscoveryFailed(err)
		if !partial && served == nil {
			return false, fmt.Errorf("discover quotable resources: %w", err)
		}
		if partial {
			for gv := range gerr.Groups {
				failed[gv] = true
			}
		}
		c.log.Warn("discovery incomplete → count what it found", slog.Any("err", err))
	}
	resources := served.Catalogue(quotableVerbs...)
	byGVR := map[schema.GroupVersionResource]*api.Resource{}
	for _, res := range resources {
		byGVR[gvrOf(res)] = res
	}
	for old, s := range c.sources {
		res, ok := byGVR[gvrOf(old)]
		switch {
		case ok && res.Kind == old.Kind && res.Namespaced == old.Namespaced:
			byGVR[gvrOf(old)] = old
		case !ok && failed[old.GroupVersion()]:
			byGVR[gvrOf(old)] = old
			resources = append(resources, old)
		default:
			delete(c.sources, old)
			s.stop()
			c.log.Info(fmt.Sprintf("%s no longer served → stop watching them", old.GroupResource()),
				slog.String("resource", old.GroupResource().String()))
		}
	}
	for i, res := range resources {
		resources[i] = byGVR[gvrOf(res)]
	}
	changed := !c.discoveredAt.IsZero() && !sameResources(c.resources, resources)
	c.resources, c.discoveredAt = resources, c.clock.Now()
	return changed, nil
}

// stopSources stops every source's informer that the controller owns.
func (c *Controller) stopSources() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for res, s := range c.sources {
		delete(c.sources, res)
		s.stop()
	}
}

func gvrOf(res *api.Resource) schema.GroupVersionResource {
	return res.GroupVersion().WithResource(res.Plural)
}

// sameResources reports whether a and b hold the same entries.
func sameResources(a, b api.Catalogue) bool {
	if len(a) != len(b) {
		return false
	}
	in := map[*api.Resource]bool{}
	for _, r := range a {
		in[r] = true
	}
	for _, r := range b {
		if !in[r] {
			return false
		}
	}
	return true
}
