package metricsserver

import (
	"errors"
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
)

// freshContainerMinResolution is the least time between a container's
// start and its first point for the start to stand in for a point before
// it: less, and the rate over so short a window is not to be trusted.
const freshContainerMinResolution = 10 * time.Second

// storage keeps the last two points of every node and container, as
// metrics-server's storage does. Its methods are not safe for concurrent
// use; the Server guards it.
type storage struct {
	resolution time.Duration

	lastNodes, prevNodes map[string]point
	// lastPods and prevPods hold points by pod and container name; a
	// container in prevPods has its point in lastPods too, from the same
	// run, later.
	lastPods, prevPods map[types.NamespacedName]containerPoints
}

// store replaces what s keeps with the batches of one scrape, by node
// name, keeping a node's or container's last point as its previous one
// when the new one is later (and, for a container, of the same run).
func (s *storage) store(batches map[string]*nodeBatch) {
	lastNodes, prevNodes := map[string]point{}, map[string]point{}
	lastPods, prevPods := map[types.NamespacedName]containerPoints{}, map[types.NamespacedName]containerPoints{}
	for name, b := range batches {
		if b.node != nil {
			lastNodes[name] = *b.node
			if prev, ok := s.previous(s.lastNodes[name], s.prevNodes[name], *b.node, false); ok {
				prevNodes[name] = prev
			}
		}
		for ref, containers := range b.pods {
			if _, dup := lastPods[ref]; dup {
				continue // a pod reported by two kubelets: keep the first
			}
			lastPods[ref] = containers
			var prev containerPoints
			for _, c := range containers {
				if p, ok := s.previousContainer(ref, c.name, c.point); ok {
					prev = append(prev, containerPoint{name: c.name, point: p})
				}
			}
			if len(prev) > 0 {
				prevPods[ref] = prev
			}
		}
	}
	s.lastNodes, s.prevNodes, s.lastPods, s.prevPods = lastNodes, prevNodes, lastPods, prevPods
}

// previousContainer is the point to keep before pt, container c of ref's
// new one: its start if it started lately, else the point kept last.
func (s *storage) previousContainer(ref types.NamespacedName, c string, pt point) (point, bool) {
	if age := pt.timestamp.Sub(pt.startTime); pt.startTime.Before(pt.timestamp) && age < s.resolution && age >= freshContainerMinResolution {
		return point{timestamp: pt.startTime, startTime: pt.startTime, memory: pt.memory}, true
	}
	last, _ := s.lastPods[ref].get(c)
	prev, _ := s.prevPods[ref].get(c)
	return s.previous(last, prev, pt, true)
}

// previous is the point to keep before next, given the last and previous
// points kept (zero when none): last if next is later, else prev if it
// is earlier than next. A container's points must be of one run: the last
// point must come after next's start.
func (s *storage) previous(last, prev, next point, sameRun bool) (point, bool) {
	if last.timestamp.IsZero() || sameRun && !next.startTime.Before(last.timestamp) {
		return point{}, false
	}
	if next.timestamp.After(last.timestamp) {
		return last, true
	}
	if !prev.timestamp.IsZero() && prev.timestamp.Before(next.timestamp) {
		return prev, true
	}
	return point{}, false
}

// usage is the usage between two points of one node or container: CPU the
// counter's rate, memory the last working set.
type usage struct {
	timestamp time.Time
	window    time.Duration
	resources corev1.ResourceList
}

var errCounterDecreased = errors.New("unexpected decrease in cumulative CPU usage value")

func usageBetween(last, prev point) (usage, error) {
	if last.cpuNs < prev.cpuNs {
		return usage{}, errCounterDecreased
	}
	window := last.timestamp.Sub(prev.timestamp)
	if window <= 0 {
		return usage{}, errors.New("points out of order")
	}
	nanocores := math.Round(float64(last.cpuNs-prev.cpuNs) / window.Seconds())
	return usage{
		timestamp: last.timestamp,
		window:    window,
		resources: corev1.ResourceList{
			corev1.ResourceCPU:    *resource.NewScaledQuantity(int64(nanocores), resource.Nano),
			corev1.ResourceMemory: *resource.NewQuantity(int64(last.memory), resource.BinarySI),
		},
	}, nil
}

// node is the usage of node name, false if it has none.
func (s *storage) node(name string) (usage, bool) {
	last, ok := s.lastNodes[name]
	prev, ok2 := s.prevNodes[name]
	if !ok || !ok2 {
		return usage{}, false
	}
	u, err := usageBetween(last, prev)
	return u, err == nil
}

// containerUsage is one container's usage.
type containerUsage struct {
	name string
	usage
}

// pod is the usage of each container of pod ref, and the earliest of
// their timestamps with its window; false unless every container has two
// points.
func (s *storage) pod(ref types.NamespacedName) ([]containerUsage, usage, bool) {
	last, prev := s.lastPods[ref], s.prevPods[ref]
	if last == nil || prev == nil {
		return nil, usage{}, false
	}
	var out []containerUsage
	var earliest usage
	for _, l := range last {
		p, ok := prev.get(l.name)
		if !ok {
			return nil, usage{}, false
		}
		u, err := usageBetween(l.point, p)
		if err != nil {
			continue // a container whose counter went back: left out
		}
		out = append(out, containerUsage{name: l.name, usage: u})
		if earliest.timestamp.IsZero() || u.timestamp.Before(earliest.timestamp) {
			earliest = u
		}
	}
	return out, earliest, true
}
