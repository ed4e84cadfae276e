package nodelifecycle

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func ptr[T any](v T) *T { return &v }

func TestPlanEviction(t *testing.T) {
	added := metav1.NewTime(t0)
	unreachable := corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute, TimeAdded: &added}
	notReady := corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute, TimeAdded: &added}
	custom := corev1.Taint{Key: "example.com/broken", Value: "yes", Effect: corev1.TaintEffectNoExecute} // no timeAdded
	tolerate := func(key string, seconds *int64) corev1.Toleration {
		return corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: seconds}
	}
	start := t0.Add(time.Minute)
	tests := []struct {
		name        string
		taints      []corev1.Taint
		tolerations []corev1.Toleration
		untolerated bool
		forever     bool
		at          time.Time
	}{
		{"no toleration: now", []corev1.Taint{unreachable}, nil, true, false, time.Time{}},
		{"another key's toleration does not help", []corev1.Taint{unreachable}, []corev1.Toleration{tolerate(corev1.TaintNodeNotReady, nil)}, true, false, time.Time{}},
		{"tolerated for 2s after timeAdded", []corev1.Taint{unreachable}, []corev1.Toleration{tolerate(corev1.TaintNodeUnreachable, ptr[int64](2))}, false, false, t0.Add(2 * time.Second)},
		{"tolerated forever", []corev1.Taint{unreachable}, []corev1.Toleration{tolerate(corev1.TaintNodeUnreachable, nil)}, false, true, time.Time{}},
		{"the longest matching toleration counts", []corev1.Taint{unreachable},
			[]corev1.Toleration{tolerate(corev1.TaintNodeUnreachable, ptr[int64](5)), tolerate("", ptr[int64](300))}, false, false, t0.Add(300 * time.Second)},
		{"forever beats seconds for one taint", []corev1.Taint{unreachable},
			[]corev1.Toleration{tolerate(corev1.TaintNodeUnreachable, ptr[int64](5)), {Operator: corev1.TolerationOpExists}}, false, true, time.Time{}},
		{"the first taint to run out decides", []corev1.Taint{unreachable, notReady},
			[]corev1.Toleration{tolerate(corev1.TaintNodeUnreachable, ptr[int64](300)), tolerate(corev1.TaintNodeNotReady, ptr[int64](30))}, false, false, t0.Add(30 * time.Second)},
		{"one taint not tolerated: now", []corev1.Taint{unreachable, custom},
			[]corev1.Toleration{tolerate(corev1.TaintNodeUnreachable, nil)}, true, false, time.Time{}},
		{"value must match for Equal", []corev1.Taint{custom},
			[]corev1.Toleration{{Key: "example.com/broken", Value: "no", Effect: corev1.TaintEffectNoExecute}}, true, false, time.Time{}},
		{"no timeAdded: counted from start", []corev1.Taint{custom},
			[]corev1.Toleration{{Key: "example.com/broken", Value: "yes", TolerationSeconds: ptr[int64](10)}}, false, false, start.Add(10 * time.Second)},
		{"negative seconds are zero", []corev1.Taint{unreachable}, []corev1.Toleration{tolerate(corev1.TaintNodeUnreachable, ptr[int64](-5))}, false, false, t0},
		{"no taints: stay", nil, nil, false, true, time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := planEviction(tt.taints, tt.tolerations, start)
			if p.untolerated != tt.untolerated || p.forever != tt.forever || !p.at.Equal(tt.at) {
				t.Errorf("= %+v; want untolerated %v forever %v at %v", p, tt.untolerated, tt.forever, tt.at)
			}
		})
	}
}

func TestWithNoSchedule(t *testing.T) {
	cond := func(typ corev1.NodeConditionType, s corev1.ConditionStatus) corev1.NodeCondition {
		return corev1.NodeCondition{Type: typ, Status: s}
	}
	noSchedule := func(key string) corev1.Taint {
		return corev1.Taint{Key: key, Effect: corev1.TaintEffectNoSchedule}
	}
	user := corev1.Taint{Key: "example.com/gpu", Effect: corev1.TaintEffectNoSchedule}
	tests := []struct {
		name          string
		conditions    []corev1.NodeCondition
		unschedulable bool
		taints        []corev1.Taint
		want          []string // keys, in order
	}{
		{"ready: none", []corev1.NodeCondition{cond(corev1.NodeReady, corev1.ConditionTrue)}, false, nil, nil},
		{"unknown", []corev1.NodeCondition{cond(corev1.NodeReady, corev1.ConditionUnknown)}, false, nil,
			[]string{corev1.TaintNodeUnreachable}},
		{"false replaces unknown, keeps others' taints in place",
			[]corev1.NodeCondition{cond(corev1.NodeReady, corev1.ConditionFalse)}, false,
			[]corev1.Taint{user, noSchedule(corev1.TaintNodeUnreachable), unreachableNoExecute},
			[]string{user.Key, corev1.TaintNodeUnreachable, corev1.TaintNodeNotReady}},
		{"pressure and unschedulable",
			[]corev1.NodeCondition{cond(corev1.NodeReady, corev1.ConditionTrue), cond(corev1.NodeDiskPressure, corev1.ConditionTrue), cond(corev1.NodeMemoryPressure, corev1.ConditionFalse)}, true,
			[]corev1.Taint{noSchedule(corev1.TaintNodeNotReady)},
			[]string{corev1.TaintNodeDiskPressure, corev1.TaintNodeUnschedulable}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			node := &corev1.Node{Spec: corev1.NodeSpec{Unschedulable: tt.unschedulable, Taints: tt.taints},
				Status: corev1.NodeStatus{Conditions: tt.conditions}}
			now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
			got := withNoSchedule(now)(node)
			var keys []string
			for _, taint := range got {
				keys = append(keys, taint.Key)
				// A taint added now carries timeAdded now; one kept is unchanged.
				i := slices.IndexFunc(tt.taints, func(t corev1.Taint) bool { return sameTaint(t, taint) })
				switch {
				case i < 0 && (taint.TimeAdded == nil || !taint.TimeAdded.Time.Equal(now)):
					t.Fatalf("new taint %v: timeAdded %v, want %v", taint, taint.TimeAdded, now)
				case i >= 0 && !apiequality.Semantic.DeepEqual(taint, tt.taints[i]):
					t.Fatalf("kept taint %v changed to %v", tt.taints[i], taint)
				}
			}
			if len(keys) != len(tt.want) {
				t.Fatalf("taints %v, want keys %v", got, tt.want)
			}
			for i := range keys {
				if keys[i] != tt.want[i] {
					t.Fatalf("taints %v, want keys %v", got, tt.want)
				}
			}
		})
	}
}

func TestSwapNoExecute(t *testing.T) {
	old := metav1.NewTime(t0)
	node := &corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{
		{Key: "example.com/x", Effect: corev1.TaintEffectNoExecute},
		{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute, TimeAdded: &old},
	}}}
	now := t0.Add(time.Minute)
	got := swapNoExecute(notReadyNoExecute, now)(node)
	if len(got) != 2 || got[0].Key != "example.com/x" || got[1].Key != corev1.TaintNodeNotReady || !got[1].TimeAdded.Time.Equal(now) {
		t.Errorf("swap to not-ready = %+v", got)
	}
	if len(node.Spec.Taints) != 2 || node.Spec.Taints[1].Key != corev1.TaintNodeUnreachable {
		t.Error("the node was changed")
	}
	// Already there: kept with its own timeAdded.
	got = swapNoExecute(unreachableNoExecute, now)(node)
	if len(got) != 2 || !got[1].TimeAdded.Time.Equal(t0) {
		t.Errorf("keeping unreachable = %+v", got)
	}
}
