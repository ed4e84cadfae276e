package namespace

import (
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/client"
)

var (
	podsRT       = resourceType{res: api.Pods, deleteCollection: true}
	configMapsRT = resourceType{res: api.ConfigMaps, deleteCollection: true}
	deployRT     = resourceType{res: api.Deployments, deleteCollection: true}
)

func TestContentConditions(t *testing.T) {
	type want struct {
		status  corev1.ConditionStatus
		reason  string
		message string
	}
	allOK := map[corev1.NamespaceConditionType]want{}
	for ct, ok := range okConditions {
		allOK[ct] = want{corev1.ConditionFalse, ok.reason, ok.message}
	}
	with := func(changes map[corev1.NamespaceConditionType]want) map[corev1.NamespaceConditionType]want {
		out := map[corev1.NamespaceConditionType]want{}
		for k, v := range allOK {
			out[k] = v
		}
		for k, v := range changes {
			out[k] = v
		}
		return out
	}

	tests := []struct {
		name   string
		report contentReport
		want   map[corev1.NamespaceConditionType]want
	}{
		{name: "empty", report: contentReport{}, want: allOK},
		{
			name: "pods and a held config map remain",
			report: contentReport{
				remaining:  []count{{podsRT, 2}, {configMapsRT, 1}},
				finalizers: map[string]int{"example.com/hold": 1, "example.com/other": 3},
			},
			want: with(map[corev1.NamespaceConditionType]want{
				corev1.NamespaceContentRemaining: {corev1.ConditionTrue, "SomeResourcesRemain",
					"Some resources are remaining: configmaps. has 1 resource instances, pods. has 2 resource instances"},
				corev1.NamespaceFinalizersRemaining: {corev1.ConditionTrue, "SomeFinalizersRemain",
					"Some content in the namespace has finalizers remaining: example.com/hold in 1 resource instances, example.com/other in 3 resource instances"},
			}),
		},
		{
			name:   "a named group",
			report: contentReport{remaining: []count{{deployRT, 1}}},
			want: with(map[corev1.NamespaceConditionType]want{
				corev1.NamespaceContentRemaining: {corev1.ConditionTrue, "SomeResourcesRemain",
					"Some resources are remaining: deployments.apps has 1 resource instances"},
			}),
		},
		{
			name: "failures",
			report: contentReport{
				discoveryErr: &client.GroupDiscoveryFailedError{Groups: map[schema.GroupVersion]error{{Group: "metrics.k8s.io", Version: "v1beta1"}: errors.New("stale GroupVersion discovery")}},
				parseErr:     errors.New(`parse group version "a/b/c": unexpected GroupVersion string: a/b/c`),
				deleteErrs:   []error{errors.New("list secrets.: boom"), errors.New("deletecollection configmaps.: bang")},
			},
			want: with(map[corev1.NamespaceConditionType]want{
				corev1.NamespaceDeletionDiscoveryFailure: {corev1.ConditionTrue, "DiscoveryFailed",
					"Discovery failed for some groups, 1 failing: unable to retrieve the complete list of server APIs: metrics.k8s.io/v1beta1: stale GroupVersion discovery"},
				corev1.NamespaceDeletionGVParsingFailure: {corev1.ConditionTrue, "GroupVersionParsingFailed",
					`parse group version "a/b/c": unexpected GroupVersion string: a/b/c`},
				corev1.NamespaceDeletionContentFailure: {corev1.ConditionTrue, "ContentDeletionFailed",
					"Failed to delete all resource types, 2 remaining: deletecollection configmaps.: bang, list secrets.: boom"},
			}),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := contentConditions(&tt.report)
			if len(got) != len(conditionTypes) {
				t.Fatalf("got %d conditions, want %d", len(got), len(conditionTypes))
			}
			for i, c := range got {
				if c.Type != conditionTypes[i] {
					t.Errorf("condition %d is %s, want %s", i, c.Type, conditionTypes[i])
				}
				w := tt.want[c.Type]
				if c.Status != w.status || c.Reason != w.reason || c.Message != w.message {
					t.Errorf("%s = %s %s %q\nwant      %s %s %q", c.Type, c.Status, c.Reason, c.Message, w.status, w.reason, w.message)
				}
			}
		})
	}
}

func TestMergeConditions(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Minute))
	status := corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating}

	first := contentConditions(&contentReport{remaining: []count{{podsRT, 2}}})
	if !mergeConditions(&status, first, t0) {
		t.Fatal("adding conditions reported no change")
	}
	if mergeConditions(&status, first, t1) {
		t.Error("the same conditions again reported a change")
	}

	// The count changes: a new message, the same status, the same
	// transition time.
	second := contentConditions(&contentReport{remaining: []count{{podsRT, 1}}})
	if !mergeConditions(&status, second, t1) {
		t.Error("a new message reported no change")
	}
	c := status.Conditions[indexOf(status.Conditions, corev1.NamespaceContentRemaining)]
	if c.Message != "Some resources are remaining: pods. has 1 resource instances" || !c.LastTransitionTime.Equal(&t0) {
		t.Errorf("after a message change: %q at %v; want the new message at %v", c.Message, c.LastTransitionTime, t0)
	}

	// Everything is gone: the status flips, and the time moves.
	if !mergeConditions(&status, contentConditions(&contentReport{}), t1) {
		t.Error("a status flip reported no change")
	}
	c = status.Conditions[indexOf(status.Conditions, corev1.NamespaceContentRemaining)]
	if c.Status != corev1.ConditionFalse || c.Reason != "ContentRemoved" || !c.LastTransitionTime.Equal(&t1) {
		t.Errorf("after the flip: %s %s at %v", c.Status, c.Reason, c.LastTransitionTime)
	}
	if len(status.Conditions) != len(conditionTypes) {
		t.Errorf("%d conditions, want %d", len(status.Conditions), len(conditionTypes))
	}
}
