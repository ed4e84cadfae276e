package apiserver_test

import (
	"net/http"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/internal/testenv"
)

// TestPodConnectionsSayTheContainersAreSimulated: kube-apiserver upgrades
// pods/exec, attach and portforward to a stream to the kubelet, and
// proxies pods/proxy; minictl's containers run no process, so each answers
// a 400 Status saying so rather than a 404 that reads as a typo. A pod that
// does not exist is still a 404, and a container the pod lacks is
// kube-apiserver's own 400. Nothing is written.
func TestPodConnectionsSayTheContainersAreSimulated(t *testing.T) {
	env := testenv.Start(t)
	create[corev1.Pod](t, env, podPath("default", ""), pod("web", "", nil))
	web := podPath("default", "web")

	for _, tc := range []struct {
		name, method, path string
		code               int
		reason             metav1.StatusReason
		message            string
	}{
		{"kubectl exec", http.MethodPost, web + "/exec?command=ls&container=app&stdout=true", 400, metav1.StatusReasonBadRequest,
			`minictl's containers are simulated: pod "web" has no process to exec into`},
		{"exec over a WebSocket", http.MethodGet, web + "/exec?command=ls&stdout=true", 400, metav1.StatusReasonBadRequest,
			`minictl's containers are simulated: pod "web" has no process to exec into`},
		{"kubectl attach", http.MethodPost, web + "/attach?stdout=true", 400, metav1.StatusReasonBadRequest,
			`minictl's containers are simulated: pod "web" has no process to attach to`},
		{"kubectl port-forward", http.MethodPost, web + "/portforward", 400, metav1.StatusReasonBadRequest,
			`minictl's containers are simulated: pod "web" has no process listening to forward to`},
		{"proxy", http.MethodGet, web + "/proxy", 400, metav1.StatusReasonBadRequest,
			`minictl's containers are simulated: pod "web" has no process serving to proxy to`},
		{"proxy to a path", http.MethodGet, web + "/proxy/healthz/ready", 400, metav1.StatusReasonBadRequest,
			`minictl's containers are simulated: pod "web" has no process serving to proxy to`},
		{"exec into a container the pod lacks", http.MethodPost, web + "/exec?command=ls&container=nope", 400, metav1.StatusReasonBadRequest,
			"container nope is not valid for pod web"},
		{"exec into a pod that does not exist", http.MethodPost, podPath("default", "nosuch") + "/exec?command=ls", 404, metav1.StatusReasonNotFound,
			`pods "nosuch" not found`},
		{"exec on a kind without it", http.MethodPost, cmPath("default", "web") + "/exec?command=ls", 404, metav1.StatusReasonNotFound, ""},
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
}
