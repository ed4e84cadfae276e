package api

import (
	"slices"
	"testing"

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func minimalPodDisruptionBudget() *policyv1.PodDisruptionBudget {
	two := intstr.FromInt32(2)
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: &two,
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		},
	}
}

func TestValidatePodDisruptionBudget(t *testing.T) {
	pct := func(s string) *intstr.IntOrString { v := intstr.FromString(s); return &v }
	num := func(n int32) *intstr.IntOrString { v := intstr.FromInt32(n); return &v }
	tests := []struct {
		name   string
		mutate func(pdb *policyv1.PodDisruptionBudget)
		want   []string
	}{
		{"valid", func(pdb *policyv1.PodDisruptionBudget) {}, nil},
		{"maxUnavailable percentage", func(pdb *policyv1.PodDisruptionBudget) {
			pdb.Spec.MinAvailable, pdb.Spec.MaxUnavailable = nil, pct("25%")
		}, nil},
		{"neither bound", func(pdb *policyv1.PodDisruptionBudget) { pdb.Spec.MinAvailable = nil }, nil},
		{"empty selector selects all", func(pdb *policyv1.PodDisruptionBudget) { pdb.Spec.Selector = &metav1.LabelSelector{} }, nil},
		{"both bounds", func(pdb *policyv1.PodDisruptionBudget) { pdb.Spec.MaxUnavailable = num(1) },
			[]string{"spec: Invalid value"}},
		{"negative minAvailable", func(pdb *policyv1.PodDisruptionBudget) { pdb.Spec.MinAvailable = num(-1) },
			[]string{"spec.minAvailable: Invalid value"}},
		{"minAvailable over 100%", func(pdb *policyv1.PodDisruptionBudget) { pdb.Spec.MinAvailable = pct("101%") },
			[]string{"spec.minAvailable: Invalid value"}},
		{"maxUnavailable not a percentage", func(pdb *policyv1.PodDisruptionBudget) {
			pdb.Spec.MinAvailable, pdb.Spec.MaxUnavailable = nil, pct("half")
		}, []string{"spec.maxUnavailable: Invalid value"}},
		{"invalid selector", func(pdb *policyv1.PodDisruptionBudget) {
			pdb.Spec.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Near"}}
		}, []string{"spec.selector.matchExpressions[0].operator: Invalid value"}},
		{"unknown eviction policy", func(pdb *policyv1.PodDisruptionBudget) {
			p := policyv1.UnhealthyPodEvictionPolicyType("Sometimes")
			pdb.Spec.UnhealthyPodEvictionPolicy = &p
		}, []string{"spec.unhealthyPodEvictionPolicy: Unsupported value"}},
		{"negative status", func(pdb *policyv1.PodDisruptionBudget) { pdb.Status.DisruptionsAllowed = -1 },
			[]string{"status.disruptionsAllowed: Invalid value"}},
		{"condition without reason", func(pdb *policyv1.PodDisruptionBudget) {
			pdb.Status.Conditions = []metav1.Condition{{Type: policyv1.DisruptionAllowedCondition, Status: metav1.ConditionTrue, LastTransitionTime: metav1.Now()}}
		}, []string{"status.conditions[0].reason: Required value"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pdb := minimalPodDisruptionBudget()
			tt.mutate(pdb)
			errs := PodDisruptionBudgets.Validate(pdb)
			checkErrors(t, errs, tt.want...)
			switch tt.name {
			case "both bounds":
				checkDetail(t, errs, "minAvailable and maxUnavailable cannot be both set")
			case "minAvailable over 100%":
				checkDetail(t, errs, "must not be greater than 100%")
			case "unknown eviction policy":
				checkDetail(t, errs, `supported values: "AlwaysAllow", "IfHealthyBudget"`)
			}
		})
	}
}

func TestPreparePodDisruptionBudget(t *testing.T) {
	pdb := minimalPodDisruptionBudget()
	pdb.Status.DisruptionsAllowed = 5
	PodDisruptionBudgets.PrepareForCreate(pdb)
	if pdb.Status.DisruptionsAllowed != 0 || pdb.Generation != 1 {
		t.Errorf("create: status %+v generation %d, want empty and 1", pdb.Status, pdb.Generation)
	}
	old := minimalPodDisruptionBudget()
	old.Generation, old.Status.DisruptionsAllowed = 1, 1
	changed := old.DeepCopy()
	changed.Spec.MinAvailable = nil
	changed.Spec.MaxUnavailable = &intstr.IntOrString{Type: intstr.String, StrVal: "50%"}
	changed.Status.DisruptionsAllowed = 9
	PodDisruptionBudgets.PrepareForUpdate(changed, old)
	if changed.Generation != 2 || changed.Status.DisruptionsAllowed != 1 {
		t.Errorf("spec change: generation %d status %+v, want 2 and the old status", changed.Generation, changed.Status)
	}
	if errs := PodDisruptionBudgets.Validate(changed); len(errs) > 0 {
		t.Errorf("a spec update is allowed in policy/v1: %v", errs)
	}
}

func TestPodDisruptionBudgetMatches(t *testing.T) {
	web := map[string]string{"app": "web"}
	pdb := minimalPodDisruptionBudget()
	if !PodDisruptionBudgetMatches(pdb, web) || PodDisruptionBudgetMatches(pdb, map[string]string{"app": "db"}) {
		t.Error("app=web selects app=web only")
	}
	pdb.Spec.Selector = &metav1.LabelSelector{}
	if !PodDisruptionBudgetMatches(pdb, web) {
		t.Error("an empty selector selects every pod")
	}
	pdb.Spec.Selector = nil
	if PodDisruptionBudgetMatches(pdb, web) {
		t.Error("a null selector selects no pod")
	}
}

func TestPodDisruptionBudgetColumns(t *testing.T) {
	var got []string
	for _, c := range PodDisruptionBudgets.TableColumns() {
		got = append(got, c.Name)
	}
	want := []string{"Name", "Min Available", "Max Unavailable", "Allowed Disruptions", "Age"}
	if !slices.Equal(got, want) {
		t.Errorf("columns %q, want kube-apiserver's %q", got, want)
	}
}
