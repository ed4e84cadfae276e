package informer

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Micro-benchmarks of the informer's hot paths: the DeltaFIFO between the
// Reflector and the informer loop, the Indexer a controller reads, and
// what one cached pod costs in memory. `make bench` measures the same
// memory against a real server.

// benchPod is the pod `make bench` creates, as the server returns it.
func benchPod(i int) *corev1.Pod {
	yes := true
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("web-%05d", i), Namespace: fmt.Sprintf("ns-%d", i%10),
			UID: "5b5d6f7e-1b6e-4b6b-9b7e-2f1c8d9a0b1c", ResourceVersion: strconv.Itoa(100 + i),
			Labels: map[string]string{"app": "web", "tier": "web"},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", UID: "rs-uid", Controller: &yes, BlockOwnerDeletion: &yes,
			}},
		},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "app", Image: "registry.example.com/bench/app:1.0",
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
			Env:   []corev1.EnvVar{{Name: "MODE", Value: "bench"}},
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
			},
			TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: corev1.TerminationMessageReadFile,
			ImagePullPolicy: corev1.PullIfNotPresent,
		}}, RestartPolicy: corev1.RestartPolicyAlways, DNSPolicy: corev1.DNSClusterFirst,
			SchedulerName: corev1.DefaultSchedulerName, NodeName: fmt.Sprintf("node-%d", i%20)},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.244.0.2", HostIP: "127.0.1.1"},
	}
}

func benchPods(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = benchPod(i)
	}
	return out
}

// podNodeIndex is an index like a scheduler or kubelet would add.
func podNodeIndex(obj any) ([]string, error) {
	return []string{obj.(*corev1.Pod).Spec.NodeName}, nil
}

func BenchmarkDeltaFIFOAddPop(b *testing.B) {
	pods := benchPods(1000)
	f := NewDeltaFIFO(DeltaFIFOOptions{})
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if err := f.Add(pods[i%len(pods)]); err != nil {
			b.Fatal(err)
		}
		if _, err := f.Pop(ctx, nil); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkDeltaFIFOReplace is a relist of 5,000 pods into a FIFO whose
// cache holds them all already, popped through to the cache.
func BenchmarkDeltaFIFOReplace(b *testing.B) {
	pods := benchPods(5000)
	idx := NewIndexer(nil, Indexers{NamespaceIndex: MetaNamespaceIndexFunc})
	if err := idx.Replace(pods, "1"); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		f := NewDeltaFIFO(DeltaFIFOOptions{KnownObjects: idx})
		if err := f.Replace(pods, "2"); err != nil {
			b.Fatal(err)
		}
		for f.Len() > 0 {
			if _, err := f.Pop(ctx, nil); err != nil {
				b.Fatal(err)
			}
		}
	}
}

func BenchmarkIndexerUpdate(b *testing.B) {
	pods := benchPods(5000)
	idx := NewIndexer(nil, Indexers{NamespaceIndex: MetaNamespaceIndexFunc, "node": podNodeIndex})
	if err := idx.Replace(pods, "1"); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if err := idx.Update(pods[i%len(pods)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

func BenchmarkIndexerGetByKey(b *testing.B) {
	idx := NewIndexer(nil, Indexers{NamespaceIndex: MetaNamespaceIndexFunc})
	if err := idx.Replace(benchPods(5000), "1"); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, ok, _ := idx.GetByKey("ns-3/web-00123"); !ok {
			b.Fatal("missing")
		}
	}
}

// BenchmarkIndexerByIndex reads the 500 pods of one namespace of 5,000.
func BenchmarkIndexerByIndex(b *testing.B) {
	idx := NewIndexer(nil, Indexers{NamespaceIndex: MetaNamespaceIndexFunc})
	if err := idx.Replace(benchPods(5000), "1"); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if l, _ := idx.ByIndex(NamespaceIndex, "ns-3"); len(l) != 500 {
			b.Fatalf("%d pods", len(l))
		}
	}
}

func BenchmarkIndexerList(b *testing.B) {
	idx := NewIndexer(nil, Indexers{NamespaceIndex: MetaNamespaceIndexFunc})
	if err := idx.Replace(benchPods(5000), "1"); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if l := idx.List(); len(l) != 5000 {
			b.Fatalf("%d pods", len(l))
		}
	}
}

// BenchmarkIndexerBytesPerPod is the heap one cached pod holds: decoded
// from the server's JSON (as a Reflector gets it) and stored with the
// namespace index every informer has. It reports bytes/pod.
func BenchmarkIndexerBytesPerPod(b *testing.B) {
	const n = 5000
	raw := make([][]byte, n)
	for i := range raw {
		var err error
		if raw[i], err = json.Marshal(benchPod(i)); err != nil {
			b.Fatal(err)
		}
	}
	var perPod float64
	for b.Loop() {
		perPod, _ = heapHeld(n, func() any {
			idx := NewIndexer(nil, Indexers{NamespaceIndex: MetaNamespaceIndexFunc})
			for _, data := range raw {
				pod := &corev1.Pod{}
				if err := json.Unmarshal(data, pod); err != nil {
					b.Fatal(err)
				}
				if err := idx.Add(pod); err != nil {
					b.Fatal(err)
				}
			}
			return idx
		})
	}
	b.ReportMetric(perPod, "bytes/pod")
}

// BenchmarkIndexerBytesPerEntry is what the store itself holds for each
// object beside the object: its slot, the values it is indexed under and
// its place in each index, with the namespace and node indexes a pod
// informer of the scheduler has. Every entry stores the same pod, so the
// pod's own bytes are not counted. It reports bytes/entry.
func BenchmarkIndexerBytesPerEntry(b *testing.B) {
	const n = 5000
	pod := benchPod(0)
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("ns-%d/web-%05d", i%10, i)
	}
	var perEntry float64
	for b.Loop() {
		perEntry, _ = heapHeld(n, func() any {
			s := newThreadSafeStore(Indexers{NamespaceIndex: MetaNamespaceIndexFunc, "node": podNodeIndex})
			for _, key := range keys {
				if err := s.put(key, pod); err != nil {
					b.Fatal(err)
				}
			}
			return s
		})
	}
	b.ReportMetric(perEntry, "bytes/entry")
}

// heapHeld is the heap, in bytes and in objects, that what build makes
// and returns holds once the collector has run, divided by n.
func heapHeld(n int, build func() any) (bytes, objects float64) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	kept := build()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(kept)
	return float64(after.HeapAlloc-before.HeapAlloc) / float64(n), float64(after.HeapObjects-before.HeapObjects) / float64(n)
}
