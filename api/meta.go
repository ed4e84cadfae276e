package api

import (
	"slices"
	"time"

	"github.com/google/uuid"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ValidateObjectMeta checks the metadata of obj, a object of resource r, the
// way kube-apiserver does for every kind on create and on update:
//
//   - metadata.name is required unless metadata.generateName is set; both
//     must have the kind's name format (r.ValidateName; a DNS-1123 subdomain
//     unless the kind says otherwise, a DNS-1123 label for namespaces and
//     services). A name still empty because the server has yet to generate
//     it from generateName is accepted.
//   - metadata.namespace is required (and a DNS-1123 label) for namespaced
//     kinds and forbidden for cluster-scoped ones.
//   - labels have qualified-name keys and valid label values; annotations
//     have qualified-name keys and at most 256KiB in all; finalizers are
//     qualified names; ownerReferences name apiVersion, kind, name and uid,
//     and at most one of them is the controller.
func ValidateObjectMeta(r *Resource, obj Object) field.ErrorList {
	fldPath := field.NewPath("metadata")
	nameFn := r.nameFunc()
	var errs field.ErrorList

	name, generateName := obj.GetName(), obj.GetGenerateName()
	if generateName != "" {
		for _, msg := range nameFn(generateName, true) {
			errs = append(errs, field.Invalid(fldPath.Child("generateName"), generateName, msg))
		}
	}
	switch {
	case name != "":
		for _, msg := range nameFn(name, false) {
			errs = append(errs, field.Invalid(fldPath.Child("name"), name, msg))
		}
	case generateName == "":
		errs = append(errs, field.Required(fldPath.Child("name"), "name or generateName is required"))
	}

	ns := obj.GetNamespace()
	switch {
	case r.Namespaced && ns == "":
		errs = append(errs, field.Required(fldPath.Child("namespace"), ""))
	case r.Namespaced:
		for _, msg := range nameIsDNSLabel(ns, false) {
			errs = append(errs, field.Invalid(fldPath.Child("namespace"), ns, msg))
		}
	case ns != "":
		errs = append(errs, field.Forbidden(fldPath.Child("namespace"), "not allowed on this type"))
	}

	errs = append(errs, apivalidation.ValidateNonnegativeField(obj.GetGeneration(), fldPath.Child("generation"))...)
	errs = append(errs, validateLabels(obj.GetLabels(), fldPath.Child("labels"))...)
	errs = append(errs, validateAnnotations(obj.GetAnnotations(), fldPath.Child("annotations"))...)
	errs = append(errs, apivalidation.ValidateOwnerReferences(obj.GetOwnerReferences(), fldPath.Child("ownerReferences"))...)
	errs = append(errs, apivalidation.ValidateFinalizers(obj.GetFinalizers(), fldPath.Child("finalizers"))...)
	errs = append(errs, metav1validation.ValidateManagedFields(obj.GetManagedFields(), fldPath.Child("managedFields"))...)
	return errs
}

// ValidateObjectMetaUpdate checks what an update may not change in metadata,
// as kube-apiserver's ValidateObjectMetaAccessorUpdate does: uid, name,
// namespace, creationTimestamp, deletionTimestamp and
// deletionGracePeriodSeconds are immutable (only a delete sets the last two),
// and no finalizer may be added to an object that is being deleted. It does
// not require metadata.resourceVersion: whether an update is conditional is
// the server's decision. Call PrepareObjectMetaForUpdate first, as
// kube-apiserver does, so that a client that leaves these fields out is not
// rejected.
func ValidateObjectMetaUpdate(obj, old Object) field.ErrorList {
	fldPath := field.NewPath("metadata")
	var errs field.ErrorList
	errs = append(errs, apivalidation.ValidateImmutableField(obj.GetName(), old.GetName(), fldPath.Child("name"))...)
	errs = append(errs, apivalidation.ValidateImmutableField(obj.GetNamespace(), old.GetNamespace(), fldPath.Child("namespace"))...)
	errs = append(errs, apivalidation.ValidateImmutableField(obj.GetUID(), old.GetUID(), fldPath.Child("uid"))...)
	errs = append(errs, apivalidation.ValidateImmutableField(obj.GetCreationTimestamp(), old.GetCreationTimestamp(), fldPath.Child("creationTimestamp"))...)
	errs = append(errs, apivalidation.ValidateImmutableField(obj.GetDeletionTimestamp(), old.GetDeletionTimestamp(), fldPath.Child("deletionTimestamp"))...)
	errs = append(errs, apivalidation.ValidateImmutableField(obj.GetDeletionGracePeriodSeconds(), old.GetDeletionGracePeriodSeconds(), fldPath.Child("deletionGracePeriodSeconds"))...)
	if old.GetDeletionTimestamp() != nil {
		errs = append(errs, apivalidation.ValidateNoNewFinalizers(obj.GetFinalizers(), old.GetFinalizers(), fldPath.Child("finalizers"))...)
	}
	return errs
}

// PrepareObjectMetaForCreate resets the metadata only the server sets on
// create, as kube-apiserver's BeforeCreate does: a new uid, the creation
// time (now, to the second, as it is stored), no resourceVersion yet, no
// deletion, and generation 0 (which the kind's PrepareForCreate sets to 1
// for kinds that track it). Call it before the kind's PrepareForCreate.
func PrepareObjectMetaForCreate(obj Object, now time.Time) {
	obj.SetUID(types.UID(uuid.NewString()))
	obj.SetCreationTimestamp(metav1.NewTime(now.Truncate(time.Second)))
	obj.SetResourceVersion("")
	obj.SetDeletionTimestamp(nil)
	obj.SetDeletionGracePeriodSeconds(nil)
	obj.SetGeneration(0)
}

// PrepareObjectMetaForUpdate carries over from old the metadata a client
// need not send back on update, as kube-apiserver's BeforeUpdate does: the
// uid when obj has none, the creation timestamp, the deletion timestamp once
// deletion has begun, the deletion grace period when obj has none, and the
// generation (which the kind's PrepareForUpdate then bumps if the spec
// changed). What a client sends that differs from old is left for
// ValidateObjectMetaUpdate to refuse. Call it before the kind's
// PrepareForUpdate and before ValidateObjectMetaUpdate.
func PrepareObjectMetaForUpdate(obj, old Object) {
	if obj.GetUID() == "" {
		obj.SetUID(old.GetUID())
	}
	if ts := old.GetCreationTimestamp(); !ts.IsZero() {
		obj.SetCreationTimestamp(ts)
	}
	if ts := old.GetDeletionTimestamp(); ts != nil {
		obj.SetDeletionTimestamp(ts)
	}
	if obj.GetDeletionGracePeriodSeconds() == nil {
		obj.SetDeletionGracePeriodSeconds(old.GetDeletionGracePeriodSeconds())
	}
	obj.SetGeneration(old.GetGeneration())
}

// FieldLabelSupported reports whether a fieldSelector on resource r may name
// label: metadata.name always, metadata.namespace for namespaced kinds, and
// the kind's own FieldLabels. The server answers any other label with 400
// "field label not supported: <label>".
func FieldLabelSupported(r *Resource, label string) bool {
	switch label {
	case "metadata.name":
		return true
	case "metadata.namespace":
		return r.Namespaced
	}
	return slices.Contains(r.FieldLabels, label)
}

func (r *Resource) nameFunc() apivalidation.ValidateNameFunc {
	if r.ValidateName != nil {
		return r.ValidateName
	}
	return nameIsDNSSubdomain
}

// Adapters from the typed functions each kind's file defines to the
// Object-typed functions of Resource. The type assertions cannot fail for an
// object made by the resource's New.

func defaulter[T runtime.Object](f func(T)) func(Object) {
	return func(obj Object) { f(obj.(T)) }
}

func validator[T runtime.Object](f func(T) field.ErrorList) func(Object) field.ErrorList {
	return func(obj Object) field.ErrorList { return f(obj.(T)) }
}

func updateValidator[T runtime.Object](f func(obj, old T) field.ErrorList) func(obj, old Object) field.ErrorList {
	return func(obj, old Object) field.ErrorList { return f(obj.(T), old.(T)) }
}

// objectValidator adapts a ValidateObject whose old object is nil on
// create.
func objectValidator[T interface {
	runtime.Object
	comparable
}](f func(obj, old T) field.ErrorList) func(obj, old Object) field.ErrorList {
	return func(obj, old Object) field.ErrorList {
		var o T
		if old != nil {
			o = old.(T)
		}
		return f(obj.(T), o)
	}
}

func updatePreparer[T runtime.Object](f func(obj, old T)) func(obj, old Object) {
	return func(obj, old Object) { f(obj.(T), old.(T)) }
}

func selectable[T runtime.Object](f func(T) fields.Set) func(Object) fields.Set {
	return func(obj Object) fields.Set { return f(obj.(T)) }
}

// nextGeneration returns the generation an updated object gets: old's, plus
// one when the spec changed. Kinds whose controllers report
// status.observedGeneration use it.
func nextGeneration(old Object, newSpec, oldSpec any) int64 {
	if apiequality.Semantic.DeepEqual(newSpec, oldSpec) {
		return old.GetGeneration()
	}
	return old.GetGeneration() + 1
}
