package apiserver_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/client/record"
	"github.com/minictl/minictl/kubelet"
)

// The simulated kubelet, as system:node:node-1 on the secure port with the
// Node mode and NodeRestriction, does everything it does as the admin:
// registers its Node with its API's port, renews its Lease, runs the pods
// bound to it and reports their status, records events, serves their logs
// and finishes their deletion. None of its requests is refused.
func TestKubeletRunsAsItsNode(t *testing.T) {
	c := startNodeCluster(t)
	create[corev1.Secret](t, c.Env, "/api/v1/namespaces/default/secrets", secret("web-config"))
	create[corev1.Pod](t, c.Env, podPath("default", ""), podMounting("web", "node-1", "web-config"))
	create[corev1.Pod](t, c.Env, podPath("default", ""), podMounting("elsewhere", "node-2", "web-config"))

	rc, err := client.New(&client.Config{Server: c.secureURL, CAData: c.servingCA.pem(), BearerToken: "node-1", Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	rec := record.NewRecorder(rc, record.Options{Component: "kubelet", Host: "node-1"})
	k, err := kubelet.New(kubelet.Options{
		Client: rc, NodeName: "node-1", Recorder: rec,
		HeartbeatInterval: 100 * time.Millisecond, StatusUpdateInterval: 200 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	recDone, runErr := make(chan struct{}), make(chan error, 1)
	go func() { defer close(recDone); rec.Run(ctx) }()
	go func() { runErr <- k.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-runErr; err != nil {
			t.Errorf("kubelet Run: %v", err)
		}
		<-recDone
	})

	eventually(t, "node-1 registered, Ready, with its kubelet's port", func() (bool, string) {
		var n corev1.Node
		r := do(t, c.Env, http.MethodGet, "/api/v1/nodes/node-1", "", nil)
		if r.code != http.StatusOK {
			return false, truncate(r.body)
		}
		r.into(t, &n)
		ready := false
		for _, cond := range n.Status.Conditions {
			ready = ready || cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue
		}
		return ready && n.Status.DaemonEndpoints.KubeletEndpoint.Port != 0, truncate(r.body)
	})
	var first string // the lease's resourceVersion when first seen
	eventually(t, "node-1's lease created, then renewed", func() (bool, string) {
		r := do(t, c.Env, http.MethodGet, leases+"/node-1", "", nil)
		if r.code != http.StatusOK {
			return false, truncate(r.body)
		}
		var l coordinationv1.Lease
		r.into(t, &l)
		if first == "" {
			first = l.ResourceVersion
		}
		return l.Spec.RenewTime != nil && l.ResourceVersion != first, l.ResourceVersion
	})
	eventually(t, "web running with an IP", func() (bool, string) {
		p := get[corev1.Pod](t, c.Env, podPath("default", "web"))
		return p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "", string(p.Status.Phase)
	})
	eventually(t, "the kubelet's Starting event recorded", func() (bool, string) {
		l := get[corev1.EventList](t, c.Env, "/api/v1/namespaces/default/events")
		for _, e := range l.Items {
			if e.Reason == "Starting" && e.InvolvedObject.Name == "node-1" && e.Source.Host == "node-1" {
				return true, ""
			}
		}
		return false, "no Starting event"
	})
	do(t, c.Env, http.MethodGet, podPath("default", "web")+"/log", "", nil).want(t, http.StatusOK)
	if p := get[corev1.Pod](t, c.Env, podPath("default", "elsewhere")); p.Status.Phase == corev1.PodRunning {
		t.Fatal("node-1's kubelet ran node-2's pod")
	}
	if n := metric(t, c.Env, `apiserver_authorization_decisions_total{decision="denied"}`); n != 0 {
		t.Fatalf("%v of the kubelet's requests were refused", n)
	}

	// A graceful delete is finished by the kubelet, which removes the pod.
	do(t, c.Env, http.MethodDelete, podPath("default", "web"), "", nil).want(t, http.StatusOK)
	eventually(t, "web deleted by its kubelet", func() (bool, string) {
		r := do(t, c.Env, http.MethodGet, podPath("default", "web"), "", nil)
		return r.code == http.StatusNotFound, truncate(r.body)
	})
}
