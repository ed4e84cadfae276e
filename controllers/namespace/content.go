package namespace

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/client"
)

// finalizerEstimate is how long objects held by finalizers are given
// before the namespace looks again: upstream's finalizerEstimateSeconds.
const finalizerEstimate = 15 * time.Second

// listPageSize bounds one page of a content list.
const listPageSize = 500

// count is how many objects of one resource there are.
type count struct {
	rt resourceType
	n  int
}

// contentReport is what one pass over a terminating namespace found, did
// and left behind. inventory fills the first part, purge the rest.
type contentReport struct {
	namespace string

	// From inventory: the resources served, what each holds (only the
	// non-empty ones, pods first), and why discovery was incomplete.
	found        []count
	items        map[resourceType][]api.Object
	discoveryErr error
	parseErr     error

	// From purge: what is still there afterwards, the finalizers holding
	// it, how long until it should be gone by itself, and what failed.
	deleted    []count // objects a delete was sent for, per resource
	remaining  []count
	finalizers map[string]int
	estimate   time.Duration
	deleteErrs []error
	// waitingForPods: pods remain, so the rest was not touched yet.
	waitingForPods bool
}

// total is how many objects inventory found.
func (r *contentReport) total() int {
	n := 0
	for _, c := range r.found {
		n += c.n
	}
	return n
}

// err joins everything that went wrong; nil when the pass went cleanly.
func (r *contentReport) err() error {
	return errors.Join(append([]error{r.discoveryErr, r.parseErr}, r.deleteErrs...)...)
}

// counts reads "3 pods, 2 configmaps".
func counts(cs []count) string {
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = fmt.Sprintf("%d %s", c.n, c.rt.res.Plural)
	}
	return strings.Join(parts, ", ")
}

// remainingSummary is upstream's "pods. has 2 resource instances, ...",
// sorted so that an unchanged namespace gets an unchanged message.
func (r *contentReport) remainingSummary() string {
	parts := make([]string, 0, len(r.remaining))
	for _, c := range r.remaining {
		parts = append(parts, fmt.Sprintf("%s has %d resource instances", c.rt, c.n))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// finalizerSummary is upstream's "example.com/hold in 1 resource
// instances, ...", sorted.
func (r *contentReport) finalizerSummary() string {
	parts := make([]string, 0, len(r.finalizers))
	for f, n := range r.finalizers {
		parts = append(parts, fmt.Sprintf("%s in %d resource instances", f, n))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// recheckAfter is when to look again at content that is on its way out:
// half the estimate plus a second, as upstream does, so a namespace is
// seen again soon after its last pod's grace period ends.
func (r *contentReport) recheckAfter() time.Duration {
	secs := int64(math.Ceil(r.estimate.Seconds()))
	return time.Duration(secs/2+1) * time.Second
}

// inventory discovers the namespaced resources and lists what each holds
// in namespace. A resource that cannot be listed is reported as a delete
// error, and left out.
func (c *Controller) inventory(ctx context.Context, namespace string) *contentReport {
	disc := c.discovery.namespacedResources(ctx)
	r := &contentReport{
		namespace:    namespace,
		items:        map[resourceType][]api.Object{},
		finalizers:   map[string]int{},
		discoveryErr: disc.err,
		parseErr:     disc.parseErr,
	}
	for _, rt := range podsFirst(disc.resources) {
		items, err := c.listContent(ctx, rt, namespace)
		if err != nil {
			r.deleteErrs = append(r.deleteErrs, err)
			continue
		}
		if len(items) > 0 {
			r.found = append(r.found, count{rt, len(items)})
			r.items[rt] = items
		}
	}
	return r
}

// podsFirst puts pods at the front: they are deleted before anything
// else, so that nothing a running pod uses (its secrets, config maps,
// service account) goes while it still runs. This is upstream's
// OrderedNamespaceDeletion, on by default since Kubernetes 1.33.
func podsFirst(rts []resourceType) []resourceType {
	out := slices.Clone(rts)
	slices.SortStableFunc(out, func(a, b resourceType) int {
		switch {
		case a.isPods() && !b.isPods():
			return -1
		case b.isPods() && !a.isPods():
			return 1
		}
		return 0
	})
	return out
}

// purge deletes what inventory found, pods first, and records what is
// left. Until the last pod is gone the other resources are left alone.
func (c *Controller) purge(ctx context.Context, r *contentReport) {
	now := c.now()
	for _, fc := range r.found {
		rt := fc.rt
		items := r.items[rt]
		if n := notDeleting(items); n > 0 {
			r.deleted = append(r.deleted, count{rt, n})
		}
		left, err := c.purgeResource(ctx, rt, r.namespace, items)
		if err == nil {
			err = r.account(rt, left, now)
		}
		if err != nil {
			r.deleteErrs = append(r.deleteErrs, err)
		}
		if rt.isPods() && (err != nil || len(left) > 0) {
			r.waitingForPods = len(r.found) > 1
			return
		}
	}
}

// purgeResource deletes every object of rt in namespace, unless all of
// items are already being deleted, and lists what is left.
func (c *Controller) purgeResource(ctx context.Context, rt resourceType, namespace string, items []api.Object) ([]api.Object, error) {
	if notDeleting(items) > 0 {
		if err := c.deleteContent(ctx, rt, namespace, items); err != nil {
			return nil, err
		}
	}
	return c.listContent(ctx, rt, namespace)
}

// notDeleting counts the items not yet being deleted.
func notDeleting(items []api.Object) int {
	n := 0
	for _, it := range items {
		if it.GetDeletionTimestamp() == nil {
			n++
		}
	}
	return n
}

// account adds what is left of rt to the report. Objects finishing a
// graceful deletion (a pod's grace period, a deletionTimestamp still in
// the future) or held by finalizers are expected to go by themselves, and
// extend the estimate; anything else left is an error, as upstream reports
// it.
func (r *contentReport) account(rt resourceType, left []api.Object, now time.Time) error {
	if len(left) == 0 {
		return nil
	}
	r.remaining = append(r.remaining, count{rt, len(left)})
	var graceful time.Duration
	held := false
	for _, it := range left {
		for _, f := range it.GetFinalizers() {
			r.finalizers[f]++
			held = true
		}
		if dt := it.GetDeletionTimestamp(); dt != nil && dt.After(now) {
			graceful = max(graceful, dt.Sub(now))
		}
	}
	switch {
	case graceful > 0:
		r.estimate = max(r.estimate, graceful)
	case held:
		r.estimate = max(r.estimate, finalizerEstimate)
	default:
		return fmt.Errorf("unexpected items still remain in namespace: %s for gvr: %v", r.namespace, rt.gvr())
	}
	return nil
}

// backgroundDelete asks the garbage collector to delete dependents after
// their owners, never to orphan them: the namespace must end up empty.
func backgroundDelete() metav1.DeleteOptions {
	policy := metav1.DeletePropagationBackground
	return metav1.DeleteOptions{PropagationPolicy: &policy}
}

// listContent lists every object of rt in namespace, page by page. A
// resource the server no longer serves is empty, and makes the next pass
// discover again.
func (c *Controller) listContent(ctx context.Context, rt resourceType, namespace string) ([]api.Object, error) {
	objects := client.ForResource(c.rc, rt.res)
	var out []api.Object
	opts := metav1.ListOptions{Limit: listPageSize}
	for {
		page, err := objects.List(ctx, namespace, opts)
		if client.IsNotFound(err) || client.IsMethodNotSupported(err) {
			c.discovery.invalidate()
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", rt, err)
		}
		out = append(out, page.Items...)
		if page.Continue == "" {
			return out, nil
		}
		opts.Continue = page.Continue
	}
}

// deleteContent deletes every object of rt in namespace: with one
// deletecollection where the server serves it, else one delete per object
// not yet being deleted.
func (c *Controller) deleteContent(ctx context.Context, rt resourceType, namespace string, items []api.Object) error {
	objects := client.ForResource(c.rc, rt.res)
	if rt.deleteCollection {
		err := objects.DeleteCollection(ctx, namespace, backgroundDelete(), metav1.ListOptions{})
		if err == nil {
			return nil
		}
		if !client.IsNotFound(err) && !client.IsMethodNotSupported(err) {
			return fmt.Errorf("deletecollection %s: %w", rt, err)
		}
		// Discovery promised deletecollection and the server refused it:
		// fall back to one delete per object.
	}
	for _, it := range items {
		if it.GetDeletionTimestamp() != nil {
			continue
		}
		err := objects.Delete(ctx, namespace, it.GetName(), backgroundDelete())
		if err != nil && !client.IsNotFound(err) && !client.IsMethodNotSupported(err) {
			return fmt.Errorf("delete %s %s: %w", rt, it.GetName(), err)
		}
	}
	return nil
}

// action says what the pass deleted: "delete" when it was everything
// found, else which part ("delete 3 pods first").
func (r *contentReport) action() string {
	if slices.Equal(r.deleted, r.found) {
		return "delete"
	}
	a := "delete " + counts(r.deleted)
	if r.waitingForPods {
		a += " first"
	}
	return a
}
