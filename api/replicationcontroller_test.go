package api

import (
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func minimalReplicationController() *corev1.ReplicationController {
	tmpl := webTemplate()
	return &corev1.ReplicationController{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec:       corev1.ReplicationControllerSpec{Template: &tmpl},
	}
}

func TestDefaultReplicationController(t *testing.T) {
	rc := minimalReplicationController()
	ReplicationControllers.Default(rc)
	want := map[string]string{"app": "web"}
	if !maps.Equal(rc.Spec.Selector, want) {
		t.Errorf("selector = %v, want the template's labels %v", rc.Spec.Selector, want)
	}
	if !maps.Equal(rc.Labels, want) {
		t.Errorf("labels = %v, want the template's labels %v", rc.Labels, want)
	}
	if rc.Spec.Replicas == nil || *rc.Spec.Replicas != 1 {
		t.Errorf("replicas = %v, want 1", rc.Spec.Replicas)
	}
	if p := rc.Spec.Template.Spec.RestartPolicy; p != corev1.RestartPolicyAlways {
		t.Errorf("template restartPolicy = %q, want Always", p)
	}
	checkErrors(t, ReplicationControllers.Validate(rc))

	t.Run("given selector and labels stay", func(t *testing.T) {
		rc := minimalReplicationController()
		rc.Labels = map[string]string{"team": "a"}
		rc.Spec.Selector = map[string]string{"app": "web"}
		rc.Spec.Template.Labels["tier"] = "front"
		rc.Spec.Replicas = ptrTo(int32(0))
		ReplicationControllers.Default(rc)
		if len(rc.Spec.Selector) != 1 || rc.Labels["team"] != "a" || *rc.Spec.Replicas != 0 {
			t.Errorf("selector %v labels %v replicas %d, want them as given", rc.Spec.Selector, rc.Labels, *rc.Spec.Replicas)
		}
	})
}

func TestValidateReplicationController(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(rc *corev1.ReplicationController)
		want   []string
	}{
		{"valid", func(rc *corev1.ReplicationController) {}, nil},
		{"empty selector", func(rc *corev1.ReplicationController) { rc.Spec.Selector = nil },
			[]string{"spec.selector: Required value"}},
		{"selector does not match template", func(rc *corev1.ReplicationController) { rc.Spec.Selector = map[string]string{"app": "api"} },
			[]string{"spec.template.metadata.labels: Invalid value"}},
		{"negative replicas", func(rc *corev1.ReplicationController) { rc.Spec.Replicas = ptrTo(int32(-1)) },
			[]string{"spec.replicas: Invalid value"}},
		{"negative minReadySeconds", func(rc *corev1.ReplicationController) { rc.Spec.MinReadySeconds = -1 },
			[]string{"spec.minReadySeconds: Invalid value"}},
		{"no template", func(rc *corev1.ReplicationController) { rc.Spec.Template = nil },
			[]string{"spec.template: Required value"}},
		{"template without containers", func(rc *corev1.ReplicationController) { rc.Spec.Template.Spec.Containers = nil },
			[]string{"spec.template.spec.containers: Required value"}},
		{"template restartPolicy Never", func(rc *corev1.ReplicationController) {
			rc.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever
		},
			[]string{"spec.template.spec.restartPolicy: Unsupported value"}},
		{"activeDeadlineSeconds", func(rc *corev1.ReplicationController) { rc.Spec.Template.Spec.ActiveDeadlineSeconds = ptrTo(int64(5)) },
			[]string{"spec.template.spec.activeDeadlineSeconds: Forbidden"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc := minimalReplicationController()
			ReplicationControllers.Default(rc)
			tt.mutate(rc)
			errs := ReplicationControllers.Validate(rc)
			checkErrors(t, errs, tt.want...)
			if tt.name == "selector does not match template" {
				checkDetail(t, errs, "`selector` does not match template `labels`")
			}
		})
	}
}

func TestPrepareReplicationController(t *testing.T) {
	rc := minimalReplicationController()
	rc.Status.Replicas = 9
	ReplicationControllers.PrepareForCreate(rc)
	if rc.Status.Replicas != 0 || rc.Generation != 1 {
		t.Errorf("create: status %+v generation %d, want empty and 1", rc.Status, rc.Generation)
	}

	old := minimalReplicationController()
	old.Generation, old.Status.Replicas = 2, 1
	labelled := old.DeepCopy()
	labelled.Labels = map[string]string{"team": "a"}
	labelled.Status.Replicas = 7
	ReplicationControllers.PrepareForUpdate(labelled, old)
	if labelled.Generation != 2 || labelled.Status.Replicas != 1 {
		t.Errorf("label change: generation %d status %+v, want 2 and the old status", labelled.Generation, labelled.Status)
	}
	scaled := old.DeepCopy()
	scaled.Spec.Replicas = ptrTo(int32(3))
	ReplicationControllers.PrepareForUpdate(scaled, old)
	if scaled.Generation != 3 {
		t.Errorf("spec change: generation %d, want 3", scaled.Generation)
	}
}

func TestReplicationControllerScale(t *testing.T) {
	rc := minimalReplicationController()
	ReplicationControllers.Default(rc)
	rc.Spec.Selector = map[string]string{"app": "web", "tier": "front"}
	rc.Status.Replicas = 2
	spec, status, selector, err := ReplicationControllers.Scale.Get(rc)
	if err != nil || spec != 1 || status != 2 || selector != "app=web,tier=front" {
		t.Errorf("Get = %d, %d, %q, %v; want 1, 2, \"app=web,tier=front\", nil", spec, status, selector, err)
	}
	if err := ReplicationControllers.Scale.Set(rc, 5); err != nil || *rc.Spec.Replicas != 5 {
		t.Errorf("Set(5): replicas %d, err %v", *rc.Spec.Replicas, err)
	}
}
