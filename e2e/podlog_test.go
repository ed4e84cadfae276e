package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/internal/minitest"
)

// TestPodLogs: on the built binary, every simulated node serves its
// kubelet API at the address and port its Node reports; a pod's log is
// read through the API server from its node's kubelet, options checked on
// the way; a follower is connected at once and stays until it leaves, or
// until the cluster stops, which it does not hold up.
func TestPodLogs(t *testing.T) {
	c := up(t, minitest.FreeAddr(t), t.TempDir(), "--fast", "--nodes=2")
	rc := c.client(t)
	ctx := context.Background()

	var nodes *client.List[*corev1.Node]
	eventually(t, "2 nodes registered", func() (bool, string) {
		var err error
		nodes, err = client.For[*corev1.Node](rc).List(ctx, "", metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		return len(nodes.Items) == 2, fmt.Sprintf("%d nodes", len(nodes.Items))
	})
	for _, n := range nodes.Items {
		port := n.Status.DaemonEndpoints.KubeletEndpoint.Port
		var ip string
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				ip = a.Address
			}
		}
		if port == 0 || !strings.HasPrefix(ip, "127.0.1.") {
			t.Fatalf("node %s: InternalIP %q, kubelet port %d", n.Name, ip, port)
		}
		resp, err := http.Get("http://" + net.JoinHostPort(ip, strconv.Itoa(int(port))) + "/healthz")
		if err != nil {
			t.Fatalf("node %s: kubelet /healthz: %v", n.Name, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(body) != "ok" {
			t.Errorf("node %s: kubelet /healthz: %d %q", n.Name, resp.StatusCode, body)
		}
	}

	if _, err := client.For[*corev1.Pod](rc).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx:1.27"}}},
	}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "pod web Running", func() (bool, string) {
		p, err := client.For[*corev1.Pod](rc).Get(ctx, "default", "web")
		if err != nil {
			return false, err.Error()
		}
		return p.Status.Phase == corev1.PodRunning, string(p.Status.Phase)
	})
	log := c.URL + "/api/v1/namespaces/default/pods/web/log"

	resp, err := http.Get(log + "?tailLines=10&timestamps=true")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/plain" {
		t.Errorf("log: %d %s, want 200 text/plain from the kubelet", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if code, st := c.do(http.MethodGet, "/api/v1/namespaces/default/pods/web/log?tailLines=-1", "", ""); code != 422 ||
		!strings.Contains(fmt.Sprint(st["message"]), "tailLines: Invalid value: -1") {
		t.Errorf("a negative tail: %d %v", code, st)
	}
	if code, st := c.do(http.MethodGet, "/api/v1/namespaces/default/pods/web/log?previous=true", "", ""); code != 400 ||
		st["message"] != `previous terminated container "app" in pod "web" not found` {
		t.Errorf("previous: %d %v", code, st)
	}

	// A follower gets its answer at once, and keeps it open.
	fctx, cancel := context.WithTimeout(ctx, 2*clusterTimeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(fctx, http.MethodGet, log+"?follow=true", nil)
	start := time.Now()
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("follow: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("follow: %d", resp.StatusCode)
	}
	ended := make(chan time.Duration, 1)
	go func() {
		io.Copy(io.Discard, resp.Body)
		ended <- time.Since(start)
	}()
	select {
	case <-ended:
		t.Fatal("the follow ended while the pod runs")
	case <-time.After(time.Second):
	}
	// Stopping the cluster ends it; the stop must be clean (checked by
	// stop).
	c.stop()
	select {
	case <-ended:
	case <-time.After(clusterTimeout):
		t.Fatal("the follow outlived the cluster")
	}
}
