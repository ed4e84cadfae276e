package scheduler

import (
	"context"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/client/record"
	"github.com/minictl/minictl/controllers/persistentvolume"
	"github.com/minictl/minictl/informer"
)

// startBinder runs the persistentvolume-binder, with its simulated
// provisioner, until the test ends: the controller that binds the claims
// the scheduler asks for.
func startBinder(t *testing.T, rc *client.RESTClient) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	factory := informer.NewSharedInformerFactory(rc, informer.FactoryOptions{})
	recorder := record.NewRecorder(rc, record.Options{Component: "persistentvolume-controller", RetryInterval: 100 * time.Millisecond})
	var opts persistentvolume.Options
	opts.Client, opts.Informers, opts.Recorder, opts.Logger = rc, factory, recorder, testLogger()
	binder, err := persistentvolume.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx)
	done := make(chan struct{}, 2)
	go func() { binder.Run(ctx, 2); done <- struct{}{} }()
	go func() { recorder.Run(ctx); done <- struct{}{} }()
	t.Cleanup(func() {
		cancel()
		<-done
		<-done
		factory.Shutdown()
	})
}

func createClass(t *testing.T, rc *client.RESTClient, name, provisioner string, mode storagev1.VolumeBindingMode) {
	t.Helper()
	class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: provisioner, VolumeBindingMode: &mode}
	if _, err := client.For[*storagev1.StorageClass](rc).Create(context.Background(), class); err != nil {
		t.Fatalf("create class %s: %v", name, err)
	}
}

func createClaim(t *testing.T, rc *client.RESTClient, name, class string) *corev1.PersistentVolumeClaim {
	t.Helper()
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: &class,
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	got, err := client.For[*corev1.PersistentVolumeClaim](rc).Create(context.Background(), pvc)
	if err != nil {
		t.Fatalf("create claim %s: %v", name, err)
	}
	return got
}

// podWithClaim is a pod mounting claim.
func podWithClaim(name, claim string) *corev1.Pod {
	pod := testPod(name, "100m", "64Mi")
	pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim},
	}}}
	return pod
}

func getClaim(rc *client.RESTClient, name string) (*corev1.PersistentVolumeClaim, error) {
	return client.For[*corev1.PersistentVolumeClaim](rc).Get(context.Background(), "default", name)
}

// firstRevision watches T in namespace default from revision from and
// returns the revision at which an object first satisfied cond.
func firstRevision[T api.Object](t *testing.T, rc *client.RESTClient, from string, cond func(T) bool) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
	defer cancel()
	w, err := client.For[T](rc).Watch(ctx, "default", metav1.ListOptions{ResourceVersion: from})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for ev := range w.Events() {
		if ev.Type == "ADDED" || ev.Type == "MODIFIED" {
			if cond(ev.Object) {
				rv, _ := strconv.ParseInt(ev.Object.GetResourceVersion(), 10, 64)
				return rv
			}
		}
	}
	t.Fatalf("watch ended before the change it waited for: %v", w.Err())
	return 0
}

func TestWaitForFirstConsumerClaimIsProvisionedOnTheChosenNodeBeforeThePodIsBound(t *testing.T) {
	rc := newClient(t)
	createNode(t, rc, testNode("node-1", "2", "4Gi", "110"))
	createNode(t, rc, testNode("node-2", "4", "8Gi", "110"))
	createClass(t, rc, "local", persistentvolume.Provisioner, storagev1.VolumeBindingWaitForFirstConsumer)
	startBinder(t, rc)
	startScheduler(t, rc)

	claim := createClaim(t, rc, "data", "local")
	// Nothing consumes the claim yet: the binder leaves it Pending.
	time.Sleep(200 * time.Millisecond)
	if got, err := getClaim(rc, "data"); err != nil || got.Spec.VolumeName != "" || got.Annotations[api.AnnSelectedNode] != "" {
		t.Fatalf("claim without a consumer = %+v, %v; want it unbound and no node selected", got, err)
	}
	createPod(t, rc, podWithClaim("db", "data"))
	node := waitBound(t, rc, "db")
	if node != "node-2" {
		t.Errorf("pod bound to %s, want node-2 (the emptier node)", node)
	}

	// When the pod is bound its claim is bound too, as the scheduler
	// waits for it: named volume and bind-completed annotation, which
	// the persistentvolume-binder writes first. The claim's phase, in
	// its status, the binder writes right after, as kube's does.
	pvc, err := getClaim(rc, "data")
	if err != nil {
		t.Fatal(err)
	}
	if !fullyBound(pvc) || pvc.Annotations[api.AnnSelectedNode] != node {
		t.Fatalf("claim when the pod is bound: volume %q, annotations %v; want it bound, with %s selected", pvc.Spec.VolumeName, pvc.Annotations, node)
	}
	waitFor(t, "the claim's phase Bound", func() (bool, error) {
		pvc, err = getClaim(rc, "data")
		return err == nil && pvc.Status.Phase == corev1.ClaimBound, err
	})
	pv, err := client.For[*corev1.PersistentVolume](rc).Get(context.Background(), "", pvc.Spec.VolumeName)
	if err != nil {
		t.Fatal(err)
	}
	terms := pv.Spec.NodeAffinity.Required.NodeSelectorTerms
	if len(terms) != 1 || terms[0].MatchExpressions[0].Key != corev1.LabelHostname || terms[0].MatchExpressions[0].Values[0] != node {
		t.Errorf("volume %s node affinity = %+v, want %s=%s", pv.Name, terms, corev1.LabelHostname, node)
	}

	// The history says the same: the claim was bound before the pod.
	claimBound := firstRevision(t, rc, claim.ResourceVersion, func(c *corev1.PersistentVolumeClaim) bool {
		return c.Name == "data" && fullyBound(c)
	})
	podBound := firstRevision(t, rc, claim.ResourceVersion, func(p *corev1.Pod) bool {
		return p.Name == "db" && p.Spec.NodeName != ""
	})
	if claimBound >= podBound {
		t.Errorf("claim Bound at revision %d, pod bound at %d: the pod was bound first", claimBound, podBound)
	}
}

func TestImmediateClaimOnAVolumeOfNode2PutsThePodOnNode2(t *testing.T) {
	rc := newClient(t)
	createNode(t, rc, testNode("node-1", "8", "16Gi", "110"))
	createNode(t, rc, testNode("node-2", "1", "2Gi", "110"))
	createClass(t, rc, "manual", "kubernetes.io/no-provisioner", storagev1.VolumeBindingImmediate)
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "disk-2"},
		Spec: corev1.PersistentVolumeSpec{
			StorageClassName: "manual",
			Capacity:         corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("5Gi")},
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: "/mnt/disk-2"},
			},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{"node-2"}}},
			}}}},
		},
	}
	startBinder(t, rc)
	startScheduler(t, rc)
	if _, err := client.For[*corev1.PersistentVolume](rc).Create(context.Background(), pv); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "volume disk-2 Available", func() (bool, error) {
		got, err := client.For[*corev1.PersistentVolume](rc).Get(context.Background(), "", "disk-2")
		return err == nil && got.Status.Phase == corev1.VolumeAvailable, err
	})
	createClaim(t, rc, "logs", "manual")
	createPod(t, rc, podWithClaim("app", "logs"))
	if node := waitBound(t, rc, "app"); node != "node-2" {
		t.Errorf("pod bound to %s, want node-2, where its volume is", node)
	}
}

func TestPodWhoseClaimCannotBeProvisionedStaysPending(t *testing.T) {
	rc := newClient(t)
	createNode(t, rc, testNode("node-1", "2", "4Gi", "110"))
	createNode(t, rc, testNode("node-2", "2", "4Gi", "110"))
	createClass(t, rc, "local-disks", "kubernetes.io/no-provisioner", storagev1.VolumeBindingWaitForFirstConsumer)
	createClass(t, rc, "external", "example.com/nobody-serves-this", storagev1.VolumeBindingImmediate)
	startBinder(t, rc)
	startScheduler(t, rc)

	createClaim(t, rc, "scratch", "local-disks")
	createPod(t, rc, podWithClaim("batch", "scratch"))
	createPod(t, rc, podWithClaim("orphan", "missing"))
	createClaim(t, rc, "elsewhere", "external")
	createPod(t, rc, podWithClaim("waiter", "elsewhere"))

	for name, want := range map[string]string{
		"batch":  "0/2 nodes are available: 2 node(s) didn't find available persistent volumes to bind.",
		"orphan": `0/2 nodes are available: persistentvolumeclaim "missing" not found.`,
		"waiter": "0/2 nodes are available: pod has unbound immediate PersistentVolumeClaims.",
	} {
		if msg := waitEvent(t, rc, name, "FailedScheduling"); msg != want {
			t.Errorf("%s: FailedScheduling = %q, want %q", name, msg, want)
		}
		pod, err := getPod(rc, name)
		if err != nil {
			t.Fatal(err)
		}
		if c := podScheduledCondition(pod); pod.Spec.NodeName != "" || c == nil || c.Reason != corev1.PodReasonUnschedulable || c.Message != want {
			t.Errorf("%s: node %q, PodScheduled %+v; want Pending, Unschedulable: %s", name, pod.Spec.NodeName, c, want)
		}
	}
	if pvc, err := getClaim(rc, "scratch"); err != nil || pvc.Annotations[api.AnnSelectedNode] != "" {
		t.Errorf("claim %+v, %v: want no node selected for a pod that fits nowhere", pvc, err)
	}

	// A volume an administrator adds on node-1 lets the pod in.
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "ssd-1"},
		Spec: corev1.PersistentVolumeSpec{
			StorageClassName:       "local-disks",
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")},
			AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeSource: corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: "/mnt/ssd"}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{"node-1"}}},
			}}}},
		},
	}
	if _, err := client.For[*corev1.PersistentVolume](rc).Create(context.Background(), pv); err != nil {
		t.Fatal(err)
	}
	if node := waitBound(t, rc, "batch"); node != "node-1" {
		t.Errorf("pod bound to %s, want node-1, where the new volume is", node)
	}
	if pvc, err := getClaim(rc, "scratch"); err != nil || pvc.Spec.VolumeName != "ssd-1" {
		t.Errorf("claim %+v, %v: want it bound to ssd-1", pvc, err)
	}
}

func TestVolumesNotBoundInTimeLeaveThePodPendingAndTheClaimFree(t *testing.T) {
	rc := newClient(t)
	createNode(t, rc, testNode("node-1", "2", "4Gi", "110"))
	createClass(t, rc, "external", "example.com/nobody-serves-this", storagev1.VolumeBindingWaitForFirstConsumer)
	startBinder(t, rc)
	startScheduler(t, rc, func(o *Options) {
		o.BindTimeout = 500 * time.Millisecond
		o.PodInitialBackoff, o.PodMaxBackoff = time.Hour, time.Hour // one attempt in this test
	})

	createClaim(t, rc, "data", "external")
	createPod(t, rc, podWithClaim("web", "data"))

	msg := waitEvent(t, rc, "web", "FailedScheduling")
	if want := `running PreBind plugin "VolumeBinding": binding volumes: context deadline exceeded`; msg != want {
		t.Errorf("FailedScheduling = %q, want %q", msg, want)
	}
	waitFor(t, "the selected-node annotation taken off the claim", func() (bool, error) {
		pvc, err := getClaim(rc, "data")
		return err == nil && pvc.Annotations[api.AnnSelectedNode] == "", err
	})
	// The condition is written last, after the event and the claim.
	waitFor(t, "the pod's PodScheduled condition with reason SchedulerError", func() (bool, error) {
		pod, err := getPod(rc, "web")
		if err != nil {
			return false, err
		}
		c := podScheduledCondition(pod)
		return c != nil && c.Reason == corev1.PodReasonSchedulerError, nil
	})
	pod, err := getPod(rc, "web")
	if err != nil {
		t.Fatal(err)
	}
	if pod.Spec.NodeName != "" {
		t.Errorf("pod bound to %s; want it unbound", pod.Spec.NodeName)
	}
}

// Pods waiting for their volumes hold no worker: with both of the
// scheduler's workers' pods waiting for claims no provisioner serves,
// a pod without claims is still placed; the waiting pods stay unbound.
func TestPodsWaitingForTheirVolumesDoNotHoldUpOthers(t *testing.T) {
	rc := newClient(t)
	createNode(t, rc, testNode("node-1", "4", "8Gi", "110"))
	createClass(t, rc, "external", "example.com/nobody-serves-this", storagev1.VolumeBindingWaitForFirstConsumer)
	startScheduler(t, rc) // two workers
	waiting := []string{"wait-1", "wait-2"}
	for _, name := range waiting {
		createClaim(t, rc, name, "external")
		createPod(t, rc, podWithClaim(name, name))
	}
	for _, name := range waiting {
		waitFor(t, "a node chosen for claim "+name, func() (bool, error) {
			pvc, err := getClaim(rc, name)
			return err == nil && pvc.Annotations[api.AnnSelectedNode] == "node-1", err
		})
	}
	createPod(t, rc, testPod("free", "100m", "64Mi"))
	if node := waitBound(t, rc, "free"); node != "node-1" {
		t.Errorf("pod free bound to %s, want node-1", node)
	}
	for _, name := range waiting {
		pod, err := getPod(rc, name)
		if err != nil {
			t.Fatal(err)
		}
		if pod.Spec.NodeName != "" {
			t.Errorf("pod %s bound to %s while its claim is unbound", name, pod.Spec.NodeName)
		}
	}
}
