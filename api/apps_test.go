package api

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func webTemplate() corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx:1.27"}}},
	}
}

func minimalDeployment() *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: webTemplate(),
		},
	}
}

func minimalReplicaSet() *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "default"},
		Spec: appsv1.ReplicaSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: webTemplate(),
		},
	}
}

func TestDefaultDeployment(t *testing.T) {
	d := minimalDeployment()
	Deployments.Default(d)
	ru := d.Spec.Strategy.RollingUpdate
	checks := []struct {
		name      string
		got, want any
	}{
		{"replicas", *d.Spec.Replicas, int32(1)},
		{"strategy type", d.Spec.Strategy.Type, appsv1.RollingUpdateDeploymentStrategyType},
		{"maxSurge", *ru.MaxSurge, intstr.FromString("25%")},
		{"maxUnavailable", *ru.MaxUnavailable, intstr.FromString("25%")},
		{"revisionHistoryLimit", *d.Spec.RevisionHistoryLimit, int32(10)},
		{"progressDeadlineSeconds", *d.Spec.ProgressDeadlineSeconds, int32(600)},
		{"template restartPolicy", d.Spec.Template.Spec.RestartPolicy, corev1.RestartPolicyAlways},
		{"template imagePullPolicy", d.Spec.Template.Spec.Containers[0].ImagePullPolicy, corev1.PullIfNotPresent},
		{"template has no pod-only serviceAccountName", d.Spec.Template.Spec.ServiceAccountName, ""},
	}
	for _, ck := range checks {
		t.Run(ck.name, func(t *testing.T) {
			if ck.got != ck.want {
				t.Errorf("got %v, want %v", ck.got, ck.want)
			}
		})
	}
	t.Run("Recreate gets no rollingUpdate", func(t *testing.T) {
		d := minimalDeployment()
		d.Spec.Strategy.Type = appsv1.RecreateDeploymentStrategyType
		Deployments.Default(d)
		if d.Spec.Strategy.RollingUpdate != nil {
			t.Errorf("rollingUpdate = %+v, want nil", d.Spec.Strategy.RollingUpdate)
		}
		checkErrors(t, Deployments.Validate(d))
	})
	checkErrors(t, ValidateObjectMeta(Deployments, d))
	checkErrors(t, Deployments.Validate(d))
}

func TestDefaultReplicaSet(t *testing.T) {
	rs := minimalReplicaSet()
	ReplicaSets.Default(rs)
	if *rs.Spec.Replicas != 1 || rs.Spec.Template.Spec.DNSPolicy != corev1.DNSClusterFirst {
		t.Errorf("defaults missing: replicas %d, dnsPolicy %q", *rs.Spec.Replicas, rs.Spec.Template.Spec.DNSPolicy)
	}
	if rs.Spec.Selector.MatchLabels["app"] != "web" {
		t.Errorf("selector changed: %v", rs.Spec.Selector)
	}
	checkErrors(t, ReplicaSets.Validate(rs))
}

func TestValidateReplicaSet(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(rs *appsv1.ReplicaSet)
		want   []string
	}{
		{"valid", func(rs *appsv1.ReplicaSet) {}, nil},
		{"no selector", func(rs *appsv1.ReplicaSet) { rs.Spec.Selector = nil }, []string{"spec.selector: Required value"}},
		{"empty selector", func(rs *appsv1.ReplicaSet) { rs.Spec.Selector = &metav1.LabelSelector{} }, []string{"spec.selector: Invalid value"}},
		{"selector does not match template", func(rs *appsv1.ReplicaSet) { rs.Spec.Template.Labels = map[string]string{"app": "api"} },
			[]string{"spec.template.metadata.labels: Invalid value"}},
		{"negative replicas", func(rs *appsv1.ReplicaSet) { rs.Spec.Replicas = ptrTo(int32(-1)) }, []string{"spec.replicas: Invalid value"}},
		{"template without containers", func(rs *appsv1.ReplicaSet) { rs.Spec.Template.Spec.Containers = nil },
			[]string{"spec.template.spec.containers: Required value"}},
		{"template restartPolicy Never", func(rs *appsv1.ReplicaSet) { rs.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever },
			[]string{"spec.template.spec.restartPolicy: Unsupported value"}},
		{"bad template label", func(rs *appsv1.ReplicaSet) {
			rs.Spec.Selector.MatchLabels = nil
			rs.Spec.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpExists}}
			rs.Spec.Template.Labels["bad key"] = "x"
		}, []string{"spec.template.metadata.labels: Invalid value"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs := minimalReplicaSet()
			ReplicaSets.Default(rs)
			tt.mutate(rs)
			errs := ReplicaSets.Validate(rs)
			checkErrors(t, errs, tt.want...)
			if tt.name == "selector does not match template" {
				checkDetail(t, errs, "`selector` does not match template `labels`")
			}
		})
	}
}

func TestValidateDeployment(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(d *appsv1.Deployment)
		want   []string
	}{
		{"valid", func(d *appsv1.Deployment) {}, nil},
		{"no selector", func(d *appsv1.Deployment) { d.Spec.Selector = nil }, []string{"spec.selector: Required value"}},
		{"selector does not match template", func(d *appsv1.Deployment) {
			d.Spec.Selector.MatchLabels = map[string]string{"app": "api"}
		}, []string{"spec.template.metadata.labels: Invalid value"}},
		{"negative replicas", func(d *appsv1.Deployment) { d.Spec.Replicas = ptrTo(int32(-3)) }, []string{"spec.replicas: Invalid value"}},
		{"template container without image", func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "" },
			[]string{"spec.template.spec.containers[0].image: Required value"}},
		{"unknown strategy", func(d *appsv1.Deployment) { d.Spec.Strategy.Type = "BlueGreen" }, []string{"spec.strategy.type: Unsupported value"}},
		{"Recreate with rollingUpdate", func(d *appsv1.Deployment) { d.Spec.Strategy.Type = appsv1.RecreateDeploymentStrategyType },
			[]string{"spec.strategy.rollingUpdate: Forbidden"}},
		{"both zero", func(d *appsv1.Deployment) {
			d.Spec.Strategy.RollingUpdate.MaxSurge = ptrTo(intstr.FromInt32(0))
			d.Spec.Strategy.RollingUpdate.MaxUnavailable = ptrTo(intstr.FromString("0%"))
		}, []string{"spec.strategy.rollingUpdate.maxUnavailable: Invalid value"}},
		{"maxUnavailable above 100%", func(d *appsv1.Deployment) {
			d.Spec.Strategy.RollingUpdate.MaxUnavailable = ptrTo(intstr.FromString("150%"))
		}, []string{"spec.strategy.rollingUpdate.maxUnavailable: Invalid value"}},
		{"maxSurge not a percentage", func(d *appsv1.Deployment) {
			d.Spec.Strategy.RollingUpdate.MaxSurge = ptrTo(intstr.FromString("half"))
		}, []string{"spec.strategy.rollingUpdate.maxSurge: Invalid value"}},
		{"negative maxSurge", func(d *appsv1.Deployment) {
			d.Spec.Strategy.RollingUpdate.MaxSurge = ptrTo(intstr.FromInt32(-1))
		}, []string{"spec.strategy.rollingUpdate.maxSurge: Invalid value"}},
		{"progress deadline not above minReadySeconds", func(d *appsv1.Deployment) { d.Spec.MinReadySeconds = 600 },
			[]string{"spec.progressDeadlineSeconds: Invalid value"}},
		{"negative revisionHistoryLimit", func(d *appsv1.Deployment) { d.Spec.RevisionHistoryLimit = ptrTo(int32(-1)) },
			[]string{"spec.revisionHistoryLimit: Invalid value"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := minimalDeployment()
			Deployments.Default(d)
			tt.mutate(d)
			checkErrors(t, Deployments.Validate(d), tt.want...)
		})
	}
}

func TestAppsUpdate(t *testing.T) {
	t.Run("deployment selector is immutable", func(t *testing.T) {
		old := minimalDeployment()
		Deployments.Default(old)
		d := old.DeepCopy()
		d.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web", "v": "2"}}
		checkErrors(t, Deployments.ValidateUpdate(d, old), "spec.selector: Invalid value")
	})
	t.Run("replicaset selector is immutable", func(t *testing.T) {
		old := minimalReplicaSet()
		rs := old.DeepCopy()
		rs.Spec.Selector.MatchLabels["app"] = "api"
		checkErrors(t, ReplicaSets.ValidateUpdate(rs, old), "spec.selector: Invalid value")
	})
	t.Run("replicas may change", func(t *testing.T) {
		old := minimalDeployment()
		Deployments.Default(old)
		d := old.DeepCopy()
		d.Spec.Replicas = ptrTo(int32(5))
		checkErrors(t, Deployments.ValidateUpdate(d, old))
	})

	t.Run("create clears status and starts at generation 1", func(t *testing.T) {
		d := minimalDeployment()
		d.Status.Replicas = 9
		Deployments.PrepareForCreate(d)
		rs := minimalReplicaSet()
		rs.Status.ReadyReplicas = 9
		ReplicaSets.PrepareForCreate(rs)
		if d.Status.Replicas != 0 || d.Generation != 1 || rs.Status.ReadyReplicas != 0 || rs.Generation != 1 {
			t.Errorf("deployment status %+v gen %d, replicaset status %+v gen %d", d.Status, d.Generation, rs.Status, rs.Generation)
		}
	})
	t.Run("update keeps status, bumps generation on spec change only", func(t *testing.T) {
		old := minimalDeployment()
		old.Generation, old.Status.Replicas = 3, 2
		same := old.DeepCopy()
		same.Status = appsv1.DeploymentStatus{}
		same.Labels = map[string]string{"team": "a"}
		Deployments.PrepareForUpdate(same, old)
		if same.Generation != 3 || same.Status.Replicas != 2 {
			t.Errorf("label change: generation %d status %+v, want 3 and old status", same.Generation, same.Status)
		}
		scaled := old.DeepCopy()
		scaled.Spec.Replicas = ptrTo(int32(4))
		Deployments.PrepareForUpdate(scaled, old)
		if scaled.Generation != 4 {
			t.Errorf("spec change: generation %d, want 4", scaled.Generation)
		}
		annotated := old.DeepCopy()
		annotated.Annotations = map[string]string{"note": "x"}
		Deployments.PrepareForUpdate(annotated, old)
		if annotated.Generation != 4 {
			t.Errorf("annotation change: generation %d, want 4", annotated.Generation)
		}

		oldRS := minimalReplicaSet()
		oldRS.Generation, oldRS.Status.Replicas = 2, 1
		rs := oldRS.DeepCopy()
		rs.Status.Replicas = 7
		rs.Spec.Replicas = ptrTo(int32(3))
		ReplicaSets.PrepareForUpdate(rs, oldRS)
		if rs.Generation != 3 || rs.Status.Replicas != 1 {
			t.Errorf("replicaset: generation %d status %+v, want 3 and old status", rs.Generation, rs.Status)
		}
	})
}
