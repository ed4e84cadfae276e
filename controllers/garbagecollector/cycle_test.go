package garbagecollector

import (
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/client/record"
	"github.com/minictl/minictl/controllers/internal/controller"
	"github.com/minictl/minictl/controllers/internal/controllertest"
	"github.com/minictl/minictl/controllers/namespace"
	"github.com/minictl/minictl/informer"
)

// createCycle creates configmaps a, b and c in namespace ns, each owned by
// the one before it (a by c), every reference blocking its owner's
// deletion.
func createCycle(t *testing.T, rc *client.RESTClient, ns string) {
	t.Helper()
	ctx := t.Context()
	cms := client.For[*corev1.ConfigMap](rc)
	made := map[string]*corev1.ConfigMap{}
	for _, name := range []string{"a", "b", "c"} {
		cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}})
		if err != nil {
			t.Fatal(err)
		}
		made[name] = cm
	}
	for dep, owner := range map[string]string{"a": "c", "b": "a", "c": "b"} {
		refs := fmt.Sprintf(`{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":%q,"uid":%q,"blockOwnerDeletion":true}]}}`,
			owner, made[owner].UID)
		if _, err := cms.Patch(ctx, ns, dep, types.MergePatchType, []byte(refs)); err != nil {
			t.Fatal(err)
		}
	}
}

// cycleLeft lists which of a, b and c still exist in ns.
func cycleLeft(t *testing.T, rc *client.RESTClient, ns string) []string {
	t.Helper()
	list, err := client.For[*corev1.ConfigMap](rc).List(t.Context(), ns, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, cm := range list.Items {
		if slices.Contains([]string{"a", "b", "c"}, cm.Name) {
			left = append(left, cm.Name)
		}
	}
	return left
}

// runGC starts a garbage collector, on its own informer factory, until
// the test ends.
func runGC(t *testing.T, rc *client.RESTClient, rec *record.FakeRecorder) {
	t.Helper()
	factory := informer.NewSharedInformerFactory(rc, informer.FactoryOptions{})
	gc, err := New(Options{Common: controller.Common{Client: rc, Informers: factory, Recorder: rec, Logger: controllertest.Logger(t)}})
	if err != nil {
		t.Fatal(err)
	}
	controllertest.Run(t, factory, 3, gc)
}

// Three objects that own each other: deleting one in the foreground makes
// each of them wait, in the foreground, for the next. The collector sees
// that the waits go round, lets one reference stop blocking, and all three
// go.
func TestForegroundCycleIsDeleted(t *testing.T) {
	f := start(t)
	createCycle(t, f.rc, "default")
	f.deleteCM(t, "a", metav1.DeletePropagationForeground)
	controllertest.Eventually(t, "a, b and c to be gone", func() (bool, string) {
		left := cycleLeft(t, f.rc, "default")
		return len(left) == 0, fmt.Sprintf("left: %v", left)
	})
	if len(f.recorder.WithReason("OwnerRefUnblocked")) == 0 {
		t.Errorf("no OwnerRefUnblocked event: %q", f.recorder.Events())
	}
}

// The same cycle, every object deleted in the foreground while no collector
// runs, holds its namespace in Terminating; a collector that starts then
// ends the cycle, and the namespace goes.
func TestNamespaceOfAForegroundCycleIsDeleted(t *testing.T) {
	env := controllertest.Start(t)
	rc := env.Client
	ctx := t.Context()
	nsc, err := namespace.New(namespace.Options{Common: controller.Common{Client: rc, Informers: env.Informers, Logger: controllertest.Logger(t)}})
	if err != nil {
		t.Fatal(err)
	}
	controllertest.Run(t, env.Informers, 2, nsc)

	const ns = "cycle"
	namespaces := client.For[*corev1.Namespace](rc)
	if _, err := namespaces.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	createCycle(t, rc, ns)
	foreground := metav1.DeletePropagationForeground
	for _, name := range []string{"a", "b", "c"} {
		if err := client.For[*corev1.ConfigMap](rc).Delete(ctx, ns, name, metav1.DeleteOptions{PropagationPolicy: &foreground}); err != nil {
			t.Fatal(err)
		}
	}
	if err := namespaces.Delete(ctx, "", ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, "the namespace to report the foregroundDeletion finalizers holding it", func() (bool, string) {
		got, err := namespaces.Get(ctx, "", ns)
		if err != nil {
			return false, err.Error()
		}
		for _, c := range got.Status.Conditions {
			if c.Type == corev1.NamespaceFinalizersRemaining && c.Status == corev1.ConditionTrue {
				return true, ""
			}
		}
		return false, fmt.Sprintf("phase %s, conditions %+v", got.Status.Phase, got.Status.Conditions)
	})

	runGC(t, rc, &record.FakeRecorder{})
	controllertest.Eventually(t, "the namespace to be gone", func() (bool, string) {
		_, err := namespaces.Get(ctx, "", ns)
		return client.IsNotFound(err), fmt.Sprintf("get: %v; left: %v", err, cycleLeft(t, rc, ns))
	})
}
