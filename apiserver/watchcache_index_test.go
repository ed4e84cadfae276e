package apiserver

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/minictl/minictl/api"
)

// TestWatchCacheNodeWatchers follows, through a pods cache over a real
// etcd, the pods of a cluster of 5,000 nodes, each watched by its kubelet
// (spec.nodeName=node-NNNN), and the watchers no node index serves: no
// selector, labels, a namespace, a name, a node inequality, unbound pods.
// Pods are created unbound, bound, updated, moved to other nodes,
// relabelled and deleted. Every watcher receives exactly the events its
// own selector, checked here in plain Go, makes of those writes, in order:
// a pod arriving on a node is ADDED for that node's watcher, one leaving
// it is DELETED for it; nothing else reaches it.
func TestWatchCacheNodeWatchers(t *testing.T) {
	const nodes, pods = 5000, 120
	ctx := t.Context()
	st := openTestStore(t)
	c := runWatchCache(t, api.Pods, st, watchCacheOptions{})

	// Each watcher, as the server registers it, and what it selects.
	type watcher struct {
		name   string
		w      *cacheWatcher
		wants  func(*corev1.Pod) bool
		expect []string
		got    []string
	}
	from := c.currentRV()
	var watchers []*watcher
	add := func(name, namespace, label, field string, wants func(*corev1.Pod) bool) *watcher {
		f := filter{namespace: namespace, label: labels.Everything()}
		var err error
		if f.label, err = labels.Parse(label); err != nil {
			t.Fatal(err)
		}
		if f.field, err = parseFieldSelector(api.Pods, field); err != nil {
			t.Fatal(err)
		}
		_, _, cw, err := c.watch(ctx, from, false, f, false, true)
		if err != nil {
			t.Fatalf("watch %s: %v", name, err)
		}
		w := &watcher{name: name, w: cw, wants: wants}
		watchers = append(watchers, w)
		return w
	}
	nodeName := func(i int) string { return fmt.Sprintf("node-%04d", i) }
	kubelets := make([]*watcher, nodes)
	for i := range nodes {
		node := nodeName(i)
		kubelets[i] = add(node, "", "", "spec.nodeName="+node, func(p *corev1.Pod) bool { return p.Spec.NodeName == node })
	}
	add("everything", "", "", "", func(*corev1.Pod) bool { return true })
	add("app=web", "", "app=web", "", func(p *corev1.Pod) bool { return p.Labels["app"] == "web" })
	add("namespace team-a", "team-a", "", "", func(p *corev1.Pod) bool { return p.Namespace == "team-a" })
	add("unbound", "", "", "spec.nodeName=", func(p *corev1.Pod) bool { return p.Spec.NodeName == "" })
	add("not on node-0001", "", "", "spec.nodeName!=node-0001", func(p *corev1.Pod) bool { return p.Spec.NodeName != "node-0001" })
	add("pod-007 by name", "", "", "metadata.name=pod-007", func(p *corev1.Pod) bool { return p.Name == "pod-007" })
	add("team-b/pod-009 by name", "team-b", "", "metadata.name=pod-009", func(p *corev1.Pod) bool {
		return p.Namespace == "team-b" && p.Name == "pod-009"
	})
	add("web pods on node-0003", "", "app=web", "spec.nodeName=node-0003", func(p *corev1.Pod) bool {
		return p.Labels["app"] == "web" && p.Spec.NodeName == "node-0003"
	})
	add("team-a pods on node-0005", "team-a", "", "spec.nodeName=node-0005,status.phase=Running", func(p *corev1.Pod) bool {
		return p.Namespace == "team-a" && p.Spec.NodeName == "node-0005" && p.Status.Phase == corev1.PodRunning
	})

	// A node's watcher buffers few events, as it sees only its node's
	// pods; the others, and the watcher of every unbound pod, keep the
	// full buffer.
	for _, w := range watchers {
		want := defaultWatcherBuffer
		if strings.HasPrefix(w.name, "node-") || w.name == "web pods on node-0003" || w.name == "team-a pods on node-0005" {
			want = indexedWatcherBuffer
		}
		if got := cap(w.w.ch); got != want {
			t.Errorf("%s: buffers %d events, want %d", w.name, got, want)
		}
	}

	// write changes one pod in etcd and records, for every watcher, the
	// event its selector makes of it.
	current := map[string]*corev1.Pod{}
	revs := map[string]int64{}
	var last int64
	write := func(ns, name string, change func(*corev1.Pod)) {
		t.Helper()
		key := registryPrefix(api.Pods) + ns + "/" + name
		prev := current[key]
		var cur *corev1.Pod
		var rev int64
		var err error
		switch {
		case change == nil:
			rev, err = st.Delete(ctx, key, revs[key])
		case prev == nil:
			cur = &corev1.Pod{}
			cur.Namespace, cur.Name = ns, name
			change(cur)
			rev, err = st.Create(ctx, key, storedValue(t, cur))
		default:
			cur = prev.DeepCopy()
			change(cur)
			rev, err = st.Update(ctx, key, storedValue(t, cur), revs[key])
		}
		if err != nil {
			t.Fatalf("write %s: %v", key, err)
		}
		current[key], revs[key], last = cur, rev, rev
		if cur == nil {
			delete(current, key)
		}
		for _, w := range watchers {
			was := prev != nil && w.wants(prev)
			is := cur != nil && w.wants(cur)
			var typ watch.EventType
			switch {
			case was && is:
				typ = watch.Modified
			case is:
				typ = watch.Added
			case was:
				typ = watch.Deleted
			default:
				continue
			}
			w.expect = append(w.expect, fmt.Sprintf("%s %s/%s %d", typ, ns, name, rev))
		}
	}

	namespaceOf := func(i int) string { return []string{"team-a", "team-b"}[i%2] }
	podName := func(i int) string { return fmt.Sprintf("pod-%03d", i) }
	for i := range pods {
		app := []string{"web", "db", "web"}[i%3]
		write(namespaceOf(i), podName(i), func(p *corev1.Pod) { p.Labels = map[string]string{"app": app} })
	}
	for i := range pods { // bound, as a binding does: two or three pods a node
		write(namespaceOf(i), podName(i), func(p *corev1.Pod) { p.Spec.NodeName = nodeName(i % 50) })
	}
	for i := range pods { // its kubelet reports it running
		write(namespaceOf(i), podName(i), func(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning })
	}
	for i := 0; i < pods; i += 4 { // moved far off, and back near
		write(namespaceOf(i), podName(i), func(p *corev1.Pod) { p.Spec.NodeName = nodeName(4000 + i) })
		write(namespaceOf(i), podName(i), func(p *corev1.Pod) { p.Spec.NodeName = nodeName((i + 3) % 50) })
	}
	for i := 0; i < pods; i += 5 { // unbound again, and relabelled
		write(namespaceOf(i), podName(i), func(p *corev1.Pod) { p.Spec.NodeName = "" })
		write(namespaceOf(i), podName(i), func(p *corev1.Pod) { p.Labels["app"] = "cache" })
	}
	for i := range pods {
		write(namespaceOf(i), podName(i), nil)
	}
	if err := c.waitFresh(ctx, last); err != nil {
		t.Fatalf("wait for the last write's revision %d: %v", last, err)
	}

	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, w := range watchers {
		if w.w.stopped {
			t.Errorf("%s: stopped (closed as too slow?) before the end", w.name)
			continue
		}
		for n := len(w.w.ch); n > 0; n-- {
			it := <-w.w.ch
			w.got = append(w.got, fmt.Sprintf("%s %s/%s %d", it.typ, it.obj.namespace, it.obj.object().GetName(), it.rv))
			if it.rv != it.obj.rv {
				t.Errorf("%s: %s event at %d carries resourceVersion %d", w.name, it.typ, it.rv, it.obj.rv)
			}
		}
		if !slices.Equal(w.got, w.expect) {
			t.Errorf("%s: got\n\t%s\nwant\n\t%s", w.name, strings.Join(w.got, "\n\t"), strings.Join(w.expect, "\n\t"))
		}
	}
	// The test is only as good as what the watchers were meant to see.
	for _, w := range watchers[nodes:] {
		if len(w.expect) == 0 {
			t.Errorf("%s: expected no event: the writes do not exercise it", w.name)
		}
	}
	var seen, silent int
	for _, k := range kubelets {
		if len(k.expect) > 0 {
			seen++
		} else {
			silent++
		}
	}
	if seen < 70 || silent < 4000 {
		t.Errorf("%d node watchers expected events and %d none: the writes do not exercise the index", seen, silent)
	}
}

// storedValue is pod as the server stores it.
func storedValue(t *testing.T, pod *corev1.Pod) []byte {
	t.Helper()
	setTypeMeta(api.Pods, pod)
	data, err := encodeForStorage(api.Pods, pod)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
