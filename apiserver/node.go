package apiserver

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/auth/node"
)

// nodeGraph is the Node authorizer's graph (auth/node): which pods are
// bound to which node and what they reference, followed from the pods'
// watch cache. It catches up when a kubelet's request asks it something
// and the cache has moved since: it applies the cache's events after the
// revision it last saw, one pod at a time, and lists the cache only when
// those events are no longer in the cache's window (or the cache is a new
// one). A request never scans every pod: the index answers by node.
type nodeGraph struct {
	s *Server

	mu    sync.Mutex  // serialises catching up
	cache *watchCache // guarded by mu: the cache the index follows
	rv    int64       // guarded by mu: the cache's revision the index reflects
	index *node.Index
}

func newNodeGraph(s *Server) *nodeGraph {
	return &nodeGraph{s: s, index: node.NewIndex()}
}

// HasPath answers from the index once it has caught up with the cache. A
// volume is the node's when a claim one of its pods uses is bound to it
// (kube's graph: pv → pvc → pod → node); the claims' watch cache says
// which volume each claim is bound to.
func (g *nodeGraph) HasPath(nodeName string, to node.Ref) bool {
	g.catchUp()
	if g.index.HasPath(nodeName, to) {
		return true
	}
	if to.Kind != node.PersistentVolume {
		return false
	}
	for _, claim := range g.index.RefsOf(nodeName, node.PersistentVolumeClaim) {
		pvc, ok := cachedAs[*corev1.PersistentVolumeClaim](g.s, api.PersistentVolumeClaims, claim.Namespace, claim.Name)
		if ok && pvc.Spec.VolumeName != "" && pvc.Spec.VolumeName == to.Name {
			return true
		}
	}
	return false
}

func (g *nodeGraph) catchUp() {
	view := g.s.serving().caches[api.Pods]
	if view == nil {
		return // pods are not served: no kubelet has any
	}
	c := view.watchCache
	g.mu.Lock()
	defer g.mu.Unlock()
	if c == g.cache {
		if c.currentRV() == g.rv && g.rv != 0 {
			return
		}
		if events, rv, ok := c.since(g.rv); ok {
			for _, e := range events {
				g.apply(e)
			}
			g.rv = rv
			return
		}
	}
	items, rv := c.list(&filter{})
	pods := make([]*corev1.Pod, 0, len(items))
	for _, it := range items {
		if p, ok := it.view().(*corev1.Pod); ok {
			pods = append(pods, p)
		}
	}
	g.index.Reset(pods)
	g.cache, g.rv = c, rv
}

func (g *nodeGraph) apply(e *cachedEvent) {
	p, ok := e.obj.view().(*corev1.Pod)
	if !ok {
		return
	}
	if e.typ == watch.Deleted {
		g.index.DeletePod(p.Namespace, p.Name)
		return
	}
	g.index.SetPod(p)
}
