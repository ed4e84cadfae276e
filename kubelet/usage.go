package kubelet

import (
	"math/bits"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
)

// The annotations that set what a pod's containers use, for the resource
// metrics (kubectl top, the HorizontalPodAutoscaler). Each value is the
// whole pod's usage, a quantity ("350m", "200Mi"), shared evenly by its
// running containers; a value that does not parse is ignored.
const (
	AnnotationCPUUsage    = "sim.minictl.io/cpu-usage"
	AnnotationMemoryUsage = "sim.minictl.io/memory-usage"
)

// Usage of a container whose pod does not say: a tenth of what it
// requests, or, without a request, the small amount an idle process
// uses.
const (
	usageShareOfRequests = 10 // percent
	idleCPUNanocores     = 1_000_000
	idleMemoryBytes      = 8 << 20
)

// The node's own usage (its kubelet, its runtime, its system), added to
// its containers'.
const (
	systemCPUNanocores = 50_000_000
	systemMemoryBytes  = 200 << 20
)

// containerUsage is what one running container uses now: its CPU rate in
// nanocores and its working set in bytes.
type containerUsage struct {
	name      string
	startedAt time.Time
	cpu       uint64 // nanocores
	memory    uint64 // bytes
}

// podUsage is the current usage of each running container of pod,
// ordered by container name: the pod's annotations shared evenly, or
// each container's default.
func podUsage(pod *corev1.Pod) []containerUsage {
	requests := map[string]corev1.ResourceList{}
	for _, c := range pod.Spec.InitContainers {
		requests[c.Name] = c.Resources.Requests
	}
	for _, c := range pod.Spec.Containers {
		requests[c.Name] = c.Resources.Requests
	}
	var out []containerUsage
	for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, cs := range list {
			if cs.State.Running == nil {
				continue
			}
			req := requests[cs.Name]
			out = append(out, containerUsage{
				name:      cs.Name,
				startedAt: cs.State.Running.StartedAt.Time,
				cpu:       defaultUsage(req, corev1.ResourceCPU, idleCPUNanocores, 9),
				memory:    defaultUsage(req, corev1.ResourceMemory, idleMemoryBytes, 0),
			})
		}
	}
	if len(out) == 0 {
		return nil
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	if total, ok := annotatedUsage(pod, AnnotationCPUUsage, 9); ok {
		for i, share := range shares(total, len(out)) {
			out[i].cpu = share
		}
	}
	if total, ok := annotatedUsage(pod, AnnotationMemoryUsage, 0); ok {
		for i, share := range shares(total, len(out)) {
			out[i].memory = share
		}
	}
	return out
}

// defaultUsage is a tenth of the request for name in req, in units of
// 10^-scale, or idle when there is none.
func defaultUsage(req corev1.ResourceList, name corev1.ResourceName, idle uint64, scale int32) uint64 {
	q, ok := req[name]
	if !ok || q.Sign() <= 0 {
		return idle
	}
	return uint64(q.ScaledValue(resource.Scale(-scale))) * usageShareOfRequests / 100
}

// annotatedUsage reads the annotation key of pod as a quantity in units of
// 10^-scale; false when it is absent or not a non-negative quantity.
func annotatedUsage(pod *corev1.Pod, key string, scale int32) (uint64, bool) {
	v, ok := pod.Annotations[key]
	if !ok {
		return 0, false
	}
	q, err := resource.ParseQuantity(v)
	if err != nil || q.Sign() < 0 {
		return 0, false
	}
	return uint64(q.ScaledValue(resource.Scale(-scale))), true
}

// shares splits total into n parts that differ by at most one and add up
// to total, the larger ones first.
func shares(total uint64, n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = total / uint64(n)
		if uint64(i) < total%uint64(n) {
			out[i]++
		}
	}
	return out
}

// cpuCounter is a cumulative CPU time that grows at a rate which changes
// now and then: what cAdvisor reads from a cgroup's cpuacct.
type cpuCounter struct {
	ns   uint64    // core-nanoseconds used until at
	rem  uint64    // what ns lost to rounding, in nanocore-nanoseconds
	at   time.Time // when ns was last brought up to date
	rate uint64    // nanocores, from at on
}

// advance brings c up to now at its rate, then makes rate its rate from
// now on.
func (c *cpuCounter) advance(now time.Time, rate uint64) {
	if d := now.Sub(c.at); d > 0 {
		hi, lo := bits.Mul64(c.rate, uint64(d))
		lo, carry := bits.Add64(lo, c.rem, 0)
		hi += carry
		q, r := bits.Div64(hi, lo, 1e9)
		c.ns, c.rem, c.at = c.ns+q, r, now
	}
	c.rate = rate
}

// seconds is c's CPU time in core-seconds.
func (c *cpuCounter) seconds() float64 { return float64(c.ns) / 1e9 }

// usageMeter keeps the CPU counters of a node and its containers, as the
// kubelet's cAdvisor does: every read brings them up to the moment of the
// read at the rate each had, then takes the rate the pods now ask for.
// A change of rate so shows from the read after the one that saw it. The
// node's counter is its own usage and everything its containers used.
type usageMeter struct {
	mu sync.Mutex
	// system counts the node's own CPU time, from the kubelet's start.
	system cpuCounter
	// containersNs is the CPU time every container that ran on the node
	// used, as far as the readings saw: it only grows, as the node's
	// counter must when containers go.
	containersNs uint64
	// containers holds the counter of each running container, by pod uid
	// and name, for as long as it runs the same run.
	containers map[containerKey]*meteredContainer
}

type containerKey struct {
	pod  types.UID
	name string
}

type meteredContainer struct {
	startedAt time.Time
	cpu       cpuCounter
}

func newUsageMeter(started time.Time) *usageMeter {
	return &usageMeter{
		system:     cpuCounter{at: started, rate: systemCPUNanocores},
		containers: map[containerKey]*meteredContainer{},
	}
}

// containerSample is one container's point in a reading.
type containerSample struct {
	namespace, pod, container string
	startedAt                 time.Time
	cpuSeconds                float64
	memoryBytes               uint64
}

// usageSample is one reading of a node: its counters at one moment.
type usageSample struct {
	at              time.Time
	nodeCPUSeconds  float64
	nodeMemoryBytes uint64
	// containers are ordered by namespace, pod and container name; pods
	// names the pods they belong to, in the same order.
	containers     []containerSample
	pods           []types.NamespacedName
	podCPUSeconds  map[types.NamespacedName]float64
	podMemoryBytes map[types.NamespacedName]uint64
}

// read takes a reading at now of the node whose running pods are pods. A
// container first seen has used its rate since it started; one gone, or
// started again, loses its counter.
func (m *usageMeter) read(now time.Time, pods []*corev1.Pod) usageSample {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := usageSample{
		at:             now,
		podCPUSeconds:  map[types.NamespacedName]float64{},
		podMemoryBytes: map[types.NamespacedName]uint64{},
	}
	nodeMemory := uint64(systemMemoryBytes)
	seen := map[containerKey]bool{}
	sort.Slice(pods, func(i, j int) bool {
		if pods[i].Namespace != pods[j].Namespace {
			return pods[i].Namespace < pods[j].Namespace
		}
		return pods[i].Name < pods[j].Name
	})
	for _, pod := range pods {
		ref := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
		usage := podUsage(pod)
		if len(usage) > 0 {
			s.pods = append(s.pods, ref)
		}
		for _, u := range usage {
			key := containerKey{pod: pod.UID, name: u.name}
			seen[key] = true
			mc := m.containers[key]
			if mc == nil || !mc.startedAt.Equal(u.startedAt) {
				mc = &meteredContainer{startedAt: u.startedAt, cpu: cpuCounter{at: u.startedAt, rate: u.cpu}}
				m.containers[key] = mc
			}
			before := mc.cpu.ns
			mc.cpu.advance(now, u.cpu)
			m.containersNs += mc.cpu.ns - before
			nodeMemory += u.memory
			cs := containerSample{
				namespace: pod.Namespace, pod: pod.Name, container: u.name,
				startedAt: u.startedAt, cpuSeconds: mc.cpu.seconds(), memoryBytes: u.memory,
			}
			s.containers = append(s.containers, cs)
			s.podCPUSeconds[ref] += cs.cpuSeconds
			s.podMemoryBytes[ref] += cs.memoryBytes
		}
	}
	for key := range m.containers {
		if !seen[key] {
			delete(m.containers, key)
		}
	}
	m.system.advance(now, systemCPUNanocores)
	s.nodeCPUSeconds = float64(m.system.ns+m.containersNs) / 1e9
	s.nodeMemoryBytes = nodeMemory
	return s
}
