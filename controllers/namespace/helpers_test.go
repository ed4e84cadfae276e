package namespace

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/client/record"
	"github.com/minictl/minictl/controllers/internal/controller"
	"github.com/minictl/minictl/controllers/internal/controllertest"
)

// These tests run the controller against a real API server on a real etcd
// (internal/testenv). No kubelet runs: a pod bound to a node stays
// Terminating after its delete until the test finishes it, as a kubelet
// would, with a delete of grace period 0.

// running is an API server with the controller running on it.
type running struct {
	rc       *client.RESTClient
	recorder *record.FakeRecorder
	ctrl     *Controller
}

// runController starts an API server and the controller with two workers;
// both stop when the test ends.
func runController(t *testing.T) *running {
	t.Helper()
	return runControllerOn(t, nil)
}

// runControllerOn is runController with an API server that serves the
// catalogue resources (nil: api.Resources()). The controller itself is
// told nothing: it finds what the server serves through discovery.
func runControllerOn(t *testing.T, resources api.Catalogue) *running {
	t.Helper()
	env := controllertest.StartWith(t, controllertest.Options{ClientTimeout: 20 * time.Second, Resources: resources})
	rec := &record.FakeRecorder{}
	c, err := New(Options{Common: controller.Common{Client: env.Client, Informers: env.Informers, Recorder: rec, Logger: controllertest.Logger(t)}})
	if err != nil {
		t.Fatal(err)
	}
	controllertest.Run(t, env.Informers, 2, c)
	return &running{rc: env.Client, recorder: rec, ctrl: c}
}

// testCtx bounds a test's own requests.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// waitFor polls cond until it holds, failing the test after 45s with the
// last explanation cond gave.
func waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	controllertest.Poll{Timeout: 45 * time.Second, Interval: 50 * time.Millisecond}.Until(t, what, cond)
}

// create creates obj or fails the test.
func create[T api.Object](t *testing.T, rc *client.RESTClient, obj T) T {
	t.Helper()
	out, err := client.For[T](rc).Create(testCtx(t), obj)
	if err != nil {
		t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
	}
	return out
}

// exists reports whether namespace/name of T is still stored.
func exists[T api.Object](t *testing.T, rc *client.RESTClient, namespace, name string) bool {
	t.Helper()
	_, err := client.For[T](rc).Get(testCtx(t), namespace, name)
	if client.IsNotFound(err) {
		return false
	}
	if err != nil {
		t.Fatalf("get %s/%s: %v", namespace, name, err)
	}
	return true
}

// condition returns the namespace's condition of type ct, and the
// namespace; ok is false when the namespace is gone.
func condition(t *testing.T, rc *client.RESTClient, name string, ct corev1.NamespaceConditionType) (c corev1.NamespaceCondition, ns *corev1.Namespace, ok bool) {
	t.Helper()
	ns, err := client.For[*corev1.Namespace](rc).Get(testCtx(t), "", name)
	if client.IsNotFound(err) {
		return c, nil, false
	}
	if err != nil {
		t.Fatalf("get namespace %s: %v", name, err)
	}
	for _, got := range ns.Status.Conditions {
		if got.Type == ct {
			return got, ns, true
		}
	}
	return c, ns, true
}

// waitForCondition waits until namespace name has condition ct True with
// message msg.
func waitForCondition(t *testing.T, rc *client.RESTClient, name string, ct corev1.NamespaceConditionType, msg string) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%s on namespace %s", ct, name), func() (bool, string) {
		c, _, ok := condition(t, rc, name, ct)
		if !ok {
			return false, "the namespace is gone"
		}
		return c.Status == corev1.ConditionTrue && c.Message == msg, fmt.Sprintf("%s %s %q", c.Status, c.Reason, c.Message)
	})
}

// waitForNamespaceGone waits until namespace name is removed.
func waitForNamespaceGone(t *testing.T, rc *client.RESTClient, name string) {
	t.Helper()
	waitFor(t, "namespace "+name+" to be removed", func() (bool, string) {
		ns, err := client.For[*corev1.Namespace](rc).Get(testCtx(t), "", name)
		if client.IsNotFound(err) {
			return true, ""
		}
		if err != nil {
			return false, err.Error()
		}
		return false, fmt.Sprintf("phase %s, finalizers %v, conditions %v", ns.Status.Phase, ns.Spec.Finalizers, ns.Status.Conditions)
	})
}

func deleteNamespace(t *testing.T, rc *client.RESTClient, name string) {
	t.Helper()
	if err := client.For[*corev1.Namespace](rc).Delete(testCtx(t), "", name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete namespace %s: %v", name, err)
	}
}

func newNamespace(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

func newPod(namespace, name, nodeName string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{
			NodeName:   nodeName,
			Containers: []corev1.Container{{Name: "app", Image: "nginx:1.27"}},
		},
	}
}

func newConfigMap(namespace, name string, finalizers ...string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Finalizers: finalizers},
		Data:       map[string]string{"k": "v"},
	}
}
