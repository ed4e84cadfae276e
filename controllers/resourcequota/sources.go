package resourcequota

import (
	"fmt"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"

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

// openSource takes res's informer from the shared factory and registers h
// on it. informer.For needs the Go type at compile time, so each served
// quotable kind has a case here; TestEveryQuotableKindHasASource fails when
// the registry gains a kind this switch lacks.
func openSource(f *informer.SharedInformerFactory, res *api.Resource, h informer.ResourceEventHandler) (*source, error) {
	switch res.New().(type) {
	case *corev1.Pod:
		return typedSource[*corev1.Pod](f, res, h)
	case *corev1.Service:
		return typedSource[*corev1.Service](f, res, h)
	case *corev1.Endpoints:
		return typedSource[*corev1.Endpoints](f, res, h)
	case *corev1.ConfigMap:
		return typedSource[*corev1.ConfigMap](f, res, h)
	case *corev1.Secret:
		return typedSource[*corev1.Secret](f, res, h)
	case *corev1.ServiceAccount:
		return typedSource[*corev1.ServiceAccount](f, res, h)
	case *corev1.ResourceQuota:
		return typedSource[*corev1.ResourceQuota](f, res, h)
	case *corev1.LimitRange:
		return typedSource[*corev1.LimitRange](f, res, h)
	case *coordinationv1.Lease:
		return typedSource[*coordinationv1.Lease](f, res, h)
	case *appsv1.ReplicaSet:
		return typedSource[*appsv1.ReplicaSet](f, res, h)
	case *appsv1.Deployment:
		return typedSource[*appsv1.Deployment](f, res, h)
	}
	return nil, fmt.Errorf("no informer for %s: add its Go type to openSource", res.GroupResource())
}

func typedSource[T api.Object](f *informer.SharedInformerFactory, res *api.Resource, h informer.ResourceEventHandler) (*source, error) {
	inf := informer.For[T](f)
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
		list: func(namespace string) []api.Object {
			items := lister.ByNamespace(namespace).List(nil)
			out := make([]api.Object, len(items))
			for i, item := range items {
				out[i] = item
			}
			return out
		},
	}, nil
}
