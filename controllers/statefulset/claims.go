package statefulset

import (
	"context"
	"fmt"
	"log/slog"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/minictl/minictl/client"
)

// A pod's claims are created before it, and kept after it, as kube's
// stateful_pod_control does. persistentVolumeClaimRetentionPolicy decides
// who owns them, through owner references the garbage collector follows
// (plain references, not controller ones, as kube sets them):
//
//   - whenDeleted Delete: each claim is owned by the set, so deleting the
//     set deletes its claims; Retain: no such reference.
//   - whenScaled Delete: the claims of an ordinal a scale down removes
//     are owned by its pod alone, so they go with it; Retain: no such
//     reference.

// ensureClaims creates the claims of pod (ordinal ord) that do not exist.
// A claim that is being deleted is an error: the pod must not start on
// a claim that is going away.
func (c *Controller) ensureClaims(ctx context.Context, set *appsv1.StatefulSet, pod *corev1.Pod, ord int) error {
	for _, claim := range claimsFor(set, ord) {
		existing, err := c.claimLister.Get(claim.Namespace, claim.Name)
		if err == nil {
			if existing.DeletionTimestamp != nil {
				return fmt.Errorf("pvc %s is being deleted", claim.Name)
			}
			continue
		}
		if !apierrors.IsNotFound(err) {
			return err
		}
		claim.OwnerReferences = wantClaimRefs(set, pod, ord, nil)
		_, err = c.claimClient.Create(ctx, claim)
		if client.IsAlreadyExists(err) {
			continue // made by an earlier sync the cache has not shown yet
		}
		if err != nil {
			c.recorder.Eventf(set, corev1.EventTypeWarning, "FailedCreate", "create Claim %s for Pod %s in StatefulSet %s failed error: %s", claim.Name, pod.Name, set.Name, err)
			return fmt.Errorf("create claim %s: %w", claim.Name, err)
		}
		c.log.Info(fmt.Sprintf("pod %s needs claim %s → create it", pod.Name, claim.Name), slog.String("object", setKey(set)))
		c.recorder.Eventf(set, corev1.EventTypeNormal, "SuccessfulCreate", "create Claim %s Pod %s in StatefulSet %s success", claim.Name, pod.Name, set.Name)
	}
	return nil
}

// applyRetention brings the owner references of the claims of every
// existing pod in line with the retention policy.
func (c *Controller) applyRetention(ctx context.Context, p *plan) error {
	for _, pod := range slices.Concat(p.replicas, p.condemned) {
		if pod == nil || pod.UID == "" {
			continue
		}
		ord, _ := ordinalOf(p.set, pod)
		for _, want := range claimsFor(p.set, ord) {
			claim, err := c.claimLister.Get(want.Namespace, want.Name)
			if err != nil {
				continue // missing claims are ensureClaims' business
			}
			refs := wantClaimRefs(p.set, pod, ord, claim.OwnerReferences)
			if slices.EqualFunc(refs, claim.OwnerReferences, func(a, b metav1.OwnerReference) bool { return a.UID == b.UID }) {
				continue
			}
			cp := claim.DeepCopy()
			cp.OwnerReferences = refs
			if _, err := c.claimClient.Update(ctx, cp); err != nil && !client.IsNotFound(err) {
				return fmt.Errorf("update owners of claim %s: %w", claim.Name, err)
			}
		}
	}
	return nil
}

// wantClaimRefs returns refs with the set's and the pod's references
// added or removed as the retention policy says for ordinal ord.
func wantClaimRefs(set *appsv1.StatefulSet, pod *corev1.Pod, ord int, refs []metav1.OwnerReference) []metav1.OwnerReference {
	policy := set.Spec.PersistentVolumeClaimRetentionPolicy
	deleteWithSet := policy != nil && policy.WhenDeleted == appsv1.DeletePersistentVolumeClaimRetentionPolicyType
	condemned := ord < startOrdinal(set) || ord >= startOrdinal(set)+replicas(set)
	deleteWithPod := policy != nil && policy.WhenScaled == appsv1.DeletePersistentVolumeClaimRetentionPolicyType && condemned
	out := slices.DeleteFunc(slices.Clone(refs), func(r metav1.OwnerReference) bool {
		return r.UID == set.UID || (pod.UID != "" && r.UID == pod.UID)
	})
	if deleteWithSet && !deleteWithPod {
		out = append(out, ownerRef(set.UID, set.Name, controllerKind.GroupVersion().String(), controllerKind.Kind))
	}
	if deleteWithPod && pod.UID != "" {
		out = append(out, ownerRef(pod.UID, pod.Name, "v1", "Pod"))
	}
	return out
}

func ownerRef(uid types.UID, name, apiVersion, kind string) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid}
}
