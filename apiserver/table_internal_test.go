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
// lists and maps, and one whose strings need escaping.
func tablePods(t *testing.T) []*cachedObject {
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
	var out []*cachedObject
	for i, p := range []*corev1.Pod{running, done, pending, odd} {
		p.ResourceVersion = fmt.Sprint(10 + i)
		raw, err := marshalObject(p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, encoded(api.Pods, "/pods/bench/"+p.Name, p, raw, int64(10+i)))
	}
	return out
}

// TestMarshalTable checks that a Table written a row at a time is the
// bytes json.Marshal makes of it, for every includeObject and with and
// without headers, and that rows read from a lean object's protobuf say
// exactly what rows read from its JSON say.
func TestMarshalTable(t *testing.T) {
	now := time.Date(2026, 1, 2, 4, 0, 0, 0, time.UTC)
	objs := tablePods(t)
	fromJSON, fromPB, raws := make([]api.Object, len(objs)), make([]api.Object, len(objs)), make([][]byte, len(objs))
	for i, o := range objs {
		if o.decoded != nil {
			t.Fatalf("%s is held decoded: pods are lean", o.key)
		}
		fromJSON[i], fromPB[i], raws[i] = o.object(), o.view(), o.raw
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
