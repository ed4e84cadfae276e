package apiserver

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/minictl/minictl/api"
)

// admitCreate runs the admission a create passes after defaults and
// before validation, in kube-apiserver's order: namespace lifecycle
// (nothing is created in a namespace that does not exist or is being
// terminated), then LimitRanger (pods get default requests and limits and
// must fit the namespace's ranges).
func (s *Server) admitCreate(ctx context.Context, res *api.Resource, obj api.Object) error {
	if !res.Namespaced {
		return nil
	}
	ns, err := s.namespace(ctx, obj.GetNamespace())
	if err != nil {
		return err
	}
	if ns.Status.Phase == corev1.NamespaceTerminating || ns.DeletionTimestamp != nil {
		return apierrors.NewForbidden(res.GroupResource(), obj.GetName(),
			fmt.Errorf("unable to create new content in namespace %s because it is being terminated", ns.Name))
	}
	if pod, ok := obj.(*corev1.Pod); ok {
		return s.admitLimitRanges(pod)
	}
	return nil
}

// namespace finds a namespace in the watch cache, and in etcd when the
// cache has not seen it yet (it may have been created a moment ago).
func (s *Server) namespace(ctx context.Context, name string) (*corev1.Namespace, error) {
	rs := s.stores[api.Namespaces]
	if o, _ := s.caches[api.Namespaces].get(rs.key("", name)); o != nil {
		return o.obj.(*corev1.Namespace), nil
	}
	obj, err := rs.get(ctx, "", name)
	if err != nil {
		return nil, err
	}
	return obj.(*corev1.Namespace), nil
}
