package apiserver

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/store"
)

// Micro-benchmarks of the API server's hot paths, without etcd or HTTP:
// the codec (what every write and every watch event pays), the selector
// match of the watch cache's filter, a list from the cache, and the
// fan-out of one event to many watchers. `make bench` measures the whole
// server; these say where its time goes.

// benchPod is a pod as the API server stores it after defaults: the pod
// `make bench` creates (one container with requests, limits, a port and
// an environment variable).
func benchPod(name string) *corev1.Pod {
	pod := &corev1.Pod{}
	pod.Name, pod.Namespace = name, "bench"
	pod.UID = "5b5d6f7e-1b6e-4b6b-9b7e-2f1c8d9a0b1c"
	pod.Labels = map[string]string{"app": "bench", "tier": "web"}
	pod.Spec.Containers = []corev1.Container{{
		Name: "app", Image: "registry.example.com/bench/app:1.0",
		Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
		Env:   []corev1.EnvVar{{Name: "MODE", Value: "bench"}},
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
		},
	}}
	api.Pods.Default(pod)
	api.AddDefaultTolerations(pod, api.DefaultTolerationSeconds)
	setTypeMeta(api.Pods, pod)
	return pod
}

func storedPod(b *testing.B, name string) []byte {
	b.Helper()
	data, err := encodeForStorage(api.Pods, benchPod(name))
	if err != nil {
		b.Fatal(err)
	}
	return data
}

func BenchmarkCodecDecodeFromStorage(b *testing.B) {
	data := storedPod(b, "pod-1")
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeFromStorage(api.Pods, data, 42); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCodecDecodeRequest is the decoding of a create's body: the pod
// `make bench` sends.
func BenchmarkCodecDecodeRequest(b *testing.B) {
	body := []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"pod-00001","namespace":"bench",` +
		`"labels":{"app":"bench","tier":"web"}},"spec":{"containers":[{"name":"app","image":"registry.example.com/bench/app:1.0",` +
		`"ports":[{"name":"http","containerPort":8080}],"env":[{"name":"MODE","value":"bench"}],` +
		`"resources":{"requests":{"cpu":"10m","memory":"16Mi"},"limits":{"cpu":"100m","memory":"64Mi"}}}]}}`)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeInto(context.Background(), api.Pods, body, fieldStrict); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCodecEncodeForStorage(b *testing.B) {
	pod := benchPod("pod-1")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := encodeForStorage(api.Pods, pod); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCodecWatchCacheObject is what the watch cache pays per event:
// the stored value to a cached object (decoded, and encoded with its
// resourceVersion for every reader).
func BenchmarkCodecWatchCacheObject(b *testing.B) {
	c := benchCache(b)
	data := storedPod(b, "pod-1")
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.newCachedObject(context.Background(), "/registry/core/pods/bench/pod-1", data, 42); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCodecDeepCopy(b *testing.B) {
	pod := benchPod("pod-1")
	b.ReportAllocs()
	for b.Loop() {
		_ = pod.DeepCopyObject()
	}
}

// BenchmarkFilterMatch is one watcher's filter against one cached pod:
// namespace, a label selector and a field selector, as a kubelet's watch
// (spec.nodeName) or a controller's (app=...) asks.
func BenchmarkFilterMatch(b *testing.B) {
	c := benchCache(b)
	o, err := c.newCachedObject(context.Background(), "/registry/core/pods/bench/pod-1", storedPod(b, "pod-1"), 42)
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct{ name, label, field string }{
		{"everything", "", ""},
		{"label", "app=bench,tier in (web,api)", ""},
		{"field", "", "spec.nodeName=node-1"},
		{"both", "app=bench", "status.phase!=Failed"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			f := benchFilter(b, "bench", tc.label, tc.field)
			b.ReportAllocs()
			for b.Loop() {
				f.matches(o)
			}
		})
	}
}

// BenchmarkWatchCacheList lists 5,000 cached pods with resourceVersion=0:
// select and sort, without the encoding (the cache holds it).
func BenchmarkWatchCacheList(b *testing.B) {
	c := benchCache(b)
	for i := range 5000 {
		name := fmt.Sprintf("pod-%05d", i)
		applyPut(b, c, name, int64(i+2))
	}
	f := benchFilter(b, "bench", "", "")
	b.ReportAllocs()
	for b.Loop() {
		if items, _ := c.list(f); len(items) != 5000 {
			b.Fatalf("%d items", len(items))
		}
	}
}

// BenchmarkWatchCacheFanOut is one etcd event applied to the cache and
// handed to every watcher (each drained by its own goroutine, as an HTTP
// watch's handler drains it): the cost per event.
func BenchmarkWatchCacheFanOut(b *testing.B) {
	for _, watchers := range []int{1, 100, 1000} {
		b.Run(strconv.Itoa(watchers)+"-watchers", func(b *testing.B) {
			c := benchCache(b)
			f := benchFilter(b, "bench", "", "")
			done := make(chan struct{})
			for range watchers {
				w := &cacheWatcher{filter: *f, jsonLines: true, ch: make(chan watchItem, c.buffer)}
				c.watchers.place(w)
				c.watchers.add(w)
				go func() {
					for range w.ch {
					}
					done <- struct{}{}
				}()
			}
			data := storedPod(b, "pod-1")
			rev := int64(1)
			b.ReportAllocs()
			for b.Loop() {
				rev++
				if err := c.handle(context.Background(), store.WatchEvent{Type: store.Put, Key: "/registry/core/pods/bench/pod-1", Value: data, Revision: rev}); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			c.stopAll()
			for range watchers {
				<-done
			}
		})
	}
}

func benchCache(b *testing.B) *watchCache {
	b.Helper()
	return newWatchCache(api.Pods, nil, watchCacheOptions{metrics: newMetrics(prometheus.NewRegistry())})
}

func benchFilter(b *testing.B, namespace, label, field string) *filter {
	b.Helper()
	l, err := labels.Parse(label)
	if err != nil {
		b.Fatal(err)
	}
	fs, err := fields.ParseSelector(field)
	if err != nil {
		b.Fatal(err)
	}
	return &filter{namespace: namespace, label: l, field: fs}
}

func applyPut(b *testing.B, c *watchCache, name string, rev int64) {
	b.Helper()
	if err := c.handle(context.Background(), store.WatchEvent{Type: store.Put, Key: "/registry/core/pods/bench/" + name, Value: storedPod(b, name), Revision: rev}); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkValidatePod is the validation of a create's pod, after defaults.
func BenchmarkValidatePod(b *testing.B) {
	pod := benchPod("pod-1")
	b.ReportAllocs()
	for b.Loop() {
		if err := validate(api.Pods, pod, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWatchCacheBytesPerPod is what the watch cache holds for each
// pod: the cached object with its encoded forms, labels and fields, built
// as the cache builds it from etcd's bytes. It reports the live heap and
// the heap objects each pod keeps: many small objects kept among freed
// ones leave the heap's spans part-empty, so both count.
func BenchmarkWatchCacheBytesPerPod(b *testing.B) {
	const pods = 10000
	stored := make([][]byte, pods)
	for i := range stored {
		pod := benchPod(fmt.Sprintf("pod-%05d", i))
		pod.Spec.NodeName = fmt.Sprintf("node-%d", i%100)
		pod.Status.Phase = corev1.PodRunning
		pod.Status.PodIP = fmt.Sprintf("10.244.%d.%d", i/250, i%250)
		data, err := encodeForStorage(api.Pods, pod)
		if err != nil {
			b.Fatal(err)
		}
		stored[i] = data
	}
	c := benchCache(b)
	var perPod, objectsPerPod float64
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		cached := make([]*cachedObject, pods)
		for i, data := range stored {
			o, err := c.newCachedObject(context.Background(), fmt.Sprintf("/registry/core/pods/bench/pod-%05d", i), data, int64(i+1))
			if err != nil {
				b.Fatal(err)
			}
			cached[i] = o
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		perPod = float64(after.HeapAlloc-before.HeapAlloc) / pods
		objectsPerPod = float64(after.HeapObjects-before.HeapObjects) / pods
		runtime.KeepAlive(cached)
	}
	b.ReportMetric(perPod, "bytes/pod")
	b.ReportMetric(objectsPerPod, "objects/pod")
}
