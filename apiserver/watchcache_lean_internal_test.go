package apiserver

import (
	"bytes"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/minictl/minictl/api"
)

// TestLeanObjectsKeepProtobufOnly: a pod, an event and a lease, written to
// etcd by another writer and then deleted, are held by their caches as
// protobuf alone, and read back (decoded, as JSON, as protobuf, and as the
// deletion's last state) as the object that was written, at the right
// resourceVersion; a JSON watcher's event line carries the same JSON.
func TestLeanObjectsKeepProtobufOnly(t *testing.T) {
	ctx := t.Context()
	st := openTestStore(t)
	at := metav1.NewTime(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC))
	micro := metav1.NewMicroTime(time.Date(2026, 3, 4, 5, 6, 7, 123456000, time.UTC))
	pod := benchPod("lean")
	pod.Spec.NodeName = "node-1"
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.244.0.9", StartTime: &at,
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: at}}}
	event := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "lean.1", Namespace: "bench"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "bench", Name: "lean"},
		Reason:         "Started", Message: "Started container app", Type: corev1.EventTypeNormal, Count: 2,
		FirstTimestamp: at, LastTimestamp: at, EventTime: micro}
	holder := "node-1"
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "node-1", Namespace: corev1.NamespaceNodeLease},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, RenewTime: &micro}}

	for _, tc := range []struct {
		res *api.Resource
		obj api.Object
	}{{api.Pods, pod}, {api.Events, event}, {api.Leases, lease}} {
		t.Run(tc.res.Plural, func(t *testing.T) {
			if !leanResources[tc.res] {
				t.Fatalf("%s is not lean", tc.res.Plural)
			}
			c := runWatchCache(t, tc.res, st, watchCacheOptions{})
			_, _, w, err := c.watch(ctx, 0, true, filter{}, false, true)
			if err != nil {
				t.Fatal(err)
			}
			obj := tc.obj.DeepCopyObject().(api.Object)
			setTypeMeta(tc.res, obj)
			data, err := encodeForStorage(tc.res, obj)
			if err != nil {
				t.Fatal(err)
			}
			key := registryPrefix(tc.res) + obj.GetNamespace() + "/" + obj.GetName()
			rev, err := st.Create(ctx, key, data)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.waitFresh(ctx, rev); err != nil {
				t.Fatal(err)
			}
			o, _ := c.get(key)
			if o == nil {
				t.Fatalf("%s not cached", key)
			}
			if o.decoded != nil || o.raw != nil || len(o.pb) == 0 {
				t.Fatalf("cached with decoded %v, JSON %d bytes, protobuf %d bytes; want protobuf only", o.decoded != nil, len(o.raw), len(o.pb))
			}
			if got := o.encodedSize(); got != int64(len(o.pb)) {
				t.Errorf("encodedSize %d, want the protobuf's %d bytes", got, len(o.pb))
			}
			checkLean(t, o, obj, rev)
			item := <-w.ch
			want, _ := o.json()
			if item.typ != watch.Added || !bytes.Equal(item.line, jsonEventLine(watch.Added, want)) {
				t.Errorf("watch event %s %s, want ADDED with the object's JSON", item.typ, item.line)
			}

			del, err := st.Delete(ctx, key, rev)
			if err != nil {
				t.Fatal(err)
			}
			item = <-w.ch
			if item.typ != watch.Deleted || item.obj.raw != nil {
				t.Fatalf("watch event %s, JSON held %v; want DELETED, lean", item.typ, item.obj.raw != nil)
			}
			checkLean(t, item.obj, obj, del)
		})
	}
}

// checkLean checks that o reads as want at revision rev, decoded and as
// JSON, and that its JSON is what its decoded form encodes to.
func checkLean(t *testing.T, o *cachedObject, want api.Object, rev int64) {
	t.Helper()
	want = want.DeepCopyObject().(api.Object)
	want.SetResourceVersion(strconv.FormatInt(rev, 10))
	got := o.object()
	if !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("decoded:\n got %+v\nwant %+v", got, want)
	}
	if got == o.object() {
		t.Error("object returned the same copy twice: a lean object is decoded for each caller")
	}
	raw, err := o.json()
	if err != nil {
		t.Fatal(err)
	}
	wantJSON, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(raw, wantJSON) {
		t.Errorf("JSON:\n got %s\nwant %s", raw, wantJSON)
	}
	if _, err := o.protobuf(o.res); err != nil {
		t.Errorf("protobuf: %v", err)
	}
}

// TestJSONMemoBudget: the memo keeps the JSON of the objects served last,
// never more bytes than its budget, and drops the oldest first; an object
// it dropped encodes its JSON again, the same bytes.
func TestJSONMemoBudget(t *testing.T) {
	objs, _ := tablePods(t)
	sizes := make([]int64, len(objs))
	for i, o := range objs {
		raw, err := o.json()
		if err != nil {
			t.Fatal(err)
		}
		sizes[i] = int64(len(raw))
	}
	// Room for the last two objects, not three.
	last := len(objs) - 1
	m := newJSONMemo(sizes[last] + sizes[last-1] + min(sizes[last-2], sizes[last-1], sizes[last]) - 1)
	for _, o := range objs {
		raw, err := o.json()
		if err != nil {
			t.Fatal(err)
		}
		m.keep(o, raw)
		if m.size() > m.budget {
			t.Fatalf("memo holds %d bytes, over its budget of %d", m.size(), m.budget)
		}
	}
	for i, o := range objs {
		if kept := o.kept.Load() != nil; kept != (i >= last-1) {
			t.Errorf("%s (%d of %d) kept %v", o.key, i+1, len(objs), kept)
		}
		fresh, err := marshalObject(o.object())
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := o.json(); !bytes.Equal(got, fresh) {
			t.Errorf("%s: json %s, want %s", o.key, got, fresh)
		}
	}
	if want := sizes[last] + sizes[last-1]; m.size() != want {
		t.Errorf("memo holds %d bytes, want %d", m.size(), want)
	}
	huge := newJSONMemo(1)
	huge.keep(objs[0], []byte("{}!"))
	if huge.size() != 0 {
		t.Errorf("JSON over the whole budget was kept")
	}
}
