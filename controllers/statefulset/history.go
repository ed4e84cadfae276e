package statefulset

import (
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"log/slog"
	"maps"
	"slices"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/rand"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/controllers/internal/controller"
)

// A StatefulSet's history is its ControllerRevisions, one per template,
// as kube keeps it (pkg/controller/history):
//
//   - A revision is named "<set>-<hash>", the hash of the template (and
//     of status.collisionCount when set), carries the template's labels
//     plus controller-revision-hash=<hash>, and is controlled by the set.
//   - Its data is {"spec":{"template":{...,"$patch":"replace"}}}, the
//     patch kubectl rollout undo sends back to the set.
//   - The update revision (the current template) has the highest number;
//     a template that comes back makes its old revision newest again.
//   - The current revision is status.currentRevision: the template the
//     pods ran before the update began.
//   - Old revisions beyond spec.revisionHistoryLimit are deleted, oldest
//     first, sparing the current and update revisions and any a pod runs.

// computeHash is the controller-revision-hash of a template.
func computeHash(tmpl *corev1.PodTemplateSpec, collisionCount *int32) string {
	h := fnv.New32a()
	b, _ := json.Marshal(tmpl) // cannot fail: a PodTemplateSpec is plain data
	h.Write(b)
	if collisionCount != nil {
		buf := make([]byte, 8)
		binary.LittleEndian.PutUint32(buf, uint32(*collisionCount))
		h.Write(buf)
	}
	return rand.SafeEncodeString(strconv.FormatUint(uint64(h.Sum32()), 10))
}

// revisionData is set's template as the patch that puts it back.
func revisionData(set *appsv1.StatefulSet) ([]byte, error) {
	b, err := json.Marshal(set.Spec.Template)
	if err != nil {
		return nil, err
	}
	var tmpl map[string]any
	if err := json.Unmarshal(b, &tmpl); err != nil {
		return nil, err
	}
	tmpl["$patch"] = "replace"
	return json.Marshal(map[string]any{"spec": map[string]any{"template": tmpl}})
}

// matchesRevision reports whether cr holds set's template.
func matchesRevision(set *appsv1.StatefulSet, cr *appsv1.ControllerRevision) bool {
	data, err := revisionData(set)
	if err != nil {
		return false
	}
	var want, got any
	if json.Unmarshal(data, &want) != nil || json.Unmarshal(cr.Data.Raw, &got) != nil {
		return false
	}
	return apiequality.Semantic.DeepEqual(want, got)
}

// applyRevision returns a copy of set whose template is cr's.
func applyRevision(set *appsv1.StatefulSet, cr *appsv1.ControllerRevision) (*appsv1.StatefulSet, error) {
	var patch struct {
		Spec struct {
			Template corev1.PodTemplateSpec `json:"template"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(cr.Data.Raw, &patch); err != nil {
		return nil, fmt.Errorf("revision %s: %w", cr.Name, err)
	}
	out := set.DeepCopy()
	out.Spec.Template = patch.Spec.Template
	return out, nil
}

// history is what a sync knows of set's revisions.
type history struct {
	all     []*appsv1.ControllerRevision
	current *appsv1.ControllerRevision // status.currentRevision's, or update when there is none
	update  *appsv1.ControllerRevision // the template of the spec
}

// hash is a revision's controller-revision-hash.
func hash(cr *appsv1.ControllerRevision) string {
	if h := cr.Labels[appsv1.StatefulSetRevisionLabel]; h != "" {
		return h
	}
	return cr.Name
}

// revisions returns set's history, creating the update revision or
// renumbering it as the newest.
func (c *Controller) revisions(ctx context.Context, set *appsv1.StatefulSet) (*history, error) {
	selector, err := metav1.LabelSelectorAsSelector(set.Spec.Selector)
	if err != nil {
		return nil, err
	}
	m := &controller.RefManager[*appsv1.ControllerRevision]{
		Owner: set, OwnerKind: controllerKind, Selector: selector, Client: c.crClient,
		CanAdopt: controller.RecheckOwner(func(ctx context.Context) (*appsv1.StatefulSet, error) {
			return c.setClient.Get(ctx, set.Namespace, set.Name)
		}, set.UID),
	}
	all, err := m.Claim(ctx, c.crLister.ByNamespace(set.Namespace).List(nil))
	if err != nil {
		return nil, fmt.Errorf("claim revisions: %w", err)
	}
	slices.SortFunc(all, func(a, b *appsv1.ControllerRevision) int { return cmp.Compare(a.Revision, b.Revision) })

	h := &history{}
	var newest int64
	for _, cr := range all {
		newest = max(newest, cr.Revision)
		if matchesRevision(set, cr) {
			h.update = cr // the highest-numbered of equal templates wins
		}
	}
	switch {
	case h.update == nil:
		if h.update, err = c.snapshot(ctx, set, newest+1); err != nil {
			return nil, err
		}
		all = append(all, h.update)
	case h.update.Revision < newest:
		cp := h.update.DeepCopy()
		cp.Revision = newest + 1
		updated, err := c.crClient.Update(ctx, cp)
		if err != nil {
			return nil, fmt.Errorf("renumber revision %s: %w", cp.Name, err)
		}
		c.log.Info(fmt.Sprintf("template of revision %s is back → it is revision %d", cp.Name, cp.Revision),
			slog.String("object", setKey(set)), slog.String("revision", cp.Name))
		all = slices.DeleteFunc(all, func(cr *appsv1.ControllerRevision) bool { return cr.Name == cp.Name })
		h.update = updated
		all = append(all, updated)
	}
	h.all = all
	h.current = h.update
	for _, cr := range all {
		if cr.Name == set.Status.CurrentRevision {
			h.current = cr
		}
	}
	return h, nil
}

// snapshot creates set's update revision with number revision. A revision
// of that name holding another template is a hash collision:
// status.collisionCount goes up by one, and the next sync hashes anew.
func (c *Controller) snapshot(ctx context.Context, set *appsv1.StatefulSet, revision int64) (*appsv1.ControllerRevision, error) {
	data, err := revisionData(set)
	if err != nil {
		return nil, err
	}
	h := computeHash(&set.Spec.Template, set.Status.CollisionCount)
	labels := maps.Clone(set.Spec.Template.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[appsv1.StatefulSetRevisionLabel] = h
	cr := &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Name: set.Name + "-" + h, Namespace: set.Namespace, Labels: labels,
			OwnerReferences: []metav1.OwnerReference{*controller.NewControllerRef(set, controllerKind)},
		},
		Data:     runtime.RawExtension{Raw: data},
		Revision: revision,
	}
	created, err := c.crClient.Create(ctx, cr)
	if err == nil {
		c.log.Info(fmt.Sprintf("new template → revision %d %s", revision, created.Name),
			slog.String("object", setKey(set)), slog.String("revision", created.Name))
		return created, nil
	}
	if !client.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create revision %s: %w", cr.Name, err)
	}
	existing, err := c.crClient.Get(ctx, set.Namespace, cr.Name)
	if err != nil {
		return nil, err
	}
	if matchesRevision(set, existing) && metav1.IsControlledBy(existing, set) {
		return existing, nil // made by an earlier sync the cache has not shown yet
	}
	fresh, err := c.setClient.Get(ctx, set.Namespace, set.Name)
	if err != nil {
		return nil, err
	}
	count := int32(0)
	if fresh.Status.CollisionCount != nil {
		count = *fresh.Status.CollisionCount
	}
	count++
	fresh.Status.CollisionCount = &count
	if _, err := c.setClient.UpdateStatus(ctx, fresh); err != nil {
		return nil, fmt.Errorf("bump collisionCount: %w", err)
	}
	return nil, fmt.Errorf("hash collision on revision %s; collisionCount is now %d", cr.Name, count)
}

// truncateHistory deletes the oldest revisions beyond
// spec.revisionHistoryLimit that neither the status nor a pod uses.
func (c *Controller) truncateHistory(ctx context.Context, set *appsv1.StatefulSet, h *history, pods []*corev1.Pod) error {
	live := map[string]bool{h.current.Name: true, h.update.Name: true}
	inUse := map[string]bool{}
	for _, pod := range pods {
		inUse[revisionOf(pod)] = true
	}
	var old []*appsv1.ControllerRevision
	for _, cr := range h.all {
		if !live[cr.Name] && !inUse[hash(cr)] {
			old = append(old, cr)
		}
	}
	limit := 10
	if set.Spec.RevisionHistoryLimit != nil {
		limit = int(*set.Spec.RevisionHistoryLimit)
	}
	for _, cr := range old[:max(len(old)-limit, 0)] { // h.all is oldest first
		if err := c.crClient.Delete(ctx, cr.Namespace, cr.Name, metav1.DeleteOptions{}); err != nil && !client.IsNotFound(err) {
			return fmt.Errorf("delete revision %s: %w", cr.Name, err)
		}
		c.log.Info(fmt.Sprintf("history beyond revisionHistoryLimit %d → delete revision %d %s", limit, cr.Revision, cr.Name),
			slog.String("object", setKey(set)), slog.String("revision", cr.Name))
	}
	return nil
}
