package api

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// minimalStatefulSet is the usual shape of a StatefulSet: its container
// mounts the claim template "data", a volume the template does not list.
func minimalStatefulSet() *appsv1.StatefulSet {
	tmpl := webTemplate()
	tmpl.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/var/lib/web"}}
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: appsv1.StatefulSetSpec{
			ServiceName: "web",
			Selector:    &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template:    tmpl,
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
				},
			}},
		},
	}
}

func TestValidateStatefulSet(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(ss *appsv1.StatefulSet)
		want   []string
		detail string
	}{
		{"a container mounting a claim template", func(ss *appsv1.StatefulSet) {}, nil, ""},
		{"selector does not match template", func(ss *appsv1.StatefulSet) { ss.Spec.Selector.MatchLabels = map[string]string{"app": "api"} },
			[]string{"spec.template.metadata.labels: Invalid value"}, "`selector` does not match template `labels`"},
		{"empty selector", func(ss *appsv1.StatefulSet) { ss.Spec.Selector = &metav1.LabelSelector{} },
			[]string{"spec.selector: Invalid value"}, "empty selector is invalid for statefulset"},
		{"restartPolicy OnFailure", func(ss *appsv1.StatefulSet) { ss.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure },
			[]string{"spec.template.spec.restartPolicy: Unsupported value"}, ""},
		{"activeDeadlineSeconds", func(ss *appsv1.StatefulSet) { ss.Spec.Template.Spec.ActiveDeadlineSeconds = ptrTo(int64(5)) },
			[]string{"spec.template.spec.activeDeadlineSeconds: Forbidden"}, "activeDeadlineSeconds in StatefulSet is not Supported"},
		{"claim template of -1Gi", func(ss *appsv1.StatefulSet) {
			ss.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("-1Gi")
		}, []string{"spec.volumeClaimTemplates[0].spec.resources[storage]: Invalid value"}, "must be greater than zero"},
		{"negative partition", func(ss *appsv1.StatefulSet) { ss.Spec.UpdateStrategy.RollingUpdate.Partition = ptrTo(int32(-1)) },
			[]string{"spec.updateStrategy.rollingUpdate.partition: Invalid value"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ss := minimalStatefulSet()
			StatefulSets.Default(ss)
			tt.mutate(ss)
			errs := StatefulSets.Validate(ss)
			checkErrors(t, errs, tt.want...)
			if tt.detail != "" {
				checkDetail(t, errs, tt.detail)
			}
		})
	}
}
