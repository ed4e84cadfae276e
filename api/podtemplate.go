package api

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// PodTemplates: a pod's spec kept under a name, for tools that stamp pods
// out of it. Its template is defaulted and validated as a pod's, with any
// restart policy; its generation moves when the template changes.

func defaultPodTemplate(pt *corev1.PodTemplate) {
	defaultPodSpec(&pt.Template.Spec)
}

func preparePodTemplateForCreate(pt *corev1.PodTemplate) {
	pt.Generation = 1
}

func preparePodTemplateForUpdate(pt, old *corev1.PodTemplate) {
	pt.Generation = nextGeneration(old, pt.Template, old.Template)
}

func validatePodTemplate(pt *corev1.PodTemplate) field.ErrorList {
	tmplPath := field.NewPath("template")
	errs := validateLabels(pt.Template.Labels, tmplPath.Child("metadata", "labels"))
	errs = append(errs, validateAnnotations(pt.Template.Annotations, tmplPath.Child("metadata", "annotations"))...)
	return append(errs, validatePodSpec(&pt.Template.Spec, tmplPath.Child("spec"))...)
}
