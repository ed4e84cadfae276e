package leaderelection

import (
	"context"
	"encoding/json"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/client"
)

// tryAcquireOrRenew makes one attempt, started at now, to write the lease
// with this candidate as holder, and reports whether it succeeded. Every
// write is a compare-and-swap on the resourceVersion last seen, so of two
// candidates writing at once one gets a Conflict and re-reads. When
// renewing, it never takes the lease from another holder: that holder has
// won.
func (le *LeaderElector) tryAcquireOrRenew(ctx context.Context, now time.Time, renewing bool) bool {
	// 1. The fast path of a holder: write over the lease as last seen,
	// without reading it first.
	if le.lease != nil && holderOf(le.lease) == le.cfg.Identity {
		updated, err := le.leases.Update(ctx, le.withHolder(le.lease, now))
		if err == nil {
			le.observe(updated, now)
			return true
		}
		le.log.Debug("leaderelection: renewing the lease as last seen failed; reading it", "err", err)
	}

	// 2. Read the lease, or create it if there is none.
	lease, err := le.leases.Get(ctx, le.cfg.Namespace, le.cfg.Name)
	if client.IsNotFound(err) && !renewing {
		lease = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: le.cfg.Namespace, Name: le.cfg.Name}}
		created, err := le.leases.Create(ctx, le.withHolder(lease, now))
		if err != nil {
			if client.IsAlreadyExists(err) {
				le.log.Debug("leaderelection: another candidate created the lease first")
			} else {
				le.log.Warn("leaderelection: create the lease", "err", err)
			}
			return false
		}
		le.observe(created, now)
		return true
	}
	if err != nil {
		le.log.Warn("leaderelection: read the lease", "err", err)
		return false
	}
	le.observe(lease, now)

	// 3. Another holder's lease that has not expired, as measured from
	// when WE saw it change (their clock is not ours to trust), is theirs.
	holder := holderOf(lease)
	if holder != le.cfg.Identity {
		if renewing {
			return false
		}
		if expires := le.observedAt.Add(durationOf(lease)); holder != "" && now.Before(expires) {
			le.log.Debug("leaderelection: the lease is held", "holder", holder, "expiresIn", expires.Sub(now).Round(time.Millisecond))
			return false
		}
	}

	// 4. Take it over, or renew it.
	updated, err := le.leases.Update(ctx, le.withHolder(lease, now))
	if err != nil {
		if client.IsConflict(err) {
			le.log.Debug("leaderelection: the lease changed while writing it", "err", err)
		} else {
			le.log.Warn("leaderelection: write the lease", "err", err)
		}
		return false
	}
	le.observe(updated, now)
	return true
}

// withHolder returns a copy of lease held by this candidate, renewed at
// now. A change of holder sets acquireTime and counts a transition.
func (le *LeaderElector) withHolder(lease *coordinationv1.Lease, now time.Time) *coordinationv1.Lease {
	out := lease.DeepCopy()
	spec := &out.Spec
	if holderOf(lease) != le.cfg.Identity {
		transitions := int32(0)
		if lease.ResourceVersion != "" { // an existing lease changes hands
			transitions = ptrValue(spec.LeaseTransitions) + 1
		}
		spec.LeaseTransitions = &transitions
		spec.AcquireTime = &metav1.MicroTime{Time: now}
	}
	spec.HolderIdentity = &le.cfg.Identity
	seconds := int32(le.cfg.LeaseDuration / time.Second)
	spec.LeaseDurationSeconds = &seconds
	spec.RenewTime = &metav1.MicroTime{Time: now}
	if spec.AcquireTime == nil {
		spec.AcquireTime = spec.RenewTime
	}
	if spec.LeaseTransitions == nil {
		spec.LeaseTransitions = new(int32)
	}
	return out
}

// release gives the lease up if this candidate still holds it: no holder,
// a duration of one second, the transitions kept, as client-go releases.
// The next candidate to try takes it at once.
func (le *LeaderElector) release(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), le.cfg.RenewDeadline)
	defer cancel()
	lease := le.lease
	for range 2 { // the lease as last seen, then, after a Conflict, as read
		if lease == nil || holderOf(lease) != le.cfg.Identity {
			return
		}
		now := le.cfg.Clock.Now()
		released := lease.DeepCopy()
		empty, second := "", int32(1)
		released.Spec.HolderIdentity = &empty
		released.Spec.LeaseDurationSeconds = &second
		released.Spec.AcquireTime = &metav1.MicroTime{Time: now}
		released.Spec.RenewTime = &metav1.MicroTime{Time: now}
		updated, err := le.leases.Update(ctx, released)
		if err == nil {
			le.observe(updated, now)
			le.log.Info("leaderelection: released the lease")
			return
		}
		if !client.IsConflict(err) {
			le.log.Warn("leaderelection: release the lease", "err", err)
			return
		}
		if lease, err = le.leases.Get(ctx, le.cfg.Namespace, le.cfg.Name); err != nil {
			le.log.Warn("leaderelection: release the lease: read it", "err", err)
			return
		}
	}
}

// observe records lease as last seen at now. observedAt moves only when
// the spec changed: a holder that keeps renewing keeps it moving, one that
// stopped lets it age toward expiry.
func (le *LeaderElector) observe(lease *coordinationv1.Lease, now time.Time) {
	if le.lease == nil || !sameSpec(le.lease, lease) {
		le.observedAt = now
	}
	le.lease = lease
	holder := holderOf(lease)
	le.mu.Lock()
	le.holder = holder
	le.mu.Unlock()
	if holder == le.reported {
		return
	}
	le.reported = holder
	if holder == "" {
		le.log.Info("leaderelection: the lease is free")
		return
	}
	le.log.Info("leaderelection: new holder of the lease", "holder", holder)
	if le.notify != nil {
		select { // keep only the latest for a slow OnNewLeader
		case <-le.notify:
		default:
		}
		le.notify <- holder
	}
}

func sameSpec(a, b *coordinationv1.Lease) bool {
	ja, errA := json.Marshal(a.Spec)
	jb, errB := json.Marshal(b.Spec)
	return errA == nil && errB == nil && string(ja) == string(jb)
}

func holderOf(lease *coordinationv1.Lease) string { return ptrValue(lease.Spec.HolderIdentity) }

// durationOf is the lease's duration; a lease without one has expired.
func durationOf(lease *coordinationv1.Lease) time.Duration {
	return time.Duration(ptrValue(lease.Spec.LeaseDurationSeconds)) * time.Second
}

func ptrValue[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}
