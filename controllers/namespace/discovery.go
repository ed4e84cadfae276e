package namespace

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/client"
)

// discoveryTTL is how long one discovery answer is trusted. The set of
// resources a server serves rarely changes; asking on every pass of every
// terminating namespace would cost several requests each time.
const discoveryTTL = 10 * time.Second

// resourceType is one namespaced resource the deleter can empty: it can be
// listed (to see what is left) and deleted, as a collection or one object
// at a time, through client.ForResource.
type resourceType struct {
	// res is the catalogue entry of a kind minictl has compiled in, and
	// otherwise an entry made from discovery, whose objects are
	// unstructured: a kind nobody compiled in is emptied all the same.
	res              *api.Resource
	deleteCollection bool // deletecollection is served; otherwise list and delete each
}

// String names the resource in messages the way upstream does:
// "pods." for core pods, "deployments.apps".
func (rt resourceType) String() string { return rt.res.Plural + "." + rt.res.Group }

// gvr is the resource's group, version and plural.
func (rt resourceType) gvr() schema.GroupVersionResource {
	return rt.res.GroupVersion().WithResource(rt.res.Plural)
}

// isPods reports whether rt is the core group's pods.
func (rt resourceType) isPods() bool { return rt.res.Group == "" && rt.res.Plural == "pods" }

// discoveryResult is what one round of discovery found.
type discoveryResult struct {
	resources []resourceType
	// err is set when some group versions could not be read; resources
	// then holds what the others serve.
	err error
	// parseErr is set when a resource list named a group version that
	// does not parse; its resources are left out.
	parseErr error
}

// discoverer finds the namespaced resources a server serves, through the
// discovery endpoints (/api, /apis and one resource list per group
// version), and remembers a complete answer for discoveryTTL.
type discoverer struct {
	rc  *client.RESTClient
	now func() time.Time

	// mu serialises discovery and guards the cache below.
	mu        sync.Mutex
	cached    []resourceType
	fetchedAt time.Time // zero: nothing cached
}

// namespacedResources returns the deletable namespaced resources of the
// preferred version of every group, in a stable order.
func (d *discoverer) namespacedResources(ctx context.Context) discoveryResult {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.fetchedAt.IsZero() && d.now().Sub(d.fetchedAt) < discoveryTTL {
		return discoveryResult{resources: d.cached}
	}
	res := d.discover(ctx)
	if res.err == nil && res.parseErr == nil {
		d.cached, d.fetchedAt = res.resources, d.now()
	}
	return res
}

// invalidate forgets the cached answer: a resource it named is no longer
// served.
func (d *discoverer) invalidate() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.fetchedAt = time.Time{}
}

// groupDiscoveryError lists the group versions whose resources could not
// be read, like client-go's ErrGroupDiscoveryFailed.
type groupDiscoveryError struct {
	failed map[string]error // group version → why
}

func (e *groupDiscoveryError) Error() string {
	gvs := make([]string, 0, len(e.failed))
	for gv := range e.failed {
		gvs = append(gvs, gv)
	}
	sort.Strings(gvs)
	parts := make([]string, len(gvs))
	for i, gv := range gvs {
		parts[i] = fmt.Sprintf("%s: %v", gv, e.failed[gv])
	}
	return "unable to retrieve the complete list of server APIs: " + strings.Join(parts, ", ")
}

func (d *discoverer) discover(ctx context.Context) discoveryResult {
	gvPaths, err := d.preferredGroupVersions(ctx)
	if err != nil {
		return discoveryResult{err: err}
	}
	var (
		out       []resourceType
		failed    = map[string]error{}
		parseErrs []error
	)
	for _, p := range gvPaths {
		var list metav1.APIResourceList
		if err := d.rc.Do(ctx, http.MethodGet, p.path, nil, "", nil, &list); err != nil {
			failed[p.groupVersion] = err
			continue
		}
		gv, err := schema.ParseGroupVersion(list.GroupVersion)
		if err != nil {
			parseErrs = append(parseErrs, fmt.Errorf("parse group version %q: %w", list.GroupVersion, err))
			continue
		}
		for _, r := range list.APIResources {
			if rt, ok := deletable(gv, r); ok {
				out = append(out, rt)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	res := discoveryResult{resources: out, parseErr: errors.Join(parseErrs...)}
	if len(failed) > 0 {
		res.err = &groupDiscoveryError{failed: failed}
	}
	return res
}

// deletable reports whether r is a namespaced resource (not a subresource)
// that can be listed and deleted.
func deletable(gv schema.GroupVersion, r metav1.APIResource) (resourceType, bool) {
	if !r.Namespaced || strings.Contains(r.Name, "/") {
		return resourceType{}, false
	}
	has := func(verb string) bool { return slices.Contains(r.Verbs, verb) }
	if !has("list") || !(has("delete") || has("deletecollection")) {
		return resourceType{}, false
	}
	res, ok := api.Lookup(gv.Group, gv.Version, r.Name)
	if !ok {
		res = &api.Resource{
			Group: gv.Group, Version: gv.Version, Kind: r.Kind, Plural: r.Name, Singular: r.SingularName,
			Namespaced: true, New: api.NewUnstructured,
		}
	}
	return resourceType{res: res, deleteCollection: has("deletecollection")}, true
}

type gvPath struct {
	groupVersion string // "v1", "apps/v1"
	path         string // "/api/v1", "/apis/apps/v1"
}

// preferredGroupVersions returns the core version and the preferred
// version of every named group: a resource served in two versions is the
// same objects twice, and is emptied through one.
func (d *discoverer) preferredGroupVersions(ctx context.Context) ([]gvPath, error) {
	var core metav1.APIVersions
	if err := d.rc.Do(ctx, http.MethodGet, "/api", nil, "", nil, &core); err != nil {
		return nil, fmt.Errorf("discover /api: %w", err)
	}
	var out []gvPath
	if len(core.Versions) > 0 {
		v := core.Versions[0]
		out = append(out, gvPath{groupVersion: v, path: "/api/" + v})
	}
	var groups metav1.APIGroupList
	if err := d.rc.Do(ctx, http.MethodGet, "/apis", nil, "", nil, &groups); err != nil {
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
		out = append(out, gvPath{groupVersion: gv, path: "/apis/" + gv})
	}
	return out, nil
}
