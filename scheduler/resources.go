package scheduler

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/minictl/minictl/scheduler/nodeports"
)

// Requests a pod without any for cpu or memory is counted with when nodes
// are scored (never when they are filtered), so that best-effort pods
// spread instead of piling onto one node: kube-scheduler's
// DefaultMilliCPURequest and DefaultMemoryRequest.
const (
	defaultMilliCPURequest int64 = 100
	defaultMemoryRequest   int64 = 200 * 1024 * 1024
)

// amounts are resource quantities as integers: cpu in millicores, every
// other resource in its base unit (bytes, pods, devices).
type amounts map[corev1.ResourceName]int64

func amountOf(name corev1.ResourceName, q resource.Quantity) int64 {
	if name == corev1.ResourceCPU {
		return q.MilliValue()
	}
	return q.Value()
}

func toAmounts(list corev1.ResourceList) amounts {
	out := make(amounts, len(list))
	for name, q := range list {
		out[name] = amountOf(name, q)
	}
	return out
}

func (a amounts) add(b amounts) {
	for name, v := range b {
		a[name] += v
	}
}

// raise sets every amount of a to at least b's.
func (a amounts) raise(b amounts) {
	for name, v := range b {
		a[name] = max(a[name], v)
	}
}

func (a amounts) clone() amounts {
	out := make(amounts, len(a))
	out.add(a)
	return out
}

// podRequests is what a pod asks a node for, the way kube-scheduler
// counts it: the sum of its containers' requests, or more if an init
// container needs more while it runs (init containers run one at a time,
// next to the sidecars started before them, which keep running), plus the
// pod overhead.
//
// With nonZero, a container that requests no cpu or no memory counts the
// scoring defaults instead.
func podRequests(pod *corev1.Pod, nonZero bool) amounts {
	requests := func(c *corev1.Container) amounts {
		a := toAmounts(c.Resources.Requests)
		if nonZero {
			if a[corev1.ResourceCPU] == 0 {
				a[corev1.ResourceCPU] = defaultMilliCPURequest
			}
			if a[corev1.ResourceMemory] == 0 {
				a[corev1.ResourceMemory] = defaultMemoryRequest
			}
		}
		return a
	}
	sum := amounts{}
	for i := range pod.Spec.Containers {
		sum.add(requests(&pod.Spec.Containers[i]))
	}
	sidecars, initPeak := amounts{}, amounts{}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		running := sidecars.clone()
		running.add(requests(c))
		initPeak.raise(running)
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sidecars.add(requests(c))
		}
	}
	sum.add(sidecars)
	sum.raise(initPeak)
	sum.add(toAmounts(pod.Spec.Overhead))
	return sum
}

// nodeUsage is what the pods bound (or assumed bound) to one node take
// from it.
type nodeUsage struct {
	requested amounts // for filtering: the pods' real requests
	nonZero   amounts // for scoring: with the defaults for unset cpu and memory
	pods      int64
	ports     nodeports.Used
}

func newNodeUsage() *nodeUsage {
	return &nodeUsage{requested: amounts{}, nonZero: amounts{}, ports: nodeports.Used{}}
}

func (u *nodeUsage) addPod(pod *corev1.Pod) { u.add(usageOf(pod)) }

// podUsage is what one pod takes from its node, kept for as long as the
// pod is bound: lists, not maps, as most pods name two resources or none
// (two maps a pod held several hundred bytes).
type podUsage struct {
	requested, nonZero []amount
	ports              []nodeports.HostPort
}

// amount is one resource's amount in a podUsage.
type amount struct {
	name  corev1.ResourceName
	value int64
}

func usageOf(pod *corev1.Pod) podUsage {
	return podUsage{requested: podRequests(pod, false).list(), nonZero: podRequests(pod, true).list(), ports: nodeports.Of(pod)}
}

// list is a's amounts as a list, nil when a has none.
func (a amounts) list() []amount {
	if len(a) == 0 {
		return nil
	}
	out := make([]amount, 0, len(a))
	for name, v := range a {
		out = append(out, amount{name, v})
	}
	return out
}

// addList adds l's amounts to a.
func (a amounts) addList(l []amount) {
	for _, x := range l {
		a[x.name] += x.value
	}
}

// subList takes l's amounts from a, dropping those that reach zero.
func (a amounts) subList(l []amount) {
	for _, x := range l {
		if a[x.name] -= x.value; a[x.name] == 0 {
			delete(a, x.name)
		}
	}
}

func (u *nodeUsage) add(p podUsage) {
	u.requested.addList(p.requested)
	u.nonZero.addList(p.nonZero)
	u.pods++
	u.ports.Add(p.ports, 1)
}

// sub takes p off u.
func (u *nodeUsage) sub(p podUsage) {
	u.requested.subList(p.requested)
	u.nonZero.subList(p.nonZero)
	u.pods--
	u.ports.Add(p.ports, -1)
}

// clone returns a copy of u; a nil u is an empty usage.
func (u *nodeUsage) clone() *nodeUsage {
	if u == nil {
		return newNodeUsage()
	}
	ports := make(nodeports.Used, len(u.ports))
	for p, n := range u.ports {
		ports[p] = n
	}
	return &nodeUsage{requested: u.requested.clone(), nonZero: u.nonZero.clone(), pods: u.pods, ports: ports}
}
