package apiserver

import (
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/minictl/minictl/api"
)

// The resource metrics API (metrics.k8s.io) as metrics-server serves it,
// from the server's own metrics server (package metricsserver): in
// Kubernetes an aggregated API behind the APIService
// v1beta1.metrics.k8s.io, here served by the API server itself.
//
// A get or list reads the nodes or pods it is about (their labels select,
// their metadata.name and metadata.namespace are the fields), and answers
// with the usage of those that have some: a list leaves the others out; a
// get of one answers 404, naming the metrics resource (a get of a node
// or pod that does not exist names the node or pod). Only Running pods
// have metrics. There is no watch (405), and nothing else.

// serveResourceMetrics answers a get or list of a ReadOnly resource.
func (s *Server) serveResourceMetrics(w http.ResponseWriter, r *http.Request, ri *requestInfo) error {
	if ri.subresource != "" || (ri.verb != "get" && ri.verb != "list") {
		if ri.verb == "watch" {
			return apierrors.NewMethodNotSupported(ri.res.GroupResource(), "watch")
		}
		return newMethodNotAllowed(r.Method, r.URL.Path)
	}
	out, err := negotiateOutput(r, ri.verb, ri.res)
	if err != nil {
		return err
	}
	if ri.verb == "get" {
		obj, err := s.getResourceMetrics(r.Context(), ri)
		if err != nil {
			return err
		}
		return out.writeObjectAs(w, ri.res, obj, nil)
	}
	o, err := s.parseListOptions(r, ri)
	if err != nil {
		return err
	}
	objs := s.listResourceMetrics(ri, o.filter.label)
	var items []api.Object
	var raws [][]byte
	for _, obj := range objs {
		if o.filter.field != nil && !o.filter.field.Matches(ri.res.Fields(obj)) {
			continue
		}
		raw, err := json.Marshal(obj)
		if err != nil {
			return apierrors.NewInternalError(err)
		}
		items, raws = append(items, obj), append(raws, raw)
	}
	return out.writeListAs(w, ri.res, metav1.ListMeta{}, items, raws, nil)
}

// getResourceMetrics is the metrics of the one node or pod ri names.
func (s *Server) getResourceMetrics(ctx context.Context, ri *requestInfo) (api.Object, error) {
	live := s.serving()
	var obj api.Object
	var ok bool
	switch {
	case live.stores[api.Nodes] == nil || live.stores[api.Pods] == nil:
		// A catalogue without nodes or pods: nothing has metrics.
	case ri.res == api.NodeMetrics:
		node, err := live.stores[api.Nodes].get(ctx, "", ri.name)
		if err != nil {
			return nil, err
		}
		obj, ok = s.resourceMetrics.NodeMetrics(node.(*corev1.Node))
	case ri.res == api.PodMetrics:
		pod, err := live.stores[api.Pods].get(ctx, ri.namespace, ri.name)
		if err != nil {
			return nil, err
		}
		obj, ok = s.resourceMetrics.PodMetrics(pod.(*corev1.Pod))
	}
	if !ok {
		name := ri.name
		if ri.namespace != "" {
			name = ri.namespace + "/" + ri.name
		}
		return nil, apierrors.NewNotFound(ri.res.GroupResource(), name)
	}
	return obj, nil
}

// listResourceMetrics is the metrics of the nodes or pods (in ri's
// namespace, if any) that sel selects and that have some, ordered by
// namespace and name.
func (s *Server) listResourceMetrics(ri *requestInfo, sel labels.Selector) []api.Object {
	from := api.Nodes
	if ri.res == api.PodMetrics {
		from = api.Pods
	}
	cache := s.serving().caches[from]
	if cache == nil {
		return nil // a catalogue without nodes or pods
	}
	items, _ := cache.list(&filter{namespace: ri.namespace, label: sel})
	var out []api.Object
	for _, it := range items {
		var obj api.Object
		var ok bool
		switch o := it.view().(type) {
		case *corev1.Node:
			obj, ok = s.resourceMetrics.NodeMetrics(o)
		case *corev1.Pod:
			obj, ok = s.resourceMetrics.PodMetrics(o)
		}
		if ok {
			out = append(out, obj)
		}
	}
	slices.SortFunc(out, func(a, b api.Object) int {
		return cmp.Or(cmp.Compare(a.GetNamespace(), b.GetNamespace()), cmp.Compare(a.GetName(), b.GetName()))
	})
	return out
}

// nodesToScrape lists the nodes in the watch cache, for the metrics
// server.
func (s *Server) nodesToScrape(context.Context) ([]*corev1.Node, error) {
	cache := s.serving().caches[api.Nodes]
	if cache == nil {
		return nil, nil // a catalogue without nodes
	}
	items, _ := cache.list(&filter{label: labels.Everything()})
	nodes := make([]*corev1.Node, 0, len(items))
	for _, it := range items {
		nodes = append(nodes, it.object().(*corev1.Node))
	}
	return nodes, nil
}
