package apiserver

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/api"
)

// tablePods are pods as a table shows them: running with a managed
// field set, completed (a row with a condition), pending with empty
// lists and maps, and one whose strings need escaping; and the JSON
// each was cached from.
func tablePods(t *testing.T) ([]*cachedObject, [][]byte) {
	t.Helper()
	start := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	running := benchPod("running")
	running.CreationTimestamp = start
	running.Spec.NodeName = "node-1"
	running.ManagedFields = []metav1.ManagedFieldsEntry{{
		Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &start,
		FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{"f:phase":{}}}`)}, Subresource: "status",
	}}
	running.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.244.0.5", StartTime: &start,
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: start}},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Ready: true, RestartCount: 2,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: start}}}}}
	done := benchPod("done")
	done.Status.Phase = corev1.PodSucceeded
	pending := benchPod("pending")
	pending.Labels, pending.Annotations, pending.Finalizers = map[string]string{}, map[string]string{}, []string{}
	pending.Spec.Tolerations = []corev1.Toleration{}
	odd := benchPod("odd")
	odd.Annotations = map[string]string{"note": `<a href="x">&amp;</a> "quoted" ünïcode`}
	// Managed fields of the shapes json.Marshal writes differently: fieldsV1
	// with whitespace, escapes, HTML characters, non-ASCII, or not an
	// object of objects; no time; names that need escaping.
	managed := benchPod("managed")
	for i, raw := range []string{
		`{"f:metadata":{"f:labels":{".":{},"f:app":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"c\"}":{".":{}}}}}`,
		`{ "f:spec" : {"f:x": {}} }`,
		`{"f:a\u0041\n\/":{}}`,
		`{"f:<b>&":{}}`,
		`{"f:ünï":{}}`,
		`{"f:a":{"f:b":{}},"f:c":{}}`,
		`{"f:a":1}`,
		`{}`,
	} {
		e := metav1.ManagedFieldsEntry{Manager: fmt.Sprintf("m%d", i), Operation: metav1.ManagedFieldsOperationApply,
			APIVersion: "v1", Time: &start, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(raw)}}
		switch i {
		case 2:
			e.Time, e.Subresource = nil, "status"
		case 3:
			e.Manager = `kubectl <edit> & "more"`
		case 4:
			e.Manager = "ünïcode"
		}
		managed.ManagedFields = append(managed.ManagedFields, e)
	}
	managed.ManagedFields = append(managed.ManagedFields, metav1.ManagedFieldsEntry{})
	var out []*cachedObject
	var raws [][]byte
	for i, p := range []*corev1.Pod{running, done, pending, odd, managed} {
		p.ResourceVersion = fmt.Sprint(10 + i)
		raw, err := marshalObject(p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, encoded(api.Pods, "/pods/bench/"+p.Name, p, raw, nil, int64(10+i)))
		raws = append(raws, raw)
	}
	return out, raws
}

// TestMarshalTable checks that a Table written a row at a time is the
// bytes json.Marshal makes of it, for every includeObject and with and
// without headers, and that rows read from a lean object's protobuf say
// exactly what rows read from its JSON say.
func TestMarshalTable(t *testing.T) {
	now := time.Date(2026, 1, 2, 4, 0, 0, 0, time.UTC)
	objs, raws := tablePods(t)
	fromJSON, fromPB := make([]api.Object, len(objs)), make([]api.Object, len(objs))
	for i, o := range objs {
		if o.decoded != nil || o.raw != nil {
			t.Fatalf("%s is held decoded or as JSON: pods are lean", o.key)
		}
		obj, err := decodeFromStorage(api.Pods, raws[i], o.rv)
		if err != nil {
			t.Fatal(err)
		}
		fromJSON[i], fromPB[i] = obj, o.view()
	}
	lm := metav1.ListMeta{ResourceVersion: "13"}
	for _, include := range []metav1.IncludeObjectPolicy{metav1.IncludeMetadata, metav1.IncludeNone, metav1.IncludeObject} {
		for _, headers := range []bool{true, false} {
			out := &output{kind: asTable, version: "v1", include: include, now: func() time.Time { return now }}
			tbl, err := out.table(api.Pods, lm, fromJSON, raws, headers)
			if err != nil {
				t.Fatal(err)
			}
			want, err := json.Marshal(tbl)
			if err != nil {
				t.Fatal(err)
			}
			// The rows carry what is compared: a row condition and the
			// metadata's managed fields.
			if include == metav1.IncludeMetadata && (!strings.Contains(string(want), `"conditions":[{"type":"Completed"`) ||
				!strings.Contains(string(want), `"manager":"kubelet"`)) {
				t.Fatalf("table lacks a row condition or managed fields: %s", want)
			}
			for name, objs := range map[string][]api.Object{"json": fromJSON, "protobuf": fromPB} {
				got, err := out.marshalTable(api.Pods, lm, objs, raws, headers)
				if err != nil {
					t.Fatal(err)
				}
				if string(got) != string(want) {
					t.Errorf("include %s, headers %v, from %s:\n got %s\nwant %s", include, headers, name, got, want)
				}
			}
		}
	}
}

// TestAppendPartial: metadata is written as json.Marshal writes it, with
// managed fields that a stored object's JSON would not carry too: a zero
// time, a fieldsV1 that is null, missing or CBOR, an empty entry.
func TestAppendPartial(t *testing.T) {
	var zero metav1.Time
	at := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 6, time.FixedZone("x", 3600)))
	for _, p := range []*metav1.PartialObjectMetadata{
		{TypeMeta: metav1.TypeMeta{Kind: "PartialObjectMetadata", APIVersion: "meta.k8s.io/v1"}, ObjectMeta: metav1.ObjectMeta{
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "a", Time: &zero}, {}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "x", ManagedFields: []metav1.ManagedFieldsEntry{
			{Manager: "a", Time: &at, FieldsV1: &metav1.FieldsV1{Raw: []byte("null")}},
			{FieldsV1: &metav1.FieldsV1{}},
			{FieldsV1: &metav1.FieldsV1{Raw: []byte{0xa1, 0x61, 0x61, 0xa0}}}, // CBOR {"a":{}}
			{FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:a":{}}`)}, Subresource: "scale"},
		}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "none"}},
	} {
		want, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		got, err := appendPartial([]byte("prefix"), p)
		if err != nil || string(got) != "prefix"+string(want) {
			t.Errorf("appendPartial:\n got %s (%v)\nwant prefix%s", got, err, want)
		}
	}
}

// TestCompactFields: a fieldsV1 is copied as it is only where json.Marshal
// would write it unchanged, and the fieldsV1 a server writes is.
func TestCompactFields(t *testing.T) {
	for _, tt := range []struct {
		raw  string
		copy bool
	}{
		{`{"f:metadata":{"f:labels":{".":{},"f:app":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"c\"}":{".":{}}}}}`, true},
		{`{}`, true},
		{`{"f:a\u00e9\"\\\/\b\f\n\r\t":{}}`, true},
		{`{"f:a":{} }`, false},
		{`{"f:a":{},}`, false},
		{`{"f:a":{}`, false},
		{`{"f:a":{}}}`, false},
		{`{"f:a":1}`, false},
		{`{"f:a":"b"}`, false},
		{`{"f:<a>":{}}`, false},
		{`{"f:a&b":{}}`, false},
		{`{"f:\u00zz":{}}`, false},
		{`{"f:\x":{}}`, false},
		{"{\"f:\u2028\":{}}", false},
		{"{\"f:\xff\":{}}", false},
		{`{"f:a`, false},
		{`null`, false},
		{``, false},
	} {
		if got := compactFields([]byte(tt.raw)); got != tt.copy {
			t.Errorf("compactFields(%s) = %v, want %v", tt.raw, got, tt.copy)
		}
		if !tt.copy {
			continue
		}
		want, err := json.Marshal(&metav1.FieldsV1{Raw: []byte(tt.raw)})
		if err != nil || string(want) != tt.raw {
			t.Errorf("json.Marshal writes %s as %s (%v): it must not be copied as it is", tt.raw, want, err)
		}
	}
}
