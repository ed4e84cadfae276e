package api

import (
	"fmt"
	"strings"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/validation/path"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// RBAC (rbac.authorization.k8s.io/v1): Roles and ClusterRoles say what may
// be done, RoleBindings and ClusterRoleBindings say who may do it. The
// authorizer that reads them is package auth/rbac; this file holds what
// kube-apiserver's registry adds: defaults, validation, table columns.

// nameIsPathSegment is kube's ValidateRBACName: RBAC names only have to be
// usable as one segment of a URL path ("system:node" is a fine name).
func nameIsPathSegment(name string, prefix bool) []string {
	return path.ValidatePathSegmentName(name, prefix)
}

// A binding's roleRef and a User or Group subject default to the RBAC
// group; a ServiceAccount subject's apiGroup is the core group, "".

func defaultRoleBinding(rb *rbacv1.RoleBinding) {
	defaultRoleRef(&rb.RoleRef)
	defaultSubjects(rb.Subjects)
}

func defaultClusterRoleBinding(crb *rbacv1.ClusterRoleBinding) {
	defaultRoleRef(&crb.RoleRef)
	defaultSubjects(crb.Subjects)
}

func defaultRoleRef(ref *rbacv1.RoleRef) {
	if ref.APIGroup == "" {
		ref.APIGroup = rbacv1.GroupName
	}
}

func defaultSubjects(subjects []rbacv1.Subject) {
	for i := range subjects {
		s := &subjects[i]
		if s.APIGroup == "" && (s.Kind == rbacv1.UserKind || s.Kind == rbacv1.GroupKind) {
			s.APIGroup = rbacv1.GroupName
		}
	}
}

func validateRole(r *rbacv1.Role) field.ErrorList {
	return validatePolicyRules(r.Rules, true)
}

func validateClusterRole(r *rbacv1.ClusterRole) field.ErrorList {
	errs := validatePolicyRules(r.Rules, false)
	if ar := r.AggregationRule; ar != nil {
		selPath := field.NewPath("aggregationRule", "clusterRoleSelectors")
		if len(ar.ClusterRoleSelectors) == 0 {
			errs = append(errs, field.Required(selPath, "at least one clusterRoleSelector required if aggregationRule is non-nil"))
		}
		for i := range ar.ClusterRoleSelectors {
			errs = append(errs, metav1validation.ValidateLabelSelector(&ar.ClusterRoleSelectors[i], metav1validation.LabelSelectorValidationOptions{}, selPath.Index(i))...)
		}
	}
	return errs
}

func validatePolicyRules(rules []rbacv1.PolicyRule, namespaced bool) field.ErrorList {
	var errs field.ErrorList
	for i, rule := range rules {
		errs = append(errs, ValidatePolicyRule(rule, namespaced, field.NewPath("rules").Index(i))...)
	}
	return errs
}

// ValidatePolicyRule is kube's: a rule names at least one verb, and either
// non-resource URLs (in a ClusterRole only, and nothing else) or at least
// one API group and one resource.
func ValidatePolicyRule(rule rbacv1.PolicyRule, namespaced bool, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(rule.Verbs) == 0 {
		errs = append(errs, field.Required(fldPath.Child("verbs"), "verbs must contain at least one value"))
	}
	if len(rule.NonResourceURLs) > 0 {
		if namespaced {
			errs = append(errs, field.Invalid(fldPath.Child("nonResourceURLs"), rule.NonResourceURLs, "namespaced rules cannot apply to non-resource URLs"))
		}
		if len(rule.APIGroups) > 0 || len(rule.Resources) > 0 || len(rule.ResourceNames) > 0 {
			errs = append(errs, field.Invalid(fldPath.Child("nonResourceURLs"), rule.NonResourceURLs, "rules cannot apply to both regular resources and non-resource URLs"))
		}
		return errs
	}
	if len(rule.APIGroups) == 0 {
		errs = append(errs, field.Required(fldPath.Child("apiGroups"), "resource rules must supply at least one api group"))
	}
	if len(rule.Resources) == 0 {
		errs = append(errs, field.Required(fldPath.Child("resources"), "resource rules must supply at least one resource"))
	}
	return errs
}

func validateRoleBinding(rb *rbacv1.RoleBinding) field.ErrorList {
	errs := validateRoleRef(rb.RoleRef, []string{"Role", "ClusterRole"})
	for i, s := range rb.Subjects {
		errs = append(errs, validateSubject(s, true, field.NewPath("subjects").Index(i))...)
	}
	return errs
}

func validateClusterRoleBinding(crb *rbacv1.ClusterRoleBinding) field.ErrorList {
	errs := validateRoleRef(crb.RoleRef, []string{"ClusterRole"})
	for i, s := range crb.Subjects {
		errs = append(errs, validateSubject(s, false, field.NewPath("subjects").Index(i))...)
	}
	return errs
}

// validateRoleRef: a binding refers to a role of the RBAC group, of one of
// kinds (a ClusterRoleBinding cannot refer to a namespace's Role), by a
// valid name.
func validateRoleRef(ref rbacv1.RoleRef, kinds []string) field.ErrorList {
	var errs field.ErrorList
	refPath := field.NewPath("roleRef")
	if ref.APIGroup != rbacv1.GroupName {
		errs = append(errs, field.NotSupported(refPath.Child("apiGroup"), ref.APIGroup, []string{rbacv1.GroupName}))
	}
	if !contains(kinds, ref.Kind) {
		errs = append(errs, field.NotSupported(refPath.Child("kind"), ref.Kind, kinds))
	}
	if ref.Name == "" {
		errs = append(errs, field.Required(refPath.Child("name"), ""))
	} else {
		for _, msg := range nameIsPathSegment(ref.Name, false) {
			errs = append(errs, field.Invalid(refPath.Child("name"), ref.Name, msg))
		}
	}
	return errs
}

// validateSubject is kube's ValidateRoleBindingSubject: a name; a
// ServiceAccount of the core group, with a valid name and, in a
// ClusterRoleBinding, a namespace (a RoleBinding's defaults to its own);
// a User or Group of the RBAC group.
func validateSubject(s rbacv1.Subject, namespaced bool, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.Name == "" {
		errs = append(errs, field.Required(fldPath.Child("name"), ""))
	}
	switch s.Kind {
	case rbacv1.ServiceAccountKind:
		if s.Name != "" {
			for _, msg := range nameIsDNSSubdomain(s.Name, false) {
				errs = append(errs, field.Invalid(fldPath.Child("name"), s.Name, msg))
			}
		}
		if s.APIGroup != "" {
			errs = append(errs, field.NotSupported(fldPath.Child("apiGroup"), s.APIGroup, []string{""}))
		}
		if !namespaced && s.Namespace == "" {
			errs = append(errs, field.Required(fldPath.Child("namespace"), ""))
		}
	case rbacv1.UserKind, rbacv1.GroupKind:
		if s.APIGroup != rbacv1.GroupName {
			errs = append(errs, field.NotSupported(fldPath.Child("apiGroup"), s.APIGroup, []string{rbacv1.GroupName}))
		}
	default:
		errs = append(errs, field.NotSupported(fldPath.Child("kind"), s.Kind, []string{rbacv1.ServiceAccountKind, rbacv1.UserKind, rbacv1.GroupKind}))
	}
	return errs
}

// A binding's roleRef never changes: who holds which role is changed by
// deleting the binding and creating another, so that a binding's name
// cannot come to mean more than it did when it was allowed.

func validateRoleBindingUpdate(rb, old *rbacv1.RoleBinding) field.ErrorList {
	return validateRoleRefUnchanged(rb.RoleRef, old.RoleRef)
}

func validateClusterRoleBindingUpdate(crb, old *rbacv1.ClusterRoleBinding) field.ErrorList {
	return validateRoleRefUnchanged(crb.RoleRef, old.RoleRef)
}

func validateRoleRefUnchanged(ref, old rbacv1.RoleRef) field.ErrorList {
	if ref != old {
		return field.ErrorList{field.Invalid(field.NewPath("roleRef"), ref, "cannot change roleRef")}
	}
	return nil
}

// The bindings print as kube-apiserver prints them: the role as
// Kind/name, and with -o wide the users, groups and ServiceAccounts
// (namespace/name) bound.

var bindingColumns = []metav1.TableColumnDefinition{
	nameColumn,
	{Name: "Role", Type: "string", Description: rbacv1.RoleBinding{}.SwaggerDoc()["roleRef"]},
	ageColumn,
	{Name: "Users", Type: "string", Priority: 1, Description: "Users in the roleBinding"},
	{Name: "Groups", Type: "string", Priority: 1, Description: "Groups in the roleBinding"},
	{Name: "ServiceAccounts", Type: "string", Priority: 1, Description: "ServiceAccounts in the roleBinding"},
}

var roleBindingTable = printer(bindingColumns, func(rb *rbacv1.RoleBinding, now time.Time) []any {
	return bindingRow(&rb.ObjectMeta, rb.RoleRef, rb.Subjects, now)
})

var clusterRoleBindingTable = printer(bindingColumns, func(crb *rbacv1.ClusterRoleBinding, now time.Time) []any {
	return bindingRow(&crb.ObjectMeta, crb.RoleRef, crb.Subjects, now)
})

func bindingRow(meta *metav1.ObjectMeta, ref rbacv1.RoleRef, subjects []rbacv1.Subject, now time.Time) []any {
	var users, groups, sas []string
	for _, s := range subjects {
		switch s.Kind {
		case rbacv1.UserKind:
			users = append(users, s.Name)
		case rbacv1.GroupKind:
			groups = append(groups, s.Name)
		case rbacv1.ServiceAccountKind:
			sas = append(sas, fmt.Sprintf("%s/%s", s.Namespace, s.Name))
		}
	}
	return []any{meta.Name, ref.Kind + "/" + ref.Name, age(meta.CreationTimestamp, now),
		strings.Join(users, ", "), strings.Join(groups, ", "), strings.Join(sas, ", ")}
}
