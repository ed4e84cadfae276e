package persistentvolume

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/controllers/internal/controller"
)

// The simulated hostPath provisioner runs inside the binder, as
// kube-controller-manager's in-tree provisioners (its own hostPath one,
// behind --enable-hostpath-provisioner, among them) do: one controller
// owns a claim from Pending to Bound, and its events say so. Classes of
// any other provisioner are left to that provisioner, as kube leaves
// them to an external (CSI) one.
const (
	// Provisioner is the simulated provisioner's name, a class's
	// provisioner field.
	Provisioner = "sim.minictl.io/hostpath"
	// FailParameter set to "true" in a class makes every provisioning
	// of it fail, so that a lesson can watch a claim stay Pending.
	FailParameter = "sim.minictl.io/fail"
	// VolumeDir is where the simulated volumes would live on their node:
	// a record in each volume's hostPath, nothing is written to disk.
	VolumeDir = "/var/lib/minictl/volumes/"
)

// provision starts provisioning pvc of class unless it is under way for
// that claim already. As kube's binder schedules it, provisioning is an
// operation of its own beside the claim worker, at most one per claim:
// the worker goes on binding other claims meanwhile, instead of waiting
// for each claim's annotation and volume to be written. A failed
// operation queues the claim again, with backoff; one that succeeds
// makes a volume whose event brings the claim back to be bound.
func (c *Controller) provision(ctx context.Context, pvc *corev1.PersistentVolumeClaim, class *storagev1.StorageClass) {
	key := pvc.Namespace + "/" + pvc.Name
	pvc, class = pvc.DeepCopy(), class.DeepCopy()
	c.ops.start(fmt.Sprintf("provision-%s[%s]", key, pvc.UID), func() {
		if err := c.provisionClaim(ctx, pvc, class); err != nil {
			controller.HandleErr(ctx, c.log, c.claimQueue, key, err)
		}
	})
}

// provisionClaim makes, or asks for, a volume for pvc of class. The claim
// is first annotated with the provisioner expected to make it, as kube's
// binder does for every provisioner; then the simulated one makes the
// volume, already bound to the claim on its side, and any other is
// waited for.
func (c *Controller) provisionClaim(ctx context.Context, pvc *corev1.PersistentVolumeClaim, class *storagev1.StorageClass) error {
	key := slog.String("object", pvc.Namespace+"/"+pvc.Name)
	if pvc.Annotations[api.AnnStorageProvisioner] != class.Provisioner || pvc.Annotations[api.AnnBetaStorageProvisioner] != class.Provisioner {
		if pvc.Annotations == nil {
			pvc.Annotations = map[string]string{}
		}
		pvc.Annotations[api.AnnStorageProvisioner] = class.Provisioner
		pvc.Annotations[api.AnnBetaStorageProvisioner] = class.Provisioner
		updated, err := c.claims.Update(ctx, pvc)
		if err != nil {
			return fmt.Errorf("annotate claim %s/%s with its provisioner: %w", pvc.Namespace, pvc.Name, err)
		}
		*pvc = *updated
	}
	if class.Provisioner != Provisioner {
		c.recorder.Event(pvc, corev1.EventTypeNormal, "ExternalProvisioning", fmt.Sprintf("Waiting for a volume to be created either by the external provisioner '%s' "+
			"or manually by the system administrator. If volume creation is delayed, please verify that the provisioner is running and correctly registered.", class.Provisioner))
		return nil
	}
	name := "pvc-" + string(pvc.UID)
	if _, err := c.volumeList.Get("", name); err == nil {
		return nil // provisioned already; the claim binds to it on its next sync
	}
	pv, err := newVolume(name, pvc, class)
	if err != nil {
		c.recorder.Event(pvc, corev1.EventTypeWarning, "ProvisioningFailed", fmt.Sprintf("Failed to provision volume with StorageClass %q: %v", class.Name, err))
		return nil // the class will not change (its parameters are immutable): nothing to retry
	}
	c.log.Info(fmt.Sprintf("no volume fits %s of class %s → provision %s", requested(pvc), class.Name, name), key)
	_, err = c.volumes.Create(ctx, pv)
	if client.IsAlreadyExists(err) {
		return nil // made by an earlier operation the cache has not shown yet
	}
	if err != nil {
		c.recorder.Event(pvc, corev1.EventTypeWarning, "ProvisioningFailed", fmt.Sprintf("Failed to provision volume with StorageClass %q: %v", class.Name, err))
		return err
	}
	c.recorder.Event(pvc, corev1.EventTypeNormal, "ProvisioningSucceeded", fmt.Sprintf("Successfully provisioned volume %s using %s", name, Provisioner))
	return nil
}

// newVolume is the volume the simulated provisioner makes for pvc: its
// size, access modes and volume mode, the class's reclaim policy and
// mount options, a hostPath under VolumeDir, pinned to the node chosen
// for the claim if one was, and bound to the claim on its side.
func newVolume(name string, pvc *corev1.PersistentVolumeClaim, class *storagev1.StorageClass) (*corev1.PersistentVolume, error) {
	for k, v := range class.Parameters {
		switch {
		case k == FailParameter && v == "true":
			return nil, fmt.Errorf("provisioning failed on purpose: the class sets %s=%q", FailParameter, v)
		case k != FailParameter:
			return nil, fmt.Errorf("invalid parameter %q for provisioner %s", k, Provisioner)
		}
	}
	reclaim := corev1.PersistentVolumeReclaimDelete
	if class.ReclaimPolicy != nil {
		reclaim = *class.ReclaimPolicy
	}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Annotations: map[string]string{
				api.AnnDynamicallyProvisioned: Provisioner,
				annBoundByController:          "yes",
			},
		},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: pvc.Spec.Resources.Requests[corev1.ResourceStorage]},
			AccessModes:                   pvc.Spec.AccessModes,
			PersistentVolumeReclaimPolicy: reclaim,
			StorageClassName:              class.Name,
			MountOptions:                  class.MountOptions,
			VolumeMode:                    pvc.Spec.VolumeMode,
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{
				Path: VolumeDir + name, Type: new(corev1.HostPathDirectoryOrCreate),
			}},
			ClaimRef: &corev1.ObjectReference{
				Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: pvc.Namespace, Name: pvc.Name,
				UID: pvc.UID, ResourceVersion: pvc.ResourceVersion,
			},
		},
	}
	if node := pvc.Annotations[api.AnnSelectedNode]; node != "" {
		pv.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
		}}}}
	}
	return pv, nil
}

// reclaimVolume applies a Released volume's reclaim policy: Retain keeps
// it, with its data, until an administrator deals with it; Delete
// deletes a volume the simulated provisioner made, leaves one another
// provisioner made to that provisioner, and fails one made by hand
// (there is nothing that could delete its storage); Recycle is not
// supported.
func (c *Controller) reclaimVolume(ctx context.Context, pv *corev1.PersistentVolume) error {
	key := slog.String("object", pv.Name)
	switch pv.Spec.PersistentVolumeReclaimPolicy {
	case corev1.PersistentVolumeReclaimRetain:
		return nil // Released it stays
	case corev1.PersistentVolumeReclaimRecycle:
		if pv.Status.Phase != corev1.VolumeFailed {
			c.recorder.Event(pv, corev1.EventTypeWarning, "VolumeFailedRecycle", "No recycler plugin found for the volume!")
		}
		return c.setVolumePhase(ctx, pv, corev1.VolumeFailed, "No recycler plugin found for the volume!")
	}
	switch by := pv.Annotations[api.AnnDynamicallyProvisioned]; {
	case by == Provisioner:
		if pv.DeletionTimestamp != nil {
			return nil // deleted already; the pv-protection finalizer goes next
		}
		c.log.Info("released, reclaim policy Delete → delete", key)
		err := c.volumes.Delete(ctx, "", pv.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pv.UID}})
		if err != nil && !client.IsNotFound(err) {
			c.recorder.Event(pv, corev1.EventTypeWarning, "VolumeFailedDelete", err.Error())
			return fmt.Errorf("delete volume %s: %w", pv.Name, err)
		}
		return nil
	case by != "":
		return nil // its provisioner deletes it
	default:
		msg := fmt.Sprintf("error getting deleter volume plugin for volume %q: no deletable volume plugin matched", pv.Name)
		if pv.Status.Phase != corev1.VolumeFailed {
			c.recorder.Event(pv, corev1.EventTypeWarning, "VolumeFailedDelete", msg)
		}
		return c.setVolumePhase(ctx, pv, corev1.VolumeFailed, msg)
	}
}

// operations runs the binder's long operations, each in a goroutine of
// its own, at most one of a name at a time, as kube's goroutinemap does.
type operations struct {
	mu      sync.Mutex
	running map[string]bool
	wg      sync.WaitGroup
}

// start runs fn in a goroutine unless an operation of that name is
// running; it reports whether it started one.
func (o *operations) start(name string, fn func()) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.running[name] {
		return false
	}
	if o.running == nil {
		o.running = map[string]bool{}
	}
	o.running[name] = true
	o.wg.Go(func() {
		defer func() {
			o.mu.Lock()
			delete(o.running, name)
			o.mu.Unlock()
		}()
		fn()
	})
	return true
}

// wait returns once every operation started has returned.
func (o *operations) wait() { o.wg.Wait() }
