package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/client"
)

// Patcher is what a RefManager needs of a client: a patch.
// *client.Client[T] is one.
type Patcher[T api.Object] interface {
	Patch(ctx context.Context, namespace, name string, pt types.PatchType, data []byte, subresource ...string) (T, error)
}

// RefManager claims objects (pods for a ReplicaSet, ReplicaSets for a
// Deployment) for one owner by their controller reference, as upstream's
// ControllerRefManager does:
//
//   - An object controlled by the owner that the selector still matches is
//     claimed.
//   - An object controlled by the owner that the selector no longer matches
//     is released: the owner's reference is patched away (unless the owner
//     is being deleted, when the garbage collector decides).
//   - An orphan (no controller) that the selector matches, in the owner's
//     namespace, not being deleted, is adopted: a controller reference is
//     patched in, provided CanAdopt agrees, which it is asked once per
//     RefManager.
//   - An object controlled by someone else is left alone.
//
// Patches carry the object's uid, so one that was deleted and created
// again under the same name is never adopted or released by mistake.
//
// Create one per sync; it is not safe for concurrent use.
type RefManager[T api.Object] struct {
	Owner     api.Object
	OwnerKind schema.GroupVersionKind
	Selector  labels.Selector
	Client    Patcher[T]
	// CanAdopt, if set, is asked before the first adoption; an error
	// stops every adoption of this RefManager. Use RecheckOwner.
	CanAdopt func(ctx context.Context) error
	// Finalizers, if set, are added to an object as it is adopted and
	// removed from it as it is released: the Job controller's tracking
	// finalizer, as upstream's ClaimPods takes it.
	Finalizers []string

	canAdoptOnce sync.Once
	canAdoptErr  error
}

// Claim returns the objects of objs the owner controls after adoptions and
// releases. objs may hold anything; unrelated objects are skipped. An error
// means some adoption or release failed; the objects returned are still
// the owner's.
func (m *RefManager[T]) Claim(ctx context.Context, objs []T) ([]T, error) {
	var claimed []T
	var errs []error
	for _, obj := range objs {
		ok, err := m.claimOne(ctx, obj)
		if err != nil {
			errs = append(errs, err)
		}
		if ok {
			claimed = append(claimed, obj)
		}
	}
	return claimed, errors.Join(errs...)
}

func (m *RefManager[T]) claimOne(ctx context.Context, obj T) (bool, error) {
	matches := m.Selector.Matches(labels.Set(obj.GetLabels()))
	if ref := metav1.GetControllerOfNoCopy(obj); ref != nil {
		switch {
		case ref.UID != m.Owner.GetUID():
			return false, nil // someone else's
		case matches:
			return true, nil
		case m.Owner.GetDeletionTimestamp() != nil:
			return false, nil // the owner is going; leave it to the garbage collector
		}
		return false, m.release(ctx, obj)
	}
	// An orphan.
	if !matches || m.Owner.GetDeletionTimestamp() != nil || obj.GetDeletionTimestamp() != nil ||
		obj.GetNamespace() != m.Owner.GetNamespace() {
		return false, nil
	}
	if err := m.adopt(ctx, obj); err != nil {
		if apierrors.IsNotFound(err) || client.IsNotFound(err) {
			return false, nil // gone meanwhile
		}
		return false, err
	}
	return true, nil
}

func (m *RefManager[T]) adopt(ctx context.Context, obj T) error {
	if m.CanAdopt != nil {
		m.canAdoptOnce.Do(func() { m.canAdoptErr = m.CanAdopt(ctx) })
		if m.canAdoptErr != nil {
			return fmt.Errorf("adopt %s %s/%s: %w", kindOf(obj), obj.GetNamespace(), obj.GetName(), m.canAdoptErr)
		}
	}
	meta := map[string]any{
		"ownerReferences": []metav1.OwnerReference{*NewControllerRef(m.Owner, m.OwnerKind)},
		"uid":             obj.GetUID(),
	}
	if len(m.Finalizers) > 0 {
		meta["finalizers"] = m.Finalizers // merged into the object's own
	}
	patch, err := json.Marshal(map[string]any{"metadata": meta})
	if err != nil {
		return err
	}
	if _, err := m.Client.Patch(ctx, obj.GetNamespace(), obj.GetName(), types.StrategicMergePatchType, patch); err != nil {
		return fmt.Errorf("adopt %s %s/%s: %w", kindOf(obj), obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}

func (m *RefManager[T]) release(ctx context.Context, obj T) error {
	meta := map[string]any{
		"ownerReferences": []map[string]any{{"$patch": "delete", "uid": m.Owner.GetUID()}},
		"uid":             obj.GetUID(),
	}
	if len(m.Finalizers) > 0 {
		meta["$deleteFromPrimitiveList/finalizers"] = m.Finalizers
	}
	patch, err := json.Marshal(map[string]any{"metadata": meta})
	if err != nil {
		return err
	}
	_, err = m.Client.Patch(ctx, obj.GetNamespace(), obj.GetName(), types.StrategicMergePatchType, patch)
	switch {
	case err == nil, client.IsNotFound(err):
		return nil // released, or gone
	case client.IsInvalid(err) || client.IsConflict(err):
		// The object under this name has another uid: the one we meant
		// was deleted and replaced. Nothing of ours to release.
		return nil
	}
	return fmt.Errorf("release %s %s/%s: %w", kindOf(obj), obj.GetNamespace(), obj.GetName(), err)
}

// RecheckOwner returns a CanAdopt that reads the owner fresh from the API
// (get), because the cache may be stale: adoption is refused when the owner
// is gone, was replaced by another object of the same name (uid differs),
// or is being deleted. Upstream calls this RecheckDeletionTimestamp.
func RecheckOwner[T api.Object](get func(ctx context.Context) (T, error), uid types.UID) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		fresh, err := get(ctx)
		if err != nil {
			return fmt.Errorf("recheck owner: %w", err)
		}
		if fresh.GetUID() != uid {
			return fmt.Errorf("original owner %s is gone: got uid %s, wanted %s", fresh.GetName(), fresh.GetUID(), uid)
		}
		if fresh.GetDeletionTimestamp() != nil {
			return fmt.Errorf("owner %s/%s is being deleted", fresh.GetNamespace(), fresh.GetName())
		}
		return nil
	}
}

// NewControllerRef returns the owner reference a controller puts on what it
// creates or adopts: controller and blockOwnerDeletion true.
func NewControllerRef(owner api.Object, kind schema.GroupVersionKind) *metav1.OwnerReference {
	yes := true
	return &metav1.OwnerReference{
		APIVersion:         kind.GroupVersion().String(),
		Kind:               kind.Kind,
		Name:               owner.GetName(),
		UID:                owner.GetUID(),
		Controller:         &yes,
		BlockOwnerDeletion: &yes,
	}
}

func kindOf(obj api.Object) string {
	if res, ok := api.ForObject(obj); ok {
		return res.Singular
	}
	return "object"
}
