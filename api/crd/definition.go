package crd

import (
	"fmt"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metavalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/minictl/minictl/internal/webhook"
)

// Default fills in what kube-apiserver defaults in a definition (the v1
// defaulters): singular is the lower-cased kind, listKind is kind+"List",
// the conversion strategy None, a conversion webhook service's port 443,
// and status.storedVersions the storage version when none is recorded.
func Default(crd *apiextensionsv1.CustomResourceDefinition) {
	spec := &crd.Spec
	if spec.Names.Singular == "" {
		spec.Names.Singular = strings.ToLower(spec.Names.Kind)
	}
	if spec.Names.ListKind == "" && spec.Names.Kind != "" {
		spec.Names.ListKind = spec.Names.Kind + "List"
	}
	if spec.Conversion == nil {
		spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter}
	}
	if w := spec.Conversion.Webhook; w != nil && w.ClientConfig != nil && w.ClientConfig.Service != nil && w.ClientConfig.Service.Port == nil {
		w.ClientConfig.Service.Port = ptrTo[int32](443)
	}
	if len(crd.Status.StoredVersions) == 0 {
		for _, v := range spec.Versions {
			if v.Storage {
				crd.Status.StoredVersions = append(crd.Status.StoredVersions, v.Name)
				break
			}
		}
	}
}

// Validate checks a definition about to be created: names, versions,
// scope, subresources, printer columns, selectable fields, conversion, and
// each version's schema (structural, with valid and pruned defaults, list
// types, and CEL rules that compile within their cost budget). Each error
// names the field to fix, in kube-apiserver's words.
func Validate(crd *apiextensionsv1.CustomResourceDefinition) field.ErrorList {
	nameFn := func(name string, prefix bool) []string {
		msgs := metavalidation.NameIsDNSSubdomain(name, prefix)
		if name != crd.Spec.Names.Plural+"."+crd.Spec.Group {
			msgs = append(msgs, `must be spec.names.plural+"."+spec.group`)
		}
		return msgs
	}
	errs := metavalidation.ValidateObjectMeta(&crd.ObjectMeta, false, nameFn, field.NewPath("metadata"))
	errs = append(errs, validateSpec(&crd.Spec, field.NewPath("spec"))...)
	errs = append(errs, validateNames(&crd.Status.AcceptedNames, field.NewPath("status", "acceptedNames"))...)
	errs = append(errs, validateStoredVersions(crd.Status.StoredVersions, crd.Spec.Versions, field.NewPath("status", "storedVersions"))...)
	errs = append(errs, validatePreserveUnknownFields(crd, nil)...)
	errs = append(errs, validateAPIApproval(crd, nil)...)
	return errs
}

// ValidateUpdate checks an update of a definition, as Validate does, plus
// what may not change: group and plural always, scope and kind once the
// definition is Established; every stored version stays listed.
func ValidateUpdate(crd, old *apiextensionsv1.CustomResourceDefinition) field.ErrorList {
	errs := metavalidation.ValidateObjectMetaUpdate(&crd.ObjectMeta, &old.ObjectMeta, field.NewPath("metadata"))
	spec := field.NewPath("spec")
	errs = append(errs, validateSpec(&crd.Spec, spec)...)
	if established(old) {
		errs = append(errs, metavalidation.ValidateImmutableField(crd.Spec.Scope, old.Spec.Scope, spec.Child("scope"))...)
		errs = append(errs, metavalidation.ValidateImmutableField(crd.Spec.Names.Kind, old.Spec.Names.Kind, spec.Child("names", "kind"))...)
	}
	errs = append(errs, metavalidation.ValidateImmutableField(crd.Spec.Group, old.Spec.Group, spec.Child("group"))...)
	errs = append(errs, metavalidation.ValidateImmutableField(crd.Spec.Names.Plural, old.Spec.Names.Plural, spec.Child("names", "plural"))...)
	errs = append(errs, validateNames(&crd.Status.AcceptedNames, field.NewPath("status", "acceptedNames"))...)
	errs = append(errs, validateStoredVersions(crd.Status.StoredVersions, crd.Spec.Versions, field.NewPath("status", "storedVersions"))...)
	errs = append(errs, validatePreserveUnknownFields(crd, old)...)
	errs = append(errs, validateAPIApproval(crd, old)...)
	return errs
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established {
			return c.Status == apiextensionsv1.ConditionTrue
		}
	}
	return false
}

func validateSpec(spec *apiextensionsv1.CustomResourceDefinitionSpec, pth *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case spec.Group == "":
		errs = append(errs, field.Required(pth.Child("group"), ""))
	case len(utilvalidation.IsDNS1123Subdomain(spec.Group)) > 0:
		errs = append(errs, field.Invalid(pth.Child("group"), spec.Group, strings.Join(utilvalidation.IsDNS1123Subdomain(spec.Group), ",")))
	case len(strings.Split(spec.Group, ".")) < 2:
		errs = append(errs, field.Invalid(pth.Child("group"), spec.Group, "should be a domain with at least one dot"))
	}
	errs = append(errs, validateEnum(pth.Child("scope"), string(spec.Scope), string(apiextensionsv1.ClusterScoped), string(apiextensionsv1.NamespaceScoped))...)

	storage := 0
	seen := sets.New[string]()
	unique := true
	for i := range spec.Versions {
		v := &spec.Versions[i]
		vp := pth.Child("versions").Index(i)
		if v.Storage {
			storage++
		}
		if seen.Has(v.Name) {
			unique = false
		}
		seen.Insert(v.Name)
		if msgs := utilvalidation.IsDNS1035Label(v.Name); len(msgs) > 0 {
			errs = append(errs, field.Invalid(vp.Child("name"), v.Name, strings.Join(msgs, ",")))
		}
		if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			errs = append(errs, field.Required(vp.Child("schema", "openAPIV3Schema"), ""))
		}
		errs = append(errs, validateVersion(v, vp)...)
	}
	if !unique {
		errs = append(errs, field.Invalid(pth.Child("versions"), versionNames(spec.Versions), "must contain unique version names"))
	}
	if storage != 1 {
		errs = append(errs, field.Invalid(pth.Child("versions"), versionNames(spec.Versions), "must have exactly one version marked as storage version"))
	}

	names := pth.Child("names")
	if spec.Names.Plural == "" {
		errs = append(errs, field.Required(names.Child("plural"), ""))
	}
	if spec.Names.Singular == "" {
		errs = append(errs, field.Required(names.Child("singular"), ""))
	}
	if spec.Names.Kind == "" {
		errs = append(errs, field.Required(names.Child("kind"), ""))
	}
	if spec.Names.ListKind == "" {
		errs = append(errs, field.Required(names.Child("listKind"), ""))
	}
	errs = append(errs, validateNames(&spec.Names, names)...)
	if spec.PreserveUnknownFields && spec.Conversion != nil && spec.Conversion.Strategy != apiextensionsv1.NoneConverter {
		errs = append(errs, field.Invalid(pth.Child("conversion", "strategy"), spec.Conversion.Strategy, "must be None if spec.preserveUnknownFields is true"))
	}
	errs = append(errs, validateConversion(spec.Conversion, pth.Child("conversion"))...)
	return errs
}

func versionNames(vs []apiextensionsv1.CustomResourceDefinitionVersion) []string {
	names := make([]string, len(vs))
	for i, v := range vs {
		names[i] = v.Name
	}
	return names
}

func validateEnum(pth *field.Path, value string, accepted ...string) field.ErrorList {
	if value == "" {
		return field.ErrorList{field.Required(pth, "")}
	}
	for _, a := range accepted {
		if a == value {
			return nil
		}
	}
	return field.ErrorList{field.NotSupported(pth, value, accepted)}
}

func validateVersion(v *apiextensionsv1.CustomResourceDefinitionVersion, pth *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validateDeprecationWarning(v.Deprecated, v.DeprecationWarning) {
		errs = append(errs, field.Invalid(pth.Child("deprecationWarning"), v.DeprecationWarning, msg))
	}
	statusEnabled := v.Subresources != nil && v.Subresources.Status != nil
	if v.Schema != nil {
		errs = append(errs, validateSchema(v.Schema.OpenAPIV3Schema, statusEnabled, pth.Child("schema"))...)
	}
	errs = append(errs, validateSubresources(v.Subresources, pth.Child("subresources"))...)
	for i := range v.AdditionalPrinterColumns {
		errs = append(errs, validateColumn(&v.AdditionalPrinterColumns[i], pth.Child("additionalPrinterColumns").Index(i))...)
	}
	if len(v.SelectableFields) > 0 {
		if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			errs = append(errs, field.Invalid(pth.Child("selectableFields"), "", "may only be set when `version.schema.openAPIV3Schema` is not included"))
		} else if schemaDepth(v.Schema.OpenAPIV3Schema, 0) <= maxSchemaDepth {
			if root, err := newStructural(v.Schema.OpenAPIV3Schema); err == nil {
				errs = append(errs, validateSelectableFields(v.SelectableFields, root, pth.Child("selectableFields"))...)
			}
		}
	}
	return errs
}

func validateDeprecationWarning(deprecated bool, warning *string) []string {
	if !deprecated && warning != nil {
		return []string{"can only be set for deprecated versions"}
	}
	if warning == nil {
		return nil
	}
	var msgs []string
	if len(*warning) > 256 {
		msgs = append(msgs, "must be <= 256 characters long")
	}
	if len(*warning) == 0 {
		msgs = append(msgs, "must not be an empty string")
	}
	for i, r := range *warning {
		if !unicode.IsPrint(r) {
			msgs = append(msgs, fmt.Sprintf("must only contain printable UTF-8 characters; non-printable character found at index %d", i))
			break
		}
		if unicode.IsControl(r) {
			msgs = append(msgs, fmt.Sprintf("must only contain printable UTF-8 characters; control character found at index %d", i))
			break
		}
	}
	if !utf8.ValidString(*warning) {
		msgs = append(msgs, "must only contain printable UTF-8 characters")
	}
	return msgs
}

func validateNames(names *apiextensionsv1.CustomResourceDefinitionNames, pth *field.Path) field.ErrorList {
	var errs field.ErrorList
	label := func(child, value string, mixedCase bool) {
		if value == "" {
			return
		}
		check := value
		if mixedCase {
			check = strings.ToLower(value)
		}
		if msgs := utilvalidation.IsDNS1035Label(check); len(msgs) > 0 {
			msg := strings.Join(msgs, ",")
			if mixedCase {
				msg = "may have mixed case, but should otherwise match: " + msg
			}
			errs = append(errs, field.Invalid(pth.Child(child), value, msg))
		}
	}
	label("plural", names.Plural, false)
	label("singular", names.Singular, false)
	label("kind", names.Kind, true)
	label("listKind", names.ListKind, true)
	for i, s := range names.ShortNames {
		if msgs := utilvalidation.IsDNS1035Label(s); len(msgs) > 0 {
			errs = append(errs, field.Invalid(pth.Child("shortNames").Index(i), s, strings.Join(msgs, ",")))
		}
	}
	if names.Kind != "" && names.Kind == names.ListKind {
		errs = append(errs, field.Invalid(pth.Child("listKind"), names.ListKind, "kind and listKind may not be the same"))
	}
	for i, c := range names.Categories {
		if msgs := utilvalidation.IsDNS1035Label(c); len(msgs) > 0 {
			errs = append(errs, field.Invalid(pth.Child("categories").Index(i), c, strings.Join(msgs, ",")))
		}
	}
	return errs
}

func validateStoredVersions(stored []string, versions []apiextensionsv1.CustomResourceDefinitionVersion, pth *field.Path) field.ErrorList {
	if len(stored) == 0 {
		return field.ErrorList{field.Invalid(pth, stored, "must have at least one stored version")}
	}
	var errs field.ErrorList
	index := map[string]int{}
	for i, v := range stored {
		index[v] = i
	}
	for _, v := range versions {
		_, ok := index[v.Name]
		if v.Storage && !ok {
			errs = append(errs, field.Invalid(pth, stored, "must have the storage version "+v.Name))
		}
		delete(index, v.Name)
	}
	for i, v := range stored {
		if _, missing := index[v]; missing {
			errs = append(errs, field.Invalid(pth.Index(i), v, fmt.Sprintf("missing from spec.versions; %[1]s was previously a storage version, and must remain in spec.versions until a storage migration ensures no data remains persisted in %[1]s and removes %[1]s from status.storedVersions", v)))
		}
	}
	return errs
}

func validatePreserveUnknownFields(crd, old *apiextensionsv1.CustomResourceDefinition) field.ErrorList {
	if old != nil && old.Spec.PreserveUnknownFields {
		return nil
	}
	if crd.Spec.PreserveUnknownFields {
		return field.ErrorList{field.Invalid(field.NewPath("spec", "preserveUnknownFields"), true, "cannot set to true, set x-kubernetes-preserve-unknown-fields to true in spec.versions[*].schema instead")}
	}
	return nil
}

func validateSubresources(sub *apiextensionsv1.CustomResourceSubresources, pth *field.Path) field.ErrorList {
	if sub == nil || sub.Scale == nil {
		return nil
	}
	var errs field.ErrorList
	scale := sub.Scale
	underPrefix := func(child, p string, prefixes []string, msg string) {
		if p == "" {
			errs = append(errs, field.Required(pth.Child(child), ""))
			return
		}
		if e := validateSimpleJSONPath(p, pth.Child(child)); len(e) > 0 {
			errs = append(errs, e...)
			return
		}
		for _, prefix := range prefixes {
			if strings.HasPrefix(p, prefix) {
				return
			}
		}
		errs = append(errs, field.Invalid(pth.Child(child), p, msg))
	}
	underPrefix("scale.specReplicasPath", scale.SpecReplicasPath, []string{".spec."}, "should be a json path under .spec")
	underPrefix("scale.statusReplicasPath", scale.StatusReplicasPath, []string{".status."}, "should be a json path under .status")
	if scale.LabelSelectorPath != nil && *scale.LabelSelectorPath != "" {
		underPrefix("scale.labelSelectorPath", *scale.LabelSelectorPath, []string{".spec.", ".status."}, "should be a json path under either .spec or .status")
	}
	return errs
}

func validateSimpleJSONPath(s string, pth *field.Path) field.ErrorList {
	switch {
	case s == "":
		return field.ErrorList{field.Invalid(pth, s, "must not be empty")}
	case s[0] != '.':
		return field.ErrorList{field.Invalid(pth, s, "must be a simple json path starting with .")}
	}
	return nil
}

var (
	columnTypes   = sets.New("integer", "number", "string", "boolean", "date")
	columnFormats = sets.New("int32", "int64", "float", "double", "byte", "date", "date-time", "password")
)

func validateColumn(col *apiextensionsv1.CustomResourceColumnDefinition, pth *field.Path) field.ErrorList {
	var errs field.ErrorList
	if col.Name == "" {
		errs = append(errs, field.Required(pth.Child("name"), ""))
	}
	typesMsg := "must be one of " + strings.Join(sets.List(columnTypes), ",")
	if col.Type == "" {
		errs = append(errs, field.Required(pth.Child("type"), typesMsg))
	} else if !columnTypes.Has(col.Type) {
		errs = append(errs, field.Invalid(pth.Child("type"), col.Type, typesMsg))
	}
	if col.Format != "" && !columnFormats.Has(col.Format) {
		errs = append(errs, field.Invalid(pth.Child("format"), col.Format, "must be one of "+strings.Join(sets.List(columnFormats), ",")))
	}
	if col.JSONPath == "" {
		errs = append(errs, field.Required(pth.Child("JSONPath"), ""))
	} else {
		errs = append(errs, validateSimpleJSONPath(col.JSONPath, pth.Child("JSONPath"))...)
	}
	return errs
}

// maxSelectableFields is how many selectable fields a version may declare.
const maxSelectableFields = 8

func validateSelectableFields(fields []apiextensionsv1.SelectableField, root *structural, pth *field.Path) field.ErrorList {
	var errs field.ErrorList
	unique := sets.New[string]()
	for i, f := range fields {
		fp := pth.Index(i).Child("jsonPath")
		if f.JSONPath == "" {
			errs = append(errs, field.Required(fp, ""))
			continue
		}
		steps, s, err := resolveFieldPath(f.JSONPath, root, false)
		if err != nil {
			errs = append(errs, field.Invalid(fp, f.JSONPath, fmt.Sprintf("is an invalid path: %v", err)))
			continue
		}
		if len(steps) > 0 && steps[0] == "metadata" {
			errs = append(errs, field.Invalid(fp, f.JSONPath, "must not point to fields in metadata"))
		}
		if s == nil || (s.Type != "string" && s.Type != "boolean" && s.Type != "integer") {
			errs = append(errs, field.Invalid(fp, f.JSONPath, "must point to a field of type string, boolean or integer. Enum string fields and strings with formats are allowed."))
		}
		key := strings.Join(steps, ".")
		if unique.Has(key) {
			errs = append(errs, field.Duplicate(fp, f.JSONPath))
		}
		unique.Insert(key)
	}
	if unique.Len() > maxSelectableFields {
		errs = append(errs, field.TooMany(pth, unique.Len(), maxSelectableFields))
	}
	return errs
}

var acceptedReviewVersions = []string{"v1", "v1beta1"}

func validateConversion(c *apiextensionsv1.CustomResourceConversion, pth *field.Path) field.ErrorList {
	if c == nil {
		return nil
	}
	errs := validateEnum(pth.Child("strategy"), string(c.Strategy), string(apiextensionsv1.NoneConverter), string(apiextensionsv1.WebhookConverter))
	if c.Strategy != apiextensionsv1.WebhookConverter {
		if c.Webhook != nil {
			errs = append(errs, field.Forbidden(pth.Child("webhook"), "should not be set when strategy is not set to Webhook"))
		}
		return errs
	}
	wp := pth.Child("webhook")
	if c.Webhook == nil {
		return append(errs, field.Required(wp, "required when strategy is set to Webhook"))
	}
	if cc := c.Webhook.ClientConfig; cc == nil {
		errs = append(errs, field.Required(wp.Child("clientConfig"), "required when strategy is set to Webhook"))
	} else {
		cp := wp.Child("clientConfig")
		switch {
		case (cc.URL == nil) == (cc.Service == nil):
			errs = append(errs, field.Required(cp, "exactly one of url or service is required"))
		case cc.URL != nil:
			errs = append(errs, webhook.ValidateURL(cp.Child("url"), *cc.URL)...)
		default:
			errs = append(errs, webhook.ValidateService(cp.Child("service"), cc.Service.Name, cc.Service.Namespace, cc.Service.Path, cc.Service.Port)...)
		}
	}
	errs = append(errs, validateReviewVersions(c.Webhook.ConversionReviewVersions, wp.Child("conversionReviewVersions"))...)
	return errs
}

func validateReviewVersions(versions []string, pth *field.Path) field.ErrorList {
	if len(versions) == 0 {
		return field.ErrorList{field.Required(pth, "")}
	}
	var errs field.ErrorList
	seen := sets.New[string]()
	accepted := false
	for i, v := range versions {
		if seen.Has(v) {
			errs = append(errs, field.Invalid(pth.Index(i), v, "duplicate version"))
			continue
		}
		seen.Insert(v)
		for _, msg := range utilvalidation.IsDNS1035Label(v) {
			errs = append(errs, field.Invalid(pth.Index(i), v, msg))
		}
		accepted = accepted || v == "v1" || v == "v1beta1"
	}
	if !accepted {
		errs = append(errs, field.Invalid(pth, versions, "must include at least one of "+strings.Join(acceptedReviewVersions, ", ")))
	}
	return errs
}

// validateAPIApproval is kube's rule for the groups the Kubernetes project
// owns (k8s.io, kubernetes.io and their subdomains): a definition in one
// says in its api-approved.kubernetes.io annotation where its API was
// approved, or why it was not ("unapproved, ..."). An update that leaves
// the annotation as it was is not checked again.
func validateAPIApproval(crd, old *apiextensionsv1.CustomResourceDefinition) field.ErrorList {
	g := crd.Spec.Group
	if g != "k8s.io" && !strings.HasSuffix(g, ".k8s.io") && g != "kubernetes.io" && !strings.HasSuffix(g, ".kubernetes.io") {
		return nil
	}
	const see = "see https://github.com/kubernetes/enhancements/pull/1111"
	v, ok := crd.Annotations[apiextensionsv1.KubeAPIApprovedAnnotation]
	if old != nil {
		if was, had := old.Annotations[apiextensionsv1.KubeAPIApprovedAnnotation]; had == ok && was == v {
			return nil
		}
	}
	pth := field.NewPath("metadata", "annotations").Key(apiextensionsv1.KubeAPIApprovedAnnotation)
	if !ok {
		return field.ErrorList{field.Required(pth, fmt.Sprintf("protected groups must have approval annotation %q, %s", apiextensionsv1.KubeAPIApprovedAnnotation, see))}
	}
	if strings.HasPrefix(v, "unapproved") {
		return nil
	}
	if u, err := url.Parse(v); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return field.ErrorList{field.Invalid(pth, v, fmt.Sprintf("protected groups must have approval annotation %q with either a URL or a reason starting with \"unapproved\", %s", apiextensionsv1.KubeAPIApprovedAnnotation, see))}
	}
	return nil
}
