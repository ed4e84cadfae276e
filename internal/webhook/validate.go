package webhook

import (
	"net/url"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ValidateURL checks a webhook's url as kube-apiserver does for admission
// and conversion webhooks alike: HTTPS, a host, and no user information,
// fragment or query.
func ValidateURL(p *field.Path, raw string) field.ErrorList {
	u, err := url.Parse(raw)
	if err != nil {
		return field.ErrorList{field.Invalid(p, raw, "url must be a valid URL: "+err.Error())}
	}
	var errs field.ErrorList
	if u.Scheme != "https" {
		errs = append(errs, field.Invalid(p, u.Scheme, "'https' is the only allowed URL scheme"))
	}
	if u.Host == "" {
		errs = append(errs, field.Invalid(p, u.Host, "host must be specified"))
	}
	if u.User != nil {
		errs = append(errs, field.Invalid(p, u.User.String(), "user information is not permitted in the URL"))
	}
	if u.Fragment != "" || u.RawFragment != "" {
		errs = append(errs, field.Invalid(p, u.Fragment, "fragments are not permitted in the URL"))
	}
	if u.RawQuery != "" {
		errs = append(errs, field.Invalid(p, u.RawQuery, "query parameters are not permitted in the URL"))
	}
	return errs
}

// ValidateService checks a webhook's service reference as kube-apiserver
// does: a name and namespace, a port in range (nil: the default, 443),
// and a path, if any, that starts with a slash.
func ValidateService(p *field.Path, name, namespace string, path *string, port *int32) field.ErrorList {
	var errs field.ErrorList
	if name == "" {
		errs = append(errs, field.Required(p.Child("name"), "service name is required"))
	}
	if namespace == "" {
		errs = append(errs, field.Required(p.Child("namespace"), "service namespace is required"))
	}
	if port != nil && (*port < 1 || *port > 65535) {
		errs = append(errs, field.Invalid(p.Child("port"), *port, "port is not valid: must be between 1 and 65535, inclusive"))
	}
	if path != nil && !strings.HasPrefix(*path, "/") {
		errs = append(errs, field.Invalid(p.Child("path"), *path, "must start with a '/'"))
	}
	return errs
}
