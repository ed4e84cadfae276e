package persistentvolume

import (
	"context"
	"fmt"
	"log/slog"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/client"
)

const (
	annBindCompleted     = api.AnnBindCompleted
	annBoundByController = api.AnnBoundByController
)

// syncUnboundClaim binds a claim to the best volume for it, or provisions
// one, or says what it waits for.
func (c *Controller) syncUnboundClaim(ctx context.Context, pvc *corev1.PersistentVolumeClaim) error {
	key := slog.String("object", pvc.Namespace+"/"+pvc.Name)
	if pvc.DeletionTimestamp != nil {
		return nil // being deleted: nothing to bind it to
	}
	if pvc.Spec.VolumeName != "" {
		// Pre-bound by its user to a volume: bind to exactly that one.
		pv, err := c.volumeList.Get("", pvc.Spec.VolumeName)
		if apierrors.IsNotFound(err) {
			c.recorder.Event(pvc, corev1.EventTypeNormal, "FailedBinding", "volume \""+pvc.Spec.VolumeName+"\" not found")
			return c.setClaimStatus(ctx, pvc, corev1.ClaimPending, nil)
		}
		if err != nil {
			return err
		}
		if pv.Spec.ClaimRef != nil && !claimRefIs(pv.Spec.ClaimRef, pvc) {
			c.recorder.Event(pvc, corev1.EventTypeWarning, "FailedBinding", "volume \""+pv.Name+"\" already bound to a different claim.")
			return c.setClaimStatus(ctx, pvc, corev1.ClaimPending, nil)
		}
		if msg := mismatch(pv, pvc); msg != "" {
			c.recorder.Event(pvc, corev1.EventTypeWarning, "VolumeMismatch", msg)
			return c.setClaimStatus(ctx, pvc, corev1.ClaimPending, nil)
		}
		return c.bind(ctx, pv.DeepCopy(), pvc)
	}

	class, err := c.claimClass(pvc)
	if err != nil {
		return err
	}
	delay := class != nil && class.VolumeBindingMode != nil && *class.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer
	node := pvc.Annotations[api.AnnSelectedNode]
	// A WaitForFirstConsumer claim binds once a node is chosen for it, or
	// once a volume names it: that is how the scheduler hands it an
	// Available volume it chose.
	if pv := c.bestMatch(ctx, pvc, node); pv != nil && (!delay || node != "" || pv.Spec.ClaimRef != nil) {
		c.log.Info(fmt.Sprintf("%s asked, %s fits → bind to %s", requested(pvc), capacityOf(pv), pv.Name), key)
		return c.bind(ctx, pv.DeepCopy(), pvc)
	}
	switch {
	case delay && node == "":
		c.recorder.Event(pvc, corev1.EventTypeNormal, "WaitForFirstConsumer", "waiting for first consumer to be created before binding")
	case class == nil && api.ClaimClass(pvc) == "":
		c.recorder.Event(pvc, corev1.EventTypeNormal, "FailedBinding", "no persistent volumes available for this claim and no storage class is set")
	case class == nil:
		c.recorder.Event(pvc, corev1.EventTypeWarning, "ProvisioningFailed", fmt.Sprintf("storageclass.storage.k8s.io %q not found", api.ClaimClass(pvc)))
	default:
		c.provision(ctx, pvc, class)
	}
	return c.setClaimStatus(ctx, pvc, corev1.ClaimPending, nil)
}

// syncBoundClaim keeps a bound claim's status true to its volume: Bound
// while the volume names it, Lost when the volume is gone or names
// another claim.
func (c *Controller) syncBoundClaim(ctx context.Context, pvc *corev1.PersistentVolumeClaim) error {
	if pvc.Spec.VolumeName == "" {
		// Bound once, and then its volumeName was taken away.
		if pvc.Status.Phase != corev1.ClaimLost {
			c.recorder.Event(pvc, corev1.EventTypeWarning, "ClaimLost", "Bound claim has lost reference to PersistentVolume. Data on the volume is lost!")
		}
		return c.setClaimStatus(ctx, pvc, corev1.ClaimLost, nil)
	}
	pv, err := c.volumeList.Get("", pvc.Spec.VolumeName)
	if apierrors.IsNotFound(err) {
		if _, err := c.volumes.Get(ctx, "", pvc.Spec.VolumeName); !client.IsNotFound(err) {
			return err // the cache is behind, or the API failed: look again
		}
		if pvc.Status.Phase != corev1.ClaimLost {
			c.recorder.Event(pvc, corev1.EventTypeWarning, "ClaimLost", "Bound claim has lost its PersistentVolume. Data on the volume is lost!")
		}
		return c.setClaimStatus(ctx, pvc, corev1.ClaimLost, nil)
	}
	if err != nil {
		return err
	}
	switch {
	case pv.Spec.ClaimRef == nil:
		// The volume lost its half of the binding: bind it again.
		return c.bind(ctx, pv.DeepCopy(), pvc)
	case pv.Spec.ClaimRef.UID == pvc.UID:
		if err := c.finishVolume(ctx, pv.DeepCopy(), pvc); err != nil {
			return err
		}
		return c.setClaimStatus(ctx, pvc, corev1.ClaimBound, pv)
	default:
		if pvc.Status.Phase != corev1.ClaimLost {
			c.recorder.Event(pvc, corev1.EventTypeWarning, "ClaimMisbound", "Two claims are bound to the same volume, this one is bound incorrectly")
		}
		return c.setClaimStatus(ctx, pvc, corev1.ClaimLost, nil)
	}
}

// bind binds pv and pvc in kube's order, each step a write that the next
// sync would otherwise redo: the volume's claimRef, the volume's phase,
// the claim's volumeName and annotations, the claim's phase.
func (c *Controller) bind(ctx context.Context, pv *corev1.PersistentVolume, pvc *corev1.PersistentVolumeClaim) error {
	if err := c.finishVolume(ctx, pv, pvc); err != nil {
		return err
	}
	if pvc.Spec.VolumeName != pv.Name || pvc.Annotations[annBindCompleted] == "" {
		if pvc.Annotations == nil {
			pvc.Annotations = map[string]string{}
		}
		if pvc.Spec.VolumeName != pv.Name {
			pvc.Spec.VolumeName = pv.Name
			pvc.Annotations[annBoundByController] = "yes"
		}
		pvc.Annotations[annBindCompleted] = "yes"
		updated, err := c.claims.Update(ctx, pvc)
		if err != nil {
			return fmt.Errorf("bind claim %s/%s to %s: %w", pvc.Namespace, pvc.Name, pv.Name, err)
		}
		pvc = updated
	}
	return c.setClaimStatus(ctx, pvc, corev1.ClaimBound, pv)
}

// finishVolume makes pv's half of its binding to pvc: its claimRef
// (marked bound-by-controller when the binder set it) and phase Bound.
func (c *Controller) finishVolume(ctx context.Context, pv *corev1.PersistentVolume, pvc *corev1.PersistentVolumeClaim) error {
	ref := pv.Spec.ClaimRef
	if ref == nil || ref.UID != pvc.UID || ref.Namespace != pvc.Namespace || ref.Name != pvc.Name {
		if ref == nil {
			if pv.Annotations == nil {
				pv.Annotations = map[string]string{}
			}
			pv.Annotations[annBoundByController] = "yes"
		}
		pv.Spec.ClaimRef = &corev1.ObjectReference{
			Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: pvc.Namespace, Name: pvc.Name,
			UID: pvc.UID, ResourceVersion: pvc.ResourceVersion,
		}
		updated, err := c.volumes.Update(ctx, pv)
		if err != nil {
			return fmt.Errorf("bind volume %s to %s/%s: %w", pv.Name, pvc.Namespace, pvc.Name, err)
		}
		pv = updated
	}
	return c.setVolumePhase(ctx, pv, corev1.VolumeBound, "")
}

// claimClass is the class pvc names, nil when it names none or the
// class does not exist.
func (c *Controller) claimClass(pvc *corev1.PersistentVolumeClaim) (*storagev1.StorageClass, error) {
	name := api.ClaimClass(pvc)
	if name == "" {
		return nil, nil
	}
	sc, err := c.classList.Get("", name)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return sc, err
}

func claimRefIs(ref *corev1.ObjectReference, pvc *corev1.PersistentVolumeClaim) bool {
	return ref.Namespace == pvc.Namespace && ref.Name == pvc.Name && (ref.UID == "" || ref.UID == pvc.UID)
}

func requested(pvc *corev1.PersistentVolumeClaim) string {
	q := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	return q.String()
}

func capacityOf(pv *corev1.PersistentVolume) string {
	q := pv.Spec.Capacity[corev1.ResourceStorage]
	return q.String()
}
