package apiserver_test

import (
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/internal/testenv"
)

// TestPodLogAsksTheRightThing: before pods/log reaches a kubelet, the API
// server checks the options and picks the container as kube-apiserver
// does, with its codes and messages, and writes nothing. (The way on to
// the kubelet and back is tested with a real kubelet in package kubelet.)
func TestPodLogAsksTheRightThing(t *testing.T) {
	env := testenv.Start(t)
	create[corev1.Pod](t, env, podPath("default", ""), pod("web", "", nil))
	two := pod("two", "", nil)
	two.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "busybox"}}
	two.Spec.Containers = append(two.Spec.Containers, corev1.Container{Name: "sidecar", Image: "busybox"})
	create[corev1.Pod](t, env, podPath("default", ""), two)
	web := podPath("default", "web") + "/log"

	for _, tc := range []struct {
		name, method, path string
		code               int
		reason             metav1.StatusReason
		message            string
	}{
		{"a negative tail", http.MethodGet, web + "?tailLines=-1", 422, metav1.StatusReasonInvalid,
			`PodLogOptions "web" is invalid: tailLines: Invalid value: -1: must be greater than or equal to 0`},
		{"no bytes", http.MethodGet, web + "?limitBytes=0", 422, metav1.StatusReasonInvalid,
			`limitBytes: Invalid value: 0: must be greater than 0`},
		{"since zero seconds", http.MethodGet, web + "?sinceSeconds=0", 422, metav1.StatusReasonInvalid,
			`sinceSeconds: Invalid value: 0: must be greater than 0`},
		{"two sinces", http.MethodGet, web + "?sinceSeconds=10&sinceTime=2026-11-28T12:00:00Z", 422, metav1.StatusReasonInvalid,
			"Forbidden: at most one of `sinceTime` or `sinceSeconds` may be specified"},
		{"a tail not a number", http.MethodGet, web + "?tailLines=ten", 400, metav1.StatusReasonBadRequest, `parsing "ten"`},
		{"a container the pod lacks", http.MethodGet, web + "?container=db", 400, metav1.StatusReasonBadRequest,
			"container db is not valid for pod web"},
		{"no container named, several there", http.MethodGet, podPath("default", "two") + "/log", 400, metav1.StatusReasonBadRequest,
			"a container name must be specified for pod two, choose one of: [init app sidecar]"},
		{"a pod that does not exist", http.MethodGet, podPath("default", "nosuch") + "/log", 404, metav1.StatusReasonNotFound,
			`pods "nosuch" not found`},
		{"a write", http.MethodPut, web, 405, metav1.StatusReasonMethodNotAllowed, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := revision(t, env)
			st := do(t, env, tc.method, tc.path, "", nil).wantStatus(t, tc.code, tc.reason)
			if !strings.Contains(st.Message, tc.message) {
				t.Errorf("message %q, want it to say %q", st.Message, tc.message)
			}
			if after := revision(t, env); after != before {
				t.Errorf("etcd revision moved from %d to %d: something was written", before, after)
			}
		})
	}

	t.Run("a pod on no node has no log yet", func(t *testing.T) {
		r := do(t, env, http.MethodGet, web, "", nil).want(t, http.StatusOK)
		if len(r.body) != 0 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/plain") {
			t.Errorf("got %q (%s), want an empty text/plain answer", r.body, r.header.Get("Content-Type"))
		}
		do(t, env, http.MethodGet, podPath("default", "two")+"/log?container=sidecar", "", nil).want(t, http.StatusOK)
	})
}

// TestPodLogWithoutAKubelet: a pod bound to a node the API server does not
// know, or whose kubelet does not answer, gets the error kube-apiserver
// gives.
func TestPodLogWithoutAKubelet(t *testing.T) {
	env := testenv.Start(t)
	create[corev1.Pod](t, env, podPath("default", ""), pod("lost", "gone", nil))
	st := do(t, env, http.MethodGet, podPath("default", "lost")+"/log", "", nil).wantStatus(t, 404, metav1.StatusReasonNotFound)
	if !strings.Contains(st.Message, `nodes "gone" not found`) {
		t.Errorf("message %q", st.Message)
	}

	// A node whose kubelet port is closed.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	node := &corev1.Node{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{Name: "silent"},
	}
	create[corev1.Node](t, env, "/api/v1/nodes", node)
	node.Status = corev1.NodeStatus{
		Addresses:       []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}},
		DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: int32(port)}},
	}
	got := get[corev1.Node](t, env, "/api/v1/nodes/silent")
	got.Status = node.Status
	update[corev1.Node](t, env, "/api/v1/nodes/silent/status", got)
	create[corev1.Pod](t, env, podPath("default", ""), pod("web", "silent", nil))
	st = do(t, env, http.MethodGet, podPath("default", "web")+"/log", "", nil).wantStatus(t, 500, metav1.StatusReasonInternalError)
	if !strings.Contains(st.Message, "connection refused") {
		t.Errorf("message %q, want it to say the kubelet refused", st.Message)
	}
}

func TestPodLogDiscovery(t *testing.T) {
	env := testenv.Start(t)
	var l metav1.APIResourceList
	do(t, env, http.MethodGet, "/api/v1", "", nil).want(t, 200).into(t, &l)
	for _, r := range l.APIResources {
		if r.Name == "pods/log" {
			if r.Kind != "Pod" || !slices.Equal(r.Verbs, metav1.Verbs{"get"}) || !r.Namespaced {
				t.Errorf("pods/log: %+v", r)
			}
			return
		}
	}
	t.Error("pods/log is not in /api/v1")
}

// TestPodLogAccept: a log has no Table, and kube-apiserver negotiates its
// Accept header with the pod's media types before it looks for the pod.
// What kubectl sends is served; a Table alone, or text/plain alone, is 406.
func TestPodLogAccept(t *testing.T) {
	env := testenv.Start(t)
	create[corev1.Pod](t, env, podPath("default", ""), pod("pending", "", nil))
	const objects = "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf"
	for _, accept := range []string{"application/json, */*", kubectlAccept, "application/yaml"} {
		if r := getAccept(t, env, podPath("default", "pending")+"/log", accept); r.code != http.StatusOK {
			t.Errorf("Accept %q: %d %s, want 200", accept, r.code, r.body)
		}
	}
	for _, tc := range []struct{ name, accept string }{
		{"pending", "application/json;as=Table;v=v1;g=meta.k8s.io"},
		{"pending", "text/plain"},
		{"nope", "application/json;as=Table;v=v1;g=meta.k8s.io"},
	} {
		st := getAccept(t, env, podPath("default", tc.name)+"/log", tc.accept).wantStatus(t, http.StatusNotAcceptable, metav1.StatusReasonNotAcceptable)
		if st.Message != objects {
			t.Errorf("%s, Accept %q: message %q, want %q", tc.name, tc.accept, st.Message, objects)
		}
	}
}
