package kubelet

import (
	"bufio"
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

	"github.com/minictl/minictl/client"
)

// kubeletURL waits for the Node of name to report where its kubelet
// serves, as the API server reads it: the InternalIP and the
// daemonEndpoints port.
func kubeletURL(t *testing.T, rc *client.RESTClient, name string) string {
	t.Helper()
	var node *corev1.Node
	waitFor(t, name+" registered", func() (bool, error) {
		var err error
		node, err = client.For[*corev1.Node](rc).Get(context.Background(), "", name)
		return err == nil, err
	})
	port := node.Status.DaemonEndpoints.KubeletEndpoint.Port
	if port == 0 {
		t.Fatalf("node %s reports kubelet port 0", name)
	}
	var ip string
	for _, a := range node.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			ip = a.Address
		}
	}
	return "http://" + net.JoinHostPort(ip, strconv.Itoa(int(port)))
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: read: %v", url, err)
	}
	return resp.StatusCode, string(b)
}

func TestServesOnTheNodeAddressAndReportsThePort(t *testing.T) {
	rc := newClient(t)
	startKubelet(t, rc, "node-7", nil)
	base := kubeletURL(t, rc, "node-7")
	if !strings.HasPrefix(base, "http://127.0.1.7:") {
		t.Errorf("kubelet serves on %s, want the node address 127.0.1.7", base)
	}
	if code, body := get(t, base+"/healthz"); code != http.StatusOK || body != "ok" {
		t.Errorf("/healthz: %d %q", code, body)
	}
	// Its pods' hostIP is where the kubelet serves.
	createPod(t, rc, newPod("web", "node-7"))
	pod := waitPod(t, rc, "web", "Running", runningAndReady)
	if !strings.HasPrefix(base, "http://"+pod.Status.HostIP+":") {
		t.Errorf("hostIP %s, kubelet at %s", pod.Status.HostIP, base)
	}
}

func TestRunFailsWhenItCannotListen(t *testing.T) {
	rc := newClient(t)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	k, err := New(Options{Client: rc, NodeName: "node-1", Address: "127.0.0.1", Port: taken.Addr().(*net.TCPAddr).Port})
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "listen") {
		t.Fatalf("Run on a port taken: %v, want a listen error", err)
	}
}

func TestServedContainerLogs(t *testing.T) {
	rc := newClient(t)
	k := startKubelet(t, rc, "node-1", nil)
	base := kubeletURL(t, rc, "node-1")

	pod := newPod("web", "node-1")
	pod.Spec.Containers = append(pod.Spec.Containers,
		corev1.Container{Name: "sidecar", Image: "busybox"}, corev1.Container{Name: "worker", Image: "busybox"})
	pod = createPod(t, rc, pod)
	waitPod(t, rc, "web", "Running", runningAndReady)
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	// New runs, without the line the kubelet printed when it started them.
	freshRun(t, k, pod, "app", "sidecar", "worker")
	for i, line := range []string{"one", "two", "three"} {
		k.logs.Print(pod.UID, "app", t0.Add(time.Duration(i)*time.Second), line)
	}
	// sinceSeconds counts back from the kubelet's clock, here the real one.
	k.logs.Print(pod.UID, "worker", time.Now().Add(-2*time.Hour), "long ago")
	k.logs.Print(pod.UID, "worker", time.Now(), "just now")
	logs := base + "/containerLogs/default/web/"

	for _, tc := range []struct {
		name, path string
		code       int
		body       string
	}{
		{"all", "app", 200, "one\ntwo\nthree\n"},
		{"tailLines", "app?tailLines=2", 200, "two\nthree\n"},
		{"tail, the older spelling", "app?tail=1", 200, "three\n"},
		{"tail all", "app?tail=all", 200, "one\ntwo\nthree\n"},
		{"timestamps and limitBytes", "app?timestamps=true&limitBytes=35", 200, "2026-11-28T12:00:00.000000000Z one\n"},
		{"sinceTime", "app?sinceTime=2026-11-28T12:00:01Z", 200, "two\nthree\n"},
		{"sinceSeconds", "worker?sinceSeconds=3600", 200, "just now\n"},
		{"a container that printed nothing", "sidecar", 200, ""},
		{"previous of a container run once", "app?previous=true", 400, `previous terminated container "app" in pod "web" not found`},
		{"an unknown container", "db", 404, `container "db" not found in pod "web"`},
		{"a negative tail", "app?tailLines=-1", 422, `{"message": "Invalid request."}`},
		{"a tail not a number", "app?tailLines=x", 400, `{"message": "Unable to decode query."}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := get(t, logs+tc.path)
			if code != tc.code || body != tc.body {
				t.Errorf("GET %s: %d %q, want %d %q", tc.path, code, body, tc.code, tc.body)
			}
		})
	}
	if code, body := get(t, base+"/containerLogs/default/nope/app"); code != 404 || body != "pod \"nope\" does not exist" {
		t.Errorf("an unknown pod: %d %q", code, body)
	}
}

func TestContainerLogsFollow(t *testing.T) {
	rc := newClient(t)
	k := startKubelet(t, rc, "node-1", nil)
	base := kubeletURL(t, rc, "node-1")
	pod := createPod(t, rc, newPod("web", "node-1"))
	waitPod(t, rc, "web", "Running", runningAndReady)

	// The follower connects before anything is printed in a new run: it
	// gets its 200 at once, then each line as it is printed, and the end
	// with the run.
	freshRun(t, k, pod, "app")
	// The kubelet answers from the status it wrote itself, not from its
	// informer, which may not have heard it back yet: the test saw Running,
	// so the kubelet has too.
	resp, err := http.Get(base + "/containerLogs/default/web/app?follow=true")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/plain" {
		t.Fatalf("follow: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	lines := bufio.NewReader(resp.Body)
	for i := range 3 {
		text := fmt.Sprintf("line %d", i)
		k.logs.Print(pod.UID, "app", time.Now(), text)
		got, err := lines.ReadString('\n')
		if err != nil || got != text+"\n" {
			t.Fatalf("followed line %d: %q, %v", i, got, err)
		}
	}
	k.logs.End(pod.UID, "app")
	if rest, err := io.ReadAll(lines); err != nil || len(rest) != 0 {
		t.Fatalf("after the run ended: %q, %v; want the end of the stream", rest, err)
	}
}

func TestContainerLogStatus(t *testing.T) {
	terminated := &corev1.ContainerStateTerminated{ContainerID: "sim://x/app"}
	for _, tc := range []struct {
		name     string
		status   corev1.PodStatus
		previous bool
		want     string
	}{
		{"not started", corev1.PodStatus{Phase: corev1.PodPending}, false,
			`container "app" in pod "web" is waiting to start: ContainerCreating`},
		{"running", corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{
			{Name: "app", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}, false, ""},
		{"running, no previous", corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{
			{Name: "app", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}, true,
			`previous terminated container "app" in pod "web" not found`},
		{"restarted", corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{
			{Name: "app", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
				LastTerminationState: corev1.ContainerState{Terminated: terminated}}}}, true, ""},
		{"terminated", corev1.PodStatus{Phase: corev1.PodSucceeded, ContainerStatuses: []corev1.ContainerStatus{
			{Name: "app", State: corev1.ContainerState{Terminated: terminated}}}}, false, ""},
		{"image pull", corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{
			{Name: "app", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}}}}}, false,
			`container "app" in pod "web" is waiting to start: trying and failing to pull image`},
		{"no status once running", corev1.PodStatus{Phase: corev1.PodRunning}, false,
			`container "app" in pod "web" is not available`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := newPod("web", "node-1")
			pod.Status = tc.status
			err := containerLogStatus(pod.Name, &pod.Status, "app", tc.previous)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
