package apiserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/minictl/minictl/api"
)

// crdController is kube-apiserver's apiextensions controllers, run inside
// the API server as kube-apiserver runs them, in one level-triggered loop
// over every CustomResourceDefinition:
//
//   - naming: a definition's names (plural, singular, shortNames, kind,
//     listKind) are accepted unless another definition of its group, or a
//     built-in resource of the group, holds them: status.acceptedNames and
//     the NamesAccepted condition, with kube's reasons (NoConflicts,
//     PluralConflict, SingularConflict, ShortNamesConflict, KindConflict,
//     ListKindConflict);
//   - establishing: once its names are accepted, its resources are served
//     (a watch cache each, filled, then a new snapshot: served.go) and only
//     then is it Established (InitialNamesAccepted); a change of its
//     versions, names or schemas serves the new resources the same way;
//   - finalizing: a definition being deleted is Terminating, every custom
//     object of it is deleted (InstanceDeletionInProgress, then
//     InstanceDeletionCompleted), its cleanup finalizer is removed, and
//     once it is gone from etcd it is no longer served: its watch caches
//     stop and their watchers end.
//
// The loop wakes on every change of the definitions' watch cache, so a new
// definition is established within a few writes of its create. Only the
// loop's goroutine touches serving.
type crdController struct {
	s   *Server
	log *slog.Logger
	// serving is, by definition name, what is served for it.
	serving map[string]*customServing
}

// customServing is what is served for one definition: its resources (one
// per served version) and how to stop their watch caches.
type customServing struct {
	uid types.UID
	// built is what the resources were built from: the spec and the
	// accepted names.
	built     customBuild
	resources []*api.Resource
	stops     []func()
	// terminating: the definition is being deleted, and the snapshot says
	// so.
	terminating bool
}

type customBuild struct {
	Spec  apiextensionsv1.CustomResourceDefinitionSpec
	Names apiextensionsv1.CustomResourceDefinitionNames
}

func newCRDController(s *Server) *crdController {
	return &crdController{s: s, log: s.log.With("controller", "apiextensions"), serving: map[string]*customServing{}}
}

// cleanupRetry is how soon a definition whose objects are not all gone yet
// (some wait for their finalizers) is looked at again.
const cleanupRetry = time.Second

// run keeps the definitions' resources served until ctx ends; synced is
// closed after the first pass, once what was established is served again.
func (c *crdController) run(ctx context.Context, synced chan<- struct{}) {
	defer c.stopAll()
	cache, ok := c.s.serving().caches[api.CustomResourceDefinitions]
	if !ok {
		close(synced) // this server serves no definitions
		<-ctx.Done()
		return
	}
	// The cache moves on every etcd progress notification too; a pass
	// runs when a definition changed, or when a retry is due.
	var seen map[string]int64 // the resourceVersion of each definition at the last pass
	var retryAt time.Time     // zero: no retry pending
	for {
		changed := cache.changes()
		items, _ := cache.list(&filter{})
		now := make(map[string]int64, len(items))
		for _, it := range items {
			now[it.key] = it.rv
		}
		due := !retryAt.IsZero() && !time.Now().Before(retryAt)
		if synced != nil || due || !maps.Equal(now, seen) {
			retryAt = time.Time{}
			if c.sync(ctx, items) {
				retryAt = time.Now().Add(cleanupRetry)
			}
			seen = now
			if synced != nil {
				close(synced)
				synced = nil
			}
		}
		if !c.wait(ctx, changed, retryAt) {
			return
		}
	}
}

// wait waits for the definitions' cache to move, or until retryAt (if
// set); false if ctx ended first.
func (c *crdController) wait(ctx context.Context, changed <-chan struct{}, retryAt time.Time) bool {
	var again <-chan time.Time
	if !retryAt.IsZero() {
		t := time.NewTimer(time.Until(retryAt))
		defer t.Stop()
		again = t.C
	}
	select {
	case <-ctx.Done():
		return false
	case <-changed:
	case <-again:
	}
	return true
}

// sync is one pass over every definition; it reports whether a definition
// waits for its objects to go.
func (c *crdController) sync(ctx context.Context, items []*cachedObject) (retry bool) {
	crds := make([]*apiextensionsv1.CustomResourceDefinition, 0, len(items))
	for _, it := range items {
		crds = append(crds, it.object().(*apiextensionsv1.CustomResourceDefinition))
	}
	// The first to ask for a name gets it.
	sort.Slice(crds, func(i, j int) bool {
		ti, tj := crds[i].CreationTimestamp, crds[j].CreationTimestamp
		if !ti.Equal(&tj) {
			return ti.Before(&tj)
		}
		return crds[i].Name < crds[j].Name
	})
	present := map[string]bool{}
	for i, crd := range crds {
		present[crd.Name] = true
		next, again, err := c.syncOne(ctx, crd, crds)
		if err != nil && ctx.Err() == nil {
			c.log.Warn("customresourcedefinition "+crd.Name+": sync failed; retrying", "err", err)
			retry = true
		}
		if next != nil {
			crds[i] = next // later definitions see the names it took
		}
		retry = retry || again
	}
	var gone []string
	for name := range c.serving {
		if !present[name] {
			gone = append(gone, name)
		}
	}
	if len(gone) > 0 {
		c.unserve(gone...)
	}
	return retry
}

// syncOne brings one definition's status and serving up to date, and
// returns it as written (nil if unchanged) and whether it waits for its
// objects to go.
func (c *crdController) syncOne(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, all []*apiextensionsv1.CustomResourceDefinition) (*apiextensionsv1.CustomResourceDefinition, bool, error) {
	if crd.DeletionTimestamp != nil {
		return c.finalize(ctx, crd)
	}
	names, accepted, established := c.calculateNames(crd, all)
	want := crd.DeepCopy()
	want.Status.AcceptedNames = names
	setCondition(want, accepted)
	setCondition(want, established)
	if conditionTrue(want, apiextensionsv1.NamesAccepted) || conditionTrue(want, apiextensionsv1.Established) {
		if err := c.serve(ctx, want); err != nil {
			return nil, false, err
		}
		if !conditionTrue(want, apiextensionsv1.Established) {
			setCondition(want, apiextensionsv1.CustomResourceDefinitionCondition{
				Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionTrue,
				Reason: "InitialNamesAccepted", Message: "the initial names have been accepted",
			})
		}
	} else if _, ok := c.serving[crd.Name]; ok {
		c.unserve(crd.Name)
	}
	if apiequality.Semantic.DeepEqual(want.Status, crd.Status) {
		return nil, false, nil
	}
	out, err := c.writeStatus(ctx, crd, want.Status)
	return out, false, err
}

// calculateNames is kube's naming controller: each requested name is taken
// unless already in use in the group by another definition's accepted
// names or a built-in resource; a name the definition holds stays its own.
func (c *crdController) calculateNames(crd *apiextensionsv1.CustomResourceDefinition, all []*apiextensionsv1.CustomResourceDefinition) (apiextensionsv1.CustomResourceDefinitionNames, apiextensionsv1.CustomResourceDefinitionCondition, apiextensionsv1.CustomResourceDefinitionCondition) {
	resources, kinds := map[string]bool{}, map[string]bool{}
	for _, other := range all {
		if other.Name == crd.Name || other.Spec.Group != crd.Spec.Group {
			continue
		}
		n := other.Status.AcceptedNames
		for _, r := range append([]string{n.Plural, n.Singular}, n.ShortNames...) {
			resources[r] = true
		}
		kinds[n.Kind], kinds[n.ListKind] = true, true
	}
	for _, res := range c.s.builtins {
		if res.Group != crd.Spec.Group {
			continue
		}
		for _, r := range append([]string{res.Plural, res.Singular}, res.ShortNames...) {
			resources[r] = true
		}
		kinds[res.Kind], kinds[res.ListKindName()] = true, true
	}
	delete(resources, "")
	delete(kinds, "")

	requested, held := crd.Spec.Names, crd.Status.AcceptedNames
	names := held
	cond := apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.NamesAccepted, Status: apiextensionsv1.ConditionUnknown}
	conflict := func(reason string, err error) {
		cond.Status, cond.Reason, cond.Message = apiextensionsv1.ConditionFalse, reason, err.Error()
	}
	if err := freshOrHeld(requested.Plural, held.Plural, resources); err != nil {
		conflict("PluralConflict", err)
	} else {
		names.Plural = requested.Plural
	}
	if err := freshOrHeld(requested.Singular, held.Singular, resources); err != nil {
		conflict("SingularConflict", err)
	} else {
		names.Singular = requested.Singular
	}
	if !slices.Equal(requested.ShortNames, held.ShortNames) {
		var errs []string
		for _, sn := range requested.ShortNames {
			if slices.Contains(held.ShortNames, sn) {
				continue
			}
			if err := freshOrHeld(sn, "", resources); err != nil {
				errs = append(errs, err.Error())
			}
		}
		if len(errs) > 0 {
			conflict("ShortNamesConflict", errors.New(aggregate(errs)))
		} else {
			names.ShortNames = requested.ShortNames
		}
	}
	if err := freshOrHeld(requested.Kind, held.Kind, kinds); err != nil {
		conflict("KindConflict", err)
	} else {
		names.Kind = requested.Kind
	}
	if err := freshOrHeld(requested.ListKind, held.ListKind, kinds); err != nil {
		conflict("ListKindConflict", err)
	} else {
		names.ListKind = requested.ListKind
	}
	names.Categories = requested.Categories
	if cond.Status == apiextensionsv1.ConditionUnknown {
		cond.Status, cond.Reason, cond.Message = apiextensionsv1.ConditionTrue, "NoConflicts", "no conflicts found"
	}

	established := apiextensionsv1.CustomResourceDefinitionCondition{
		Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionFalse,
		Reason: "NotAccepted", Message: "not all names are accepted",
	}
	if old := findCondition(crd, apiextensionsv1.Established); old != nil {
		established = *old
	}
	if established.Status != apiextensionsv1.ConditionTrue && cond.Status == apiextensionsv1.ConditionTrue {
		established = apiextensionsv1.CustomResourceDefinitionCondition{
			Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionFalse,
			Reason: "Installing", Message: "the initial names have been accepted",
		}
	}
	return names, cond, established
}

func freshOrHeld(requested, held string, used map[string]bool) error {
	if requested == held || !used[requested] {
		return nil
	}
	return fmt.Errorf("%q is already in use", requested)
}

// aggregate words several errors as apimachinery's aggregate does.
func aggregate(msgs []string) string {
	if len(msgs) == 1 {
		return msgs[0]
	}
	return "[" + strings.Join(msgs, ", ") + "]"
}

// serve makes crd's resources (at its accepted names) served: unchanged if
// they already are; otherwise new resources, whose watch caches are filled
// before a new snapshot replaces the old resources with them.
func (c *crdController) serve(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) error {
	build := customBuild{Spec: crd.Spec, Names: crd.Status.AcceptedNames}
	cur := c.serving[crd.Name]
	if cur != nil && cur.uid == crd.UID && apiequality.Semantic.DeepEqual(cur.built, build) {
		return nil
	}
	resources, err := api.CustomResources(crd)
	if err != nil {
		return err
	}
	c.s.convertByWebhook(crd, resources)
	next := &customServing{uid: crd.UID, built: build, resources: resources}
	live := c.s.serving()
	catalogue := c.catalogueWithout(live, crd.Name).With(resources...)
	v := c.s.newServed(catalogue, live)
	if len(resources) > 0 {
		cache := v.caches[resources[0]].watchCache // every version's
		next.stops = append(next.stops, c.s.caches.start(ctx, cache))
		if err := cache.waitFresh(ctx, 0); err != nil {
			next.stop()
			return fmt.Errorf("fill the watch cache of %s: %w", resources[0].GroupResource(), err)
		}
	}
	c.s.live.Store(v)
	c.serving[crd.Name] = next
	if cur != nil {
		cur.stop()
	}
	c.log.Info("customresourcedefinition "+crd.Name+": serving", "group", crd.Spec.Group, "plural", build.Names.Plural, "versions", len(resources))
	return nil
}

// unserve stops serving the named definitions: a new snapshot without
// their resources, then their watch caches stop, ending their watchers.
func (c *crdController) unserve(names ...string) {
	live := c.s.serving()
	catalogue := live.resources
	for _, name := range names {
		catalogue = withoutResources(catalogue, c.serving[name])
	}
	c.s.live.Store(c.s.newServed(catalogue, live))
	for _, name := range names {
		c.serving[name].stop()
		delete(c.serving, name)
		c.log.Info("customresourcedefinition " + name + ": no longer served")
	}
}

// catalogueWithout is what live serves but the resources of the named
// definition.
func (c *crdController) catalogueWithout(live *served, name string) api.Catalogue {
	return withoutResources(live.resources, c.serving[name])
}

func withoutResources(cat api.Catalogue, cs *customServing) api.Catalogue {
	if cs == nil {
		return slices.Clip(cat)
	}
	out := make(api.Catalogue, 0, len(cat))
	for _, res := range cat {
		if !slices.Contains(cs.resources, res) {
			out = append(out, res)
		}
	}
	return out
}

func (cs *customServing) stop() {
	for _, stop := range cs.stops {
		stop()
	}
}

// stopAll stops every custom resource's watch cache.
func (c *crdController) stopAll() {
	for _, cs := range c.serving {
		cs.stop()
	}
}

// finalize is kube's finalizer controller: Terminating, every custom
// object deleted, then the cleanup finalizer removed (which lets the
// definition go). It reports true while objects remain.
func (c *crdController) finalize(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) (*apiextensionsv1.CustomResourceDefinition, bool, error) {
	if !slices.Contains(crd.Finalizers, api.CustomResourceCleanupFinalizer) {
		return nil, false, nil
	}
	cs := c.serving[crd.Name]
	status := crd.Status.DeepCopy()
	terminating := apiextensionsv1.CustomResourceDefinitionCondition{
		Type: apiextensionsv1.Terminating, Status: apiextensionsv1.ConditionTrue,
		Reason: "InstanceDeletionInProgress", Message: "CustomResource deletion is in progress",
	}
	if cs != nil && !cs.terminating {
		c.markTerminating(cs)
	}
	remaining := 0
	if cs == nil {
		terminating.Status, terminating.Reason, terminating.Message = apiextensionsv1.ConditionFalse, "NeverEstablished", "resource was never established"
	} else {
		n, err := c.deleteInstances(ctx, cs)
		remaining = n
		switch {
		case err != nil:
			terminating.Reason, terminating.Message = "InstanceDeletionFailed", fmt.Sprintf("could not issue all deletes: %v", err)
		case n == 0:
			terminating.Status, terminating.Reason, terminating.Message = apiextensionsv1.ConditionFalse, "InstanceDeletionCompleted", "removed all instances"
		}
	}
	wantStatus := &apiextensionsv1.CustomResourceDefinition{Status: *status}
	setCondition(wantStatus, terminating)
	out := crd
	if !apiequality.Semantic.DeepEqual(wantStatus.Status, crd.Status) {
		written, err := c.writeStatus(ctx, crd, wantStatus.Status)
		if err != nil {
			return nil, true, err
		}
		out = written
	}
	if terminating.Status == apiextensionsv1.ConditionTrue || remaining > 0 {
		return out, true, nil
	}
	_, err := c.s.updateObject(ctx, c.s.serving().stores[api.CustomResourceDefinitions], "", crd.Name, updateOptions{mode: modeMain, manager: "kube-apiserver"}, func(cur api.Object) (api.Object, error) {
		cur.SetFinalizers(slices.DeleteFunc(cur.GetFinalizers(), func(f string) bool { return f == api.CustomResourceCleanupFinalizer }))
		return cur, nil
	})
	if apierrors.IsNotFound(err) {
		return nil, false, nil
	}
	if err == nil {
		c.log.Info("customresourcedefinition " + crd.Name + ": every object deleted; finalizer removed")
	}
	return nil, false, err
}

// markTerminating publishes a snapshot in which cs's resources take no
// new objects, as kube-apiserver refuses them once a definition is being
// deleted.
func (c *crdController) markTerminating(cs *customServing) {
	live := c.s.serving()
	v := c.s.newServed(live.resources, live)
	for _, res := range cs.resources {
		v.terminating[res] = true
	}
	c.s.live.Store(v)
	cs.terminating = true
}

// deleteInstances deletes every object of the definition and returns how
// many were there (those with finalizers of their own stay until they are
// done).
func (c *crdController) deleteInstances(ctx context.Context, cs *customServing) (int, error) {
	live := c.s.serving()
	res := cs.resources[0]
	for _, r := range cs.resources {
		if !converts(r) {
			res = r // the storage version: no conversion on the way
		}
	}
	rs, cache := live.stores[res], live.caches[res]
	if rs == nil {
		return 0, nil
	}
	ri := &requestInfo{res: res, store: rs, cache: cache}
	items, _, err := c.s.consistentList(ctx, ri, &filter{})
	if err != nil {
		return 0, err
	}
	var errs []error
	for _, it := range items {
		if it.object().GetDeletionTimestamp() != nil {
			continue
		}
		_, _, err := c.s.deleteObject(ctx, rs, it.object().GetNamespace(), it.object().GetName(), &metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	return len(items), errors.Join(errs...)
}

// writeStatus writes a definition's status through its status subresource.
func (c *crdController) writeStatus(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, status apiextensionsv1.CustomResourceDefinitionStatus) (*apiextensionsv1.CustomResourceDefinition, error) {
	rs := c.s.serving().stores[api.CustomResourceDefinitions]
	out, err := c.s.updateObject(ctx, rs, "", crd.Name, updateOptions{mode: modeStatus, subresource: "status", manager: "kube-apiserver"}, func(cur api.Object) (api.Object, error) {
		next := cur.(*apiextensionsv1.CustomResourceDefinition)
		if next.UID != crd.UID {
			return nil, apierrors.NewConflict(api.CustomResourceDefinitions.GroupResource(), crd.Name, errors.New("the definition was replaced"))
		}
		next.Status.AcceptedNames = status.AcceptedNames
		for _, cond := range status.Conditions {
			setCondition(next, cond)
		}
		return next, nil
	})
	if err != nil {
		return nil, fmt.Errorf("write status of customresourcedefinition %s: %w", crd.Name, err)
	}
	return out.(*apiextensionsv1.CustomResourceDefinition), nil
}

func findCondition(crd *apiextensionsv1.CustomResourceDefinition, t apiextensionsv1.CustomResourceDefinitionConditionType) *apiextensionsv1.CustomResourceDefinitionCondition {
	for i := range crd.Status.Conditions {
		if crd.Status.Conditions[i].Type == t {
			return &crd.Status.Conditions[i]
		}
	}
	return nil
}

func conditionTrue(crd *apiextensionsv1.CustomResourceDefinition, t apiextensionsv1.CustomResourceDefinitionConditionType) bool {
	c := findCondition(crd, t)
	return c != nil && c.Status == apiextensionsv1.ConditionTrue
}

// setCondition sets a condition as kube's helper does: its transition time
// moves only when its status does.
func setCondition(crd *apiextensionsv1.CustomResourceDefinition, cond apiextensionsv1.CustomResourceDefinitionCondition) {
	old := findCondition(crd, cond.Type)
	if old == nil {
		cond.LastTransitionTime = metav1.NewTime(time.Now().Truncate(time.Second))
		crd.Status.Conditions = append(crd.Status.Conditions, cond)
		return
	}
	if old.Status != cond.Status {
		cond.LastTransitionTime = metav1.NewTime(time.Now().Truncate(time.Second))
	} else {
		cond.LastTransitionTime = old.LastTransitionTime
	}
	*old = cond
}
