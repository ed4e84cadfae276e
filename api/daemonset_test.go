package api

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func minimalDaemonSet() *appsv1.DaemonSet {
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "default"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: webTemplate(),
		},
	}
}

func TestDefaultDaemonSet(t *testing.T) {
	ds := minimalDaemonSet()
	DaemonSets.Default(ds)
	s := ds.Spec.UpdateStrategy
	if s.Type != appsv1.RollingUpdateDaemonSetStrategyType || s.RollingUpdate == nil {
		t.Fatalf("updateStrategy = %+v, want RollingUpdate", s)
	}
	if *s.RollingUpdate.MaxUnavailable != intstr.FromInt32(1) || *s.RollingUpdate.MaxSurge != intstr.FromInt32(0) {
		t.Errorf("maxUnavailable %v maxSurge %v, want 1 and 0", s.RollingUpdate.MaxUnavailable, s.RollingUpdate.MaxSurge)
	}
	if ds.Spec.RevisionHistoryLimit == nil || *ds.Spec.RevisionHistoryLimit != 10 {
		t.Errorf("revisionHistoryLimit = %v, want 10", ds.Spec.RevisionHistoryLimit)
	}
	if p := ds.Spec.Template.Spec.RestartPolicy; p != corev1.RestartPolicyAlways {
		t.Errorf("template restartPolicy = %q, want Always", p)
	}
	checkErrors(t, DaemonSets.Validate(ds))

	onDelete := minimalDaemonSet()
	onDelete.Spec.UpdateStrategy.Type = appsv1.OnDeleteDaemonSetStrategyType
	DaemonSets.Default(onDelete)
	if onDelete.Spec.UpdateStrategy.RollingUpdate != nil {
		t.Errorf("OnDelete got a rollingUpdate %+v", onDelete.Spec.UpdateStrategy.RollingUpdate)
	}
	checkErrors(t, DaemonSets.Validate(onDelete))
}

func TestValidateDaemonSet(t *testing.T) {
	pct := func(s string) *intstr.IntOrString { return ptrTo(intstr.FromString(s)) }
	num := func(n int32) *intstr.IntOrString { return ptrTo(intstr.FromInt32(n)) }
	tests := []struct {
		name   string
		mutate func(ds *appsv1.DaemonSet)
		want   []string
		detail string
	}{
		{"valid", func(ds *appsv1.DaemonSet) {}, nil, ""},
		{"no selector", func(ds *appsv1.DaemonSet) { ds.Spec.Selector = nil },
			[]string{"spec.selector: Required value", "spec.template.metadata.labels: Invalid value"}, ""},
		{"empty selector", func(ds *appsv1.DaemonSet) { ds.Spec.Selector = &metav1.LabelSelector{} },
			[]string{"spec.selector: Invalid value"}, "empty selector is invalid for daemonset"},
		{"selector does not match template", func(ds *appsv1.DaemonSet) { ds.Spec.Selector.MatchLabels = map[string]string{"app": "api"} },
			[]string{"spec.template.metadata.labels: Invalid value"}, "`selector` does not match template `labels`"},
		{"template without containers", func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.Containers = nil },
			[]string{"spec.template.spec.containers: Required value"}, ""},
		{"restartPolicy OnFailure", func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure },
			[]string{"spec.template.spec.restartPolicy: Unsupported value"}, ""},
		{"activeDeadlineSeconds", func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.ActiveDeadlineSeconds = ptrTo(int64(5)) },
			[]string{"spec.template.spec.activeDeadlineSeconds: Forbidden"}, "activeDeadlineSeconds in DaemonSet is not Supported"},
		{"negative minReadySeconds", func(ds *appsv1.DaemonSet) { ds.Spec.MinReadySeconds = -1 },
			[]string{"spec.minReadySeconds: Invalid value"}, ""},
		{"negative revisionHistoryLimit", func(ds *appsv1.DaemonSet) { ds.Spec.RevisionHistoryLimit = ptrTo(int32(-1)) },
			[]string{"spec.revisionHistoryLimit: Invalid value"}, ""},
		{"unknown strategy", func(ds *appsv1.DaemonSet) { ds.Spec.UpdateStrategy.Type = "Recreate" },
			[]string{"spec.updateStrategy: Unsupported value"}, ""},
		{"rolling update without parameters", func(ds *appsv1.DaemonSet) { ds.Spec.UpdateStrategy.RollingUpdate = nil },
			[]string{"spec.updateStrategy.rollingUpdate: Required value"}, ""},
		{"both zero", func(ds *appsv1.DaemonSet) { ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = pct("0%") },
			[]string{"spec.updateStrategy.rollingUpdate.maxUnavailable: Required value"}, "cannot be 0 when maxSurge is 0"},
		{"both set", func(ds *appsv1.DaemonSet) { ds.Spec.UpdateStrategy.RollingUpdate.MaxSurge = num(1) },
			[]string{"spec.updateStrategy.rollingUpdate.maxSurge: Invalid value"}, "may not be set when maxUnavailable is non-zero"},
		{"surge only", func(ds *appsv1.DaemonSet) {
			ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = num(0)
			ds.Spec.UpdateStrategy.RollingUpdate.MaxSurge = pct("25%")
		}, nil, ""},
		{"more than 100%", func(ds *appsv1.DaemonSet) { ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = pct("120%") },
			[]string{"spec.updateStrategy.rollingUpdate.maxUnavailable: Invalid value"}, "must not be greater than 100%"},
		{"negative maxUnavailable", func(ds *appsv1.DaemonSet) {
			ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = num(-1)
			ds.Spec.UpdateStrategy.RollingUpdate.MaxSurge = num(1)
		}, []string{"spec.updateStrategy.rollingUpdate.maxUnavailable: Invalid value", "spec.updateStrategy.rollingUpdate.maxSurge: Invalid value"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ds := minimalDaemonSet()
			DaemonSets.Default(ds)
			tt.mutate(ds)
			errs := DaemonSets.Validate(ds)
			checkErrors(t, errs, tt.want...)
			if tt.detail != "" {
				checkDetail(t, errs, tt.detail)
			}
		})
	}
}

func TestValidateDaemonSetUpdate(t *testing.T) {
	old := minimalDaemonSet()
	DaemonSets.Default(old)
	ds := old.DeepCopy()
	ds.Spec.Selector.MatchLabels = map[string]string{"app": "web", "tier": "x"}
	checkErrors(t, DaemonSets.ValidateUpdate(ds, old), "spec.selector: Invalid value")
	ds = old.DeepCopy()
	ds.Spec.Template.Spec.Containers[0].Image = "nginx:1.28"
	checkErrors(t, DaemonSets.ValidateUpdate(ds, old))
}

func TestPrepareDaemonSet(t *testing.T) {
	ds := minimalDaemonSet()
	ds.Status.NumberReady = 4
	DaemonSets.PrepareForCreate(ds)
	if ds.Generation != 1 || ds.Status.NumberReady != 0 || TemplateGeneration(ds) != 1 {
		t.Errorf("create: generation %d status %+v templateGeneration %d, want 1, empty, 1", ds.Generation, ds.Status, TemplateGeneration(ds))
	}
	old := ds.DeepCopy()
	old.Status.NumberReady = 3

	relabelled := old.DeepCopy()
	relabelled.Labels = map[string]string{"team": "a"}
	relabelled.Annotations[appsv1.DeprecatedTemplateGeneration] = "7"
	DaemonSets.PrepareForUpdate(relabelled, old)
	if relabelled.Generation != 1 || TemplateGeneration(relabelled) != 1 || relabelled.Status.NumberReady != 3 {
		t.Errorf("label change: generation %d templateGeneration %d status %+v, want 1, 1 and the old status",
			relabelled.Generation, TemplateGeneration(relabelled), relabelled.Status)
	}
	limited := old.DeepCopy()
	limited.Spec.RevisionHistoryLimit = ptrTo(int32(2))
	DaemonSets.PrepareForUpdate(limited, old)
	if limited.Generation != 2 || TemplateGeneration(limited) != 1 {
		t.Errorf("spec change: generation %d templateGeneration %d, want 2 and 1", limited.Generation, TemplateGeneration(limited))
	}
	updated := old.DeepCopy()
	updated.Spec.Template.Spec.Containers[0].Image = "nginx:1.28"
	DaemonSets.PrepareForUpdate(updated, old)
	if updated.Generation != 2 || TemplateGeneration(updated) != 2 {
		t.Errorf("template change: generation %d templateGeneration %d, want 2 and 2", updated.Generation, TemplateGeneration(updated))
	}
}

func TestValidateControllerRevision(t *testing.T) {
	cr := &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{Name: "agent-6d4b8", Namespace: "default"},
		Data:       runtime.RawExtension{Raw: []byte(`{"spec":{"template":{"$patch":"replace"}}}`)},
		Revision:   1,
	}
	checkErrors(t, ControllerRevisions.Validate(cr))
	noData := cr.DeepCopy()
	noData.Data = runtime.RawExtension{}
	noData.Revision = -1
	checkErrors(t, ControllerRevisions.Validate(noData), "data: Required value", "revision: Invalid value")

	renumbered := cr.DeepCopy()
	renumbered.Revision = 3
	renumbered.Data.Raw = []byte(`{"spec": {"template": {"$patch": "replace"}}}`)
	checkErrors(t, ControllerRevisions.ValidateUpdate(renumbered, cr))
	changed := cr.DeepCopy()
	changed.Data.Raw = []byte(`{"spec":{}}`)
	errs := ControllerRevisions.ValidateUpdate(changed, cr)
	checkErrors(t, errs, "data: Invalid value")
	checkDetail(t, errs, "field is immutable")
}

func TestDaemonSetTables(t *testing.T) {
	ds := minimalDaemonSet()
	ds.CreationTimestamp = ago(time.Hour)
	ds.Spec.Template.Spec.NodeSelector = map[string]string{"disk": "ssd"}
	ds.Status = appsv1.DaemonSetStatus{DesiredNumberScheduled: 3, CurrentNumberScheduled: 3, NumberReady: 2, UpdatedNumberScheduled: 1, NumberAvailable: 2}
	row := DaemonSets.TableRow(ds, tableNow)
	want := []any{"agent", int64(3), int64(3), int64(2), int64(1), int64(2), "disk=ssd", "60m", "app", "nginx:1.27", "app=web"}
	checkCells(t, row.Cells, want)
	var names []string
	for _, c := range DaemonSets.TableColumns() {
		names = append(names, c.Name)
	}
	checkCells(t, names, []string{"Name", "Desired", "Current", "Ready", "Up-to-date", "Available", "Node Selector", "Age", "Containers", "Images", "Selector"})

	cr := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: "agent-6d4b8", CreationTimestamp: ago(time.Minute),
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", Controller: ptrTo(true)}}},
		Revision: 2}
	checkCells(t, ControllerRevisions.TableRow(cr, tableNow).Cells, []any{"agent-6d4b8", "daemonset.apps/agent", int64(2), "60s"})
	cr.OwnerReferences = nil
	checkCells(t, ControllerRevisions.TableRow(cr, tableNow).Cells, []any{"agent-6d4b8", "<none>", int64(2), "60s"})
}

func checkCells[T comparable](t *testing.T, got, want []T) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("cells %v, want %v", got, want)
		return
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("cells %v, want %v", got, want)
			return
		}
	}
}
