package apiserver

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/minictl/minictl/api"
)

// Storage admission: kube-apiserver's DefaultStorageClass,
// StorageObjectInUseProtection and PersistentVolumeClaimResize plugins,
// and the default StorageClass every minictl cluster starts with.

// admitDefaultStorageClass is DefaultStorageClass: a new claim that names
// no class (neither storageClassName nor the beta annotation) gets the
// default one, if a class is marked default. A claim whose
// storageClassName is "" asked for no class and keeps none.
func (s *Server) admitDefaultStorageClass(_ context.Context, a *attributes) error {
	pvc, ok := a.obj.(*corev1.PersistentVolumeClaim)
	if a.op != opCreate || a.subresource != "" || !ok {
		return nil
	}
	if _, ok := pvc.Annotations[api.AnnBetaStorageClass]; ok || pvc.Spec.StorageClassName != nil {
		return nil
	}
	if def := s.defaultStorageClass(); def != nil {
		name := def.Name
		pvc.Spec.StorageClassName = &name
	}
	return nil
}

// defaultStorageClass is the class marked default; of several, the newest
// (then the first by name), as kube's GetDefaultClass chooses. nil when
// none is, or classes are not served.
func (s *Server) defaultStorageClass() *storagev1.StorageClass {
	c := s.serving().caches[api.StorageClasses]
	if c == nil {
		return nil
	}
	items, _ := c.list(&filter{})
	var def *storagev1.StorageClass
	for _, it := range items {
		sc := it.object().(*storagev1.StorageClass)
		if !api.IsDefaultClass(sc) {
			continue
		}
		if def == nil || def.CreationTimestamp.Before(&sc.CreationTimestamp) {
			def = sc
		}
	}
	return def
}

// admitStorageObjectInUseProtection is StorageObjectInUseProtection: every
// new claim gets the kubernetes.io/pvc-protection finalizer and every new
// volume kubernetes.io/pv-protection, which the pvc-protection and
// pv-protection controllers remove only once no pod uses the claim and no
// claim is bound to the volume. A claim in use is therefore not deleted
// until its pods are gone.
func (s *Server) admitStorageObjectInUseProtection(_ context.Context, a *attributes) error {
	if a.op != opCreate || a.subresource != "" {
		return nil
	}
	var finalizer string
	switch a.obj.(type) {
	case *corev1.PersistentVolumeClaim:
		finalizer = api.PVCProtectionFinalizer
	case *corev1.PersistentVolume:
		finalizer = api.PVProtectionFinalizer
	default:
		return nil
	}
	accessor, err := meta.Accessor(a.obj)
	if err != nil {
		return nil
	}
	for _, f := range accessor.GetFinalizers() {
		if f == finalizer {
			return nil
		}
	}
	accessor.SetFinalizers(append(accessor.GetFinalizers(), finalizer))
	return nil
}

// validatePersistentVolumeClaimResize is PersistentVolumeClaimResize: a
// claim may ask for more storage only when its class allows volume
// expansion (validation already keeps unbound claims from changing size).
func (s *Server) validatePersistentVolumeClaimResize(_ context.Context, a *attributes) (func(), error) {
	pvc, ok := a.obj.(*corev1.PersistentVolumeClaim)
	if a.op != opUpdate || a.subresource != "" || !ok {
		return nil, nil
	}
	old := a.old.(*corev1.PersistentVolumeClaim)
	newSize, oldSize := pvc.Spec.Resources.Requests[corev1.ResourceStorage], old.Spec.Resources.Requests[corev1.ResourceStorage]
	if newSize.Cmp(oldSize) <= 0 {
		return nil, nil
	}
	if !s.classAllowsExpansion(api.ClaimClass(pvc)) {
		return nil, apierrors.NewForbidden(a.res.GroupResource(), a.name,
			errors.New("only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize"))
	}
	return nil, nil
}

func (s *Server) classAllowsExpansion(name string) bool {
	c := s.serving().caches[api.StorageClasses]
	if name == "" || c == nil {
		return false
	}
	rs := s.serving().stores[api.StorageClasses]
	o, _ := c.get(rs.key("", name))
	if o == nil {
		return false
	}
	sc := o.object().(*storagev1.StorageClass)
	return sc.AllowVolumeExpansion != nil && *sc.AllowVolumeExpansion
}

// The StorageClass every minictl cluster has from its first start, as a
// cluster's addon manager installs one: "standard", the default, served
// by minictl's simulated hostPath provisioner, deleting its volumes once
// released and binding them where the first pod that uses them is
// scheduled.
const (
	StandardStorageClass     = "standard"
	SimulatedHostPathDriver  = "sim.minictl.io/hostpath"
	standardClassAddonMode   = "addonmanager.kubernetes.io/mode"
	standardClassEnsureExist = "EnsureExists"
)

// ensureDefaultStorageClass creates the standard class when no class of
// that name exists, as the addon manager treats an EnsureExists addon: it
// is created if absent and never changed afterwards, so a user may edit
// it (mark it is-default-class "false", say) and keep the edit. A deleted
// one comes back when an API server next starts, not before.
func (s *Server) ensureDefaultStorageClass(ctx context.Context) error {
	rs := s.serving().stores[api.StorageClasses]
	if rs == nil {
		return nil
	}
	sc := api.StorageClasses.NewObject().(*storagev1.StorageClass)
	sc.Name = StandardStorageClass
	sc.Labels = map[string]string{standardClassAddonMode: standardClassEnsureExist}
	sc.Annotations = map[string]string{api.AnnDefaultStorageClass: "true"}
	sc.Provisioner = SimulatedHostPathDriver
	reclaim, wait := corev1.PersistentVolumeReclaimDelete, storagev1.VolumeBindingWaitForFirstConsumer
	sc.ReclaimPolicy, sc.VolumeBindingMode = &reclaim, &wait
	ctx, cancel := context.WithTimeout(ctx, s.requestTimeout)
	defer cancel()
	_, err := s.createObject(ctx, rs, sc, createOptions{keep: true, manager: "kube-apiserver"})
	if isAlreadyExists(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("create storageclass %s: %w", sc.Name, err)
	}
	// Claims created once the server is ready find it as their default:
	// DefaultStorageClass reads the watch cache.
	rv, _ := strconv.ParseInt(sc.ResourceVersion, 10, 64)
	return s.serving().caches[api.StorageClasses].waitFresh(ctx, rv)
}
