package endpoints

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/minictl/minictl/controllers/internal/controllertest"
)

// A service's Endpoints follow its pods: scaling up and down, a pod that
// stops being ready, and nothing written while nothing changes.
func TestEndpointsFollowPods(t *testing.T) {
	t.Parallel()
	r := runController(t)
	web := []corev1.ContainerPort{{Name: "web", ContainerPort: 8080}}

	svc := r.createService(t, newService("web", map[string]string{"app": "web"}, servicePort("http", 80, intstr.FromInt32(8080))))
	r.runPod(t, newPod("web-1", "web", web...), "10.0.0.1", true)
	r.runPod(t, newPod("web-2", "web", web...), "10.0.0.2", true)
	r.runPod(t, newPod("web-3", "web", web...), "10.0.0.3", true)
	r.runPod(t, newPod("other", "other", web...), "10.0.0.9", true)
	// Not an endpoint yet: no IP.
	r.createPod(t, newPod("web-pending", "web", web...))

	ep := r.waitForSubsets(t, "web", "[10.0.0.1(web-1) 10.0.0.2(web-2) 10.0.0.3(web-3) | http:8080/TCP]")
	if ep.Labels["tier"] != "frontend" {
		t.Errorf("labels %v; want the service's", ep.Labels)
	}
	if _, ok := ep.Labels[corev1.IsHeadlessService]; ok {
		t.Errorf("a service with a cluster IP is labelled headless")
	}
	if ts := ep.Annotations[corev1.EndpointsLastChangeTriggerTime]; ts == "" {
		t.Errorf("no %s annotation", corev1.EndpointsLastChangeTriggerTime)
	} else if _, err := time.Parse(time.RFC3339Nano, ts); err != nil {
		t.Errorf("trigger time %q: %v", ts, err)
	}
	pod1, err := r.pods.Get(testCtx(t), ns, "web-1")
	if err != nil {
		t.Fatal(err)
	}
	a := ep.Subsets[0].Addresses[0]
	if a.TargetRef == nil || a.TargetRef.Kind != "Pod" || a.TargetRef.Namespace != ns || a.TargetRef.Name != "web-1" || a.TargetRef.UID != pod1.UID {
		t.Errorf("targetRef %+v; want Pod %s/web-1 uid %s", a.TargetRef, ns, pod1.UID)
	}
	if a.NodeName == nil || *a.NodeName != "node-1" {
		t.Errorf("nodeName %v, want node-1", a.NodeName)
	}

	// Nothing changes: a sync writes nothing. The sync reads the
	// controller's caches, so wait until they hold what it wrote.
	controllertest.Eventually(t, "the Endpoints in the cache", func() (bool, string) {
		cached, err := r.ctrl.epLister.Get(ns, "web")
		if err != nil {
			return false, err.Error()
		}
		return cached.ResourceVersion == ep.ResourceVersion, "resourceVersion " + cached.ResourceVersion
	})
	if err := r.ctrl.sync(testCtx(t), ns+"/web"); err != nil {
		t.Fatal(err)
	}
	if again := r.getEndpoints(t, "web"); again.ResourceVersion != ep.ResourceVersion {
		t.Errorf("an unchanged service rewrote its endpoints: resourceVersion %s → %s", ep.ResourceVersion, again.ResourceVersion)
	}

	// Scale up.
	r.runPod(t, newPod("web-4", "web", web...), "10.0.0.4", true)
	r.waitForSubsets(t, "web", "[10.0.0.1(web-1) 10.0.0.2(web-2) 10.0.0.3(web-3) 10.0.0.4(web-4) | http:8080/TCP]")

	// Scale down: a deleted pod leaves at once, though its kubelet has
	// not finished it (it stays, Terminating, on node-1).
	if err := r.pods.Delete(testCtx(t), ns, "web-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	r.waitForSubsets(t, "web", "[10.0.0.2(web-2) 10.0.0.3(web-3) 10.0.0.4(web-4) | http:8080/TCP]")

	// A pod that stops being ready moves to notReadyAddresses.
	r.setPodStatus(t, "web-3", "10.0.0.3", false)
	r.waitForSubsets(t, "web", "[10.0.0.2(web-2) 10.0.0.4(web-4) | notReady 10.0.0.3(web-3) | http:8080/TCP]")

	// A service that publishes not-ready addresses lists it as ready,
	// and the terminating pod too.
	svc, err = r.services.Get(testCtx(t), ns, "web")
	if err != nil {
		t.Fatal(err)
	}
	svc.Spec.PublishNotReadyAddresses = true
	if _, err := r.services.Update(testCtx(t), svc); err != nil {
		t.Fatal(err)
	}
	r.waitForSubsets(t, "web", "[10.0.0.1(web-1) 10.0.0.2(web-2) 10.0.0.3(web-3) 10.0.0.4(web-4) | http:8080/TCP]")
}

// A named targetPort is resolved in each pod: pods that number it
// differently land in different subsets, and a pod without it is left out.
func TestNamedTargetPortResolvesPerPod(t *testing.T) {
	t.Parallel()
	r := runController(t)

	r.createService(t, newService("api", map[string]string{"app": "api"}, servicePort("http", 80, intstr.FromString("web"))))
	r.runPod(t, newPod("api-old", "api", corev1.ContainerPort{Name: "web", ContainerPort: 8080}), "10.0.1.1", true)
	r.runPod(t, newPod("api-new", "api", corev1.ContainerPort{Name: "web", ContainerPort: 9090}), "10.0.1.2", true)
	r.runPod(t, newPod("api-odd", "api", corev1.ContainerPort{Name: "metrics", ContainerPort: 9100}), "10.0.1.3", true)

	r.waitForSubsets(t, "api", "[10.0.1.1(api-old) | http:8080/TCP][10.0.1.2(api-new) | http:9090/TCP]")
}

// A service without a selector is left alone: its Endpoints are the
// user's.
func TestServiceWithoutSelectorIsLeftAlone(t *testing.T) {
	t.Parallel()
	r := runController(t)

	r.createService(t, newService("db", nil, servicePort("pg", 5432, intstr.FromInt32(5432))))
	r.runPod(t, newPod("db-0", "db"), "10.0.2.1", true)
	mine, err := r.endpoints.Create(testCtx(t), &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns, Labels: map[string]string{"owner": "me"}},
		Subsets: []corev1.EndpointSubset{{
			Addresses: []corev1.EndpointAddress{{IP: "192.168.1.10"}},
			Ports:     []corev1.EndpointPort{{Name: "pg", Port: 5432}},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	// Wait until the controller's caches have the service and the
	// Endpoints, then sync it.
	controllertest.Eventually(t, "the caches", func() (bool, string) {
		_, err1 := r.ctrl.svcLister.Get(ns, "db")
		_, err2 := r.ctrl.epLister.Get(ns, "db")
		return err1 == nil && err2 == nil, "not yet"
	})
	if err := r.ctrl.sync(testCtx(t), ns+"/db"); err != nil {
		t.Fatal(err)
	}
	got := r.getEndpoints(t, "db")
	if got == nil || got.ResourceVersion != mine.ResourceVersion || describe(got.Subsets) != "[192.168.1.10(?) | pg:5432/TCP]" {
		t.Errorf("user-managed endpoints changed: %v", got)
	}
}

// Deleting a service deletes its Endpoints; Endpoints deleted while the
// service lives are written again.
func TestEndpointsGoWithTheService(t *testing.T) {
	t.Parallel()
	r := runController(t)

	r.createService(t, newService("web", map[string]string{"app": "web"}, servicePort("", 80, intstr.FromInt32(80))))
	r.runPod(t, newPod("web-1", "web"), "10.0.3.1", true)
	ep := r.waitForSubsets(t, "web", "[10.0.3.1(web-1) | :80/TCP]")

	if err := r.endpoints.Delete(testCtx(t), ns, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, "endpoints web written again", func() (bool, string) {
		got := r.getEndpoints(t, "web")
		if got == nil {
			return false, "none"
		}
		return got.UID != ep.UID, "the old object"
	})

	if err := r.services.Delete(testCtx(t), ns, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, "endpoints web deleted", func() (bool, string) {
		got := r.getEndpoints(t, "web")
		if got == nil {
			return true, ""
		}
		return false, describe(got.Subsets)
	})
}

// Endpoints whose service went while no controller ran are deleted when it
// starts; a leader-election record is not.
func TestLeftoverEndpointsAreDeletedAtStart(t *testing.T) {
	t.Parallel()
	a := startAPI(t)
	for _, ep := range []*corev1.Endpoints{
		{ObjectMeta: metav1.ObjectMeta{Name: "orphan", Namespace: ns}},
		{ObjectMeta: metav1.ObjectMeta{Name: "leader", Namespace: ns, Annotations: map[string]string{leaderAnnotation: "{}"}}},
	} {
		if _, err := a.endpoints.Create(testCtx(t), ep); err != nil {
			t.Fatal(err)
		}
	}
	startController(t, a)
	controllertest.Eventually(t, "endpoints orphan deleted", func() (bool, string) {
		return a.getEndpoints(t, "orphan") == nil, "still there"
	})
	if a.getEndpoints(t, "leader") == nil {
		t.Errorf("the leader-election record was deleted")
	}
}
