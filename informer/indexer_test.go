package informer

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// pod returns a pod ns/name on node with labels.
func pod(ns, name, node string, lbls map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls},
		Spec:       corev1.PodSpec{NodeName: node},
	}
}

// byNode indexes pods by spec.nodeName; unscheduled pods are not indexed.
func byNode(obj any) ([]string, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, fmt.Errorf("not a pod: %T", obj)
	}
	if p.Spec.NodeName == "" {
		return nil, nil
	}
	return []string{p.Spec.NodeName}, nil
}

func sorted(s []string) []string { slices.Sort(s); return s }

func names(objs []any) []string {
	out := make([]string, 0, len(objs))
	for _, o := range objs {
		key, _ := MetaNamespaceKeyFunc(o)
		out = append(out, key)
	}
	return sorted(out)
}

func TestIndexerMaintainsIndexes(t *testing.T) {
	idx := NewIndexer(nil, Indexers{"node": byNode, NamespaceIndex: MetaNamespaceIndexFunc})
	must(t, idx.Add(pod("ns1", "a", "n1", nil)))
	must(t, idx.Add(pod("ns1", "b", "n1", nil)))
	must(t, idx.Add(pod("ns2", "c", "n2", nil)))
	must(t, idx.Add(pod("ns2", "d", "", nil)))

	type query struct {
		index, value string
		want         []string
	}
	steps := []struct {
		name    string
		do      func() error
		queries []query
		values  []string // ListIndexFuncValues("node")
	}{
		{"initial", func() error { return nil }, []query{
			{"node", "n1", []string{"ns1/a", "ns1/b"}},
			{"node", "n2", []string{"ns2/c"}},
			{NamespaceIndex, "ns2", []string{"ns2/c", "ns2/d"}},
		}, []string{"n1", "n2"}},
		{"update moves a pod to another node", func() error { return idx.Update(pod("ns1", "b", "n2", nil)) }, []query{
			{"node", "n1", []string{"ns1/a"}},
			{"node", "n2", []string{"ns1/b", "ns2/c"}},
		}, []string{"n1", "n2"}},
		{"schedule an unscheduled pod", func() error { return idx.Update(pod("ns2", "d", "n3", nil)) }, []query{
			{"node", "n3", []string{"ns2/d"}},
		}, []string{"n1", "n2", "n3"}},
		{"delete removes entries and empty values", func() error { return idx.Delete(pod("ns1", "a", "", nil)) }, []query{
			{"node", "n1", []string{}},
			{NamespaceIndex, "ns1", []string{"ns1/b"}},
		}, []string{"n2", "n3"}},
		{"delete by tombstone", func() error { return idx.Delete(DeletedFinalStateUnknown{Key: "ns2/d"}) }, []query{
			{"node", "n3", []string{}},
		}, []string{"n2"}},
		{"delete of a missing key is fine", func() error { return idx.Delete(pod("ns9", "x", "", nil)) }, nil, []string{"n2"}},
		{"replace rebuilds", func() error {
			return idx.Replace([]any{pod("ns3", "e", "n4", nil), pod("ns3", "f", "n4", nil)}, "7")
		}, []query{
			{"node", "n2", []string{}},
			{"node", "n4", []string{"ns3/e", "ns3/f"}},
			{NamespaceIndex, "ns3", []string{"ns3/e", "ns3/f"}},
			{NamespaceIndex, "ns1", []string{}},
		}, []string{"n4"}},
	}
	for _, step := range steps {
		must(t, step.do())
		for _, q := range step.queries {
			objs, err := idx.ByIndex(q.index, q.value)
			must(t, err)
			if got := names(objs); !slices.Equal(got, q.want) {
				t.Errorf("%s: ByIndex(%s, %s) = %v, want %v", step.name, q.index, q.value, got, q.want)
			}
			keys, err := idx.IndexKeys(q.index, q.value)
			must(t, err)
			if got := sorted(keys); !slices.Equal(got, q.want) {
				t.Errorf("%s: IndexKeys(%s, %s) = %v, want %v", step.name, q.index, q.value, got, q.want)
			}
		}
		if got := sorted(idx.ListIndexFuncValues("node")); !slices.Equal(got, step.values) {
			t.Errorf("%s: ListIndexFuncValues = %v, want %v", step.name, got, step.values)
		}
	}

	objs, err := idx.Index("node", pod("any", "thing", "n4", nil))
	must(t, err)
	if got := names(objs); !slices.Equal(got, []string{"ns3/e", "ns3/f"}) {
		t.Errorf("Index = %v", got)
	}
	if _, err := idx.ByIndex("nope", "x"); err == nil {
		t.Error("ByIndex of an unknown index: no error")
	}
	if _, err := idx.IndexKeys("nope", "x"); err == nil {
		t.Error("IndexKeys of an unknown index: no error")
	}
	if _, err := idx.Index("nope", pod("a", "b", "", nil)); err == nil {
		t.Error("Index of an unknown index: no error")
	}
}

func TestIndexerGetAndList(t *testing.T) {
	idx := NewIndexer(MetaNamespaceKeyFunc, nil)
	p := pod("ns", "a", "", nil)
	must(t, idx.Add(p))
	got, ok, err := idx.Get(pod("ns", "a", "", nil))
	if err != nil || !ok || got != any(p) {
		t.Fatalf("Get = %v %v %v", got, ok, err)
	}
	if _, ok, _ := idx.GetByKey("ns/b"); ok {
		t.Fatal("GetByKey found a missing key")
	}
	if keys := idx.ListKeys(); !slices.Equal(keys, []string{"ns/a"}) {
		t.Fatalf("ListKeys = %v", keys)
	}
	if l := idx.List(); len(l) != 1 {
		t.Fatalf("List = %v", l)
	}
	if err := idx.Add("not an object"); err == nil {
		t.Fatal("Add of a keyless object: no error")
	}
}

func TestIndexerFailingIndexFuncChangesNothing(t *testing.T) {
	boom := errors.New("boom")
	failOn := func(obj any) ([]string, error) {
		if obj.(*corev1.Pod).Name == "bad" {
			return nil, boom
		}
		return []string{"v"}, nil
	}
	idx := NewIndexer(nil, Indexers{"f": failOn})
	must(t, idx.Add(pod("ns", "good", "", nil)))
	if err := idx.Add(pod("ns", "bad", "", nil)); !errors.Is(err, boom) {
		t.Fatalf("Add = %v, want boom", err)
	}
	if err := idx.Replace([]any{pod("ns", "bad", "", nil)}, "1"); !errors.Is(err, boom) {
		t.Fatalf("Replace = %v, want boom", err)
	}
	if keys := idx.ListKeys(); !slices.Equal(keys, []string{"ns/good"}) {
		t.Fatalf("ListKeys = %v after failed writes", keys)
	}
}

func TestIndexerAddIndexers(t *testing.T) {
	tests := []struct {
		name   string
		before bool // add the indexer before the data
	}{{"before data", true}, {"on a populated store", false}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			idx := NewIndexer(nil, Indexers{NamespaceIndex: MetaNamespaceIndexFunc})
			if tt.before {
				must(t, idx.AddIndexers(Indexers{"node": byNode}))
			}
			must(t, idx.Add(pod("ns", "a", "n1", nil)))
			must(t, idx.Add(pod("ns", "b", "n1", nil)))
			if !tt.before {
				must(t, idx.AddIndexers(Indexers{"node": byNode}))
			}
			must(t, idx.Update(pod("ns", "b", "n2", nil))) // maintained after adding
			for value, want := range map[string][]string{"n1": {"ns/a"}, "n2": {"ns/b"}} {
				objs, err := idx.ByIndex("node", value)
				must(t, err)
				if got := names(objs); !slices.Equal(got, want) {
					t.Errorf("ByIndex(node, %s) = %v, want %v", value, got, want)
				}
			}
			if err := idx.AddIndexers(Indexers{NamespaceIndex: MetaNamespaceIndexFunc}); err == nil {
				t.Error("AddIndexers of an existing name: no error")
			}
		})
	}
}

func TestIndexerConcurrentReadersAndWriters(t *testing.T) {
	idx := NewIndexer(nil, Indexers{"node": byNode, NamespaceIndex: MetaNamespaceIndexFunc})
	const writers, readers, rounds = 4, 4, 300
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				name := fmt.Sprintf("p%d", i%10)
				node := fmt.Sprintf("n%d", (i+w)%3)
				if i%7 == 0 {
					_ = idx.Delete(pod("ns", name, "", nil))
					continue
				}
				if err := idx.Update(pod("ns", name, node, nil)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	for range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				_ = idx.List()
				_, _ = idx.ByIndex("node", fmt.Sprintf("n%d", i%3))
				_, _, _ = idx.GetByKey("ns/p1")
				_ = idx.ListIndexFuncValues("node")
			}
		}()
	}
	wg.Wait()

	// Quiescent: every index entry agrees with the object it names.
	count := 0
	for _, node := range idx.ListIndexFuncValues("node") {
		objs, err := idx.ByIndex("node", node)
		must(t, err)
		for _, o := range objs {
			count++
			if o.(*corev1.Pod).Spec.NodeName != node {
				t.Errorf("node index %s holds %s on %s", node, o.(*corev1.Pod).Name, o.(*corev1.Pod).Spec.NodeName)
			}
		}
	}
	if count != len(idx.List()) {
		t.Errorf("node index holds %d objects, store %d", count, len(idx.List()))
	}
}

func TestLister(t *testing.T) {
	for _, withNamespaceIndex := range []bool{true, false} {
		t.Run(fmt.Sprintf("namespace index %v", withNamespaceIndex), func(t *testing.T) {
			indexers := Indexers{"node": byNode}
			if withNamespaceIndex {
				indexers[NamespaceIndex] = MetaNamespaceIndexFunc
			}
			idx := NewIndexer(nil, indexers)
			web := map[string]string{"app": "web"}
			db := map[string]string{"app": "db"}
			for _, p := range []*corev1.Pod{
				pod("prod", "web-1", "n1", web), pod("prod", "web-2", "n2", web),
				pod("prod", "db-1", "n1", db), pod("dev", "web-1", "n1", web),
			} {
				must(t, idx.Add(p))
			}
			lister := NewLister[*corev1.Pod](idx)
			webSel := labels.SelectorFromSet(web)

			podNames := func(pods []*corev1.Pod) []string {
				var out []string
				for _, p := range pods {
					out = append(out, p.Namespace+"/"+p.Name)
				}
				return sorted(out)
			}
			tests := []struct {
				name string
				got  []*corev1.Pod
				want []string
			}{
				{"all", lister.List(nil), []string{"dev/web-1", "prod/db-1", "prod/web-1", "prod/web-2"}},
				{"everything selector", lister.List(labels.Everything()), []string{"dev/web-1", "prod/db-1", "prod/web-1", "prod/web-2"}},
				{"by selector", lister.List(webSel), []string{"dev/web-1", "prod/web-1", "prod/web-2"}},
				{"namespace", lister.ByNamespace("prod").List(nil), []string{"prod/db-1", "prod/web-1", "prod/web-2"}},
				{"namespace and selector", lister.ByNamespace("prod").List(webSel), []string{"prod/web-1", "prod/web-2"}},
				{"empty namespace", lister.ByNamespace("qa").List(nil), nil},
				{"all namespaces", lister.ByNamespace("").List(webSel), []string{"dev/web-1", "prod/web-1", "prod/web-2"}},
			}
			for _, tt := range tests {
				if got := podNames(tt.got); !slices.Equal(got, tt.want) {
					t.Errorf("%s = %v, want %v", tt.name, got, tt.want)
				}
			}

			byNode, err := lister.ByIndex("node", "n1")
			must(t, err)
			if got := podNames(byNode); !slices.Equal(got, []string{"dev/web-1", "prod/db-1", "prod/web-1"}) {
				t.Errorf("ByIndex = %v", got)
			}
			if _, err := lister.ByIndex("nope", "x"); err == nil {
				t.Error("ByIndex of an unknown index: no error")
			}

			p, err := lister.ByNamespace("prod").Get("db-1")
			if err != nil || p.Name != "db-1" {
				t.Fatalf("Get = %v, %v", p, err)
			}
			_, err = lister.Get("prod", "missing")
			if !apierrors.IsNotFound(err) {
				t.Fatalf("Get of a missing pod: %v, want NotFound", err)
			}
			if want := `pod "missing" not found`; err.Error() != want {
				t.Errorf("error = %q, want %q", err, want)
			}
		})
	}
}

func TestListerPanicsOnWrongType(t *testing.T) {
	idx := NewIndexer(nil, nil)
	must(t, idx.Add(cm("ns", "a", "1")))
	defer func() {
		if recover() == nil {
			t.Fatal("no panic for a ConfigMap in a pod lister")
		}
	}()
	NewLister[*corev1.Pod](idx).List(nil)
}
