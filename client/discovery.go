package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/minictl/minictl/api"
)

// ServedResource is one resource a server's discovery lists: its catalogue
// entry and the verbs it serves.
type ServedResource struct {
	// Resource is the catalogue entry of a kind minictl has compiled in
	// (the entry api.Lookup returns, with its Go type), and otherwise an
	// entry made from discovery, whose objects are unstructured
	// (api.NewUnstructured): a kind nobody compiled in is handled all the
	// same.
	Resource *api.Resource
	Verbs    []string
}

// Supports reports whether every one of verbs is served.
func (s ServedResource) Supports(verbs ...string) bool {
	for _, v := range verbs {
		if !slices.Contains(s.Verbs, v) {
			return false
		}
	}
	return true
}

// ServedResources is what discovery lists, in a stable order (by group,
// then plural).
type ServedResources []ServedResource

// Catalogue returns the resources that serve every one of verbs, as the
// controllers that handle every kind ask for them: the garbage collector
// "list", "watch", "delete"; the quota controller "create", "list",
// "watch", "delete".
func (s ServedResources) Catalogue(verbs ...string) api.Catalogue {
	var out api.Catalogue
	for _, r := range s {
		if r.Supports(verbs...) {
			out = append(out, r.Resource)
		}
	}
	return out
}

// GroupDiscoveryFailedError lists the group versions whose resources could
// not be read, like client-go's ErrGroupDiscoveryFailed. Discovery returns
// it with the resources of every other group version.
type GroupDiscoveryFailedError struct {
	Groups map[schema.GroupVersion]error // group version → why
}

func (e *GroupDiscoveryFailedError) Error() string {
	gvs := make([]string, 0, len(e.Groups))
	msgs := make(map[string]string, len(e.Groups))
	for gv, err := range e.Groups {
		gvs = append(gvs, gv.String())
		msgs[gv.String()] = err.Error()
	}
	sort.Strings(gvs)
	parts := make([]string, len(gvs))
	for i, gv := range gvs {
		parts[i] = gv + ": " + msgs[gv]
	}
	return "unable to retrieve the complete list of server APIs: " + strings.Join(parts, ", ")
}

// GroupVersionParseError is a resource list that names a group version
// that does not parse; its resources are left out.
type GroupVersionParseError struct {
	GroupVersion string
	Err          error
}

func (e *GroupVersionParseError) Error() string {
	return fmt.Sprintf("parse group version %q: %v", e.GroupVersion, e.Err)
}

func (e *GroupVersionParseError) Unwrap() error { return e.Err }

// IsGroupDiscoveryFailed reports whether err is (or wraps) a
// *GroupDiscoveryFailedError, and returns it.
func IsGroupDiscoveryFailed(err error) (*GroupDiscoveryFailedError, bool) {
	var gerr *GroupDiscoveryFailedError
	ok := errors.As(err, &gerr)
	return gerr, ok
}

// ServerPreferredResources reads discovery (/api, /apis and the resource
// list of each group version) and returns the resources, not
// subresources, of the core version and of the preferred version of every
// named group, as client-go's ServerPreferredResources does: a resource
// served in two versions is the same objects twice, and is handled through
// one. Each entry's Subresources lists the subresources discovery names.
//
// When some group versions cannot be read, it returns what the others
// serve and a *GroupDiscoveryFailedError; a resource list that names a
// group version that does not parse is left out, and a
// *GroupVersionParseError joined to the error says so.
func (c *RESTClient) ServerPreferredResources(ctx context.Context) (ServedResources, error) {
	gvs, err := c.preferredGroupVersions(ctx)
	if err != nil {
		return nil, err
	}
	var (
		out       ServedResources
		failed    = map[schema.GroupVersion]error{}
		parseErrs []error
	)
	for _, gv := range gvs {
		var list metav1.APIResourceList
		if err := c.Do(ctx, http.MethodGet, groupVersionPath(gv), nil, "", nil, &list); err != nil {
			failed[gv] = err
			continue
		}
		listed, err := schema.ParseGroupVersion(list.GroupVersion)
		if err != nil {
			parseErrs = append(parseErrs, &GroupVersionParseError{GroupVersion: list.GroupVersion, Err: err})
			continue
		}
		out = append(out, servedIn(listed, list.APIResources)...)
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i].Resource, out[j].Resource
		if a.Group != b.Group {
			return a.Group < b.Group
		}
		return a.Plural < b.Plural
	})
	if len(failed) > 0 {
		parseErrs = append([]error{&GroupDiscoveryFailedError{Groups: failed}}, parseErrs...)
	}
	return out, errors.Join(parseErrs...)
}

// servedIn turns one group version's resource list into catalogue entries:
// the known ones resolve to their api entry; "plural/sub" entries become
// the Subresources of the others.
func servedIn(gv schema.GroupVersion, list []metav1.APIResource) ServedResources {
	subs := map[string][]string{}
	for _, r := range list {
		if plural, sub, ok := strings.Cut(r.Name, "/"); ok {
			subs[plural] = append(subs[plural], sub)
		}
	}
	var out ServedResources
	for _, r := range list {
		if strings.Contains(r.Name, "/") {
			continue
		}
		res, ok := api.Lookup(gv.Group, gv.Version, r.Name)
		if !ok {
			res = &api.Resource{
				Group: gv.Group, Version: gv.Version, Kind: r.Kind, Plural: r.Name, Singular: r.SingularName,
				Namespaced: r.Namespaced, ShortNames: r.ShortNames, Categories: r.Categories,
				Subresources: subs[r.Name], New: api.NewUnstructured,
			}
			if res.Singular == "" {
				res.Singular = strings.ToLower(r.Kind)
			}
		}
		out = append(out, ServedResource{Resource: res, Verbs: slices.Clone(r.Verbs)})
	}
	return out
}

// preferredGroupVersions returns the core version and the preferred
// version of every named group.
func (c *RESTClient) preferredGroupVersions(ctx context.Context) ([]schema.GroupVersion, error) {
	var core metav1.APIVersions
	if err := c.Do(ctx, http.MethodGet, "/api", nil, "", nil, &core); err != nil {
		return nil, fmt.Errorf("discover /api: %w", err)
	}
	var out []schema.GroupVersion
	if len(core.Versions) > 0 {
		out = append(out, schema.GroupVersion{Version: core.Versions[0]})
	}
	var groups metav1.APIGroupList
	if err := c.Do(ctx, http.MethodGet, "/apis", nil, "", nil, &groups); err != nil {
		return nil, fmt.Errorf("discover /apis: %w", err)
	}
	for _, g := range groups.Groups {
		gv := g.PreferredVersion.GroupVersion
		if gv == "" && len(g.Versions) > 0 {
			gv = g.Versions[0].GroupVersion
		}
		if gv == "" {
			continue
		}
		parsed, err := schema.ParseGroupVersion(gv)
		if err != nil {
			return nil, fmt.Errorf("discover /apis: parse group version %q: %w", gv, err)
		}
		out = append(out, parsed)
	}
	return out, nil
}

// groupVersionPath is where a group version's resource list is served:
// "/api/v1", "/apis/apps/v1".
func groupVersionPath(gv schema.GroupVersion) string {
	if gv.Group == "" {
		return "/api/" + gv.Version
	}
	return "/apis/" + gv.Group + "/" + gv.Version
}
