package persistentvolume_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/client/record"
	"github.com/minictl/minictl/controllers/internal/controller"
	"github.com/minictl/minictl/controllers/internal/controllertest"
	"github.com/minictl/minictl/controllers/persistentvolume"
	"github.com/minictl/minictl/controllers/pvcprotection"
	"github.com/minictl/minictl/controllers/pvprotection"
	"github.com/minictl/minictl/informer"
)

// These tests run the binder with the two protection controllers, as the
// controller manager runs them, against a real API server on a real etcd
// (whose admission gives every claim and volume its protection
// finalizer). No scheduler runs: a test chooses a claim's node itself, by
// the annotation the scheduler would set.

type fixture struct {
	t       *testing.T
	rec     *record.FakeRecorder
	pvs     *client.Client[*corev1.PersistentVolume]
	pvcs    *client.Client[*corev1.PersistentVolumeClaim]
	classes *client.Client[*storagev1.StorageClass]
}

func start(t *testing.T) *fixture {
	return startBehind(t, 2, nil)
}

// startBehind is start with workers workers for each controller, and the
// controllers' requests going through front, a handler that passes what
// it lets through to next, the API server; nil: no front. The test's own
// clients go to the API server directly.
func startBehind(t *testing.T, workers int, front func(next http.Handler) http.Handler) *fixture {
	env := controllertest.Start(t)
	rc, informers := env.Client, env.Informers
	if front != nil {
		target, err := url.Parse(env.Client.Server())
		if err != nil {
			t.Fatal(err)
		}
		proxy := httputil.NewSingleHostReverseProxy(target)
		proxy.FlushInterval = -1 // watches stream
		srv := httptest.NewServer(front(proxy))
		t.Cleanup(srv.Close)
		if rc, err = client.New(&client.Config{Server: srv.URL}); err != nil {
			t.Fatal(err)
		}
		informers = informer.NewSharedInformerFactory(rc, informer.FactoryOptions{})
	}
	rec := &record.FakeRecorder{}
	common := controller.Common{Client: rc, Informers: informers, Recorder: rec, Logger: controllertest.Logger(t)}
	binder, err := persistentvolume.New(persistentvolume.Options{Common: common})
	if err != nil {
		t.Fatal(err)
	}
	pvc, err := pvcprotection.New(pvcprotection.Options{Common: common})
	if err != nil {
		t.Fatal(err)
	}
	pv, err := pvprotection.New(pvprotection.Options{Common: common})
	if err != nil {
		t.Fatal(err)
	}
	controllertest.Run(t, informers, workers, binder, pvc, pv)
	return &fixture{
		t: t, rec: rec,
		pvs: client.For[*corev1.PersistentVolume](env.Client), pvcs: client.For[*corev1.PersistentVolumeClaim](env.Client),
		classes: client.For[*storagev1.StorageClass](env.Client),
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

func (f *fixture) class(name, provisioner string, mode storagev1.VolumeBindingMode, params map[string]string) {
	f.t.Helper()
	if _, err := f.classes.Create(ctx(f.t), &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: provisioner, VolumeBindingMode: &mode, Parameters: params,
	}); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) claim(name, class, size string, modes ...corev1.PersistentVolumeAccessMode) *corev1.PersistentVolumeClaim {
	f.t.Helper()
	if len(modes) == 0 {
		modes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	}
	pvc, err := f.pvcs.Create(ctx(f.t), &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: &class, AccessModes: modes,
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
		},
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return pvc
}

func (f *fixture) volume(name, class, size string, policy corev1.PersistentVolumeReclaimPolicy, modes ...corev1.PersistentVolumeAccessMode) {
	f.t.Helper()
	if _, err := f.pvs.Create(ctx(f.t), &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			StorageClassName: class, AccessModes: modes, PersistentVolumeReclaimPolicy: policy,
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)},
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/data/" + name}},
		},
	}); err != nil {
		f.t.Fatal(err)
	}
}

// available waits for the volumes to be Available, as the binder makes a
// new volume that names no claim.
func (f *fixture) available(names ...string) {
	f.t.Helper()
	controllertest.Eventually(f.t, "volumes Available", func() (bool, string) {
		for _, name := range names {
			v, err := f.pvs.Get(ctx(f.t), "", name)
			if err != nil {
				return false, err.Error()
			}
			if v.Status.Phase != corev1.VolumeAvailable {
				return false, name + " is " + string(v.Status.Phase)
			}
		}
		return true, ""
	})
}

// bound waits for claim name to be Bound, and returns it and its volume,
// checked both ways.
func (f *fixture) bound(name string) (*corev1.PersistentVolumeClaim, *corev1.PersistentVolume) {
	f.t.Helper()
	var pvc *corev1.PersistentVolumeClaim
	var pv *corev1.PersistentVolume
	controllertest.Eventually(f.t, "claim "+name+" Bound, its volume Bound to it", func() (bool, string) {
		var err error
		if pvc, err = f.pvcs.Get(ctx(f.t), "default", name); err != nil {
			return false, err.Error()
		}
		if pvc.Status.Phase != corev1.ClaimBound || pvc.Spec.VolumeName == "" {
			return false, fmt.Sprintf("claim %s volume %q", pvc.Status.Phase, pvc.Spec.VolumeName)
		}
		if pv, err = f.pvs.Get(ctx(f.t), "", pvc.Spec.VolumeName); err != nil {
			return false, err.Error()
		}
		ref := pv.Spec.ClaimRef
		if pv.Status.Phase != corev1.VolumeBound || ref == nil || ref.UID != pvc.UID {
			return false, fmt.Sprintf("volume %s claimRef %v", pv.Status.Phase, ref)
		}
		return true, ""
	})
	return pvc, pv
}

func (f *fixture) event(reason, contains string) {
	f.t.Helper()
	controllertest.Eventually(f.t, "a "+reason+" event", func() (bool, string) {
		for _, e := range f.rec.WithReason(reason) {
			if strings.Contains(e, contains) {
				return true, ""
			}
		}
		return false, fmt.Sprint(f.rec.Events())
	})
}

func (f *fixture) gone(what string, get func() error) {
	f.t.Helper()
	controllertest.Eventually(f.t, what+" gone", func() (bool, string) {
		err := get()
		return client.IsNotFound(err), fmt.Sprint(err)
	})
}

func TestImmediateClassProvisionsAndBindsAndDeleteReclaims(t *testing.T) {
	f := start(t)
	f.class("fast", persistentvolume.Provisioner, storagev1.VolumeBindingImmediate, nil)
	want := f.claim("data", "fast", "3Gi")
	pvc, pv := f.bound("data")
	if pv.Name != "pvc-"+string(want.UID) {
		t.Errorf("volume %s, want pvc-<claim uid>", pv.Name)
	}
	size := pv.Spec.Capacity[corev1.ResourceStorage]
	if size.String() != "3Gi" || pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete ||
		pv.Spec.StorageClassName != "fast" || pv.Spec.HostPath == nil || pv.Spec.HostPath.Path != "/var/lib/minictl/volumes/"+pv.Name {
		t.Errorf("provisioned volume spec %+v", pv.Spec)
	}
	if pv.Annotations["pv.kubernetes.io/provisioned-by"] != persistentvolume.Provisioner ||
		pvc.Annotations["volume.kubernetes.io/storage-provisioner"] != persistentvolume.Provisioner ||
		pvc.Annotations["pv.kubernetes.io/bind-completed"] != "yes" {
		t.Errorf("annotations: volume %v claim %v", pv.Annotations, pvc.Annotations)
	}
	if got := pvc.Status.Capacity[corev1.ResourceStorage]; got.String() != "3Gi" || !slices.Equal(pvc.Status.AccessModes, pv.Spec.AccessModes) {
		t.Errorf("claim status %+v", pvc.Status)
	}
	f.event("ProvisioningSucceeded", "Successfully provisioned volume "+pv.Name+" using "+persistentvolume.Provisioner)
	if got := f.rec.WithReason("ProvisioningSucceeded"); len(got) != 1 {
		t.Errorf("ProvisioningSucceeded events %q, want one: the volume was made once", got)
	}

	if err := f.pvcs.Delete(ctx(t), "default", "data", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.gone("the claim", func() error { _, err := f.pvcs.Get(ctx(t), "default", "data"); return err })
	f.gone("its volume (reclaim policy Delete)", func() error { _, err := f.pvs.Get(ctx(t), "", pv.Name); return err })
}

func TestBindsTheSmallestMatchingVolumeAndRetainReleases(t *testing.T) {
	f := start(t)
	rwo, rwx := corev1.ReadWriteOnce, corev1.ReadWriteMany
	f.volume("big", "manual", "10Gi", "", rwo)
	f.volume("small", "manual", "2Gi", "", rwo, rwx)
	f.volume("wrong-mode", "manual", "1Gi", "", rwx)
	f.volume("other-class", "other", "1Gi", "", rwo)
	f.volume("too-small", "manual", "500Mi", "", rwo)
	all := []string{"big", "small", "wrong-mode", "other-class", "too-small"}
	f.available(all...)
	f.claim("data", "manual", "1Gi", rwo)
	pvc, pv := f.bound("data")
	if pv.Name != "small" {
		t.Errorf("bound to %s, want small: the smallest volume of the class with the size and the access mode", pv.Name)
	}
	if pv.Annotations["pv.kubernetes.io/bound-by-controller"] != "yes" ||
		pvc.Annotations["pv.kubernetes.io/bind-completed"] != "yes" || pvc.Annotations["pv.kubernetes.io/bound-by-controller"] != "yes" {
		t.Errorf("annotations: volume %v claim %v", pv.Annotations, pvc.Annotations)
	}
	f.available("big", "wrong-mode", "other-class", "too-small")

	if err := f.pvcs.Delete(ctx(t), "default", "data", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, "the retained volume Released, still there", func() (bool, string) {
		v, err := f.pvs.Get(ctx(t), "", "small")
		if err != nil {
			return false, err.Error()
		}
		return v.Status.Phase == corev1.VolumeReleased && v.DeletionTimestamp == nil, string(v.Status.Phase)
	})
}

func TestUnservedProvisionerLeavesTheClaimPending(t *testing.T) {
	f := start(t)
	f.class("elsewhere", "example.com/none", storagev1.VolumeBindingImmediate, nil)
	f.claim("data", "elsewhere", "1Gi")
	f.event("ExternalProvisioning", "Waiting for a volume to be created either by the external provisioner 'example.com/none' "+
		"or manually by the system administrator. If volume creation is delayed, please verify that the provisioner is running and correctly registered.")
	pvc, err := f.pvcs.Get(ctx(t), "default", "data")
	if err != nil {
		t.Fatal(err)
	}
	if pvc.Status.Phase != corev1.ClaimPending || pvc.Spec.VolumeName != "" || pvc.Annotations["volume.kubernetes.io/storage-provisioner"] != "example.com/none" {
		t.Errorf("claim phase %q volume %q annotations %v, want Pending, none, the provisioner named", pvc.Status.Phase, pvc.Spec.VolumeName, pvc.Annotations)
	}
}

func TestWaitForFirstConsumerProvisionsOnTheSelectedNode(t *testing.T) {
	f := start(t)
	f.class("local", persistentvolume.Provisioner, storagev1.VolumeBindingWaitForFirstConsumer, nil)
	f.claim("data", "local", "1Gi")
	f.event("WaitForFirstConsumer", "waiting for first consumer to be created before binding")

	pvc, err := f.pvcs.Get(ctx(t), "default", "data")
	if err != nil {
		t.Fatal(err)
	}
	if pvc.Spec.VolumeName != "" {
		t.Fatalf("bound to %s before a node was chosen", pvc.Spec.VolumeName)
	}
	pvc.Annotations = map[string]string{"volume.kubernetes.io/selected-node": "node-1"}
	if _, err := f.pvcs.Update(ctx(t), pvc); err != nil {
		t.Fatal(err)
	}
	_, pv := f.bound("data")
	terms := pv.Spec.NodeAffinity.Required.NodeSelectorTerms
	if len(terms) != 1 || terms[0].MatchExpressions[0].Key != corev1.LabelHostname || !slices.Equal(terms[0].MatchExpressions[0].Values, []string{"node-1"}) {
		t.Errorf("node affinity %+v, want kubernetes.io/hostname In [node-1]", pv.Spec.NodeAffinity)
	}
}

func TestAClassThatFailsOnPurposeLeavesTheClaimPending(t *testing.T) {
	f := start(t)
	f.class("broken", persistentvolume.Provisioner, storagev1.VolumeBindingImmediate, map[string]string{persistentvolume.FailParameter: "true"})
	f.claim("data", "broken", "1Gi")
	f.event("ProvisioningFailed", `Failed to provision volume with StorageClass "broken"`)
	pvc, err := f.pvcs.Get(ctx(t), "default", "data")
	if err != nil {
		t.Fatal(err)
	}
	if pvc.Status.Phase != corev1.ClaimPending || pvc.Spec.VolumeName != "" {
		t.Errorf("claim phase %q volume %q, want Pending and none", pvc.Status.Phase, pvc.Spec.VolumeName)
	}
}

// With one claim worker, as the controller manager runs the binder, a
// claim whose volume is being provisioned does not hold up the others:
// while the provisioned volume's create is held in front of the API
// server, another claim binds to an Available volume; once the create
// goes through, the first claim binds to its volume.
func TestProvisioningDoesNotHoldUpOtherClaims(t *testing.T) {
	arrived, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	f := startBehind(t, 1, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost && r.URL.Path == "/api/v1/persistentvolumes" {
				once.Do(func() { close(arrived) })
				select {
				case <-release:
				case <-r.Context().Done():
					return
				}
			}
			next.ServeHTTP(w, r)
		})
	})
	released := sync.OnceFunc(func() { close(release) })
	t.Cleanup(released) // before the front closes, which waits for the held request
	f.class("fast", persistentvolume.Provisioner, storagev1.VolumeBindingImmediate, nil)
	f.volume("manual-1", "manual", "1Gi", corev1.PersistentVolumeReclaimRetain, corev1.ReadWriteOnce)
	f.available("manual-1")

	f.claim("provisioned", "fast", "1Gi")
	select {
	case <-arrived:
	case <-ctx(t).Done():
		t.Fatal("the provisioner never created a volume")
	}
	f.claim("static", "manual", "1Gi")
	if _, pv := f.bound("static"); pv.Name != "manual-1" {
		t.Errorf("static bound to %s, want manual-1", pv.Name)
	}
	pvc, err := f.pvcs.Get(ctx(t), "default", "provisioned")
	if err != nil {
		t.Fatal(err)
	}
	if pvc.Status.Phase != corev1.ClaimPending || pvc.Spec.VolumeName != "" {
		t.Errorf("claim provisioned is %s with volume %q while its volume's create is held, want Pending and none", pvc.Status.Phase, pvc.Spec.VolumeName)
	}
	released()
	if _, pv := f.bound("provisioned"); pv.Name != "pvc-"+string(pvc.UID) {
		t.Errorf("provisioned bound to %s, want pvc-<claim uid>", pv.Name)
	}
}

// Two claims after the one volume that fits them, with several workers:
// one gets it, and the other waits, Pending, for another.
func TestTwoClaimsAfterOneVolume(t *testing.T) {
	f := startBehind(t, 5, nil)
	f.volume("only", "", "1Gi", corev1.PersistentVolumeReclaimRetain, corev1.ReadWriteOnce)
	f.available("only")
	f.claim("first", "", "1Gi")
	f.claim("second", "", "1Gi")
	f.event("FailedBinding", "no persistent volumes available for this claim and no storage class is set")
	var winner string
	controllertest.Eventually(t, "one claim Bound", func() (bool, string) {
		phases := map[string]corev1.PersistentVolumeClaimPhase{}
		for _, name := range []string{"first", "second"} {
			pvc, err := f.pvcs.Get(ctx(t), "default", name)
			if err != nil {
				return false, err.Error()
			}
			if pvc.Status.Phase == corev1.ClaimBound {
				winner = name
			}
			phases[name] = pvc.Status.Phase
		}
		return winner != "", fmt.Sprint(phases)
	})
	pvc, pv := f.bound(winner)
	if pv.Name != "only" || pv.Spec.ClaimRef.UID != pvc.UID {
		t.Errorf("volume %s claimRef %+v, want only, naming %s", pv.Name, pv.Spec.ClaimRef, pvc.Name)
	}
	loser := map[string]string{"first": "second", "second": "first"}[winner]
	got, err := f.pvcs.Get(ctx(t), "default", loser)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.Phase != corev1.ClaimPending || got.Spec.VolumeName != "" {
		t.Errorf("claim %s is %s with volume %q; want Pending, and no volume", loser, got.Status.Phase, got.Spec.VolumeName)
	}
}
