package serviceaccount

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/client/record"
	"github.com/minictl/minictl/controllers/internal/controller"
	"github.com/minictl/minictl/controllers/internal/controllertest"
)

// fixture is a real API server with the controller running against it.
type fixture struct {
	rc       *client.RESTClient
	c        *Controller
	recorder *record.FakeRecorder
}

func start(t *testing.T) *fixture {
	t.Helper()
	env := controllertest.StartWith(t, controllertest.Options{})
	rc := env.Client
	rec := &record.FakeRecorder{}
	c, err := New(Options{Common: controller.Common{Client: rc, Informers: env.Informers, Recorder: rec, Logger: controllertest.Logger(t)}})
	if err != nil {
		t.Fatal(err)
	}
	controllertest.Run(t, env.Informers, 2, c)
	return &fixture{rc: rc, c: c, recorder: rec}
}

func TestNewNamespaceGetsDefaultServiceAccount(t *testing.T) {
	f := start(t)
	ctx := t.Context()
	sas := client.For[*corev1.ServiceAccount](f.rc)

	// The namespaces that exist from the start get one too.
	waitFor(t, "default/default ServiceAccount", func() bool {
		_, err := sas.Get(ctx, "default", DefaultServiceAccount)
		return err == nil
	})

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}
	if _, err := client.For[*corev1.Namespace](f.rc).Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "team-a/default ServiceAccount", func() bool {
		_, err := sas.Get(ctx, "team-a", DefaultServiceAccount)
		return err == nil
	})
	waitFor(t, "a Created event", func() bool {
		for _, e := range f.recorder.Events() {
			if strings.Contains(e, "Created ServiceAccount default in namespace team-a") {
				return true
			}
		}
		return false
	})
}

func TestDeletedDefaultServiceAccountIsRecreated(t *testing.T) {
	f := start(t)
	ctx := t.Context()
	sas := client.For[*corev1.ServiceAccount](f.rc)

	var first *corev1.ServiceAccount
	waitFor(t, "default/default ServiceAccount", func() bool {
		sa, err := sas.Get(ctx, "default", DefaultServiceAccount)
		first = sa
		return err == nil
	})
	if err := sas.Delete(ctx, "default", DefaultServiceAccount, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a new default/default ServiceAccount", func() bool {
		sa, err := sas.Get(ctx, "default", DefaultServiceAccount)
		return err == nil && sa.UID != first.UID
	})
}

func TestTerminatingNamespaceIsSkipped(t *testing.T) {
	f := start(t)
	ctx := t.Context()
	sas := client.For[*corev1.ServiceAccount](f.rc)
	namespaces := client.For[*corev1.Namespace](f.rc)

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "leaving"}}
	if _, err := namespaces.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "leaving/default ServiceAccount", func() bool {
		_, err := sas.Get(ctx, "leaving", DefaultServiceAccount)
		return err == nil
	})
	// No namespace controller runs here, so the namespace stays
	// Terminating with its content until we remove it by hand.
	if err := namespaces.Delete(ctx, "", "leaving", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := sas.Delete(ctx, "leaving", DefaultServiceAccount, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the cache to see the namespace terminating and its ServiceAccount gone", func() bool {
		got, err := f.c.nsLister.Get("", "leaving")
		if err != nil || got.Status.Phase != corev1.NamespaceTerminating {
			return false
		}
		_, err = f.c.saLister.Get("leaving", DefaultServiceAccount)
		return err != nil
	})
	if err := f.c.sync(ctx, "leaving"); err != nil {
		t.Fatalf("sync: %v", err)
	}
	if _, err := sas.Get(ctx, "leaving", DefaultServiceAccount); !client.IsNotFound(err) {
		t.Fatalf("get ServiceAccount in a terminating namespace: err = %v, want NotFound", err)
	}
}

// waitFor waits up to 20s for cond, asking every 20ms.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll := controllertest.Poll{Timeout: 20 * time.Second, Interval: 20 * time.Millisecond}
	poll.Until(t, what, func() (bool, string) { return cond(), "" })
}
