package compat

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// TestControllerRuntimeReconcilesCustomResource: a controller-runtime
// manager, as kubebuilder projects start one, reconciles a custom resource
// on minictl: it reads each widget and writes status.observedSize through
// the status subresource.
func TestControllerRuntimeReconcilesCustomResource(t *testing.T) {
	const group, ns = "controllerruntime.compat.minictl.io", "compat-controller-runtime"
	createWidgetCRD(t, group)
	createNamespace(t, clientset(t), ns)
	gvk := schema.GroupVersionKind{Group: group, Version: "v1", Kind: "Widget"}
	newWidget := func() *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		return u
	}

	ctrl.SetLogger(logr.Discard())
	mgr, err := ctrl.NewManager(&rest.Config{Host: env.url}, ctrl.Options{
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		t.Fatalf("new manager: %v", err)
	}
	c := mgr.GetClient()
	err = ctrl.NewControllerManagedBy(mgr).Named("widget").For(newWidget()).
		Complete(reconcile.Func(func(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
			w := newWidget()
			if err := c.Get(ctx, req.NamespacedName, w); err != nil {
				return ctrl.Result{}, client.IgnoreNotFound(err)
			}
			size, _, _ := unstructured.NestedInt64(w.Object, "spec", "size")
			if observed, _, _ := unstructured.NestedInt64(w.Object, "status", "observedSize"); observed == size {
				return ctrl.Result{}, nil
			}
			if err := unstructured.SetNestedField(w.Object, size, "status", "observedSize"); err != nil {
				return ctrl.Result{}, err
			}
			return ctrl.Result{}, c.Status().Update(ctx, w)
		}))
	if err != nil {
		t.Fatalf("controller: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	}()

	kubectlIn(t, widget(group, ns, "r1", "{size: 3}"), "apply", "-f", "-")
	observed := func(want string) {
		t.Helper()
		eventually(t, 30*time.Second, "status.observedSize "+want, func() (bool, string) {
			got := kubectl(t, "get", "widget."+group, "r1", "-n", ns, "-o", "jsonpath={.status.observedSize}")
			return strings.TrimSpace(got) == want, got
		})
	}
	observed("3")
	kubectl(t, "patch", "widget."+group, "r1", "-n", ns, "--type=merge", "-p", `{"spec":{"size":4}}`)
	observed("4")
}
