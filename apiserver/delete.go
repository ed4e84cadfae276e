package apiserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/minictl/minictl/api"
)

// parseDeleteOptions reads DeleteOptions from the body (JSON or YAML) and
// the query, as kubectl and curl send them.
func (s *Server) parseDeleteOptions(r *http.Request) (*metav1.DeleteOptions, error) {
	opts := &metav1.DeleteOptions{}
	body, err := readBody(r, s.maxBody)
	if err != nil {
		return nil, err
	}
	if len(body) > 0 {
		data, err := s.toJSON(mediaType(r), body)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(data, opts); err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("the body is not valid DeleteOptions: %v", err))
		}
	}
	q := r.URL.Query()
	if v := q.Get("gracePeriodSeconds"); v != "" {
		g, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("gracePeriodSeconds must be an integer, not %q", v))
		}
		opts.GracePeriodSeconds = &g
	}
	if v := q.Get("propagationPolicy"); v != "" {
		p := metav1.DeletionPropagation(v)
		opts.PropagationPolicy = &p
	}
	if v := q.Get("orphanDependents"); v != "" {
		b := isTrue(v)
		opts.OrphanDependents = &b //nolint:staticcheck // still sent by older clients
	}
	if len(q["dryRun"]) > 0 {
		opts.DryRun = q["dryRun"]
	}
	if err := checkDryRun("DeleteOptions", opts.DryRun); err != nil {
		return nil, err
	}
	if p := opts.PropagationPolicy; p != nil {
		switch *p {
		case metav1.DeletePropagationOrphan, metav1.DeletePropagationBackground, metav1.DeletePropagationForeground:
		default:
			return nil, apierrors.NewInvalid(schemaGroupKindOf("meta.k8s.io", "DeleteOptions"), "", field.ErrorList{
				field.NotSupported(field.NewPath("propagationPolicy"), string(*p), []string{"Foreground", "Background", "Orphan"}),
			})
		}
		if opts.OrphanDependents != nil { //nolint:staticcheck
			return nil, apierrors.NewInvalid(schemaGroupKindOf("meta.k8s.io", "DeleteOptions"), "", field.ErrorList{
				field.Invalid(field.NewPath("propagationPolicy"), string(*p), "orphanDependents and propagationPolicy cannot both be set"),
			})
		}
	}
	return opts, nil
}

func (s *Server) serveDelete(w http.ResponseWriter, r *http.Request, ri *requestInfo) error {
	opts, err := s.parseDeleteOptions(r)
	if err != nil {
		return err
	}
	warnOrphans(r.Context(), ri.res, opts)
	obj, removed, err := s.deleteObject(r.Context(), ri.store, ri.namespace, ri.name, opts)
	if err != nil {
		return err
	}
	if removed && !returnsDeletedObject(ri.res) {
		writeJSON(w, http.StatusOK, successStatus(&metav1.StatusDetails{
			Name: ri.name, Group: ri.res.Group, Kind: ri.res.Plural, UID: obj.GetUID(),
		}))
		return nil
	}
	code := http.StatusOK
	//nolint:staticcheck // kube-apiserver answers 202 exactly in this case
	if !removed && opts.OrphanDependents != nil && !*opts.OrphanDependents {
		code = http.StatusAccepted
	}
	writeWritten(w, r, ri.res, code, obj)
	return nil
}

// warnOrphans warns a delete of a kind with an OrphanWarning that names
// no propagation policy, as kube-apiserver warns of a Job's.
func warnOrphans(ctx context.Context, res *api.Resource, opts *metav1.DeleteOptions) {
	if res.OrphanWarning != "" && opts.PropagationPolicy == nil {
		addWarning(ctx, res.OrphanWarning)
	}
}

// returnsDeletedObject: kube-apiserver answers a delete of these kinds
// with the object, and of the others with a Status.
func returnsDeletedObject(res *api.Resource) bool {
	return res == api.Pods || res == api.Namespaces
}

// deleteObject deletes one object as Kubernetes does. What the deletion
// waits for is written on the object: deletionTimestamp (plus a grace
// period for a running pod), the finalizers its propagation policy asks
// the garbage collector to honour (orphan, foregroundDeletion), and the
// Terminating phase of a namespace. With nothing to wait for, the object is
// removed at once. It returns the object's last state and whether it is
// gone.
func (s *Server) deleteObject(ctx context.Context, rs *resourceStore, namespace, name string, opts *metav1.DeleteOptions) (api.Object, bool, error) {
	dry := len(opts.DryRun) > 0
	for {
		var removeNow bool
		obj, err := rs.update(ctx, namespace, name, dry, func(cur api.Object) (api.Object, error) {
			removeNow = false // the update may call this again, on a newer state
			if err := checkPreconditions(rs.res, cur, opts.Preconditions); err != nil {
				return nil, err
			}
			if err := s.admitDelete(ctx, rs.res, cur, opts); err != nil {
				return nil, err
			}
			fins, policyChanged := policyFinalizers(rs.res, cur, opts)
			if cur.GetDeletionTimestamp() == nil {
				for _, f := range rs.res.DeleteFinalizers {
					if !slices.Contains(fins, f) {
						fins = append(slices.Clip(fins), f)
					}
				}
			}
			cur.SetFinalizers(fins)
			grace := gracePeriod(cur, opts)
			if removedAtOnce(cur, fins, grace) {
				removeNow = true
				return cur, nil
			}
			switch old := cur.GetDeletionGracePeriodSeconds(); {
			case cur.GetDeletionTimestamp() == nil:
				markDeleted(cur, grace)
			case old != nil && grace < *old:
				// A shorter grace period overrides a longer one; never the
				// other way round.
				markDeleted(cur, grace)
				if grace == 0 && len(cur.GetFinalizers()) == 0 {
					removeNow = true
				}
			case !policyChanged:
				return cur, nil // already being deleted; nothing changes
			}
			return cur, nil
		})
		if err != nil {
			return nil, false, err
		}
		if !removeNow || dry {
			return obj, removeNow, nil
		}
		_, err = rs.remove(ctx, obj)
		if apierrors.IsConflict(err) {
			continue // it changed between our read and the delete: decide again
		}
		if err != nil {
			return nil, false, err
		}
		return obj, true, nil
	}
}

// admitDelete passes the delete of old through both halves of the
// admission chain, as kube-apiserver's delete validation does once it has
// read the object: there is no new object, and nothing is reserved for a
// delete.
func (s *Server) admitDelete(ctx context.Context, res *api.Resource, old api.Object, opts *metav1.DeleteOptions) error {
	a := &attributes{op: opDelete, res: res, namespace: old.GetNamespace(), name: old.GetName(), old: old, dryRun: len(opts.DryRun) > 0}
	if err := s.admit(ctx, a); err != nil {
		return err
	}
	release, err := s.validateAdmission(ctx, a)
	if err != nil {
		return err
	}
	release()
	return nil
}

func checkPreconditions(res *api.Resource, cur api.Object, p *metav1.Preconditions) error {
	if p == nil {
		return nil
	}
	if p.UID != nil && *p.UID != cur.GetUID() {
		return apierrors.NewConflict(res.GroupResource(), cur.GetName(),
			fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", *p.UID, cur.GetUID()))
	}
	if p.ResourceVersion != nil && *p.ResourceVersion != cur.GetResourceVersion() {
		return apierrors.NewConflict(res.GroupResource(), cur.GetName(),
			fmt.Errorf("Precondition failed: ResourceVersion in precondition: %v, ResourceVersion in object meta: %v", *p.ResourceVersion, cur.GetResourceVersion()))
	}
	return nil
}

// policyFinalizers are obj's finalizers with the deletion's propagation
// policy recorded for the garbage collector the way Kubernetes does:
// Orphan as the "orphan" finalizer, Foreground as "foregroundDeletion",
// Background as neither. With no policy, a kind that OrphansByDefault
// orphans, unless obj is already deleted in the foreground. changed
// reports whether they differ from obj's.
func policyFinalizers(res *api.Resource, obj api.Object, opts *metav1.DeleteOptions) (fins []string, changed bool) {
	var policy metav1.DeletionPropagation
	switch {
	case opts.PropagationPolicy != nil:
		policy = *opts.PropagationPolicy
	case opts.OrphanDependents != nil: //nolint:staticcheck
		policy = metav1.DeletePropagationBackground
		if *opts.OrphanDependents { //nolint:staticcheck
			policy = metav1.DeletePropagationOrphan
		}
	case res.OrphansByDefault && !slices.Contains(obj.GetFinalizers(), metav1.FinalizerDeleteDependents):
		policy = metav1.DeletePropagationOrphan
	default:
		return obj.GetFinalizers(), false
	}
	before := obj.GetFinalizers()
	fins = slices.DeleteFunc(slices.Clone(before), func(f string) bool {
		return f == metav1.FinalizerOrphanDependents || f == metav1.FinalizerDeleteDependents
	})
	switch policy {
	case metav1.DeletePropagationOrphan:
		fins = append(fins, metav1.FinalizerOrphanDependents)
	case metav1.DeletePropagationForeground:
		fins = append(fins, metav1.FinalizerDeleteDependents)
	}
	if slices.Equal(before, fins) {
		return before, false
	}
	if len(fins) == 0 {
		fins = nil
	}
	return fins, true
}

// removedAtOnce is the one rule of what a delete waits for: an object whose
// finalizers (fins, the policy's included) are none, that is not a
// namespace with finalizers of its own, and whose grace period is 0 is
// removed without being marked first.
func removedAtOnce(obj api.Object, fins []string, grace int64) bool {
	return len(fins) == 0 && grace == 0 && !hasNamespaceFinalizers(obj)
}

// gracePeriod is how long a deletion waits before the object may go. Only
// pods are deleted gracefully, and only while they may be running: an
// unscheduled or finished pod is removed at once, as in Kubernetes.
func gracePeriod(obj api.Object, opts *metav1.DeleteOptions) int64 {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return 0
	}
	if pod.Spec.NodeName == "" || api.IsPodTerminal(pod) {
		return 0
	}
	var g int64 = corev1.DefaultTerminationGracePeriodSeconds
	switch {
	case opts.GracePeriodSeconds != nil:
		g = *opts.GracePeriodSeconds
	case pod.DeletionGracePeriodSeconds != nil:
		g = *pod.DeletionGracePeriodSeconds
	case pod.Spec.TerminationGracePeriodSeconds != nil:
		g = *pod.Spec.TerminationGracePeriodSeconds
	}
	if g < 0 {
		g = 1
	}
	return g
}

func hasNamespaceFinalizers(obj api.Object) bool {
	ns, ok := obj.(*corev1.Namespace)
	return ok && len(ns.Spec.Finalizers) > 0
}

// markDeleted sets deletionTimestamp (now plus the grace period) and, for
// kinds with a generation, moves it on, so controllers see the change.
func markDeleted(obj api.Object, grace int64) {
	first := obj.GetDeletionTimestamp() == nil
	ts := metav1.NewTime(time.Now().Add(time.Duration(grace) * time.Second).Truncate(time.Second))
	if !first && obj.GetDeletionTimestamp().Before(&ts) {
		ts = *obj.GetDeletionTimestamp()
	}
	obj.SetDeletionTimestamp(&ts)
	obj.SetDeletionGracePeriodSeconds(&grace)
	if first && obj.GetGeneration() > 0 {
		obj.SetGeneration(obj.GetGeneration() + 1)
	}
	if ns, ok := obj.(*corev1.Namespace); ok {
		ns.Status.Phase = corev1.NamespaceTerminating
	}
}

// deleteCollectionWorkers is how many objects a deletecollection deletes
// at once, like kube-apiserver's --delete-collection-workers: etcd commits
// the concurrent writes together.
const deleteCollectionWorkers = 16

// serveDeleteCollection deletes every object the selectors match, each as a
// single delete would, and answers with the list of what it deleted. It
// stops at the first failure (objects being deleted by other workers at
// that moment may still go) and returns it.
func (s *Server) serveDeleteCollection(w http.ResponseWriter, r *http.Request, ri *requestInfo) error {
	opts, err := s.parseDeleteOptions(r)
	if err != nil {
		return err
	}
	warnOrphans(r.Context(), ri.res, opts)
	lo, err := s.parseListOptions(r, ri)
	if err != nil {
		return err
	}
	items, rv, err := s.consistentList(r.Context(), ri, &lo.filter)
	if err != nil {
		return err
	}
	rs := ri.store
	raws := make([][]byte, len(items))
	errs := make([]error, len(items))
	var next atomic.Int64
	var failed atomic.Bool
	var wg sync.WaitGroup
	for range min(deleteCollectionWorkers, len(items)) {
		wg.Go(func() {
			for !failed.Load() {
				i := int(next.Add(1)) - 1
				if i >= len(items) {
					return
				}
				if raws[i], errs[i] = s.deleteListed(r.Context(), rs, items[i], opts); errs[i] != nil {
					failed.Store(true)
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	deleted := slices.DeleteFunc(raws, func(raw []byte) bool { return raw == nil })
	return writeList(w, ri.res, metav1.ListMeta{ResourceVersion: strconv.FormatInt(rv, 10)}, deleted)
}

// deleteListed deletes one object a deletecollection listed, and returns
// its last state as JSON, or nil if it was gone already. An object that
// would be removed at once (no finalizers, no grace period, none to add)
// is removed on the strength of the list: the delete is conditional on
// the listed revision, and only if the object changed since is it decided
// again from its current state, as a single delete decides.
func (s *Server) deleteListed(ctx context.Context, rs *resourceStore, it *cachedObject, opts *metav1.DeleteOptions) ([]byte, error) {
	listed := it.object()
	if removableAsListed(rs.res, listed, opts) {
		if err := s.admitDelete(ctx, rs.res, listed, opts); err != nil {
			return nil, err
		}
		_, err := rs.remove(ctx, listed)
		switch {
		case err == nil:
			return it.json()
		case apierrors.IsNotFound(err):
			return nil, nil
		case !apierrors.IsConflict(err):
			return nil, err
		}
	}
	obj, _, err := s.deleteObject(ctx, rs, listed.GetNamespace(), listed.GetName(), opts)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return raw, nil
}

// removableAsListed reports whether deleteObject would remove obj at once
// without changing it first: no preconditions to check, no dry run, not a
// namespace, finalizers the propagation policy leaves as they are, and
// removedAtOnce.
func removableAsListed(res *api.Resource, obj api.Object, opts *metav1.DeleteOptions) bool {
	if opts.Preconditions != nil || len(opts.DryRun) > 0 || res == api.Namespaces {
		return false
	}
	fins, changed := policyFinalizers(res, obj, opts)
	return !changed && removedAtOnce(obj, fins, gracePeriod(obj, opts))
}
