package endpoints

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/client/record"
	"github.com/minictl/minictl/controllers/internal/controller"
	"github.com/minictl/minictl/controllers/internal/controllertest"
)

// These tests run the controller against a real API server on a real etcd
// (internal/testenv). No kubelet runs: the tests play it, giving pods an
// IP, phase Running and a Ready condition with UpdateStatus.

const ns = "default"

// apiEnv is a running API server and typed clients of it.
type apiEnv struct {
	env       *controllertest.Env
	rc        *client.RESTClient
	pods      *client.Client[*corev1.Pod]
	services  *client.Client[*corev1.Service]
	endpoints *client.Client[*corev1.Endpoints]
}

func startAPI(t *testing.T) *apiEnv {
	t.Helper()
	env := controllertest.Start(t)
	rc := env.Client
	return &apiEnv{
		env:       env,
		rc:        rc,
		pods:      client.For[*corev1.Pod](rc),
		services:  client.For[*corev1.Service](rc),
		endpoints: client.For[*corev1.Endpoints](rc),
	}
}

// running is an API server with the controller running on it.
type running struct {
	*apiEnv
	ctrl     *Controller
	recorder *record.FakeRecorder
}

// runController starts an API server and the controller on it.
func runController(t *testing.T) *running {
	t.Helper()
	return startController(t, startAPI(t))
}

// startController starts the controller, with two workers, on a; it stops
// when the test ends.
func startController(t *testing.T, a *apiEnv) *running {
	t.Helper()
	rec := &record.FakeRecorder{}
	c, err := New(Options{Common: controller.Common{Client: a.rc, Informers: a.env.Informers, Recorder: rec, Logger: controllertest.Logger(t)}})
	if err != nil {
		t.Fatal(err)
	}
	controllertest.Run(t, a.env.Informers, 2, c)
	return &running{apiEnv: a, ctrl: c, recorder: rec}
}

// testCtx bounds a test's own requests.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func newService(name string, selector map[string]string, ports ...corev1.ServicePort) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"tier": "frontend"}},
		Spec:       corev1.ServiceSpec{Selector: selector, Ports: ports},
	}
}

func servicePort(name string, port int32, target intstr.IntOrString) corev1.ServicePort {
	return corev1.ServicePort{Name: name, Port: port, TargetPort: target}
}

// newPod is a pod labelled app=app on node-1, whose container serves
// ports.
func newPod(name, app string, ports ...corev1.ContainerPort) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": app}},
		Spec: corev1.PodSpec{
			NodeName:   "node-1",
			Containers: []corev1.Container{{Name: "app", Image: "nginx:1.27", Ports: ports}},
		},
	}
}

func (a *apiEnv) createService(t *testing.T, svc *corev1.Service) *corev1.Service {
	t.Helper()
	out, err := a.services.Create(testCtx(t), svc)
	if err != nil {
		t.Fatalf("create service %s: %v", svc.Name, err)
	}
	return out
}

func (a *apiEnv) createPod(t *testing.T, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	out, err := a.pods.Create(testCtx(t), pod)
	if err != nil {
		t.Fatalf("create pod %s: %v", pod.Name, err)
	}
	return out
}

// setPodStatus plays the kubelet: the pod runs at ip, ready or not.
func (a *apiEnv) setPodStatus(t *testing.T, name, ip string, ready bool) *corev1.Pod {
	t.Helper()
	pod, err := a.pods.Get(testCtx(t), ns, name)
	if err != nil {
		t.Fatalf("get pod %s: %v", name, err)
	}
	readyStatus := corev1.ConditionFalse
	if ready {
		readyStatus = corev1.ConditionTrue
	}
	pod.Status.Phase = corev1.PodRunning
	pod.Status.PodIP = ip
	pod.Status.PodIPs = []corev1.PodIP{{IP: ip}}
	pod.Status.Conditions = []corev1.PodCondition{{
		Type: corev1.PodReady, Status: readyStatus, LastTransitionTime: metav1.Now(),
	}}
	out, err := a.pods.UpdateStatus(testCtx(t), pod)
	if err != nil {
		t.Fatalf("update status of pod %s: %v", name, err)
	}
	return out
}

// runPod creates a pod and makes it run at ip, ready or not.
func (a *apiEnv) runPod(t *testing.T, pod *corev1.Pod, ip string, ready bool) *corev1.Pod {
	t.Helper()
	a.createPod(t, pod)
	return a.setPodStatus(t, pod.Name, ip, ready)
}

// getEndpoints returns the Endpoints name, or nil when there are none.
func (a *apiEnv) getEndpoints(t *testing.T, name string) *corev1.Endpoints {
	t.Helper()
	ep, err := a.endpoints.Get(testCtx(t), ns, name)
	if client.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatalf("get endpoints %s: %v", name, err)
	}
	return ep
}

// describe renders subsets compactly for comparisons and failure
// messages: "[10.0.0.1(web-1) | notReady 10.0.0.2(web-2) | http:8080/TCP]".
func describe(subsets []corev1.EndpointSubset) string {
	var b strings.Builder
	for _, ss := range subsets {
		b.WriteString("[")
		var parts []string
		for _, a := range ss.Addresses {
			parts = append(parts, addrString(a))
		}
		b.WriteString(strings.Join(parts, " "))
		if len(ss.NotReadyAddresses) > 0 {
			parts = parts[:0]
			for _, a := range ss.NotReadyAddresses {
				parts = append(parts, addrString(a))
			}
			b.WriteString(" | notReady " + strings.Join(parts, " "))
		}
		parts = parts[:0]
		for _, p := range ss.Ports {
			parts = append(parts, fmt.Sprintf("%s:%d/%s", p.Name, p.Port, p.Protocol))
		}
		b.WriteString(" | " + strings.Join(parts, " ") + "]")
	}
	return b.String()
}

func addrString(a corev1.EndpointAddress) string {
	name := "?"
	if a.TargetRef != nil {
		name = a.TargetRef.Name
	}
	return fmt.Sprintf("%s(%s)", a.IP, name)
}

// waitForSubsets waits until the Endpoints name describe as want.
func (a *apiEnv) waitForSubsets(t *testing.T, name, want string) *corev1.Endpoints {
	t.Helper()
	var ep *corev1.Endpoints
	controllertest.Eventually(t, "endpoints "+name+" = "+want, func() (bool, string) {
		ep = a.getEndpoints(t, name)
		if ep == nil {
			return false, "no endpoints"
		}
		got := describe(ep.Subsets)
		return got == want, got
	})
	return ep
}
