package daemonset

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
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/controllers/internal/controller"
)

// A DaemonSet's history is its ControllerRevisions, one per template it
// has had, as kube keeps it (pkg/controller/daemon/update.go):
//
//   - A revision is named "<ds>-<hash>", the hash of the template (and of
//     status.collisionCount), carries the template's labels plus
//     controller-revision-hash=<hash>, and is controlled by the DaemonSet.
//   - Its data is a strategic merge patch that puts the template back:
//     {"spec":{"template":{...,"$patch":"replace"}}}. kubectl rollout undo
//     sends exactly these bytes as a patch of the DaemonSet, and kubectl
//     rollout history shows them.
//   - The current revision has the highest number; a template that comes
//     back (an undo) makes its old revision current again, renumbered.
//   - Old revisions beyond spec.revisionHistoryLimit are deleted, oldest
//     first, except those whose pods still run.

// computeHash returns the controller-revision-hash of a template: the
// FNV-32a hash of its JSON, and of collisionCount when set, written in the
// alphabet Kubernetes uses for names.
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

// revisionData is kube's getPatch: ds's template as a strategic merge
// patch that replaces spec.template whole.
func revisionData(ds *appsv1.DaemonSet) ([]byte, error) {
	b, err := json.Marshal(ds.Spec.Template)
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

// matchesRevision reports whether cr holds ds's current template.
func matchesRevision(ds *appsv1.DaemonSet, cr *appsv1.ControllerRevision) bool {
	data, err := revisionData(ds)
	if err != nil {
		return false
	}
	var want, got any
	if json.Unmarshal(data, &want) != nil || json.Unmarshal(cr.Data.Raw, &got) != nil {
		return false
	}
	return apiequality.Semantic.DeepEqual(want, got)
}

// constructHistory returns ds's current revision, creating it or
// renumbering it as the newest, and its old revisions.
func (c *Controller) constructHistory(ctx context.Context, ds *appsv1.DaemonSet) (cur *appsv1.ControllerRevision, old []*appsv1.ControllerRevision, err error) {
	revisions, err := c.claimRevisions(ctx, ds)
	if err != nil {
		return nil, nil, err
	}
	var current []*appsv1.ControllerRevision
	for _, cr := range revisions {
		if _, ok := cr.Labels[appsv1.DefaultDaemonSetUniqueLabelKey]; !ok {
			// A revision made before revisions were labelled: its name
			// stands for its hash.
			cp := cr.DeepCopy()
			if cp.Labels == nil {
				cp.Labels = map[string]string{}
			}
			cp.Labels[appsv1.DefaultDaemonSetUniqueLabelKey] = cp.Name
			if cr, err = c.crClient.Update(ctx, cp); err != nil {
				return nil, nil, fmt.Errorf("label revision %s: %w", cp.Name, err)
			}
		}
		if matchesRevision(ds, cr) {
			current = append(current, cr)
		} else {
			old = append(old, cr)
		}
	}

	next := maxRevision(old) + 1
	if len(current) == 0 {
		cur, err = c.snapshot(ctx, ds, next)
		return cur, old, err
	}
	if cur, err = c.dedupCurrent(ctx, ds, current); err != nil {
		return nil, nil, err
	}
	if cur.Revision < next {
		cp := cur.DeepCopy()
		cp.Revision = next
		if cur, err = c.crClient.Update(ctx, cp); err != nil {
			return nil, nil, fmt.Errorf("renumber revision %s: %w", cp.Name, err)
		}
		c.log.Info(fmt.Sprintf("template of revision %s is back → it is revision %d", cur.Name, next),
			slog.String("object", dsKey(ds)), slog.String("revision", cur.Name), slog.Int64("number", next))
	}
	return cur, old, nil
}

// claimRevisions returns the revisions ds controls, adopting matching
// orphans and releasing those that stopped matching.
func (c *Controller) claimRevisions(ctx context.Context, ds *appsv1.DaemonSet) ([]*appsv1.ControllerRevision, error) {
	selector, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil {
		return nil, err
	}
	m := &controller.RefManager[*appsv1.ControllerRevision]{
		Owner: ds, OwnerKind: controllerKind, Selector: selector, Client: c.crClient,
		CanAdopt: controller.RecheckOwner(func(ctx context.Context) (*appsv1.DaemonSet, error) {
			return c.dsClient.Get(ctx, ds.Namespace, ds.Name)
		}, ds.UID),
	}
	revisions, err := m.Claim(ctx, c.crLister.ByNamespace(ds.Namespace).List(nil))
	if err != nil {
		return nil, fmt.Errorf("claim revisions: %w", err)
	}
	return revisions, nil
}

// snapshot creates ds's current revision with number revision. A
// revision of that name holding another template is a hash collision:
// status.collisionCount goes up by one, and the next sync hashes anew.
func (c *Controller) snapshot(ctx context.Context, ds *appsv1.DaemonSet, revision int64) (*appsv1.ControllerRevision, error) {
	data, err := revisionData(ds)
	if err != nil {
		return nil, err
	}
	hash := computeHash(&ds.Spec.Template, ds.Status.CollisionCount)
	labels := maps.Clone(ds.Spec.Template.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[appsv1.DefaultDaemonSetUniqueLabelKey] = hash
	cr := &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Name: ds.Name + "-" + hash, Namespace: ds.Namespace, Labels: labels,
			Annotations:     maps.Clone(ds.Annotations),
			OwnerReferences: []metav1.OwnerReference{*controller.NewControllerRef(ds, controllerKind)},
		},
		Data:     runtime.RawExtension{Raw: data},
		Revision: revision,
	}
	created, err := c.crClient.Create(ctx, cr)
	if err == nil {
		c.log.Info(fmt.Sprintf("new template → revision %d %s", revision, created.Name),
			slog.String("object", dsKey(ds)), slog.String("revision", created.Name), slog.Int64("number", revision))
		return created, nil
	}
	if !client.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create revision %s: %w", cr.Name, err)
	}
	existing, getErr := c.crClient.Get(ctx, ds.Namespace, cr.Name)
	if getErr != nil {
		return nil, getErr
	}
	if matchesRevision(ds, existing) {
		return existing, nil // made by an earlier sync
	}
	fresh, getErr := c.dsClient.Get(ctx, ds.Namespace, ds.Name)
	if getErr != nil {
		return nil, getErr
	}
	if !apiequality.Semantic.DeepEqual(fresh.Status.CollisionCount, ds.Status.CollisionCount) {
		return nil, fmt.Errorf("stale collisionCount of %s; retrying once the cache has the new one", dsKey(ds))
	}
	count := int32(0)
	if fresh.Status.CollisionCount != nil {
		count = *fresh.Status.CollisionCount
	}
	count++
	fresh.Status.CollisionCount = &count
	if _, err := c.dsClient.UpdateStatus(ctx, fresh); err != nil {
		return nil, fmt.Errorf("bump collisionCount: %w", err)
	}
	c.log.Info(fmt.Sprintf("revision name %s taken by another template → collisionCount %d", cr.Name, count),
		slog.String("object", dsKey(ds)), slog.Int("collisionCount", int(count)))
	return nil, fmt.Errorf("hash collision on revision %s", cr.Name)
}

// dedupCurrent keeps the highest-numbered of several revisions holding
// ds's current template, moves pods labelled with another's hash onto
// it, and deletes the others.
func (c *Controller) dedupCurrent(ctx context.Context, ds *appsv1.DaemonSet, current []*appsv1.ControllerRevision) (*appsv1.ControllerRevision, error) {
	if len(current) == 1 {
		return current[0], nil
	}
	keep := slices.MaxFunc(current, func(a, b *appsv1.ControllerRevision) int { return cmp.Compare(a.Revision, b.Revision) })
	hash := keep.Labels[appsv1.DefaultDaemonSetUniqueLabelKey]
	pods, err := c.claimPods(ctx, ds)
	if err != nil {
		return nil, err
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{appsv1.DefaultDaemonSetUniqueLabelKey: hash}}})
	for _, pod := range pods {
		if pod.Labels[appsv1.DefaultDaemonSetUniqueLabelKey] == hash {
			continue
		}
		if _, err := c.podClient.Patch(ctx, pod.Namespace, pod.Name, types.MergePatchType, patch); err != nil && !client.IsNotFound(err) {
			return nil, fmt.Errorf("relabel pod %s: %w", pod.Name, err)
		}
	}
	for _, cr := range current {
		if cr.Name == keep.Name {
			continue
		}
		if err := c.crClient.Delete(ctx, cr.Namespace, cr.Name, metav1.DeleteOptions{}); err != nil && !client.IsNotFound(err) {
			return nil, fmt.Errorf("delete duplicate revision %s: %w", cr.Name, err)
		}
	}
	return keep, nil
}

// cleanupHistory deletes old revisions beyond spec.revisionHistoryLimit,
// lowest number first, sparing those whose hash a pod still carries.
func (c *Controller) cleanupHistory(ctx context.Context, ds *appsv1.DaemonSet, pods []*corev1.Pod, old []*appsv1.ControllerRevision) error {
	limit := 10
	if ds.Spec.RevisionHistoryLimit != nil {
		limit = int(*ds.Spec.RevisionHistoryLimit)
	}
	excess := len(old) - limit
	if excess <= 0 {
		return nil
	}
	live := map[string]bool{}
	for _, pod := range pods {
		if h := pod.Labels[appsv1.DefaultDaemonSetUniqueLabelKey]; h != "" {
			live[h] = true
		}
	}
	old = slices.Clone(old)
	slices.SortFunc(old, func(a, b *appsv1.ControllerRevision) int { return cmp.Compare(a.Revision, b.Revision) })
	for _, cr := range old {
		if excess == 0 {
			break
		}
		if live[cr.Labels[appsv1.DefaultDaemonSetUniqueLabelKey]] {
			continue
		}
		if err := c.crClient.Delete(ctx, cr.Namespace, cr.Name, metav1.DeleteOptions{}); err != nil && !client.IsNotFound(err) {
			return fmt.Errorf("delete revision %s: %w", cr.Name, err)
		}
		c.log.Info(fmt.Sprintf("history beyond revisionHistoryLimit %d → delete revision %d %s", limit, cr.Revision, cr.Name),
			slog.String("object", dsKey(ds)), slog.String("revision", cr.Name))
		excess--
	}
	return nil
}

func maxRevision(revisions []*appsv1.ControllerRevision) int64 {
	var n int64
	for _, cr := range revisions {
		n = max(n, cr.Revision)
	}
	return n
}
