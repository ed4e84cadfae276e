package kubelet

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/informer"
	"github.com/minictl/minictl/internal/testenv"
)

// Short intervals, so that heartbeats are seen in tests.
const (
	testHeartbeat = 100 * time.Millisecond
	testStatus    = 200 * time.Millisecond
	testDeadline  = 15 * time.Second
	testBackOff   = 200 * time.Millisecond
)

func testLogger() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func newClient(t *testing.T) *client.RESTClient {
	t.Helper()
	env := testenv.Start(t)
	rc, err := client.New(&client.Config{Server: env.URL, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return rc
}

// startKubelet runs a kubelet for node name until the test ends.
func startKubelet(t *testing.T, rc *client.RESTClient, name string, adjust func(*Options)) *Kubelet {
	t.Helper()
	opts := Options{
		Client:               rc,
		NodeName:             name,
		Logger:               testLogger(),
		HeartbeatInterval:    testHeartbeat,
		StatusUpdateInterval: testStatus,
		BackOffBase:          testBackOff,
		MaxBackOff:           4 * testBackOff,
	}
	if adjust != nil {
		adjust(&opts)
	}
	k, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- k.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("kubelet Run: %v", err)
		}
	})
	return k
}

// waitFor polls cond until it holds, failing the test at the deadline.
func waitFor(t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(testDeadline)
	var lastErr error
	for time.Now().Before(deadline) {
		ok, err := cond()
		if ok {
			return
		}
		lastErr = err
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s (last error: %v)", what, lastErr)
}

func newPod(name, node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: corev1.PodSpec{
			NodeName:   node,
			Containers: []corev1.Container{{Name: "app", Image: "nginx:1.27"}},
		},
	}
}

func createPod(t *testing.T, rc *client.RESTClient, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	out, err := client.For[*corev1.Pod](rc).Create(context.Background(), pod)
	if err != nil {
		t.Fatalf("create pod %s: %v", pod.Name, err)
	}
	return out
}

func getPod(rc *client.RESTClient, name string) (*corev1.Pod, error) {
	return client.For[*corev1.Pod](rc).Get(context.Background(), "default", name)
}

// waitPod waits until pod name satisfies cond and returns it.
func waitPod(t *testing.T, rc *client.RESTClient, name, what string, cond func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	waitFor(t, fmt.Sprintf("pod %s %s", name, what), func() (bool, error) {
		var err error
		pod, err = getPod(rc, name)
		return err == nil && cond(pod), err
	})
	return pod
}

func runningAndReady(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodRunning && api.PodIsReady(pod)
}

func annotate(t *testing.T, rc *client.RESTClient, kind, name string, annotations map[string]any) {
	t.Helper()
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": annotations}})
	var err error
	switch kind {
	case "node":
		_, err = client.For[*corev1.Node](rc).Patch(context.Background(), "", name, types.MergePatchType, patch)
	case "pod":
		_, err = client.For[*corev1.Pod](rc).Patch(context.Background(), "default", name, types.MergePatchType, patch)
	}
	if err != nil {
		t.Fatalf("annotate %s %s: %v", kind, name, err)
	}
}

func condition(pod *corev1.Pod, typ corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range pod.Status.Conditions {
		if c.Type == typ {
			return c.Status
		}
	}
	return ""
}

func leaseRenewTime(rc *client.RESTClient, node string) (time.Time, error) {
	l, err := client.For[*coordinationv1.Lease](rc).Get(context.Background(), corev1.NamespaceNodeLease, node)
	if err != nil {
		return time.Time{}, err
	}
	if l.Spec.RenewTime == nil {
		return time.Time{}, fmt.Errorf("lease %s has no renewTime", node)
	}
	return l.Spec.RenewTime.Time, nil
}

func TestRegistersReadyNodeAndRenewsLease(t *testing.T) {
	rc := newClient(t)
	startKubelet(t, rc, "node-1", func(o *Options) {
		o.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")}
		o.Labels = map[string]string{"disk": "ssd"}
	})

	var node *corev1.Node
	waitFor(t, "node-1 registered Ready", func() (bool, error) {
		var err error
		node, err = client.For[*corev1.Node](rc).Get(context.Background(), "", "node-1")
		return err == nil && nodeReady(node), err
	})
	for name, want := range map[corev1.ResourceName]string{
		corev1.ResourceCPU: "8", corev1.ResourceMemory: "8Gi", corev1.ResourcePods: "110",
	} {
		if got := node.Status.Capacity[name]; got.Cmp(resource.MustParse(want)) != 0 {
			t.Errorf("capacity %s = %s, want %s", name, got.String(), want)
		}
		if got := node.Status.Allocatable[name]; got.Cmp(resource.MustParse(want)) != 0 {
			t.Errorf("allocatable %s = %s, want %s", name, got.String(), want)
		}
	}
	for k, want := range map[string]string{
		corev1.LabelHostname: "node-1", corev1.LabelOSStable: "linux", "type": "sim", "disk": "ssd",
	} {
		if got := node.Labels[k]; got != want {
			t.Errorf("label %s = %q, want %q", k, got, want)
		}
	}
	if v := node.Status.NodeInfo.KubeletVersion; v != Version {
		t.Errorf("kubeletVersion = %q, want %q", v, Version)
	}
	if len(node.Status.Addresses) != 2 || node.Status.Addresses[0].Address != "127.0.1.1" {
		t.Errorf("addresses = %+v, want InternalIP 127.0.1.1 and Hostname", node.Status.Addresses)
	}
	for _, typ := range []corev1.NodeConditionType{corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure} {
		found := false
		for _, c := range node.Status.Conditions {
			if c.Type == typ {
				found = c.Status == corev1.ConditionFalse
			}
		}
		if !found {
			t.Errorf("condition %s is not False: %+v", typ, node.Status.Conditions)
		}
	}

	var first time.Time
	waitFor(t, "a lease", func() (bool, error) {
		var err error
		first, err = leaseRenewTime(rc, "node-1")
		return err == nil, err
	})
	waitFor(t, "the lease renewed", func() (bool, error) {
		got, err := leaseRenewTime(rc, "node-1")
		return err == nil && got.After(first), err
	})
	lease, err := client.For[*coordinationv1.Lease](rc).Get(context.Background(), corev1.NamespaceNodeLease, "node-1")
	if err != nil {
		t.Fatal(err)
	}
	if h := lease.Spec.HolderIdentity; h == nil || *h != "node-1" {
		t.Errorf("holderIdentity = %v, want node-1", h)
	}
	if d := lease.Spec.LeaseDurationSeconds; d == nil || *d != 40 {
		t.Errorf("leaseDurationSeconds = %v, want 40", d)
	}
	if refs := lease.OwnerReferences; len(refs) != 1 || refs[0].Kind != "Node" || refs[0].UID != node.UID {
		t.Errorf("ownerReferences = %+v, want the Node", refs)
	}
}

func TestPodsRunWithDistinctIPsFromTheNodeRange(t *testing.T) {
	rc := newClient(t)
	startKubelet(t, rc, "node-1", func(o *Options) { o.PodCIDR = "10.99.0.0/24" })
	fallback := netip.MustParsePrefix("10.99.0.0/24")

	createPod(t, rc, newPod("web-1", "node-1"))
	createPod(t, rc, newPod("web-2", "node-1"))
	ips := map[string]string{}
	for _, name := range []string{"web-1", "web-2"} {
		pod := waitPod(t, rc, name, "Running and Ready", runningAndReady)
		ip, err := netip.ParseAddr(pod.Status.PodIP)
		if err != nil || !fallback.Contains(ip) {
			t.Errorf("%s podIP = %q, want one in %s", name, pod.Status.PodIP, fallback)
		}
		ips[pod.Status.PodIP] = name
		if pod.Status.HostIP != "127.0.1.1" || pod.Status.StartTime == nil {
			t.Errorf("%s hostIP %q, startTime %v", name, pod.Status.HostIP, pod.Status.StartTime)
		}
		for _, typ := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
			if got := condition(pod, typ); got != corev1.ConditionTrue {
				t.Errorf("%s condition %s = %q, want True", name, typ, got)
			}
		}
		cs := pod.Status.ContainerStatuses
		if len(cs) != 1 || !cs[0].Ready || cs[0].State.Running == nil || cs[0].Started == nil || !*cs[0].Started ||
			cs[0].ImageID != "sim://nginx:1.27" || cs[0].ContainerID != fmt.Sprintf("sim://%s/app", pod.UID) {
			t.Errorf("%s containerStatuses = %+v", name, cs)
		}
	}
	if len(ips) != 2 {
		t.Errorf("pods share an IP: %v", ips)
	}

	// Once the node IPAM controller sets spec.podCIDR, new pods get IPs
	// from it.
	patch := []byte(`{"spec":{"podCIDR":"10.244.7.0/24","podCIDRs":["10.244.7.0/24"]}}`)
	if _, err := client.For[*corev1.Node](rc).Patch(context.Background(), "", "node-1", types.MergePatchType, patch); err != nil {
		t.Fatal(err)
	}
	podCIDR := netip.MustParsePrefix("10.244.7.0/24")
	waitFor(t, "a pod with an IP from spec.podCIDR", func() (bool, error) {
		// The kubelet's cache may not have the podCIDR yet: try pods
		// until one is started after it has.
		name := fmt.Sprintf("later-%d", time.Now().UnixNano())
		createPod(t, rc, newPod(name, "node-1"))
		pod := waitPod(t, rc, name, "Running", runningAndReady)
		ip, err := netip.ParseAddr(pod.Status.PodIP)
		return err == nil && podCIDR.Contains(ip), err
	})
}

func TestGracefulDeletionStopsThenRemovesThePod(t *testing.T) {
	rc := newClient(t)
	startKubelet(t, rc, "node-1", func(o *Options) { o.TerminationDelay = 300 * time.Millisecond })
	pod := createPod(t, rc, newPod("web", "node-1"))
	waitPod(t, rc, "web", "Running", runningAndReady)

	if err := client.For[*corev1.Pod](rc).Delete(context.Background(), "default", "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	stopped := waitPod(t, rc, "web", "Terminating with its containers stopped", func(p *corev1.Pod) bool {
		return p.DeletionTimestamp != nil && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Terminated != nil
	})
	if stopped.UID != pod.UID || api.PodIsReady(stopped) {
		t.Errorf("stopped pod: uid %s (want %s), ready %v", stopped.UID, pod.UID, api.PodIsReady(stopped))
	}
	waitFor(t, "the pod removed", func() (bool, error) {
		_, err := getPod(rc, "web")
		return client.IsNotFound(err), err
	})
}

func TestHeartbeatStopAnnotation(t *testing.T) {
	rc := newClient(t)
	startKubelet(t, rc, "node-1", nil)
	waitFor(t, "a lease", func() (bool, error) {
		_, err := leaseRenewTime(rc, "node-1")
		return err == nil, err
	})

	annotate(t, rc, "node", "node-1", map[string]any{AnnotationHeartbeat: "stop"})
	// A renewal may be in flight as the annotation lands: wait until the
	// lease stands still for a few heartbeats, then watch it stay still.
	var stoppedAt time.Time
	waitFor(t, "renewals to stop", func() (bool, error) {
		before, err := leaseRenewTime(rc, "node-1")
		if err != nil {
			return false, err
		}
		time.Sleep(3 * testHeartbeat)
		after, err := leaseRenewTime(rc, "node-1")
		stoppedAt = after
		return err == nil && after.Equal(before), err
	})
	heartbeat := func() time.Time {
		node, err := client.For[*corev1.Node](rc).Get(context.Background(), "", "node-1")
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.LastHeartbeatTime.Time
			}
		}
		return time.Time{}
	}
	statusAt := heartbeat()
	for range 10 {
		time.Sleep(testHeartbeat)
		if got, err := leaseRenewTime(rc, "node-1"); err != nil || !got.Equal(stoppedAt) {
			t.Fatalf("lease renewed while heartbeat stopped: %v → %v (%v)", stoppedAt, got, err)
		}
	}
	if got := heartbeat(); !got.Equal(statusAt) {
		t.Errorf("node status written while heartbeat stopped: %v → %v", statusAt, got)
	}

	annotate(t, rc, "node", "node-1", map[string]any{AnnotationHeartbeat: nil})
	waitFor(t, "renewals to resume", func() (bool, error) {
		got, err := leaseRenewTime(rc, "node-1")
		return err == nil && got.After(stoppedAt), err
	})
	waitFor(t, "status updates to resume", func() (bool, error) {
		return heartbeat().After(statusAt), nil
	})
}

func TestReadyAnnotation(t *testing.T) {
	rc := newClient(t)
	startKubelet(t, rc, "node-1", nil)
	createPod(t, rc, newPod("web", "node-1"))
	waitPod(t, rc, "web", "Running and Ready", runningAndReady)

	annotate(t, rc, "pod", "web", map[string]any{AnnotationReady: "false"})
	pod := waitPod(t, rc, "web", "not Ready", func(p *corev1.Pod) bool { return !api.PodIsReady(p) })
	if got := condition(pod, corev1.ContainersReady); got != corev1.ConditionFalse {
		t.Errorf("ContainersReady = %q, want False", got)
	}
	if cs := pod.Status.ContainerStatuses; len(cs) != 1 || cs[0].Ready || cs[0].State.Running == nil {
		t.Errorf("containerStatuses = %+v, want running and not ready", cs)
	}
	if pod.Status.Phase != corev1.PodRunning {
		t.Errorf("phase = %s, want Running", pod.Status.Phase)
	}

	annotate(t, rc, "pod", "web", map[string]any{AnnotationReady: nil})
	waitPod(t, rc, "web", "Ready again", runningAndReady)
}

func TestExitCodeAnnotation(t *testing.T) {
	rc := newClient(t)
	startKubelet(t, rc, "node-1", nil)

	t.Run("restartPolicy Never fails with the exit code", func(t *testing.T) {
		pod := newPod("job", "node-1")
		pod.Spec.RestartPolicy = corev1.RestartPolicyNever
		createPod(t, rc, pod)
		waitPod(t, rc, "job", "Running", runningAndReady)
		annotate(t, rc, "pod", "job", map[string]any{AnnotationExitCode: "3"})
		got := waitPod(t, rc, "job", "Failed", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
		cs := got.Status.ContainerStatuses
		if len(cs) != 1 || cs[0].State.Terminated == nil || cs[0].State.Terminated.ExitCode != 3 || cs[0].State.Terminated.Reason != "Error" {
			t.Errorf("containerStatuses = %+v, want terminated with exit code 3", cs)
		}
		if api.PodIsReady(got) {
			t.Error("a failed pod is Ready")
		}
	})

	t.Run("restartPolicy OnFailure with 0 succeeds", func(t *testing.T) {
		pod := newPod("batch", "node-1")
		pod.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
		pod.Annotations = map[string]string{AnnotationExitCode: "0"}
		createPod(t, rc, pod)
		got := waitPod(t, rc, "batch", "Succeeded", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
		if cs := got.Status.ContainerStatuses; len(cs) != 1 || cs[0].State.Terminated == nil || cs[0].State.Terminated.Reason != "Completed" {
			t.Errorf("containerStatuses = %+v, want terminated Completed", cs)
		}
	})

	t.Run("restartPolicy Always restarts once per value", func(t *testing.T) {
		createPod(t, rc, newPod("web", "node-1"))
		waitPod(t, rc, "web", "Running", runningAndReady)
		annotate(t, rc, "pod", "web", map[string]any{AnnotationExitCode: "1"})
		got := waitPod(t, rc, "web", "restarted", func(p *corev1.Pod) bool {
			return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount > 0
		})
		cs := got.Status.ContainerStatuses[0]
		if cs.RestartCount != 1 || cs.State.Running == nil || cs.LastTerminationState.Terminated == nil ||
			cs.LastTerminationState.Terminated.ExitCode != 1 || got.Status.Phase != corev1.PodRunning {
			t.Errorf("after exit 1: phase %s, container %+v; want Running, restartCount 1, lastState exit 1", got.Status.Phase, cs)
		}
		// Another change makes the kubelet sync the pod again: the exit
		// is not applied twice.
		annotate(t, rc, "pod", "web", map[string]any{AnnotationReady: "false"})
		got = waitPod(t, rc, "web", "not Ready", func(p *corev1.Pod) bool { return !api.PodIsReady(p) })
		if n := got.Status.ContainerStatuses[0].RestartCount; n != 1 {
			t.Errorf("restartCount = %d after another sync, want 1", n)
		}
		// The same value set again after removal applies again.
		annotate(t, rc, "pod", "web", map[string]any{AnnotationExitCode: nil, AnnotationReady: nil})
		waitPod(t, rc, "web", "Ready", runningAndReady)
		annotate(t, rc, "pod", "web", map[string]any{AnnotationExitCode: "1"})
		waitPod(t, rc, "web", "restarted twice", func(p *corev1.Pod) bool {
			return p.Status.ContainerStatuses[0].RestartCount == 2
		})
	})
}

func TestKubeletsShareAFactory(t *testing.T) {
	rc := newClient(t)
	factory := informer.NewSharedInformerFactory(rc, informer.FactoryOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 2)
	for _, name := range []string{"node-a", "node-b"} {
		k, err := New(Options{Client: rc, NodeName: name, Informers: factory, Logger: testLogger(),
			HeartbeatInterval: testHeartbeat, StatusUpdateInterval: testStatus})
		if err != nil {
			t.Fatal(err)
		}
		go func() { done <- k.Run(ctx) }()
	}
	factory.Start(ctx)
	t.Cleanup(func() {
		cancel()
		for range 2 {
			if err := <-done; err != nil {
				t.Errorf("kubelet Run: %v", err)
			}
		}
		factory.Shutdown()
	})

	createPod(t, rc, newPod("on-a", "node-a"))
	createPod(t, rc, newPod("on-b", "node-b"))
	for pod, node := range map[string]string{"on-a": "node-a", "on-b": "node-b"} {
		got := waitPod(t, rc, pod, "Running", runningAndReady)
		want := fmt.Sprintf("127.0.1.%d", nodeNumber(node))
		if got.Status.HostIP != want {
			t.Errorf("%s hostIP = %s, want %s (%s's address)", pod, got.Status.HostIP, want, node)
		}
	}
}

func TestRestartedKubeletTakesOverItsNodeAndPods(t *testing.T) {
	rc := newClient(t)
	ctx, cancel := context.WithCancel(context.Background())
	first, err := New(Options{Client: rc, NodeName: "node-1", Logger: testLogger(),
		HeartbeatInterval: testHeartbeat, StatusUpdateInterval: testStatus})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- first.Run(ctx) }()
	createPod(t, rc, newPod("web", "node-1"))
	waitPod(t, rc, "web", "Running", runningAndReady)
	annotate(t, rc, "pod", "web", map[string]any{AnnotationExitCode: "1"})
	before := waitPod(t, rc, "web", "restarted", func(p *corev1.Pod) bool {
		return p.Status.ContainerStatuses[0].RestartCount == 1
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("first kubelet: %v", err)
	}

	startKubelet(t, rc, "node-1", func(o *Options) { o.Labels = map[string]string{"generation": "2"} })
	waitFor(t, "the node relabelled by the new kubelet", func() (bool, error) {
		node, err := client.For[*corev1.Node](rc).Get(context.Background(), "", "node-1")
		return err == nil && node.Labels["generation"] == "2", err
	})
	// The new kubelet syncs the pod (the annotation change proves it) and
	// neither restarts it nor applies the exit again.
	annotate(t, rc, "pod", "web", map[string]any{AnnotationReady: "false"})
	after := waitPod(t, rc, "web", "not Ready", func(p *corev1.Pod) bool { return !api.PodIsReady(p) })
	cs := after.Status.ContainerStatuses[0]
	if cs.RestartCount != 1 || after.Status.PodIP != before.Status.PodIP || !after.Status.StartTime.Equal(before.Status.StartTime) {
		t.Errorf("after the restart: restartCount %d, podIP %s (was %s), startTime %v (was %v)",
			cs.RestartCount, after.Status.PodIP, before.Status.PodIP, after.Status.StartTime, before.Status.StartTime)
	}
}

// TestExternalCloudProviderTaintsTheNode: a kubelet whose node a cloud
// controller manager initializes registers it tainted uninitialized, and
// a kubelet that comes back to a node the cloud-node controller has
// initialized does not taint it again.
func TestExternalCloudProviderTaintsTheNode(t *testing.T) {
	rc := newClient(t)
	nodes := client.For[*corev1.Node](rc)
	ctx, cancel := context.WithCancel(context.Background())
	first, err := New(Options{Client: rc, NodeName: "node-1", Logger: testLogger(), ExternalCloudProvider: true,
		HeartbeatInterval: testHeartbeat, StatusUpdateInterval: testStatus})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- first.Run(ctx) }()
	var node *corev1.Node
	waitFor(t, "node-1 registered", func() (bool, error) {
		node, err = nodes.Get(context.Background(), "", "node-1")
		return err == nil, err
	})
	want := corev1.Taint{Key: "node.cloudprovider.kubernetes.io/uninitialized", Value: "true", Effect: corev1.TaintEffectNoSchedule}
	if len(node.Spec.Taints) != 1 || node.Spec.Taints[0].Key != want.Key || node.Spec.Taints[0].Value != want.Value || node.Spec.Taints[0].Effect != want.Effect {
		t.Fatalf("taints %+v, want only %+v", node.Spec.Taints, want)
	}
	var renewed time.Time
	waitFor(t, "node-1's lease", func() (bool, error) {
		renewed, err = leaseRenewTime(rc, "node-1")
		return err == nil, err
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("first kubelet: %v", err)
	}

	// The cloud-node controller initializes the node.
	if _, err := nodes.Patch(context.Background(), "", "node-1", types.MergePatchType, []byte(`{"spec":{"taints":null,"providerID":"sim://sim-a/node-1"}}`)); err != nil {
		t.Fatal(err)
	}
	startKubelet(t, rc, "node-1", func(o *Options) {
		o.ExternalCloudProvider = true
		o.Labels = map[string]string{"generation": "2"}
	})
	waitFor(t, "node-1 taken over", func() (bool, error) {
		node, err = nodes.Get(context.Background(), "", "node-1")
		return err == nil && node.Labels["generation"] == "2", err
	})
	waitFor(t, "the new kubelet's heartbeat", func() (bool, error) {
		at, err := leaseRenewTime(rc, "node-1")
		return err == nil && at.After(renewed), err
	})
	if node, err = nodes.Get(context.Background(), "", "node-1"); err != nil {
		t.Fatal(err)
	}
	if len(node.Spec.Taints) != 0 {
		t.Fatalf("an initialized node tainted again: %+v", node.Spec.Taints)
	}
}

// TestExternalCloudProviderKeepsTheCloudsAddresses: once the cloud-node
// controller has written the machine's addresses, the kubelet's status
// updates leave them alone; without a cloud it reports its own.
func TestExternalCloudProviderKeepsTheCloudsAddresses(t *testing.T) {
	rc := newClient(t)
	nodes := client.For[*corev1.Node](rc)
	for _, external := range []bool{true, false} {
		name := fmt.Sprintf("external-%v", external)
		startKubelet(t, rc, name, func(o *Options) { o.ExternalCloudProvider = external })
		var node *corev1.Node
		waitFor(t, name+" registered with its own addresses", func() (bool, error) {
			var err error
			node, err = nodes.Get(context.Background(), "", name)
			return err == nil && len(node.Status.Addresses) == 2, err
		})
		cloudAddrs := `{"status":{"addresses":[{"type":"InternalIP","address":"10.0.0.9"},{"type":"Hostname","address":"` + name + `"}]}}`
		written, err := nodes.Patch(context.Background(), "", name, types.MergePatchType, []byte(cloudAddrs), "status")
		if err != nil {
			t.Fatal(err)
		}
		beat := readyHeartbeat(written)
		waitFor(t, name+"'s next status update", func() (bool, error) {
			node, err = nodes.Get(context.Background(), "", name)
			return err == nil && readyHeartbeat(node).After(beat), err
		})
		kept := node.Status.Addresses[0].Address == "10.0.0.9"
		if kept != external {
			t.Errorf("%s: addresses %v after a status update; the cloud's kept: %v, want %v", name, node.Status.Addresses, kept, external)
		}
	}
}

func readyHeartbeat(node *corev1.Node) time.Time {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.LastHeartbeatTime.Time
		}
	}
	return time.Time{}
}
