package namespace

import (
	"context"
	"errors"
	"sort"
	"sync"
	"time"

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

// discover asks the server's discovery, and keeps the namespaced
// resources that can be emptied. A group version that failed is a
// discovery error; one that does not parse, a parse error.
func (d *discoverer) discover(ctx context.Context) discoveryResult {
	served, err := d.rc.ServerPreferredResources(ctx)
	var res discoveryResult
	for _, s := range served {
		if rt, ok := deletable(s); ok {
			res.resources = append(res.resources, rt)
		}
	}
	sort.Slice(res.resources, func(i, j int) bool { return res.resources[i].String() < res.resources[j].String() })
	if err == nil {
		return res
	}
	var parseErrs, others []error
	for _, e := range unjoin(err) {
		var perr *client.GroupVersionParseError
		if errors.As(e, &perr) {
			parseErrs = append(parseErrs, e)
		} else {
			others = append(others, e)
		}
	}
	res.parseErr = errors.Join(parseErrs...)
	if len(others) == 1 {
		res.err = others[0]
	} else {
		res.err = errors.Join(others...)
	}
	return res
}

// unjoin returns the errors errors.Join joined into err, or err alone.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// deletable reports whether s is a namespaced resource that can be listed
// and deleted.
func deletable(s client.ServedResource) (resourceType, bool) {
	if !s.Resource.Namespaced || !s.Supports("list") || !(s.Supports("delete") || s.Supports("deletecollection")) {
		return resourceType{}, false
	}
	return resourceType{res: s.Resource, deleteCollection: s.Supports("deletecollection")}, true
}
