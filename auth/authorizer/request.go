package authorizer

import (
	"net/http"
	"strings"

	"k8s.io/apimachinery/pkg/api/validation/path"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/minictl/minictl/auth/user"
)

// FromRequest reads what r asks for from its path and method alone, as
// kube-apiserver's RequestInfoFactory does before anything looks the
// resource up (so a request for a resource that does not exist is
// authorized like any other, and refused before it is found missing):
//
//	/api/v1/namespaces/{ns}/{resource}/{name}/{subresource}
//	/apis/{group}/{version}/{resource}/{name}/{subresource}
//
// A GET of a collection is list, or watch with ?watch=true; a DELETE of
// one is deletecollection; POST is create, PUT update, PATCH patch.
// namespaces/{name}/status and /finalize are the namespace's own
// subresources. A list whose fieldSelector names one object
// (metadata.name=x) carries that name, so that a rule limited to
// resourceNames can allow it, and every list and watch carries its
// fieldSelector. Every other path is a non-resource URL, its
// verb the method in lower case.
func FromRequest(r *http.Request, u *user.Info) Attributes {
	a := Attributes{User: u, Path: r.URL.Path, Verb: strings.ToLower(r.Method)}
	parts := splitPath(r.URL.Path)
	if len(parts) < 3 {
		return a
	}
	prefix := parts[0]
	parts = parts[1:]
	switch prefix {
	case "api":
	case "apis":
		if len(parts) < 3 {
			return a
		}
		a.APIGroup, parts = parts[0], parts[1:]
	default:
		return a
	}
	a.ResourceRequest = true
	a.APIVersion, parts = parts[0], parts[1:]
	// The legacy /watch/ and /proxy/ forms name the verb in the path.
	if parts[0] == "watch" || parts[0] == "proxy" {
		if len(parts) < 2 {
			return Attributes{User: u, Path: r.URL.Path, Verb: strings.ToLower(r.Method)}
		}
		a.Verb, parts = parts[0], parts[1:]
	} else {
		switch r.Method {
		case http.MethodPost:
			a.Verb = "create"
		case http.MethodGet, http.MethodHead:
			a.Verb = "get"
		case http.MethodPut:
			a.Verb = "update"
		case http.MethodPatch:
			a.Verb = "patch"
		case http.MethodDelete:
			a.Verb = "delete"
		default:
			a.Verb = ""
		}
	}
	if parts[0] == "namespaces" {
		if len(parts) > 1 {
			a.Namespace = parts[1]
			if len(parts) > 2 && parts[2] != "status" && parts[2] != "finalize" {
				parts = parts[2:]
			}
		}
	}
	switch {
	case len(parts) >= 3 && a.Verb != "proxy":
		a.Subresource = parts[2]
		fallthrough
	case len(parts) >= 2:
		a.Name = parts[1]
		fallthrough
	default:
		a.Resource = parts[0]
	}
	if a.Name == "" && a.Verb == "get" {
		q := r.URL.Query()
		a.Verb = "list"
		if w := q.Get("watch"); w == "true" || w == "1" {
			a.Verb = "watch"
		}
		if sel, err := fields.ParseSelector(q.Get("fieldSelector")); err == nil {
			a.FieldSelector = sel.String()
			if name, ok := sel.RequiresExactMatch("metadata.name"); ok && len(path.IsValidPathSegmentName(name)) == 0 {
				a.Name = name
			}
		}
	}
	if a.Name == "" && a.Verb == "delete" {
		a.Verb = "deletecollection"
	}
	return a
}

// splitPath splits a path into its segments, without empty ones at
// either end.
func splitPath(p string) []string {
	p = strings.Trim(p, "/")
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}
