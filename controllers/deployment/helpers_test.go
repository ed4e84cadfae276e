package deployment

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/client/record"
	"github.com/minictl/minictl/controllers/internal/controller"
	"github.com/minictl/minictl/controllers/internal/controllertest"
	"github.com/minictl/minictl/controllers/replicaset"
)

// These tests run the Deployment controller and the ReplicaSet controller
// together against a real API server on a real etcd (internal/testenv).
// No kubelet or scheduler runs: pods stay unscheduled (so a delete removes
// them at once), and the tests play the kubelet where they need ready pods.

const ns = "default"

type cluster struct {
	rc       *client.RESTClient
	pods     *client.Client[*corev1.Pod]
	rss      *client.Client[*appsv1.ReplicaSet]
	deploys  *client.Client[*appsv1.Deployment]
	recorder *record.FakeRecorder
}

// runControllers starts an API server, the ReplicaSet and Deployment
// controllers on one shared informer factory; all stop when the test ends.
func runControllers(t *testing.T) *cluster {
	t.Helper()
	env := controllertest.Start(t)
	rc := env.Client
	log := controllertest.Logger(t)
	rec := &record.FakeRecorder{}
	rsc, err := replicaset.New(replicaset.Options{Common: controller.Common{Client: rc, Informers: env.Informers, Recorder: rec, Logger: log}})
	if err != nil {
		t.Fatal(err)
	}
	dc, err := New(Options{Common: controller.Common{Client: rc, Informers: env.Informers, Recorder: rec, Logger: log}})
	if err != nil {
		t.Fatal(err)
	}
	controllertest.Run(t, env.Informers, 2, rsc, dc)
	return &cluster{
		rc: rc, recorder: rec,
		pods:    client.For[*corev1.Pod](rc),
		rss:     client.For[*appsv1.ReplicaSet](rc),
		deploys: client.For[*appsv1.Deployment](rc),
	}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func newDeployment(name string, replicas int32, image string) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: image}}},
			},
		},
	}
}

func rolling(d *appsv1.Deployment, surge, unavailable int) *appsv1.Deployment {
	s, u := intstr.FromInt(surge), intstr.FromInt(unavailable)
	d.Spec.Strategy = appsv1.DeploymentStrategy{
		Type:          appsv1.RollingUpdateDeploymentStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &s, MaxUnavailable: &u},
	}
	return d
}

func (c *cluster) createDeployment(t *testing.T, d *appsv1.Deployment) *appsv1.Deployment {
	t.Helper()
	out, err := c.deploys.Create(testCtx(t), d)
	if err != nil {
		t.Fatalf("create deployment: %v", err)
	}
	return out
}

// updateDeployment applies change to the current deployment, retrying
// conflicts with the controller's writes.
func (c *cluster) updateDeployment(t *testing.T, name string, change func(*appsv1.Deployment)) {
	t.Helper()
	for {
		cur, err := c.deploys.Get(testCtx(t), ns, name)
		if err != nil {
			t.Fatal(err)
		}
		change(cur)
		_, err = c.deploys.Update(testCtx(t), cur)
		if client.IsConflict(err) {
			continue
		}
		if err != nil {
			t.Fatalf("update deployment %s: %v", name, err)
		}
		return
	}
}

func setImage(image string) func(*appsv1.Deployment) {
	return func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = image }
}

func (c *cluster) getDeployment(t *testing.T, name string) *appsv1.Deployment {
	t.Helper()
	d, err := c.deploys.Get(testCtx(t), ns, name)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// replicaSetsOf returns the ReplicaSets d controls, by name.
func (c *cluster) replicaSetsOf(t *testing.T, d *appsv1.Deployment) map[string]*appsv1.ReplicaSet {
	t.Helper()
	list, err := c.rss.List(testCtx(t), ns, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*appsv1.ReplicaSet{}
	for _, rs := range list.Items {
		if ref := metav1.GetControllerOf(rs); ref != nil && ref.UID == d.UID {
			out[rs.Name] = rs
		}
	}
	return out
}

// podsOf returns the pods the selector sel ("app=web") matches that are not
// being deleted.
func (c *cluster) podsOf(t *testing.T, sel string) []*corev1.Pod {
	t.Helper()
	list, err := c.pods.List(testCtx(t), ns, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		t.Fatal(err)
	}
	var out []*corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// markReady plays the kubelet for one pod: Running and Ready. A pod that
// is gone meanwhile is fine.
func (c *cluster) markReady(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	for {
		cur, err := c.pods.Get(testCtx(t), pod.Namespace, pod.Name)
		if client.IsNotFound(err) {
			return
		}
		if err != nil {
			t.Fatalf("get pod %s: %v", pod.Name, err)
		}
		cur.Status.Phase = corev1.PodRunning
		cur.Status.Conditions = []corev1.PodCondition{{
			Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now(),
		}}
		_, err = c.pods.UpdateStatus(testCtx(t), cur)
		switch {
		case client.IsConflict(err):
			continue
		case client.IsNotFound(err), err == nil:
			return
		}
		t.Fatalf("mark pod %s ready: %v", pod.Name, err)
	}
}

// markAllReady plays the kubelet once for every pod sel matches that is
// not ready yet, and reports how many it marked.
func (c *cluster) markAllReady(t *testing.T, sel string) int {
	t.Helper()
	n := 0
	for _, p := range c.podsOf(t, sel) {
		if !api.PodIsReady(p) {
			c.markReady(t, p)
			n++
		}
	}
	return n
}

// runKubelet marks every pod sel matches ready as soon as it sees it, until
// the test ends.
func (c *cluster) runKubelet(t *testing.T, sel string) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			list, err := c.pods.List(ctx, ns, metav1.ListOptions{LabelSelector: sel})
			if err == nil {
				for _, p := range list.Items {
					if !api.PodIsReady(p) && p.DeletionTimestamp == nil {
						cur := p.DeepCopy()
						cur.Status.Phase = corev1.PodRunning
						cur.Status.Conditions = []corev1.PodCondition{{
							Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now(),
						}}
						_, _ = c.pods.UpdateStatus(ctx, cur) // a conflict is retried on the next round
					}
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

// waitForRollout waits until the deployment's status says its current
// generation is fully rolled out and available, and returns it.
func (c *cluster) waitForRollout(t *testing.T, name string) *appsv1.Deployment {
	t.Helper()
	var d *appsv1.Deployment
	controllertest.Eventually(t, "rollout of "+name, func() (bool, string) {
		d = c.getDeployment(t, name)
		s := d.Status
		want := *d.Spec.Replicas
		ok := s.ObservedGeneration >= d.Generation && s.UpdatedReplicas == want && s.Replicas == want &&
			s.AvailableReplicas == want
		return ok, fmt.Sprintf("generation %d, status %+v", d.Generation, s)
	})
	return d
}

func countEvents(rec *record.FakeRecorder, prefix string) int {
	n := 0
	for _, e := range rec.Events() {
		if strings.HasPrefix(e, prefix) {
			n++
		}
	}
	return n
}

func condition(d *appsv1.Deployment, t appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	return getCondition(d.Status, t)
}
