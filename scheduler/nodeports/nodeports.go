// Package nodeports is kube's NodePorts check: a pod fits a node only if
// every host port it asks for is free there. The scheduler filters nodes
// with it; the kubelet admits pods with it.
//
// Properties:
//
//   - A host port is a protocol (TCP when unset), a port and a host IP
//     (0.0.0.0 when unset, meaning every IP of the node); containerPorts
//     without HostPort take none. Init containers' ports count.
//   - Two host ports conflict when protocol and port are the same and
//     their IPs are the same or either is 0.0.0.0.
package nodeports

import corev1 "k8s.io/api/core/v1"

// Name is the check's name, the kubelet's admission reason; ErrReason is
// how the scheduler tells a node failing it.
const (
	Name      = "NodePorts"
	ErrReason = "node(s) didn't have free ports for the requested pod ports"
)

// HostPort is one port a container takes on its node's network: a
// protocol and port on an IP (0.0.0.0 for every IP of the node).
type HostPort struct {
	ip       string
	protocol corev1.Protocol
	port     int32
}

// Of is the host ports pod's containers (init containers included) ask
// for.
func Of(pod *corev1.Pod) []HostPort {
	var ports []HostPort
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range list {
			for _, p := range c.Ports {
				if p.HostPort <= 0 {
					continue
				}
				hp := HostPort{ip: p.HostIP, protocol: p.Protocol, port: p.HostPort}
				if hp.ip == "" {
					hp.ip = "0.0.0.0"
				}
				if hp.protocol == "" {
					hp.protocol = corev1.ProtocolTCP
				}
				ports = append(ports, hp)
			}
		}
	}
	return ports
}

// Used counts the host ports taken on one node; the zero value is
// not usable: make it.
type Used map[HostPort]int

// Add counts ports as taken n more times (n<0: released).
func (h Used) Add(ports []HostPort, n int) {
	for _, p := range ports {
		if h[p] += n; h[p] <= 0 {
			delete(h, p)
		}
	}
}

// conflicts reports whether p is taken: the same protocol and port on the
// same IP, or with either on 0.0.0.0.
func (h Used) conflicts(p HostPort) bool {
	if p.ip == "0.0.0.0" {
		for taken := range h {
			if taken.protocol == p.protocol && taken.port == p.port {
				return true
			}
		}
		return false
	}
	return h[p] > 0 || h[HostPort{ip: "0.0.0.0", protocol: p.protocol, port: p.port}] > 0
}

// Fit reports whether every host port of ports is free in h.
func (h Used) Fit(ports []HostPort) bool {
	for _, p := range ports {
		if h.conflicts(p) {
			return false
		}
	}
	return true
}

// Fits reports whether the host ports pod asks for are free on a node
// where others run.
func Fits(pod *corev1.Pod, others []*corev1.Pod) bool {
	want := Of(pod)
	if len(want) == 0 {
		return true
	}
	taken := Used{}
	for _, o := range others {
		taken.Add(Of(o), 1)
	}
	return taken.Fit(want)
}
