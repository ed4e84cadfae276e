package nodeports

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func podWithPorts(ports ...corev1.ContainerPort) *corev1.Pod {
	return &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Ports: ports}}}}
}

func TestFits(t *testing.T) {
	tcp80 := corev1.ContainerPort{ContainerPort: 80, HostPort: 80}
	for _, tt := range []struct {
		name       string
		pod, other corev1.ContainerPort
		fits       bool
	}{
		{"same port, both on all IPs", tcp80, tcp80, false},
		{"another port", tcp80, corev1.ContainerPort{ContainerPort: 80, HostPort: 81}, true},
		{"no host port takes none", corev1.ContainerPort{ContainerPort: 80}, corev1.ContainerPort{ContainerPort: 80}, true},
		{"UDP and TCP (the default) do not meet", tcp80, corev1.ContainerPort{HostPort: 80, Protocol: corev1.ProtocolUDP}, true},
		{"explicit TCP is the default", tcp80, corev1.ContainerPort{HostPort: 80, Protocol: corev1.ProtocolTCP}, false},
		{"two IPs", corev1.ContainerPort{HostPort: 80, HostIP: "10.0.0.1"}, corev1.ContainerPort{HostPort: 80, HostIP: "10.0.0.2"}, true},
		{"an IP against all IPs", corev1.ContainerPort{HostPort: 80, HostIP: "10.0.0.1"}, tcp80, false},
		{"all IPs against an IP", tcp80, corev1.ContainerPort{HostPort: 80, HostIP: "10.0.0.1"}, false},
		{"0.0.0.0 is all IPs", corev1.ContainerPort{HostPort: 80, HostIP: "0.0.0.0"}, tcp80, false},
	} {
		if got := Fits(podWithPorts(tt.pod), []*corev1.Pod{podWithPorts(tt.other)}); got != tt.fits {
			t.Errorf("%s: Fits = %v, want %v", tt.name, got, tt.fits)
		}
	}

	used := Used{}
	taken := Of(podWithPorts(tcp80))
	used.Add(taken, 1)
	used.Add(taken, 1)
	used.Add(taken, -1)
	if used.Fit(taken) {
		t.Error("a port taken twice and released once is free")
	}
	used.Add(taken, -1)
	if !used.Fit(taken) || len(used) != 0 {
		t.Errorf("a port released by all is not free: %v", used)
	}
}
