package scheduler

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/minictl/minictl/informer"
)

// BenchmarkDecide is one scheduling decision (filter and score every node,
// assume the pod) with 20 nodes holding 2,000 bound pods: what placing
// each pod of a large ReplicaSet costs. It does not grow with the pods
// already bound.
func BenchmarkDecide(b *testing.B) {
	for _, bound := range []int{0, 2000} {
		b.Run(fmt.Sprintf("%d-bound", bound), func(b *testing.B) {
			nodes := informer.NewIndexer(nil, nil)
			for i := range 20 {
				n := &corev1.Node{}
				n.Name = fmt.Sprintf("node-%d", i)
				n.Status.Allocatable = corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"),
					corev1.ResourcePods: resource.MustParse("110"),
				}
				n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
				if err := nodes.Add(n); err != nil {
					b.Fatal(err)
				}
			}
			s := &Scheduler{
				nodeLister: informer.NewLister[*corev1.Node](nodes),
				assumed:    map[string]assumedPod{}, bound: map[string]boundPod{},
				usage: map[string]*nodeUsage{}, unschedulable: map[string]time.Time{},
			}
			for i := range bound {
				p := benchPod(i)
				p.Spec.NodeName = fmt.Sprintf("node-%d", i%20)
				s.observe(p)
			}
			pod := benchPod(-1)
			b.ReportAllocs()
			for b.Loop() {
				d := s.decide("default/new", pod)
				if d.node == "" {
					b.Fatalf("no node: %s", d.message)
				}
				s.forgetAssumed("default/new")
			}
		})
	}
}

func benchPod(i int) *corev1.Pod {
	p := &corev1.Pod{}
	p.Namespace, p.Name, p.UID = "default", fmt.Sprintf("web-%d", i), types.UID(fmt.Sprintf("uid-%d", i))
	p.Spec.SchedulerName = DefaultSchedulerName
	p.Spec.Containers = []corev1.Container{{Name: "app", Image: "app", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")},
	}}}
	return p
}
