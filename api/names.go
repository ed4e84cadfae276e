package api

import (
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Names, label keys and values, port names and resource names are checked
// on every write, several times per pod. apimachinery checks them with
// regular expressions, which were most of a pod's validation time. The
// checks here apply the same rules a byte at a time and ask apimachinery
// only about a value they refuse, so every message is still Kubernetes'
// own. TestNameChecksAgree holds them to apimachinery's answers.

// isDNS1123Label is validation.IsDNS1123Label: at most 63 lower-case
// alphanumerics or '-', starting and ending with an alphanumeric.
func isDNS1123Label(v string) []string {
	if dns1123Label(v) {
		return nil
	}
	return validation.IsDNS1123Label(v)
}

// isDNS1123Subdomain is validation.IsDNS1123Subdomain: at most 253
// characters of dot-separated DNS-1123 labels (each of any length here).
func isDNS1123Subdomain(v string) []string {
	if dns1123Subdomain(v) {
		return nil
	}
	return validation.IsDNS1123Subdomain(v)
}

// isQualifiedName is validation.IsQualifiedName: a name of at most 63
// alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric,
// optionally after a DNS-1123 subdomain prefix and a '/'.
func isQualifiedName(v string) []string {
	if qualifiedName(v) {
		return nil
	}
	return validation.IsQualifiedName(v)
}

// isValidLabelValue is validation.IsValidLabelValue: empty, or a qualified
// name without a prefix.
func isValidLabelValue(v string) []string {
	if labelValue(v) {
		return nil
	}
	return validation.IsValidLabelValue(v)
}

// isValidPortName is validation.IsValidPortName: at most 15 lower-case
// alphanumerics or '-', with at least one letter, no '-' at either end
// and no "--".
func isValidPortName(v string) []string {
	if portName(v) {
		return nil
	}
	return validation.IsValidPortName(v)
}

// nameIsDNSSubdomain and nameIsDNSLabel are apivalidation's
// ValidateNameFuncs of the same names.
func nameIsDNSSubdomain(name string, prefix bool) []string {
	if dns1123Subdomain(maskTrailingDash(name, prefix)) {
		return nil
	}
	return apivalidation.NameIsDNSSubdomain(name, prefix)
}

func nameIsDNSLabel(name string, prefix bool) []string {
	if dns1123Label(maskTrailingDash(name, prefix)) {
		return nil
	}
	return apivalidation.NameIsDNSLabel(name, prefix)
}

// validateLabels is metav1validation.ValidateLabels.
func validateLabels(labels map[string]string, fldPath *field.Path) field.ErrorList {
	for k, v := range labels {
		if !qualifiedName(k) || !labelValue(v) {
			return metav1validation.ValidateLabels(labels, fldPath)
		}
	}
	return nil
}

// validateAnnotations is apivalidation.ValidateAnnotations: qualified-name
// keys (any case) and at most 256 KiB in all.
func validateAnnotations(annotations map[string]string, fldPath *field.Path) field.ErrorList {
	size := 0
	for k, v := range annotations {
		if !qualifiedName(k) {
			return apivalidation.ValidateAnnotations(annotations, fldPath)
		}
		size += len(k) + len(v)
	}
	if size > apivalidation.TotalAnnotationSizeLimitB {
		return apivalidation.ValidateAnnotations(annotations, fldPath)
	}
	return nil
}

// maskTrailingDash is what a generateName prefix is checked as: the
// server appends random characters, so it may end with '-'. Like
// apimachinery's, it replaces the last two characters, not just the dash.
func maskTrailingDash(name string, prefix bool) string {
	if prefix && len(name) > 1 && name[len(name)-1] == '-' {
		return name[:len(name)-2] + "a"
	}
	return name
}

func isLowerAlnum(c byte) bool { return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' }

func isAlnum(c byte) bool { return isLowerAlnum(c) || 'A' <= c && c <= 'Z' }

func dns1123Label(v string) bool {
	if len(v) == 0 || len(v) > validation.DNS1123LabelMaxLength {
		return false
	}
	return dnsLabelChars(v)
}

// dnsLabelChars: lower-case alphanumerics and '-', alphanumeric at both
// ends; v is not empty.
func dnsLabelChars(v string) bool {
	if !isLowerAlnum(v[0]) || !isLowerAlnum(v[len(v)-1]) {
		return false
	}
	for i := 1; i < len(v)-1; i++ {
		if c := v[i]; !isLowerAlnum(c) && c != '-' {
			return false
		}
	}
	return true
}

func dns1123Subdomain(v string) bool {
	if len(v) == 0 || len(v) > validation.DNS1123SubdomainMaxLength {
		return false
	}
	start := 0
	for i := 0; i <= len(v); i++ {
		if i == len(v) || v[i] == '.' {
			if i == start || !dnsLabelChars(v[start:i]) {
				return false
			}
			start = i + 1
		}
	}
	return true
}

func qualifiedName(v string) bool {
	name := v
	for i := 0; i < len(v); i++ {
		if v[i] == '/' {
			if !dns1123Subdomain(v[:i]) {
				return false
			}
			name = v[i+1:]
			break
		}
	}
	return len(name) > 0 && labelValue(name)
}

// labelValue: empty, or at most 63 alphanumerics, '-', '_' or '.',
// alphanumeric at both ends.
func labelValue(v string) bool {
	if len(v) == 0 {
		return true
	}
	if len(v) > validation.LabelValueMaxLength || !isAlnum(v[0]) || !isAlnum(v[len(v)-1]) {
		return false
	}
	for i := 1; i < len(v)-1; i++ {
		if c := v[i]; !isAlnum(c) && c != '-' && c != '_' && c != '.' {
			return false
		}
	}
	return true
}

func portName(v string) bool {
	if len(v) == 0 || len(v) > 15 || v[0] == '-' || v[len(v)-1] == '-' {
		return false
	}
	letter := false
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case 'a' <= c && c <= 'z':
			letter = true
		case '0' <= c && c <= '9':
		case c == '-':
			if i > 0 && v[i-1] == '-' {
				return false
			}
		default:
			return false
		}
	}
	return letter
}
