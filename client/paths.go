package client

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/api"
)

// ResourcePath returns the path of a resource's collection or object, the
// way kube-apiserver lays them out:
//
//	/api/v1/nodes/{name}[/{sub}]                                  core, cluster-scoped
//	/api/v1/namespaces/{ns}/pods/{name}[/{sub}]                   core, namespaced
//	/apis/apps/v1/namespaces/{ns}/deployments/{name}[/{sub}]      any other group
//	/api/v1/pods                                                  namespaced, all namespaces (ns "")
//
// namespace is ignored for a cluster-scoped resource. Names are not checked
// here; the Client methods check them before building a path.
func ResourcePath(r *api.Resource, namespace, name string, subresource ...string) string {
	var b strings.Builder
	if r.Group == "" {
		b.WriteString("/api/")
		b.WriteString(r.Version)
	} else {
		b.WriteString("/apis/")
		b.WriteString(r.Group)
		b.WriteString("/")
		b.WriteString(r.Version)
	}
	if r.Namespaced && namespace != "" {
		b.WriteString("/namespaces/")
		b.WriteString(namespace)
	}
	b.WriteString("/")
	b.WriteString(r.Plural)
	if name != "" {
		b.WriteString("/")
		b.WriteString(name)
		for _, s := range subresource {
			b.WriteString("/")
			b.WriteString(s)
		}
	}
	return b.String()
}

// checkSegment rejects what cannot be one path segment: a name or namespace
// with "/" would address a different URL, and "." or ".." would be cleaned
// away. The API server rejects such names anyway; this keeps the request
// from going to the wrong place first.
func checkSegment(what, s string) error {
	switch {
	case s == "":
		return fmt.Errorf("%s may not be empty", what)
	case s == "." || s == "..":
		return fmt.Errorf("%s may not be %q", what, s)
	case strings.ContainsAny(s, "/%"):
		return fmt.Errorf("%s %q may not contain '/' or '%%'", what, s)
	}
	return nil
}

// objectPath checks namespace and name for r and returns the object's path.
func objectPath(r *api.Resource, namespace, name string, subresource ...string) (string, error) {
	if err := checkSegment("resource name", name); err != nil {
		return "", err
	}
	if r.Namespaced {
		if err := checkSegment("namespace", namespace); err != nil {
			return "", fmt.Errorf("%s %q: %w", r.Plural, name, err)
		}
	}
	for _, s := range subresource {
		if err := checkSegment("subresource", s); err != nil {
			return "", err
		}
	}
	return ResourcePath(r, namespace, name, subresource...), nil
}

// collectionPath checks namespace (which may be "": all namespaces) and
// returns the collection's path.
func collectionPath(r *api.Resource, namespace string) (string, error) {
	if r.Namespaced && namespace != "" {
		if err := checkSegment("namespace", namespace); err != nil {
			return "", err
		}
	}
	return ResourcePath(r, namespace, ""), nil
}

// ListOptionsQuery encodes opts as the query kube-apiserver reads, leaving
// out what is unset.
func ListOptionsQuery(opts metav1.ListOptions) url.Values {
	q := url.Values{}
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	set("labelSelector", opts.LabelSelector)
	set("fieldSelector", opts.FieldSelector)
	set("resourceVersion", opts.ResourceVersion)
	set("resourceVersionMatch", string(opts.ResourceVersionMatch))
	set("continue", opts.Continue)
	if opts.Watch {
		q.Set("watch", "true")
	}
	if opts.AllowWatchBookmarks {
		q.Set("allowWatchBookmarks", "true")
	}
	if opts.SendInitialEvents != nil {
		q.Set("sendInitialEvents", strconv.FormatBool(*opts.SendInitialEvents))
	}
	if opts.TimeoutSeconds != nil {
		q.Set("timeoutSeconds", strconv.FormatInt(*opts.TimeoutSeconds, 10))
	}
	if opts.Limit > 0 {
		q.Set("limit", strconv.FormatInt(opts.Limit, 10))
	}
	return q
}
