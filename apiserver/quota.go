package apiserver

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/api/quota"
)

// quotaLocks serialise quota charges per namespace inside this server
// (striped: a namespace always takes the same one of a fixed set of
// locks, so nothing grows with the number of namespaces);
// compare-and-swap on the quota's resourceVersion serialises them across
// servers sharing an etcd.
type quotaLocks [64]sync.Mutex

func (q *quotaLocks) lock(namespace string) func() {
	h := fnv.New32a()
	_, _ = h.Write([]byte(namespace))
	l := &q[h.Sum32()%uint32(len(q))]
	l.Lock()
	return l.Unlock
}

// charge is one quota's share of an admitted object, kept so that it can
// be given back if the write of the object fails.
type charge struct {
	quota string
	usage corev1.ResourceList
}

// validateResourceQuota is Kubernetes' ResourceQuota admission, the last
// step before an object is written: for every quota in the namespace that
// covers it, the object's usage (for an update, what it adds) must fit
// under status.hard on top of status.used, and is then added to
// status.used with a compare-and-swap write of the quota. Because the
// charge is written before the object and every charge re-reads the quota
// it writes, two creates can never both take the last slot. A refused
// object gets 403 with kube-apiserver's message and nothing is written.
// release gives the charge back if the object is not written after all.
//
// It charges creates and updates of the object itself; a dry run writes
// nothing to charge for, and a status write changes no usage.
func (s *Server) validateResourceQuota(ctx context.Context, a *attributes) (release func(), err error) {
	if a.dryRun || a.op == opDelete || a.mode == modeStatus || !quota.Quotable(a.res) {
		return nil, nil
	}
	res, obj, old := a.res, a.obj, a.old
	ns := obj.GetNamespace()
	quotas, _ := s.serving().caches[api.ResourceQuotas].list(&filter{namespace: ns})
	if len(quotas) == 0 {
		return nil, nil
	}
	usage := quota.ObjectUsage(res, obj)
	if old != nil {
		usage = positive(quota.Subtract(usage, quota.ObjectUsage(res, old)))
	}
	if len(usage) == 0 {
		return nil, nil
	}
	defer s.quotaLocks.lock(ns)()
	rs := s.serving().stores[api.ResourceQuotas]
	var charges []charge
	for _, o := range quotas {
		name := o.object().GetName()
		var charged corev1.ResourceList
		_, err := rs.update(ctx, ns, name, false, func(cur api.Object) (api.Object, error) {
			q := cur.(*corev1.ResourceQuota)
			charged = nil
			ok, err := quota.Matches(q, res, obj)
			if err != nil || !ok {
				return cur, err
			}
			covered := quota.CoveredResources(s.serving().resources, q.Status.Hard)
			if err := quota.Constraints(res, obj, covered); err != nil {
				return nil, forbidden(res, obj, fmt.Sprintf("failed quota: %s: %v", q.Name, err))
			}
			want := quota.Mask(usage, quota.MatchingResources(res, covered))
			if len(want) == 0 {
				return cur, nil
			}
			if ok, msg := quota.UsageKnown(q, quota.ResourceNames(want)); !ok {
				return nil, forbidden(res, obj, msg)
			}
			if ok, msg := quota.Exceeded(q, want); !ok {
				return nil, forbidden(res, obj, msg)
			}
			q.Status.Used = quota.Add(q.Status.Used, want)
			charged = want
			return q, nil
		})
		if apierrors.IsNotFound(err) {
			continue // the quota went away meanwhile
		}
		if err != nil {
			s.refundQuota(ctx, ns, charges)
			return nil, err
		}
		if charged != nil {
			charges = append(charges, charge{quota: name, usage: charged})
		}
	}
	if len(charges) == 0 {
		return nil, nil
	}
	return func() { s.refundQuota(ctx, ns, charges) }, nil
}

// refundQuota gives back charges for an object that was not written
// after all; the resource quota controller would correct status.used at
// its next full recalculation, this just does it at once.
func (s *Server) refundQuota(ctx context.Context, namespace string, charges []charge) {
	if len(charges) == 0 {
		return
	}
	rs := s.serving().stores[api.ResourceQuotas]
	for _, c := range charges {
		_, err := rs.update(context.WithoutCancel(ctx), namespace, c.quota, false, func(cur api.Object) (api.Object, error) {
			q := cur.(*corev1.ResourceQuota)
			q.Status.Used = quota.Subtract(q.Status.Used, c.usage)
			return q, nil
		})
		if err != nil && !apierrors.IsNotFound(err) {
			s.log.Warn("quota refund failed; the resource quota controller will correct it", "quota", namespace+"/"+c.quota, "err", err)
		}
	}
}

func forbidden(res *api.Resource, obj api.Object, msg string) error {
	return apierrors.NewForbidden(res.GroupResource(), obj.GetName(), errors.New(msg))
}

// positive keeps the resources of list that are above zero: what an update
// adds to usage.
func positive(list corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{}
	for name, q := range list {
		if q.Sign() > 0 {
			out[name] = q
		}
	}
	return out
}
