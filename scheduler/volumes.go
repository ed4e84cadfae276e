package scheduler

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/clock"
	"github.com/minictl/minictl/informer"
	"github.com/minictl/minictl/scheduler/placement"
)

// What the VolumeBinding plugin says, in kube-scheduler's words.
const (
	reasonVolumeNodeConflict = "node(s) had volume node affinity conflict"
	reasonVolumeBindConflict = "node(s) didn't find available persistent volumes to bind"
	reasonVolumeNotExist     = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
	msgUnboundImmediate      = "pod has unbound immediate PersistentVolumeClaims"
	volumeBindingPlugin      = "VolumeBinding"
	// noProvisioner is the provisioner of a class whose volumes are only
	// ever made by hand: the scheduler never asks it to provision.
	noProvisioner = "kubernetes.io/no-provisioner"
)

// DefaultBindTimeout is how long a pod waits, before it is bound, for its
// claims to be bound (kube-scheduler's VolumeBindingArgs.bindTimeoutSeconds).
const DefaultBindTimeout = 600 * time.Second

// bindPollInterval is how often a pod waiting for its claims looks at them
// again. The look is at the informers' caches, so it costs no API call.
const bindPollInterval = 100 * time.Millisecond

// podClaims is what the VolumeBinding pre-filter learns of a pod's claims:
// those already bound, and the unbound ones of a WaitForFirstConsumer
// class, which wait for this scheduler to choose their node.
type podClaims struct {
	bound   []*corev1.PersistentVolumeClaim
	delayed []*corev1.PersistentVolumeClaim
}

// volumePlan is what a pod's volumes need on one node before the pod can
// be bound there: Available volumes to bind to its delayed claims, and the
// delayed claims to provision on the node.
type volumePlan struct {
	node       string
	bindings   []volumeBinding
	provisions []*corev1.PersistentVolumeClaim
}

type volumeBinding struct {
	pv  *corev1.PersistentVolume
	pvc *corev1.PersistentVolumeClaim
}

func (p *volumePlan) empty() bool { return p == nil || len(p.bindings)+len(p.provisions) == 0 }

// claimName is the claim a volume of pod uses, if any: a
// persistentVolumeClaim volume names it, a generic ephemeral volume's is
// named after the pod and the volume.
func claimName(pod *corev1.Pod, v *corev1.Volume) (name string, ephemeral, ok bool) {
	switch {
	case v.PersistentVolumeClaim != nil:
		return v.PersistentVolumeClaim.ClaimName, false, true
	case v.Ephemeral != nil:
		return pod.Name + "-" + v.Name, true, true
	}
	return "", false, false
}

// hasClaims reports whether any volume of pod uses a claim. A pod without
// claims skips the volume plugins altogether.
func hasClaims(pod *corev1.Pod) bool {
	for i := range pod.Spec.Volumes {
		if _, _, ok := claimName(pod, &pod.Spec.Volumes[i]); ok {
			return true
		}
	}
	return false
}

// fullyBound reports whether the persistentvolume-binder has finished
// binding pvc: it names its volume and says the binding is complete.
func fullyBound(pvc *corev1.PersistentVolumeClaim) bool {
	return pvc.Spec.VolumeName != "" && metav1.HasAnnotation(pvc.ObjectMeta, api.AnnBindCompleted)
}

// volumePreFilter is the VolumeBinding plugin's PreFilter: every claim
// must exist and not be going away, and every claim not of a
// WaitForFirstConsumer class must be bound already (the
// persistentvolume-binder binds those, not the scheduler). The message
// says why not, in kube-scheduler's words; it is "" when the pod may go on
// to the filters.
func (s *Scheduler) volumePreFilter(pod *corev1.Pod) (*podClaims, string) {
	claims := &podClaims{}
	immediate := false
	for i := range pod.Spec.Volumes {
		name, ephemeral, ok := claimName(pod, &pod.Spec.Volumes[i])
		if !ok {
			continue
		}
		pvc, err := s.pvcLister.Get(pod.Namespace, name)
		switch {
		case apierrors.IsNotFound(err) && ephemeral:
			return nil, fmt.Sprintf("waiting for ephemeral volume controller to create the persistentvolumeclaim %q", name)
		case err != nil:
			return nil, fmt.Sprintf("persistentvolumeclaim %q not found", name)
		case pvc.Status.Phase == corev1.ClaimLost:
			return nil, fmt.Sprintf("persistentvolumeclaim %q bound to non-existent persistentvolume %q", name, pvc.Spec.VolumeName)
		case pvc.DeletionTimestamp != nil:
			return nil, fmt.Sprintf("persistentvolumeclaim %q is being deleted", name)
		case fullyBound(pvc):
			claims.bound = append(claims.bound, pvc)
			continue
		}
		delayed, msg := s.delayBinding(pvc)
		if msg != "" {
			return nil, msg
		}
		// A claim that names its volume is pre-bound: the binder finishes
		// it, as it does an Immediate claim.
		if delayed && pvc.Spec.VolumeName == "" {
			claims.delayed = append(claims.delayed, pvc)
		} else {
			immediate = true
		}
	}
	if immediate {
		return nil, msgUnboundImmediate
	}
	return claims, ""
}

// delayBinding reports whether pvc's class binds WaitForFirstConsumer. A
// claim without a class binds at once.
func (s *Scheduler) delayBinding(pvc *corev1.PersistentVolumeClaim) (bool, string) {
	className := api.ClaimClass(pvc)
	if className == "" {
		return false, ""
	}
	class, err := s.classLister.Get("", className)
	if err != nil {
		return false, fmt.Sprintf("storageclass.storage.k8s.io %q not found", className)
	}
	return class.VolumeBindingMode != nil && *class.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer, ""
}

// volumeFilter is the VolumeBinding plugin's Filter for one node: the
// volume of each bound claim must be reachable from the node (its node
// affinity), and each delayed claim must find, on this node, either an
// Available volume to bind (not one taken by another claim of the pod or
// by a pod already decided for), or a class that can provision there. A
// delayed claim whose node was chosen already (it carries the
// selected-node annotation) fits that node only. It returns the plan for
// the node, or the reasons it does not fit.
func (s *Scheduler) volumeFilter(claims *podClaims, node *corev1.Node, taken map[string]string) (*volumePlan, []string) {
	plan := &volumePlan{node: node.Name}
	boundOK, boundExist, unboundOK := true, true, true
	for _, pvc := range claims.bound {
		pv, err := s.pvLister.Get("", pvc.Spec.VolumeName)
		if err != nil {
			boundExist = false
			break
		}
		if !placement.VolumeFitsNode(pv, node) {
			boundOK = false
		}
	}
	if boundExist {
		chosen := map[string]bool{}
		for _, pvc := range bySize(claims.delayed) {
			if selected, ok := pvc.Annotations[api.AnnSelectedNode]; ok {
				if selected != node.Name {
					unboundOK = false
					break
				}
				plan.provisions = append(plan.provisions, pvc)
				continue
			}
			if pv := s.matchingVolume(pvc, node, chosen, taken); pv != nil {
				chosen[pv.Name] = true
				plan.bindings = append(plan.bindings, volumeBinding{pv: pv, pvc: pvc})
				continue
			}
			if !s.canProvision(pvc, node) {
				unboundOK = false
				continue
			}
			plan.provisions = append(plan.provisions, pvc)
		}
	}
	var reasons []string
	if !boundOK {
		reasons = append(reasons, reasonVolumeNodeConflict)
	}
	if !unboundOK {
		reasons = append(reasons, reasonVolumeBindConflict)
	}
	if !boundExist {
		reasons = append(reasons, reasonVolumeNotExist)
	}
	if len(reasons) > 0 {
		return nil, reasons
	}
	return plan, nil
}

// bySize sorts claims by the storage they request, smallest first, so
// that each takes the smallest volume that fits it and the larger ones
// stay for the larger claims.
func bySize(claims []*corev1.PersistentVolumeClaim) []*corev1.PersistentVolumeClaim {
	sorted := slices.Clone(claims)
	slices.SortStableFunc(sorted, func(a, b *corev1.PersistentVolumeClaim) int {
		qa, qb := a.Spec.Resources.Requests[corev1.ResourceStorage], b.Spec.Resources.Requests[corev1.ResourceStorage]
		return qa.Cmp(qb)
	})
	return sorted
}

// matchingVolume is the smallest volume pvc may bind to on node, as the
// persistentvolume-binder would match it: of the claim's class, not
// claimed by another claim (a volume pre-bound to this claim wins at
// once), reachable from node, of the claim's volume mode, offering every
// access mode the claim asks for, at least as large as its request, and
// matching its selector. Volumes in chosen or taken are skipped.
func (s *Scheduler) matchingVolume(pvc *corev1.PersistentVolumeClaim, node *corev1.Node, chosen map[string]bool, taken map[string]string) *corev1.PersistentVolume {
	class := api.ClaimClass(pvc)
	want := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	var selector labels.Selector
	if pvc.Spec.Selector != nil {
		sel, err := metav1.LabelSelectorAsSelector(pvc.Spec.Selector)
		if err != nil {
			return nil
		}
		selector = sel
	}
	var best *corev1.PersistentVolume
	var bestSize resource.Quantity
	for _, pv := range s.pvLister.List(nil) {
		if chosen[pv.Name] || taken[pv.Name] != "" || pv.DeletionTimestamp != nil || api.VolumeClass(pv) != class {
			continue
		}
		if ref := pv.Spec.ClaimRef; ref != nil {
			if ref.Namespace != pvc.Namespace || ref.Name != pvc.Name || (ref.UID != "" && ref.UID != pvc.UID) {
				continue
			}
			if placement.VolumeFitsNode(pv, node) {
				return pv // pre-bound to this claim
			}
			continue
		}
		if pv.Status.Phase != corev1.VolumeAvailable || !placement.VolumeFitsNode(pv, node) {
			continue
		}
		if volumeMode(pv.Spec.VolumeMode) != volumeMode(pvc.Spec.VolumeMode) {
			continue
		}
		if slices.ContainsFunc(pvc.Spec.AccessModes, func(m corev1.PersistentVolumeAccessMode) bool { return !slices.Contains(pv.Spec.AccessModes, m) }) {
			continue
		}
		size := pv.Spec.Capacity[corev1.ResourceStorage]
		if size.Cmp(want) < 0 {
			continue
		}
		if selector != nil && !selector.Matches(labels.Set(pv.Labels)) {
			continue
		}
		if best == nil || size.Cmp(bestSize) < 0 {
			best, bestSize = pv, size
		}
	}
	return best
}

func volumeMode(m *corev1.PersistentVolumeMode) corev1.PersistentVolumeMode {
	if m == nil {
		return corev1.PersistentVolumeFilesystem
	}
	return *m
}

// canProvision reports whether pvc's class may provision a volume for a
// pod on node: it has a provisioner, and its allowedTopologies, if any,
// admit the node.
func (s *Scheduler) canProvision(pvc *corev1.PersistentVolumeClaim, node *corev1.Node) bool {
	class, err := s.classLister.Get("", api.ClaimClass(pvc))
	if err != nil || class.Provisioner == noProvisioner {
		return false
	}
	if len(class.AllowedTopologies) == 0 {
		return true
	}
	return slices.ContainsFunc(class.AllowedTopologies, func(term corev1.TopologySelectorTerm) bool {
		for _, req := range term.MatchLabelExpressions {
			if v, ok := node.Labels[req.Key]; !ok || !slices.Contains(req.Values, v) {
				return false
			}
		}
		return true
	})
}

// assumeVolumesLocked keeps the volumes plan binds for pod key, so that
// the decisions made before the binder has bound them do not offer them
// to other claims. Each goes when the informer shows it claimed, or when
// the pod's binding fails.
func (s *Scheduler) assumeVolumesLocked(key string, plan *volumePlan) {
	for _, b := range plan.bindings {
		s.assumedPVs[b.pv.Name] = key
	}
}

// releaseVolumes forgets the volumes assumed for pod key.
func (s *Scheduler) releaseVolumes(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for pv, k := range s.assumedPVs {
		if k == key {
			delete(s.assumedPVs, pv)
		}
	}
}

func (s *Scheduler) onPVChange(obj any) {
	if pv, ok := obj.(*corev1.PersistentVolume); ok && pv.Spec.ClaimRef != nil {
		s.mu.Lock()
		delete(s.assumedPVs, pv.Name) // the informer shows it claimed now
		s.mu.Unlock()
	}
	s.requeueUnschedulable()
}

// bindVolumes is the VolumeBinding plugin's PreBind: it writes what plan
// decided (each chosen volume's claimRef, and the selected-node annotation
// on each claim to provision, which tells the provisioner where), then
// waits, at most the bind timeout, for the persistentvolume-binder to bind
// every claim to a volume reachable from the node. The pod is bound only
// after that, so that its kubelet finds its volumes ready.
func (s *Scheduler) bindVolumes(ctx context.Context, pod *corev1.Pod, plan *volumePlan) error {
	written := map[string]int64{} // the resourceVersion of each object written, by kind/name
	for _, b := range plan.bindings {
		pv := b.pv.DeepCopy()
		pv.Spec.ClaimRef = &corev1.ObjectReference{
			Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: b.pvc.Namespace, Name: b.pvc.Name,
			UID: b.pvc.UID, ResourceVersion: b.pvc.ResourceVersion,
		}
		metav1.SetMetaDataAnnotation(&pv.ObjectMeta, api.AnnBoundByController, "yes")
		got, err := client.For[*corev1.PersistentVolume](s.rc).Update(ctx, pv)
		if err != nil {
			return err
		}
		written["pv/"+got.Name] = rv(got.ResourceVersion)
	}
	for _, c := range plan.provisions {
		if c.Annotations[api.AnnSelectedNode] == plan.node {
			written["pvc/"+c.Name] = rv(c.ResourceVersion)
			continue // chosen by an earlier attempt
		}
		pvc := c.DeepCopy()
		metav1.SetMetaDataAnnotation(&pvc.ObjectMeta, api.AnnSelectedNode, plan.node)
		got, err := client.For[*corev1.PersistentVolumeClaim](s.rc).Update(ctx, pvc)
		if err != nil {
			return err
		}
		written["pvc/"+got.Name] = rv(got.ResourceVersion)
	}

	ctx, cancel := context.WithTimeout(ctx, s.bindTimeout)
	defer cancel()
	for {
		done, err := s.volumesBound(pod, plan, written)
		if err != nil {
			return fmt.Errorf("binding volumes: %w", err)
		}
		if done {
			return nil
		}
		if !clock.Sleep(ctx, s.clock, bindPollInterval) {
			return fmt.Errorf("binding volumes: %w", context.DeadlineExceeded)
		}
	}
}

func rv(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}

// volumesBound reports whether every claim plan dealt with is bound, from
// the informers' caches; an error when the binding can no longer succeed
// and the pod must be scheduled again: the pod is gone, a volume lost its
// claimRef or is not reachable from the node, or a claim lost its
// selected-node annotation (a provisioner gives up so).
func (s *Scheduler) volumesBound(pod *corev1.Pod, plan *volumePlan, written map[string]int64) (bool, error) {
	node, err := s.nodeLister.Get("", plan.node)
	if err != nil {
		return false, fmt.Errorf("failed to get node %q: %w", plan.node, err)
	}
	if _, err := s.podLister.Get(pod.Namespace, pod.Name); apierrors.IsNotFound(err) {
		return false, fmt.Errorf("pod does not exist any more: %w", err)
	}
	for _, b := range plan.bindings {
		pv, err := s.pvLister.Get("", b.pv.Name)
		if err != nil {
			return false, fmt.Errorf("failed to check binding: %w", err)
		}
		pvc, err := s.pvcLister.Get(b.pvc.Namespace, b.pvc.Name)
		if err != nil {
			return false, fmt.Errorf("failed to check binding: %w", err)
		}
		if rv(pv.ResourceVersion) < written["pv/"+pv.Name] {
			return false, nil // the informer has not seen our write yet
		}
		if !placement.VolumeFitsNode(pv, node) {
			return false, fmt.Errorf("pv %q node affinity doesn't match node %q", pv.Name, node.Name)
		}
		if pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID == "" {
			return false, fmt.Errorf("ClaimRef got reset for pv %q", pv.Name)
		}
		if !fullyBound(pvc) {
			return false, nil
		}
	}
	for _, c := range plan.provisions {
		pvc, err := s.pvcLister.Get(c.Namespace, c.Name)
		if err != nil {
			return false, fmt.Errorf("failed to check provisioning pvc: %w", err)
		}
		if rv(pvc.ResourceVersion) < written["pvc/"+pvc.Name] {
			return false, nil
		}
		if pvc.Annotations[api.AnnSelectedNode] != plan.node {
			return false, fmt.Errorf("provisioning failed for PVC %q", pvc.Name)
		}
		if pvc.Spec.VolumeName != "" {
			pv, err := s.pvLister.Get("", pvc.Spec.VolumeName)
			if apierrors.IsNotFound(err) {
				return false, nil // not in the informer yet
			}
			if err != nil {
				return false, err
			}
			if !placement.VolumeFitsNode(pv, node) {
				return false, fmt.Errorf("pv %q node affinity doesn't match node %q", pv.Name, node.Name)
			}
		}
		if !fullyBound(pvc) {
			return false, nil
		}
	}
	return true, nil
}

// unselectNode takes the selected-node annotation off each claim plan
// asked to provision that is still unbound, so that the pod's next
// attempt may choose another node for it.
func (s *Scheduler) unselectNode(ctx context.Context, plan *volumePlan) {
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{api.AnnSelectedNode: nil}}})
	for _, c := range plan.provisions {
		pvc, err := s.pvcLister.Get(c.Namespace, c.Name)
		if err != nil || pvc.Spec.VolumeName != "" || pvc.Annotations[api.AnnSelectedNode] != plan.node {
			continue
		}
		_, err = client.For[*corev1.PersistentVolumeClaim](s.rc).Patch(ctx, c.Namespace, c.Name, types.MergePatchType, patch)
		if err != nil && !client.IsNotFound(err) {
			s.log.Error("remove selected-node annotation", "pvc", c.Namespace+"/"+c.Name, "err", err)
		}
	}
}

// errPreBind names the plugin whose PreBind failed, as kube-scheduler's
// FailedScheduling event does.
func errPreBind(err error) error {
	return fmt.Errorf("running PreBind plugin %q: %w", volumeBindingPlugin, err)
}

// watchVolumes starts the claim, volume and class informers the
// VolumeBinding plugin reads. A claim or volume that changes, or a class
// that appears, may let a pod waiting for one fit: each is tried again.
func (s *Scheduler) watchVolumes(f *informer.SharedInformerFactory) error {
	pvcs := informer.For[*corev1.PersistentVolumeClaim](f)
	pvs := informer.For[*corev1.PersistentVolume](f)
	classes := informer.For[*storagev1.StorageClass](f)
	s.pvcLister, s.pvLister, s.classLister = pvcs.Lister(), pvs.Lister(), classes.Lister()
	requeue := informer.ResourceEventHandlerFuncs{
		AddFunc:    func(any, bool) { s.requeueUnschedulable() },
		UpdateFunc: func(any, any) { s.requeueUnschedulable() },
	}
	pvcReg, err := pvcs.AddEventHandler(requeue)
	if err != nil {
		return fmt.Errorf("scheduler: claim handler: %w", err)
	}
	pvReg, err := pvs.AddEventHandler(informer.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any, _ bool) { s.onPVChange(obj) },
		UpdateFunc: func(_, obj any) { s.onPVChange(obj) },
	})
	if err != nil {
		return fmt.Errorf("scheduler: volume handler: %w", err)
	}
	classReg, err := classes.AddEventHandler(informer.ResourceEventHandlerFuncs{
		AddFunc: func(any, bool) { s.requeueUnschedulable() },
	})
	if err != nil {
		return fmt.Errorf("scheduler: storage class handler: %w", err)
	}
	s.synced = append(s.synced, pvcReg.HasSynced, pvReg.HasSynced, classReg.HasSynced)
	return nil
}

// preFilterMessage is kube-scheduler's FitError message when a PreFilter
// plugin rejects the pod before any node is looked at.
func preFilterMessage(numNodes int, msg string) string {
	return fmt.Sprintf("0/%d nodes are available: %s.", numNodes, msg)
}

// preBindFailed undoes the decision for a pod whose volumes could not be
// bound: the node and volumes assumed for it are given back, the claims it
// chose a node for are free to be placed elsewhere, and the pod says why
// in a FailedScheduling event and its PodScheduled condition (reason
// SchedulerError). The error it returns has sync try again after a
// backoff.
func (s *Scheduler) preBindFailed(ctx context.Context, key string, pod *corev1.Pod, plan *volumePlan, err error) error {
	s.releaseVolumes(key)
	s.forgetAssumed(key)
	if ctx.Err() != nil {
		return ctx.Err() // stopping
	}
	s.unselectNode(ctx, plan)
	msg := errPreBind(err).Error()
	s.log.Info("not bound: "+msg, slog.String("object", key))
	s.recorder.Eventf(pod, corev1.EventTypeWarning, "FailedScheduling", "%s", msg)
	if err := s.setCondition(ctx, pod, corev1.PodReasonSchedulerError, msg); err != nil {
		return err
	}
	return fmt.Errorf("pod %s: %s", key, msg)
}
