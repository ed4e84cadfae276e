// Package kubebuilder tests a controller the way a kubebuilder project's
// generated suite_test.go does with envtest, against minictl's testenv
// instead: the CRDs installed from config/crd/bases, a controller-runtime
// manager with the reconciler, a client from the environment's
// kubeconfig. The difference shows at the end: minictl runs the garbage
// collector, so what the reconciler made for an object goes with it.
package kubebuilder

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/minictl/minictl/testenv"
)

var websiteGVK = schema.GroupVersionKind{Group: "webapp.example.com", Version: "v1", Kind: "Website"}

func newWebsite() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(websiteGVK)
	return u
}

// WebsiteReconciler keeps, for each Website, a ConfigMap <name>-content
// holding its greeting, owned by the Website, and marks the Website
// ready.
type WebsiteReconciler struct {
	client.Client
}

func (r *WebsiteReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	site := newWebsite()
	if err := r.Get(ctx, req.NamespacedName, site); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	greeting, _, _ := unstructured.NestedString(site.Object, "spec", "greeting")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: req.Name + "-content", Namespace: req.Namespace}}
	if _, err := controllerutil.CreateOrUpdate(ctx, r.Client, cm, func() error {
		cm.Data = map[string]string{"index.html": greeting}
		return controllerutil.SetControllerReference(site, cm, r.Scheme())
	}); err != nil {
		return ctrl.Result{}, err
	}
	if ready, _, _ := unstructured.NestedBool(site.Object, "status", "ready"); ready {
		return ctrl.Result{}, nil
	}
	if err := unstructured.SetNestedField(site.Object, true, "status", "ready"); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, r.Status().Update(ctx, site)
}

// startSuite is kubebuilder's BeforeSuite and AfterSuite: an environment
// with the project's CRDs, a client, and the manager running the
// reconciler until the test ends. Unlike envtest, the environment runs
// the controller manager too (here the garbage collector alone).
func startSuite(t *testing.T) (client.Client, *rest.Config) {
	env := testenv.Start(t,
		testenv.CRDDirectoryPaths(filepath.Join("testdata", "crd")),
		testenv.ErrorIfCRDPathMissing(),
		testenv.WithControllers("garbagecollector"),
	)
	cfg, err := clientcmd.RESTConfigFromKubeConfig(env.Kubeconfig) // the one line from Env to client-go
	if err != nil {
		t.Fatal(err)
	}
	ctrl.SetLogger(logr.Discard())
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		t.Fatalf("new manager: %v", err)
	}
	r := &WebsiteReconciler{Client: mgr.GetClient()}
	if err := ctrl.NewControllerManagedBy(mgr).For(newWebsite()).Owns(&corev1.ConfigMap{}).Named("website").Complete(r); err != nil {
		t.Fatalf("controller: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() { // registered after Start's: runs before the environment stops
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	c, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c, cfg
}

// TestWebsiteReconciler: create a Website, see the reconciler's
// ConfigMap and status; delete the Website, see the garbage collector
// remove the ConfigMap it owned, which envtest, without a controller
// manager, cannot show.
func TestWebsiteReconciler(t *testing.T) {
	c, _ := startSuite(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	site := newWebsite()
	site.SetName("home")
	site.SetNamespace("default")
	if err := unstructured.SetNestedField(site.Object, "hello", "spec", "greeting"); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, site); err != nil {
		t.Fatalf("create website: %v", err)
	}
	key := client.ObjectKey{Namespace: "default", Name: "home-content"}
	eventually(ctx, t, "the ConfigMap home-content with the greeting", func() bool {
		var cm corev1.ConfigMap
		return c.Get(ctx, key, &cm) == nil && cm.Data["index.html"] == "hello"
	})
	eventually(ctx, t, "status.ready on the Website", func() bool {
		got := newWebsite()
		if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "home"}, got); err != nil {
			return false
		}
		ready, _, _ := unstructured.NestedBool(got.Object, "status", "ready")
		return ready
	})

	if err := c.Delete(ctx, site); err != nil {
		t.Fatalf("delete website: %v", err)
	}
	eventually(ctx, t, "the garbage collector to delete home-content", func() bool {
		var cm corev1.ConfigMap
		return apierrors.IsNotFound(c.Get(ctx, key, &cm))
	})
}

func eventually(ctx context.Context, t *testing.T, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
