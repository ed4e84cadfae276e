package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/api"
)

// The eviction subresource: POST pods/{name}/eviction with a policy/v1 (or
// policy/v1beta1) Eviction deletes the pod as its deleteOptions say, unless
// that would take more of its pods down than the PodDisruptionBudget
// selecting it allows, as kube-apiserver's eviction REST does:
//
//   - A pod that is terminal, still Pending or already being deleted has
//     nothing left to disrupt: it is deleted without asking a budget.
//   - No budget selects the pod: it is deleted. More than one: 500, which
//     the subresource does not support.
//   - A not-ready pod whose budget is healthy enough (or whose budget's
//     unhealthyPodEvictionPolicy is AlwaysAllow) takes nothing from the
//     budget: it is deleted if it is still the pod that was judged (its
//     resourceVersion), 429 otherwise.
//   - Otherwise the budget must have seen its spec (observedGeneration) and
//     allow a disruption: 429 TooManyRequests naming it if not. The
//     allowance is taken (disruptionsAllowed - 1, the pod in
//     disruptedPods, so that the disruption controller does not count it
//     healthy until it is gone) by a compare-and-swap on the budget's
//     status, then the pod is deleted.
//
// A deleted pod first gets the DisruptionTarget condition saying the
// eviction API evicts it. With dryRun nothing is written.

// maxDisruptedPods bounds status.disruptedPods: beyond it, evictions the
// disruption controller has not yet seen through are too many (kube's
// MaxDisruptedPodSize).
const maxDisruptedPods = 2000

// evictionCauseType is the type of the cause a refusal names its budget in.
const evictionCauseType = metav1.CauseType(policyv1.DisruptionBudgetCause)

func (s *Server) serveEviction(w http.ResponseWriter, r *http.Request, ri *requestInfo) error {
	if r.Method != http.MethodPost {
		return newMethodNotAllowed(r.Method, r.URL.Path) // an eviction is only ever created
	}
	ev, err := s.readEviction(r, ri)
	if err != nil {
		return err
	}
	opts := ev.DeleteOptions
	if opts == nil {
		opts = &metav1.DeleteOptions{}
	}
	if q := r.URL.Query()["dryRun"]; len(q) > 0 {
		if len(opts.DryRun) > 0 && !slices.Equal(opts.DryRun, q) {
			return apierrors.NewBadRequest(fmt.Sprintf("Non-matching dry-run options in request and content: %v and %v", q, opts.DryRun))
		}
		opts.DryRun = q
	}
	if err := checkDryRun("DeleteOptions", opts.DryRun); err != nil {
		return err
	}
	if err := s.admitNodeEviction(r.Context(), ri.namespace, ri.name); err != nil {
		return err
	}
	if err := s.evict(r.Context(), ri.namespace, ri.name, opts); err != nil {
		return err
	}
	st := successStatus(nil)
	st.Code = http.StatusCreated
	writeJSON(w, http.StatusCreated, st)
	return nil
}

// readEviction decodes the body: an Eviction of policy/v1 or v1beta1 (the
// same fields) naming the pod on the URL.
func (s *Server) readEviction(r *http.Request, ri *requestInfo) (*policyv1.Eviction, error) {
	var ev policyv1.Eviction
	if err := s.readBodyInto(r, "Eviction", &ev); err != nil {
		return nil, err
	}
	if ev.Kind != "Eviction" || (ev.APIVersion != "policy/v1" && ev.APIVersion != "policy/v1beta1") {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the body is a %q %q, not a policy/v1 or policy/v1beta1 Eviction", ev.APIVersion, ev.Kind))
	}
	if ev.Name != ri.name {
		return nil, apierrors.NewBadRequest("name in URL does not match name in Eviction object")
	}
	if ev.Namespace != "" && ev.Namespace != ri.namespace {
		return nil, apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
	}
	return &ev, nil
}

// evict is the eviction of one pod, once the request is understood.
func (s *Server) evict(ctx context.Context, namespace, name string, opts *metav1.DeleteOptions) error {
	pod, done, err := s.deleteIfUndisruptable(ctx, namespace, name, opts)
	if done || err != nil {
		return err
	}
	pdbs, err := s.budgetsFor(ctx, pod)
	if err != nil {
		return err
	}
	switch len(pdbs) {
	case 0:
		return s.deleteEvicted(ctx, pod, opts)
	case 1:
	default:
		return multipleBudgets()
	}
	pdb := pdbs[0]
	if !podReady(pod) {
		healthyEnough := pdb.Status.CurrentHealthy >= pdb.Status.DesiredHealthy && pdb.Status.DesiredHealthy > 0
		alwaysAllow := pdb.Spec.UnhealthyPodEvictionPolicy != nil && *pdb.Spec.UnhealthyPodEvictionPolicy == policyv1.AlwaysAllow
		if healthyEnough || alwaysAllow {
			given := resourceVersionGiven(opts)
			if !given {
				opts = requireResourceVersion(opts, pod.ResourceVersion) // still the unready pod judged here
			}
			err := s.deleteEvicted(ctx, pod, opts)
			if apierrors.IsConflict(err) && !given {
				return stillProcessing(pdb.Name)
			}
			return err
		}
	}
	if err := s.takeDisruption(ctx, pdb, pod.Name, len(opts.DryRun) > 0); err != nil {
		return err
	}
	return s.deleteEvicted(ctx, pod, opts)
}

// evictionRetries bounds how often a pod that changed under an eviction
// is read and judged again (kube's EvictionsRetry).
const evictionRetries = 20

// deleteIfUndisruptable reads the pod and, if it is not what a budget
// protects (podDisrupted), deletes it: done. A pod that changed between
// the read and the delete is judged again, unless the client named the
// resourceVersion it meant.
func (s *Server) deleteIfUndisruptable(ctx context.Context, namespace, name string, opts *metav1.DeleteOptions) (pod *corev1.Pod, done bool, err error) {
	pods := s.serving().stores[api.Pods]
	for range evictionRetries {
		obj, err := pods.get(ctx, namespace, name)
		if err != nil {
			return nil, false, err
		}
		pod = obj.(*corev1.Pod)
		if !podDisrupted(pod) {
			return pod, false, nil
		}
		o := opts
		if podMayStillBecomeReady(pod) && !resourceVersionGiven(opts) {
			o = requireResourceVersion(opts, pod.ResourceVersion) // not racing its becoming ready
		}
		err = s.deleteEvicted(ctx, pod, o)
		if !apierrors.IsConflict(err) || resourceVersionGiven(opts) {
			return pod, true, err
		}
	}
	return nil, false, apierrors.NewTimeoutError(fmt.Sprintf("couldn't evict pod %q due to conflicts", name), 10)
}

func resourceVersionGiven(opts *metav1.DeleteOptions) bool {
	return opts.Preconditions != nil && opts.Preconditions.ResourceVersion != nil
}

// budgetsFor lists the budgets of pod's namespace that select it, as they
// are now: the cache is read once it has caught up with etcd.
func (s *Server) budgetsFor(ctx context.Context, pod *corev1.Pod) ([]*policyv1.PodDisruptionBudget, error) {
	v := s.serving()
	rev, err := s.store.Revision(ctx)
	if err != nil {
		return nil, v.stores[api.PodDisruptionBudgets].storageError(err, "")
	}
	cache := v.caches[api.PodDisruptionBudgets]
	if err := cache.waitFresh(ctx, rev); err != nil {
		return nil, err
	}
	items, _ := cache.list(&filter{namespace: pod.Namespace})
	var out []*policyv1.PodDisruptionBudget
	for _, it := range items {
		if pdb := it.object().(*policyv1.PodDisruptionBudget); api.PodDisruptionBudgetMatches(pdb, pod.Labels) {
			out = append(out, pdb)
		}
	}
	return out, nil
}

// takeDisruption takes one disruption from pdb for podName: a
// compare-and-swap of its status, decided again on the budget's current
// state each time the swap loses. With dry, nothing is written.
func (s *Server) takeDisruption(ctx context.Context, pdb *policyv1.PodDisruptionBudget, podName string, dry bool) error {
	rs := s.serving().stores[api.PodDisruptionBudgets]
	_, err := s.updateObject(ctx, rs, pdb.Namespace, pdb.Name, updateOptions{mode: modeStatus, dry: dry, subresource: "status"}, func(cur api.Object) (api.Object, error) {
		pdb := cur.(*policyv1.PodDisruptionBudget)
		st := &pdb.Status
		switch {
		case st.ObservedGeneration < pdb.Generation:
			return nil, stillProcessing(pdb.Name)
		case st.DisruptionsAllowed < 0:
			return nil, apierrors.NewForbidden(policyv1.Resource("poddisruptionbudget"), pdb.Name, errors.New("pdb disruptions allowed is negative"))
		case len(st.DisruptedPods) > maxDisruptedPods:
			return nil, apierrors.NewForbidden(policyv1.Resource("poddisruptionbudget"), pdb.Name, errors.New("DisruptedPods map too big - too many evictions not confirmed by PDB controller"))
		case st.DisruptionsAllowed == 0:
			return nil, budgetExhausted(pdb)
		}
		st.DisruptionsAllowed--
		if st.DisruptionsAllowed == 0 {
			api.SetDisruptionAllowedCondition(pdb)
		}
		if st.DisruptedPods == nil {
			st.DisruptedPods = map[string]metav1.Time{}
		}
		st.DisruptedPods[podName] = metav1.NewTime(time.Now())
		return pdb, nil
	})
	return err
}

// deleteEvicted marks pod a DisruptionTarget of the eviction API and
// deletes it as opts say. The condition is written only if pod is still
// what opts' preconditions name; the delete then names the pod as the
// condition left it.
func (s *Server) deleteEvicted(ctx context.Context, pod *corev1.Pod, opts *metav1.DeleteOptions) error {
	pods := s.serving().stores[api.Pods]
	if len(opts.DryRun) == 0 && pod.DeletionTimestamp == nil {
		marked, err := s.updateObject(ctx, pods, pod.Namespace, pod.Name, updateOptions{mode: modeInternal}, func(cur api.Object) (api.Object, error) {
			if err := checkPreconditions(api.Pods, cur, opts.Preconditions); err != nil {
				return nil, err
			}
			setPodCondition(cur.(*corev1.Pod), corev1.PodCondition{
				Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
				Reason: "EvictionByEvictionAPI", Message: "Eviction API: evicting",
				LastTransitionTime: metav1.NewTime(time.Now().Truncate(time.Second)),
			})
			return cur, nil
		})
		if err != nil {
			return err
		}
		if opts.Preconditions != nil && opts.Preconditions.ResourceVersion != nil {
			opts = requireResourceVersion(opts, marked.GetResourceVersion()) // we moved it on
		}
	}
	_, _, err := s.deleteObject(ctx, pods, pod.Namespace, pod.Name, opts)
	return err
}

// podDisrupted: a pod that is terminal, not yet running or already being
// deleted is not what a budget protects (kube's canIgnorePDB).
func podDisrupted(pod *corev1.Pod) bool {
	switch pod.Status.Phase {
	case corev1.PodSucceeded, corev1.PodFailed, corev1.PodPending:
		return true
	}
	return pod.DeletionTimestamp != nil
}

// podMayStillBecomeReady: a pod that is neither terminal nor being deleted
// (kube's shouldEnforceResourceVersion).
func podMayStillBecomeReady(pod *corev1.Pod) bool {
	p := pod.Status.Phase
	return p != corev1.PodSucceeded && p != corev1.PodFailed && pod.DeletionTimestamp == nil
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// requireResourceVersion is a copy of opts whose preconditions name rv.
func requireResourceVersion(opts *metav1.DeleteOptions, rv string) *metav1.DeleteOptions {
	cp := opts.DeepCopy()
	if cp.Preconditions == nil {
		cp.Preconditions = &metav1.Preconditions{}
	}
	cp.Preconditions.ResourceVersion = &rv
	return cp
}

// budgetExhausted is the refusal of an eviction pdb allows no more of.
func budgetExhausted(pdb *policyv1.PodDisruptionBudget) error {
	err := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{
		Type:    evictionCauseType,
		Message: fmt.Sprintf("The disruption budget %s needs %d healthy pods and has %d currently", pdb.Name, pdb.Status.DesiredHealthy, pdb.Status.CurrentHealthy),
	})
	return err
}

// stillProcessing is the refusal of an eviction whose budget the
// disruption controller has not yet brought up to date.
func stillProcessing(name string) error {
	err := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 10)
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{
		Type:    evictionCauseType,
		Message: fmt.Sprintf("The disruption budget %s is still being processed by the server.", name),
	})
	return err
}

// multipleBudgets is kube-apiserver's answer to evicting a pod that more
// than one budget selects: a failure Status with code 500 and no reason.
func multipleBudgets() error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusInternalServerError,
		Message: "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
	}}
}
