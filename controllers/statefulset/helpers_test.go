package statefulset

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/client/record"
	"github.com/minictl/minictl/controllers/garbagecollector"
	"github.com/minictl/minictl/controllers/internal/controller"
	"github.com/minictl/minictl/controllers/internal/controllertest"
	"github.com/minictl/minictl/informer"
)

// These tests run the controller against a real API server on a real etcd
// (internal/testenv). No kubelet or scheduler runs: pods stay unbound and
// Pending, so a delete removes them at once, and a test that needs Running
// and Ready pods plays the kubelet with UpdateStatus.

const ns = "default"

type running struct {
	pods     *client.Client[*corev1.Pod]
	sets     *client.Client[*appsv1.StatefulSet]
	claims   *client.Client[*corev1.PersistentVolumeClaim]
	crs      *client.Client[*appsv1.ControllerRevision]
	recorder *record.FakeRecorder
}

// runController starts an API server and the controller on it, with two
// workers, and the garbage collector when gc; all stop when the test ends.
func runController(t *testing.T, gc bool) *running {
	t.Helper()
	return runControllerBehind(t, gc, nil)
}

// runControllerBehind is runController with the controllers' requests
// going through front, a handler that passes what it lets through to
// next, the API server; nil: no front. The test's own clients go to the
// API server directly.
func runControllerBehind(t *testing.T, gc bool, front func(next http.Handler) http.Handler) *running {
	t.Helper()
	env := controllertest.Start(t)
	rc := env.Client
	informers := env.Informers
	if front != nil {
		target, err := url.Parse(env.Client.Server())
		if err != nil {
			t.Fatal(err)
		}
		proxy := httputil.NewSingleHostReverseProxy(target)
		proxy.FlushInterval = -1 // watches stream
		srv := httptest.NewServer(front(proxy))
		t.Cleanup(srv.Close)
		if rc, err = client.New(&client.Config{Server: srv.URL, Timeout: 20 * time.Second}); err != nil {
			t.Fatal(err)
		}
		informers = informer.NewSharedInformerFactory(rc, informer.FactoryOptions{})
	}
	rec := &record.FakeRecorder{}
	common := controller.Common{Client: rc, Informers: informers, Recorder: rec, Logger: controllertest.Logger(t)}
	c, err := New(Options{Common: common})
	if err != nil {
		t.Fatal(err)
	}
	run := []controllertest.Controller{c}
	if gc {
		g, err := garbagecollector.New(garbagecollector.Options{Common: controller.Common{Client: rc, Informers: informers, Logger: controllertest.Logger(t)}})
		if err != nil {
			t.Fatal(err)
		}
		run = append(run, g)
	}
	controllertest.Run(t, informers, 2, run...)
	return &running{
		pods: client.For[*corev1.Pod](env.Client), sets: client.For[*appsv1.StatefulSet](env.Client),
		claims: client.For[*corev1.PersistentVolumeClaim](env.Client), crs: client.For[*appsv1.ControllerRevision](env.Client),
		recorder: rec,
	}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// newSet is a StatefulSet "name" of n replicas with a claim template
// "data" of 1Gi, its pods serving "nginx".
func newSet(name string, n int32, policy appsv1.PodManagementPolicyType) *appsv1.StatefulSet {
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.StatefulSetSpec{
			Replicas: &n, ServiceName: "nginx", PodManagementPolicy: policy,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "web:1"}}},
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
				},
			}},
		},
	}
}

func (r *running) create(t *testing.T, set *appsv1.StatefulSet) *appsv1.StatefulSet {
	t.Helper()
	out, err := r.sets.Create(testCtx(t), set)
	if err != nil {
		t.Fatalf("create statefulset: %v", err)
	}
	return out
}

// update applies change to the StatefulSet name, retrying conflicts with
// the controller's status writes.
func (r *running) update(t *testing.T, name string, change func(*appsv1.StatefulSet)) *appsv1.StatefulSet {
	t.Helper()
	for {
		cur, err := r.sets.Get(testCtx(t), ns, name)
		if err != nil {
			t.Fatal(err)
		}
		change(cur)
		out, err := r.sets.Update(testCtx(t), cur)
		if client.IsConflict(err) {
			continue
		}
		if err != nil {
			t.Fatalf("update statefulset %s: %v", name, err)
		}
		return out
	}
}

// livePods returns the pods of the namespace that are not being deleted,
// by name.
func (r *running) livePods(t *testing.T) map[string]*corev1.Pod {
	t.Helper()
	list, err := r.pods.List(testCtx(t), ns, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list pods: %v", err)
	}
	out := map[string]*corev1.Pod{}
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out[p.Name] = p
		}
	}
	return out
}

func names[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// setReady plays the kubelet: pod becomes Running and Ready.
func (r *running) setReady(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	for {
		cur, err := r.pods.Get(testCtx(t), pod.Namespace, pod.Name)
		if client.IsNotFound(err) {
			return
		}
		if err != nil {
			t.Fatalf("get pod %s: %v", pod.Name, err)
		}
		cur.Status.Phase = corev1.PodRunning
		cur.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
		_, err = r.pods.UpdateStatus(testCtx(t), cur)
		if client.IsConflict(err) {
			continue
		}
		if client.IsNotFound(err) {
			return
		}
		if err != nil {
			t.Fatalf("set pod %s ready: %v", pod.Name, err)
		}
		return
	}
}

// readyAll makes every live Pending pod Running and Ready, and returns the
// live pods.
func (r *running) readyAll(t *testing.T) map[string]*corev1.Pod {
	t.Helper()
	pods := r.livePods(t)
	for _, p := range pods {
		if p.Status.Phase != corev1.PodRunning {
			r.setReady(t, p)
		}
	}
	return pods
}

// waitForStatus waits until the StatefulSet name's status satisfies ok,
// making pods Ready meanwhile when ready.
func (r *running) waitForStatus(t *testing.T, name, what string, ready bool, ok func(*appsv1.StatefulSet) bool) *appsv1.StatefulSet {
	t.Helper()
	var set *appsv1.StatefulSet
	controllertest.Eventually(t, what, func() (bool, string) {
		if ready {
			r.readyAll(t)
		}
		var err error
		set, err = r.sets.Get(testCtx(t), ns, name)
		if err != nil {
			return false, err.Error()
		}
		return set.Generation == set.Status.ObservedGeneration && ok(set),
			fmt.Sprintf("status %+v generation %d", set.Status, set.Generation)
	})
	return set
}

func image(p *corev1.Pod) string { return p.Spec.Containers[0].Image }
