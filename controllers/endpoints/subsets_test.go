package endpoints

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// pod builds a pod for the pure tests: running at ip (none if ""), ready
// or not, serving ports.
func pod(name, ip string, ready bool, ports ...corev1.ContainerPort) *corev1.Pod {
	p := newPod(name, "web", ports...)
	p.UID = types.UID("uid-" + name)
	p.Status.Phase = corev1.PodRunning
	p.Status.PodIP = ip
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
	return p
}

func TestPodIsEndpoint(t *testing.T) {
	now := metav1.Now()
	running := pod("a", "10.0.0.1", true)
	noIP := pod("a", "", true)
	failed := pod("a", "10.0.0.1", false)
	failed.Status.Phase = corev1.PodFailed
	succeeded := pod("a", "10.0.0.1", false)
	succeeded.Status.Phase = corev1.PodSucceeded
	deleting := pod("a", "10.0.0.1", true)
	deleting.DeletionTimestamp = &now
	onlyPodIPs := pod("a", "", true)
	onlyPodIPs.Status.PodIPs = []corev1.PodIP{{IP: "10.0.0.1"}}

	for _, tt := range []struct {
		name               string
		pod                *corev1.Pod
		includeTerminating bool
		want               bool
	}{
		{"running", running, false, true},
		{"no IP", noIP, false, false},
		{"only podIPs", onlyPodIPs, false, true},
		{"failed", failed, true, false},
		{"succeeded", succeeded, true, false},
		{"being deleted", deleting, false, false},
		{"being deleted, publishing not-ready addresses", deleting, true, true},
	} {
		if got := podIsEndpoint(tt.pod, tt.includeTerminating); got != tt.want {
			t.Errorf("%s: podIsEndpoint = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestFindPort(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	p := pod("a", "10.0.0.1", true,
		corev1.ContainerPort{Name: "web", ContainerPort: 8080},
		corev1.ContainerPort{Name: "dns", ContainerPort: 5353, Protocol: corev1.ProtocolUDP})
	p.Spec.InitContainers = []corev1.Container{
		{Name: "proxy", RestartPolicy: &always, Ports: []corev1.ContainerPort{{Name: "proxy", ContainerPort: 15001}}},
		{Name: "setup", Ports: []corev1.ContainerPort{{Name: "setup", ContainerPort: 7000}}},
	}
	for _, tt := range []struct {
		name   string
		port   corev1.ServicePort
		want   int32
		wantOK bool
	}{
		{"a number", corev1.ServicePort{Port: 80, TargetPort: intstr.FromInt32(9376)}, 9376, true},
		{"no target port", corev1.ServicePort{Port: 80}, 80, true},
		{"a name", corev1.ServicePort{Port: 80, TargetPort: intstr.FromString("web")}, 8080, true},
		{"a name, other protocol", corev1.ServicePort{Port: 53, TargetPort: intstr.FromString("dns"), Protocol: corev1.ProtocolTCP}, 0, false},
		{"a name and its protocol", corev1.ServicePort{Port: 53, TargetPort: intstr.FromString("dns"), Protocol: corev1.ProtocolUDP}, 5353, true},
		{"a sidecar's name", corev1.ServicePort{Port: 80, TargetPort: intstr.FromString("proxy")}, 15001, true},
		{"an init container's name", corev1.ServicePort{Port: 80, TargetPort: intstr.FromString("setup")}, 0, false},
		{"an unknown name", corev1.ServicePort{Port: 80, TargetPort: intstr.FromString("nope")}, 0, false},
	} {
		got, ok := findPort(p, &tt.port)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("%s: findPort = %d, %v; want %d, %v", tt.name, got, ok, tt.want, tt.wantOK)
		}
	}
}

func TestDesiredSubsets(t *testing.T) {
	web8080 := corev1.ContainerPort{Name: "web", ContainerPort: 8080}
	web9090 := corev1.ContainerPort{Name: "web", ContainerPort: 9090}
	svc := func(publish bool, ports ...corev1.ServicePort) *corev1.Service {
		s := newService("web", map[string]string{"app": "web"}, ports...)
		s.Spec.PublishNotReadyAddresses = publish
		return s
	}
	headless := svc(false)
	headless.Spec.ClusterIP = corev1.ClusterIPNone

	for _, tt := range []struct {
		name                string
		svc                 *corev1.Service
		pods                []*corev1.Pod
		want                string
		wantReady, wantNotR int
	}{
		{
			name: "ready and not ready",
			svc:  svc(false, servicePort("http", 80, intstr.FromInt32(8080))),
			pods: []*corev1.Pod{pod("b", "10.0.0.2", true), pod("a", "10.0.0.1", true), pod("c", "10.0.0.3", false), pod("d", "", true)},
			want: "[10.0.0.1(a) 10.0.0.2(b) | notReady 10.0.0.3(c) | http:8080/TCP]", wantReady: 2, wantNotR: 1,
		},
		{
			name: "publishing not-ready addresses",
			svc:  svc(true, servicePort("http", 80, intstr.FromInt32(8080))),
			pods: []*corev1.Pod{pod("a", "10.0.0.1", true), pod("c", "10.0.0.3", false)},
			want: "[10.0.0.1(a) 10.0.0.3(c) | http:8080/TCP]", wantReady: 2,
		},
		{
			name: "a named port numbered differently",
			svc:  svc(false, servicePort("http", 80, intstr.FromString("web"))),
			pods: []*corev1.Pod{pod("a", "10.0.0.1", true, web8080), pod("b", "10.0.0.2", true, web9090), pod("c", "10.0.0.3", true, web8080), pod("d", "10.0.0.4", true)},
			want: "[10.0.0.1(a) 10.0.0.3(c) | http:8080/TCP][10.0.0.2(b) | http:9090/TCP]", wantReady: 3,
		},
		{
			name: "a pod without the name keeps the other port",
			svc: svc(false, servicePort("http", 80, intstr.FromString("web")),
				servicePort("metrics", 9100, intstr.FromInt32(9100))),
			pods: []*corev1.Pod{pod("a", "10.0.0.1", true, web8080), pod("d", "10.0.0.4", true)},
			want: "[10.0.0.1(a) | http:8080/TCP][10.0.0.1(a) 10.0.0.4(d) | metrics:9100/TCP]", wantReady: 2,
		},
		{
			name: "a headless service without ports",
			svc:  headless,
			pods: []*corev1.Pod{pod("a", "10.0.0.1", true), pod("b", "10.0.0.2", false)},
			want: "[10.0.0.1(a) | notReady 10.0.0.2(b) | ]", wantReady: 1, wantNotR: 1,
		},
		{
			name: "a service with a cluster IP and no ports",
			svc:  svc(false),
			pods: []*corev1.Pod{pod("a", "10.0.0.1", true)},
			want: "",
		},
		{
			name: "no pods",
			svc:  svc(false, servicePort("http", 80, intstr.FromInt32(8080))),
			want: "",
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, ready, notReady := desiredSubsets(tt.svc, tt.pods)
			if describe(got) != tt.want || ready != tt.wantReady || notReady != tt.wantNotR {
				t.Errorf("got %s (%d ready, %d not)\nwant %s (%d ready, %d not)", describe(got), ready, notReady, tt.want, tt.wantReady, tt.wantNotR)
			}
			// The order of the pods never changes the result.
			for range 10 {
				shuffled := slices.Clone(tt.pods)
				rand.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
				again, _, _ := desiredSubsets(tt.svc, shuffled)
				if !reflect.DeepEqual(again, got) {
					t.Fatalf("pods in another order gave %s", describe(again))
				}
			}
		})
	}
}

func TestPodAddress(t *testing.T) {
	s := newService("web", map[string]string{"app": "web"})
	p := pod("a", "10.0.0.1", true)
	p.Status.PodIPs = []corev1.PodIP{{IP: "fd00::1"}, {IP: "10.0.0.1"}}
	p.Spec.Hostname, p.Spec.Subdomain = "a", "web"
	addr, err := podAddress(s, p)
	if err != nil {
		t.Fatal(err)
	}
	if addr.IP != "10.0.0.1" || addr.Hostname != "a" || addr.NodeName == nil || *addr.NodeName != "node-1" {
		t.Errorf("address %+v", addr)
	}
	s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol}
	if addr, err := podAddress(s, p); err != nil || addr.IP != "fd00::1" {
		t.Errorf("IPv6 service: %v, %v", addr.IP, err)
	}
	p.Status.PodIPs, p.Status.PodIP = nil, "10.0.0.1"
	if _, err := podAddress(s, p); err == nil {
		t.Errorf("an IPv6 service got an IPv4 address")
	}
	p.Spec.Subdomain = "other"
	s.Spec.IPFamilies = nil
	if addr, _ := podAddress(s, p); addr.Hostname != "" {
		t.Errorf("hostname %q set for a pod whose subdomain names another service", addr.Hostname)
	}
}
