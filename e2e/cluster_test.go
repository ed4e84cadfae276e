package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/informer"
	"github.com/minictl/minictl/internal/minitest"
)

const clusterTimeout = 60 * time.Second

func (c *cluster) client(t *testing.T) *client.RESTClient {
	t.Helper()
	rc, err := client.New(&client.Config{Server: c.URL})
	if err != nil {
		t.Fatal(err)
	}
	return rc
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(clusterTimeout)
	var last string
	for time.Now().Before(deadline) {
		ok, state := cond()
		if ok {
			return
		}
		last = state
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s; last: %s", what, last)
}

func deploymentObj(name string, replicas int32, image string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: name, Image: image}}},
			},
		},
	}
}

// livePods are the pods selecting app=name that are not being deleted.
func livePods(t *testing.T, pods *client.Client[*corev1.Pod], app string) []*corev1.Pod {
	t.Helper()
	l, err := pods.List(context.Background(), "default", metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		t.Fatal(err)
	}
	var out []*corev1.Pod
	for _, p := range l.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

func runningReady(pods []*corev1.Pod) int {
	n := 0
	for _, p := range pods {
		if p.Status.Phase == corev1.PodRunning && api.PodIsReady(p) {
			n++
		}
	}
	return n
}

// TestSeedDemonstration is the seed's demonstration: a Deployment brings
// a ReplicaSet and its pods up Running on the simulated nodes; a deleted
// pod comes back with a new name; the Events say why.
func TestSeedDemonstration(t *testing.T) {
	c := up(t, minitest.FreeAddr(t), t.TempDir(), "--fast")
	rc := c.client(t)
	ctx := context.Background()
	deps, rss, pods := client.For[*appsv1.Deployment](rc), client.For[*appsv1.ReplicaSet](rc), client.For[*corev1.Pod](rc)
	if _, err := deps.Create(ctx, deploymentObj("redis", 3, "redis:7")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a ReplicaSet owned by the Deployment", func() (bool, string) {
		l, err := rss.List(ctx, "default", metav1.ListOptions{LabelSelector: "app=redis"})
		if err != nil || len(l.Items) != 1 {
			return false, fmt.Sprint(err)
		}
		ref := metav1.GetControllerOf(l.Items[0])
		return ref != nil && ref.Kind == "Deployment" && ref.Name == "redis", fmt.Sprint(l.Items[0].OwnerReferences)
	})
	var before []*corev1.Pod
	eventually(t, "3 pods Running and Ready", func() (bool, string) {
		before = livePods(t, pods, "redis")
		return len(before) == 3 && runningReady(before) == 3, fmt.Sprintf("%d pods, %d running", len(before), runningReady(before))
	})
	victim := before[0]
	if err := pods.Delete(ctx, "default", victim.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a replacement with a new name", func() (bool, string) {
		now := livePods(t, pods, "redis")
		names := map[string]bool{}
		for _, p := range now {
			names[p.Name] = true
		}
		return len(now) == 3 && runningReady(now) == 3 && !names[victim.Name], fmt.Sprint(names)
	})
	events := client.For[*corev1.Event](rc)
	eventually(t, "ScalingReplicaSet and SuccessfulCreate events", func() (bool, string) {
		l, err := events.List(ctx, "default", metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		reasons := map[string]int{}
		for _, e := range l.Items {
			reasons[e.Reason] += int(e.Count)
		}
		return reasons["ScalingReplicaSet"] >= 1 && reasons["SuccessfulCreate"] >= 4, fmt.Sprint(reasons)
	})
}

// TestScaleUpAndDown scales a Deployment 3 → 10 → 2 through its scale
// subresource.
func TestScaleUpAndDown(t *testing.T) {
	c := up(t, minitest.FreeAddr(t), t.TempDir(), "--fast")
	rc := c.client(t)
	ctx := context.Background()
	deps, pods := client.For[*appsv1.Deployment](rc), client.For[*corev1.Pod](rc)
	if _, err := deps.Create(ctx, deploymentObj("web", 3, "nginx:1.27")); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{3, 10, 2} {
		patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, n)
		if _, err := deps.Patch(ctx, "default", "web", types.MergePatchType, []byte(patch)); err != nil {
			t.Fatal(err)
		}
		eventually(t, fmt.Sprintf("%d pods running", n), func() (bool, string) {
			l := livePods(t, pods, "web")
			return len(l) == n && runningReady(l) == n, fmt.Sprintf("%d pods, %d running", len(l), runningReady(l))
		})
	}
}

// TestRollingUpdate changes the image of a Deployment and watches every
// pod change through an informer: ready pods never drop below
// replicas - maxUnavailable, and the rollout ends on the new image.
func TestRollingUpdate(t *testing.T) {
	c := up(t, minitest.FreeAddr(t), t.TempDir(), "--fast")
	rc := c.client(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	deps, pods := client.For[*appsv1.Deployment](rc), client.For[*corev1.Pod](rc)
	d := deploymentObj("api", 4, "example/api:1")
	one := intstr.FromInt32(1)
	d.Spec.Strategy = appsv1.DeploymentStrategy{
		Type:          appsv1.RollingUpdateDeploymentStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &one, MaxUnavailable: &one},
	}
	if _, err := deps.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	eventually(t, "4 pods running", func() (bool, string) {
		l := livePods(t, pods, "api")
		return runningReady(l) == 4, fmt.Sprint(runningReady(l))
	})

	factory := informer.NewSharedInformerFactory(rc, informer.FactoryOptions{})
	inf := informer.For[*corev1.Pod](factory)
	var mu sync.Mutex
	minReady, observations := 4, 0
	check := func(any) {
		all := inf.Lister().List(labels.Everything())
		var live []*corev1.Pod
		for _, p := range all {
			if p.DeletionTimestamp == nil {
				live = append(live, p)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		observations++
		minReady = min(minReady, runningReady(live))
	}
	_, _ = inf.AddEventHandler(informer.ResourceEventHandlerFuncs{
		// The initial list's adds arrive while the cache still fills: a
		// count then would see some of the pods, not fewer ready ones.
		AddFunc: func(o any, initialList bool) {
			if !initialList {
				check(o)
			}
		},
		UpdateFunc: func(_, o any) { check(o) },
		DeleteFunc: check,
	})
	factory.Start(ctx)
	defer factory.Shutdown()
	if !informer.WaitForCacheSync(ctx, inf.HasSynced) {
		t.Fatal("informer did not sync")
	}

	patch := `{"spec":{"template":{"spec":{"containers":[{"name":"api","image":"example/api:2"}]}}}}`
	if _, err := deps.Patch(ctx, "default", "api", types.StrategicMergePatchType, []byte(patch)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the rollout to finish on the new image", func() (bool, string) {
		l := livePods(t, pods, "api")
		for _, p := range l {
			if p.Spec.Containers[0].Image != "example/api:2" {
				return false, p.Name + " still on " + p.Spec.Containers[0].Image
			}
		}
		return len(l) == 4 && runningReady(l) == 4, fmt.Sprintf("%d pods, %d ready", len(l), runningReady(l))
	})
	mu.Lock()
	defer mu.Unlock()
	if observations == 0 {
		t.Fatal("the informer saw no pod change during the rollout")
	}
	if minReady < 3 {
		t.Errorf("ready pods dropped to %d during the rollout; maxUnavailable=1 allows no fewer than 3", minReady)
	}
}

// controllerManager is one `minictl controller-manager` process.
type controllerManager struct {
	p        *minitest.Process
	identity string
}

func startControllerManager(t *testing.T, server string) *controllerManager {
	t.Helper()
	p := minitest.Start(t, false, "controller-manager", "--fast", "--server", server, "--address", "127.0.0.1:0")
	// Its first line: "controller manager <identity>: /healthz and /metrics on ..."
	var first string
	eventually(t, "the controller manager's first line", func() (bool, string) {
		line, _, ok := strings.Cut(p.Stdout.String(), "\n")
		first = line
		select {
		case <-p.Exited():
			t.Fatalf("controller manager exited:\n%s", p.Stderr)
		default:
		}
		return ok, p.Stderr.String()
	})
	f := strings.Fields(first)
	if len(f) < 3 {
		t.Fatalf("unexpected first line %q", first)
	}
	return &controllerManager{p: p, identity: strings.TrimSuffix(f[2], ":")}
}

// TestLeaderElectionFailover runs two controller managers against one
// cluster, kills the leader, and checks that the other takes the Lease and
// carries on without creating anything twice.
func TestLeaderElectionFailover(t *testing.T) {
	c := up(t, minitest.FreeAddr(t), t.TempDir(), "--fast", "--controller-manager=false")
	rc := c.client(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, b := startControllerManager(t, c.URL), startControllerManager(t, c.URL)
	leases := client.For[*coordinationv1.Lease](rc)
	var holder string
	eventually(t, "one controller manager to take the lease", func() (bool, string) {
		l, err := leases.Get(ctx, "kube-system", "kube-controller-manager")
		if err != nil || l.Spec.HolderIdentity == nil {
			return false, fmt.Sprint(err)
		}
		holder = *l.Spec.HolderIdentity
		return holder == a.identity || holder == b.identity, holder
	})
	leader, standby := a, b
	if holder == b.identity {
		leader, standby = b, a
	}

	// Count every pod ever created, to catch a double create.
	pods := client.For[*corev1.Pod](rc)
	w, err := pods.Watch(ctx, "default", metav1.ListOptions{LabelSelector: "app=failover"})
	if err != nil {
		t.Fatal(err)
	}
	var created sync.Map
	go func() {
		for ev := range w.Events() {
			if ev.Object != nil && ev.Type == "ADDED" {
				created.Store(ev.Object.GetName(), true)
			}
		}
	}()
	countCreated := func() int {
		n := 0
		created.Range(func(any, any) bool { n++; return true })
		return n
	}

	rss := client.For[*appsv1.ReplicaSet](rc)
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "failover", Namespace: "default"},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptrTo(int32(3)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "failover"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "failover"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
			},
		},
	}
	if _, err := rss.Create(ctx, rs); err != nil {
		t.Fatal(err)
	}
	eventually(t, "3 pods from the first leader", func() (bool, string) {
		return len(livePods(t, pods, "failover")) == 3, fmt.Sprint(len(livePods(t, pods, "failover")))
	})

	if err := leader.p.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-leader.p.Exited()
	eventually(t, "the standby to take the lease", func() (bool, string) {
		l, err := leases.Get(ctx, "kube-system", "kube-controller-manager")
		if err != nil || l.Spec.HolderIdentity == nil {
			return false, fmt.Sprint(err)
		}
		return *l.Spec.HolderIdentity == standby.identity, *l.Spec.HolderIdentity
	})
	if _, err := rss.Patch(ctx, "default", "failover", types.MergePatchType, []byte(`{"spec":{"replicas":5}}`)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "5 pods from the new leader", func() (bool, string) {
		return len(livePods(t, pods, "failover")) == 5, fmt.Sprint(len(livePods(t, pods, "failover")))
	})
	// Give a wrongly doubled controller a moment to show itself.
	time.Sleep(2 * time.Second)
	if n := len(livePods(t, pods, "failover")); n != 5 {
		t.Errorf("%d pods after failover, want 5", n)
	}
	if n := countCreated(); n != 5 {
		t.Errorf("%d pods were ever created, want 5: something was created twice", n)
	}
}

func ptrTo[T any](v T) *T { return &v }
