package api

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ReplicationControllers: the core/v1 ancestor of the ReplicaSet, kept by
// the same controller. Its selector is a plain label map (no expressions)
// and, unlike a ReplicaSet's, may change; its template is a pointer.

var replicationControllerFieldLabels = []string{"status.replicas"}

// defaultReplicationController is kube's SetDefaults_ReplicationController:
// the selector and the labels default to the template's labels, replicas
// to 1.
func defaultReplicationController(rc *corev1.ReplicationController) {
	if tmpl := rc.Spec.Template; tmpl != nil {
		if tmpl.Labels != nil {
			if len(rc.Spec.Selector) == 0 {
				rc.Spec.Selector = tmpl.Labels
			}
			if len(rc.Labels) == 0 {
				rc.Labels = tmpl.Labels
			}
		}
		defaultPodSpec(&tmpl.Spec)
	}
	if rc.Spec.Replicas == nil {
		rc.Spec.Replicas = ptrTo(int32(1))
	}
}

// A new ReplicationController starts at generation 1 with an empty status;
// an update keeps the status and bumps the generation when the spec
// changed, as for a ReplicaSet.

func prepareReplicationControllerForCreate(rc *corev1.ReplicationController) {
	rc.Generation = 1
	rc.Status = corev1.ReplicationControllerStatus{}
}

func prepareReplicationControllerForUpdate(rc, old *corev1.ReplicationController) {
	rc.Status = old.Status
	rc.Generation = nextGeneration(old, rc.Spec, old.Spec)
}

// validateReplicationController is kube's ValidateReplicationControllerSpec:
// a non-empty selector that the template's labels match, a template that
// is a valid always-restarting pod, no negative counts. Updates are
// checked the same way: an RC's selector may change.
func validateReplicationController(rc *corev1.ReplicationController) field.ErrorList {
	specPath := field.NewPath("spec")
	spec := &rc.Spec
	var errs field.ErrorList
	errs = append(errs, apivalidation.ValidateNonnegativeField(int64(spec.MinReadySeconds), specPath.Child("minReadySeconds"))...)
	if labels.SelectorFromSet(spec.Selector).Empty() {
		errs = append(errs, field.Required(specPath.Child("selector"), ""))
	}
	if spec.Replicas != nil {
		errs = append(errs, apivalidation.ValidateNonnegativeField(int64(*spec.Replicas), specPath.Child("replicas"))...)
	}
	return append(errs, validateReplicationControllerTemplate(spec.Template, spec.Selector, specPath.Child("template"))...)
}

// validateReplicationControllerTemplate is kube's ValidatePodTemplateSpecForRC.
func validateReplicationControllerTemplate(tmpl *corev1.PodTemplateSpec, selector map[string]string, tmplPath *field.Path) field.ErrorList {
	if tmpl == nil {
		return field.ErrorList{field.Required(tmplPath, "")}
	}
	var errs field.ErrorList
	labelsPath := tmplPath.Child("metadata", "labels")
	if sel := labels.SelectorFromSet(selector); !sel.Empty() && !sel.Matches(labels.Set(tmpl.Labels)) {
		errs = append(errs, field.Invalid(labelsPath, tmpl.Labels, "`selector` does not match template `labels`"))
	}
	errs = append(errs, validateLabels(tmpl.Labels, labelsPath)...)
	errs = append(errs, validateAnnotations(tmpl.Annotations, tmplPath.Child("metadata", "annotations"))...)
	tmplSpecPath := tmplPath.Child("spec")
	errs = append(errs, validatePodSpec(&tmpl.Spec, tmplSpecPath)...)
	if p := tmpl.Spec.RestartPolicy; p != corev1.RestartPolicyAlways {
		errs = append(errs, field.NotSupported(tmplSpecPath.Child("restartPolicy"), p, []corev1.RestartPolicy{corev1.RestartPolicyAlways}))
	}
	if tmpl.Spec.ActiveDeadlineSeconds != nil {
		errs = append(errs, field.Forbidden(tmplSpecPath.Child("activeDeadlineSeconds"), "activeDeadlineSeconds in ReplicationController is not Supported"))
	}
	return errs
}

func replicationControllerFields(rc *corev1.ReplicationController) fields.Set {
	return fields.Set{"status.replicas": strconv.Itoa(int(rc.Status.Replicas))}
}
