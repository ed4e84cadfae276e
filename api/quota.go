package api

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ResourceQuotas and LimitRanges: the per-namespace budgets that admission
// enforces.

var (
	supportedQuotaScopes = []corev1.ResourceQuotaScope{
		corev1.ResourceQuotaScopeTerminating, corev1.ResourceQuotaScopeNotTerminating,
		corev1.ResourceQuotaScopeBestEffort, corev1.ResourceQuotaScopeNotBestEffort,
		corev1.ResourceQuotaScopePriorityClass, corev1.ResourceQuotaScopeCrossNamespacePodAffinity,
		corev1.ResourceQuotaScopeVolumeAttributesClass,
	}
	supportedLimitTypes = []corev1.LimitType{corev1.LimitTypePod, corev1.LimitTypeContainer, corev1.LimitTypePersistentVolumeClaim}

	// integerResources are the quota resources that count objects, so
	// their quantities must be whole numbers.
	integerResources = sets.New[corev1.ResourceName](
		corev1.ResourcePods, corev1.ResourceServices, corev1.ResourceReplicationControllers,
		corev1.ResourceQuotas, corev1.ResourceSecrets, corev1.ResourceConfigMaps,
		corev1.ResourcePersistentVolumeClaims, corev1.ResourceServicesNodePorts, corev1.ResourceServicesLoadBalancers,
	)
)

// --- ResourceQuota ---

func prepareResourceQuotaForCreate(q *corev1.ResourceQuota) {
	q.Status = corev1.ResourceQuotaStatus{}
}

// prepareResourceQuotaForUpdate keeps status.used and status.hard, which
// the resource quota controller writes through the status subresource.
func prepareResourceQuotaForUpdate(q, old *corev1.ResourceQuota) {
	q.Status = old.Status
}

func validateResourceQuota(q *corev1.ResourceQuota) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateQuotaList(q.Spec.Hard, field.NewPath("spec", "hard"))...)
	errs = append(errs, validateQuotaList(q.Status.Hard, field.NewPath("status", "hard"))...)
	errs = append(errs, validateQuotaList(q.Status.Used, field.NewPath("status", "used"))...)
	for i, s := range q.Spec.Scopes {
		if !contains(supportedQuotaScopes, s) {
			errs = append(errs, field.NotSupported(field.NewPath("spec", "scopes").Index(i), s, supportedQuotaScopes))
		}
	}
	return errs
}

// validateQuotaList checks that every quantity is named by a qualified
// resource name, is not negative, and counts whole objects where the
// resource is a count.
func validateQuotaList(list corev1.ResourceList, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, name := range sortedKeys(list) {
		q, keyPath := list[name], fldPath.Key(string(name))
		errs = append(errs, validateQualifiedName(string(name), keyPath)...)
		errs = append(errs, validateNonNegativeQuantity(q, keyPath)...)
		isCount := integerResources.Has(name) || strings.HasPrefix(string(name), "count/")
		if isCount && q.MilliValue()%1000 != 0 {
			errs = append(errs, field.Invalid(keyPath, q.String(), "must be an integer"))
		}
	}
	return errs
}

// --- LimitRange ---

// defaultLimitRange fills, for Container limits, a default limit from the
// max, and a default request from the default limit or else from the min:
// what a container that sets nothing gets from the LimitRanger admission.
func defaultLimitRange(lr *corev1.LimitRange) {
	for i := range lr.Spec.Limits {
		item := &lr.Spec.Limits[i]
		if item.Type != corev1.LimitTypeContainer {
			continue
		}
		if item.Default == nil {
			item.Default = corev1.ResourceList{}
		}
		if item.DefaultRequest == nil {
			item.DefaultRequest = corev1.ResourceList{}
		}
		fillMissing(item.Default, item.Max)
		fillMissing(item.DefaultRequest, item.Default)
		fillMissing(item.DefaultRequest, item.Min)
	}
}

func fillMissing(dst, src corev1.ResourceList) {
	for name, q := range src {
		if _, ok := dst[name]; !ok {
			dst[name] = q.DeepCopy()
		}
	}
}

func validateLimitRange(lr *corev1.LimitRange) field.ErrorList {
	var errs field.ErrorList
	types := sets.New[corev1.LimitType]()
	for i := range lr.Spec.Limits {
		item := &lr.Spec.Limits[i]
		idxPath := field.NewPath("spec", "limits").Index(i)
		switch {
		case item.Type == "":
			errs = append(errs, field.Required(idxPath.Child("type"), ""))
		case !contains(supportedLimitTypes, item.Type):
			errs = append(errs, field.NotSupported(idxPath.Child("type"), item.Type, supportedLimitTypes))
		case types.Has(item.Type):
			errs = append(errs, field.Duplicate(idxPath.Child("type"), item.Type))
		}
		types.Insert(item.Type)
		if item.Type == corev1.LimitTypePod {
			if len(item.Default) > 0 {
				errs = append(errs, field.Forbidden(idxPath.Child("default"), "may not be specified when `type` is 'Pod'"))
			}
			if len(item.DefaultRequest) > 0 {
				errs = append(errs, field.Forbidden(idxPath.Child("defaultRequest"), "may not be specified when `type` is 'Pod'"))
			}
		}
		errs = append(errs, validateLimitRangeItem(item, idxPath)...)
	}
	return errs
}

// validateLimitRangeItem checks, resource by resource, that
// min ≤ defaultRequest ≤ default ≤ max and that a limit/request ratio is
// at least 1.
func validateLimitRangeItem(item *corev1.LimitRangeItem, idxPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	lists := []struct {
		name string
		list corev1.ResourceList
	}{
		{"max", item.Max}, {"min", item.Min}, {"default", item.Default},
		{"defaultRequest", item.DefaultRequest}, {"maxLimitRequestRatio", item.MaxLimitRequestRatio},
	}
	names := sets.New[corev1.ResourceName]()
	for _, l := range lists {
		for _, name := range sortedKeys(l.list) {
			keyPath := idxPath.Child(l.name).Key(string(name))
			errs = append(errs, validateQualifiedName(string(name), keyPath)...)
			errs = append(errs, validateNonNegativeQuantity(l.list[name], keyPath)...)
			names.Insert(name)
		}
	}

	// greater reports an error at field[name] when a > b.
	greater := func(fld string, name corev1.ResourceName, a, b resource.Quantity, msg string) {
		if a.Cmp(b) > 0 {
			errs = append(errs, field.Invalid(idxPath.Child(fld).Key(string(name)), a.String(), fmt.Sprintf(msg, a.String(), b.String())))
		}
	}
	for _, name := range sets.List(names) {
		minQ, hasMin := item.Min[name]
		maxQ, hasMax := item.Max[name]
		def, hasDef := item.Default[name]
		defReq, hasDefReq := item.DefaultRequest[name]
		if hasMin && hasMax {
			greater("min", name, minQ, maxQ, "min value %s is greater than max value %s")
		}
		if hasDefReq && hasMin {
			greater("defaultRequest", name, minQ, defReq, "min value %s is greater than default request value %s")
		}
		if hasDefReq && hasMax {
			greater("defaultRequest", name, defReq, maxQ, "default request value %s is greater than max value %s")
		}
		if hasDefReq && hasDef {
			greater("defaultRequest", name, defReq, def, "default request value %s is greater than default limit value %s")
		}
		if hasDef && hasMin {
			greater("default", name, minQ, def, "min value %s is greater than default value %s")
		}
		if hasDef && hasMax {
			greater("default", name, def, maxQ, "default value %s is greater than max value %s")
		}
		if ratio, ok := item.MaxLimitRequestRatio[name]; ok && ratio.Cmp(resource.MustParse("1")) < 0 {
			errs = append(errs, field.Invalid(idxPath.Child("maxLimitRequestRatio").Key(string(name)), ratio.String(),
				fmt.Sprintf("ratio %s is less than 1", ratio.String())))
		}
	}
	return errs
}
