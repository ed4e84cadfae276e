package kubelet

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/internal/testenv"
)

// The whole way of `kubectl logs`: the API server's pods/log, on to this
// node's kubelet at the address and port its Node reports, and back.

func TestPodLogThroughTheAPIServer(t *testing.T) {
	env := testenv.Start(t)
	rc, err := client.New(&client.Config{Server: env.URL, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	k := startKubelet(t, rc, "node-1", nil)
	pod := createPod(t, rc, newPod("web", "node-1"))
	waitPod(t, rc, "web", "Running", runningAndReady)
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	freshRun(t, k, pod, "app")
	for i, line := range []string{"one", "two", "three"} {
		k.logs.Print(pod.UID, "app", t0.Add(time.Duration(i)*time.Second), line)
	}
	log := env.URL + "/api/v1/namespaces/default/pods/web/log"

	for _, tc := range []struct{ query, want string }{
		{"", "one\ntwo\nthree\n"},
		{"?container=app&tailLines=1", "three\n"},
		{"?timestamps=true&tailLines=1", "2026-11-28T12:00:02.000000000Z three\n"},
		{"?sinceTime=2026-11-28T12:00:01Z", "two\nthree\n"},
		{"?limitBytes=6", "one\ntw"},
	} {
		resp, err := http.Get(log + tc.query)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(body) != tc.want || resp.Header.Get("Content-Type") != "text/plain" {
			t.Errorf("GET log%s: %d %s %q, want 200 text/plain %q", tc.query, resp.StatusCode, resp.Header.Get("Content-Type"), body, tc.want)
		}
	}

	// The kubelet's refusals come back as kube-apiserver's Statuses.
	resp, err := http.Get(log + "?previous=true")
	if err != nil {
		t.Fatal(err)
	}
	var st metav1.Status
	_ = json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	if st.Code != 400 || st.Reason != metav1.StatusReasonBadRequest || st.Message != `previous terminated container "app" in pod "web" not found` {
		t.Errorf("previous of a container run once: %d %+v", resp.StatusCode, st)
	}
}

func TestPodLogFollowStreams(t *testing.T) {
	env := testenv.Start(t)
	rc, err := client.New(&client.Config{Server: env.URL, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	k := startKubelet(t, rc, "node-1", nil)
	pod := createPod(t, rc, newPod("web", "node-1"))
	waitPod(t, rc, "web", "Running", runningAndReady)
	freshRun(t, k, pod, "app")
	k.logs.Print(pod.UID, "app", time.Now(), "before")

	resp, err := http.Get(env.URL + "/api/v1/namespaces/default/pods/web/log?follow=true")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("follow: %d", resp.StatusCode)
	}
	lines := bufio.NewReader(resp.Body)
	if got, err := lines.ReadString('\n'); got != "before\n" {
		t.Fatalf("first line %q, %v", got, err)
	}
	// Printed after the follower connected and read: it sees each.
	for _, text := range []string{"after 1", "after 2"} {
		k.logs.Print(pod.UID, "app", time.Now(), text)
		if got, err := lines.ReadString('\n'); got != text+"\n" {
			t.Fatalf("followed %q, %v; want %q", got, err, text)
		}
	}
	k.logs.End(pod.UID, "app")
	if rest, err := io.ReadAll(lines); err != nil || len(rest) != 0 {
		t.Fatalf("after the run ended: %q, %v; want the end of the stream", rest, err)
	}
}

// A follower that goes away ends its request in the API server, and so
// the API server's request to the kubelet: the request is counted done.
func TestPodLogFollowerGoesAway(t *testing.T) {
	env := testenv.Start(t)
	rc, err := client.New(&client.Config{Server: env.URL, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	k := startKubelet(t, rc, "node-1", nil)
	pod := createPod(t, rc, newPod("web", "node-1"))
	waitPod(t, rc, "web", "Running", runningAndReady)
	freshRun(t, k, pod, "app") // a new run, without the kubelet's start line
	k.logs.Print(pod.UID, "app", time.Now(), "hello")

	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, env.URL+"/api/v1/namespaces/default/pods/web/log?follow=true", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := bufio.NewReader(resp.Body).ReadString('\n'); got != "hello\n" {
		t.Fatalf("%q, %v", got, err)
	}
	const done = `apiserver_request_total{code="200",resource="pods",subresource="log",verb="get"} 1`
	if m := metrics(t, env.URL); strings.Contains(m, done) {
		t.Fatal("the follow is counted done while it streams")
	}
	cancel()
	resp.Body.Close()
	waitFor(t, "the API server to end the follow", func() (bool, error) {
		return strings.Contains(metrics(t, env.URL), done), nil
	})
}

func metrics(t *testing.T, server string) string {
	t.Helper()
	resp, err := http.Get(server + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
