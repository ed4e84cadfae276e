package deployment

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
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/controllers/internal/controller"
)

// The annotations the controller keeps on Deployments and ReplicaSets,
// Kubernetes' own, so kubectl rollout history and status read them.
const (
	// RevisionAnnotation numbers a ReplicaSet's template among its
	// Deployment's; the Deployment carries its current one.
	RevisionAnnotation = "deployment.kubernetes.io/revision"
	// RevisionHistoryAnnotation lists, on a ReplicaSet rolled back to, the
	// revisions it had before.
	RevisionHistoryAnnotation = "deployment.kubernetes.io/revision-history"
	// DesiredReplicasAnnotation is the Deployment's spec.replicas when the
	// ReplicaSet was last scaled; a difference means the Deployment was
	// resized.
	DesiredReplicasAnnotation = "deployment.kubernetes.io/desired-replicas"
	// MaxReplicasAnnotation is spec.replicas + maxSurge then: the base of
	// proportional scaling.
	MaxReplicasAnnotation = "deployment.kubernetes.io/max-replicas"
)

// maxRevisionHistoryChars bounds RevisionHistoryAnnotation.
const maxRevisionHistoryChars = 2000

// annotationsNotCopied are the Deployment annotations its ReplicaSets do
// not inherit.
var annotationsNotCopied = map[string]bool{
	corev1.LastAppliedConfigAnnotation: true,
	RevisionAnnotation:                 true,
	RevisionHistoryAnnotation:          true,
	DesiredReplicasAnnotation:          true,
	MaxReplicasAnnotation:              true,
}

// computeHash returns the pod-template-hash of a template: the FNV-32a hash
// of its JSON (and of collisionCount, when set, so that a collision is
// resolved by counting up), written in the alphabet Kubernetes uses for
// names ("bcdfghjklmnpqrstvwxz2456789"), which has no vowels and so spells
// no words.
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

// equalIgnoreHash reports whether two templates are the same but for their
// pod-template-hash label.
func equalIgnoreHash(a, b *corev1.PodTemplateSpec) bool {
	a, b = a.DeepCopy(), b.DeepCopy()
	delete(a.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	delete(b.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	return apiequality.Semantic.DeepEqual(a, b)
}

// findNewReplicaSet returns the ReplicaSet of d's current template, the
// oldest if there are several; nil if there is none yet.
func findNewReplicaSet(d *appsv1.Deployment, rsList []*appsv1.ReplicaSet) *appsv1.ReplicaSet {
	sorted := slices.Clone(rsList)
	slices.SortFunc(sorted, byCreation)
	for _, rs := range sorted {
		if equalIgnoreHash(&rs.Spec.Template, &d.Spec.Template) {
			return rs
		}
	}
	return nil
}

// byCreation orders ReplicaSets oldest first, then by name.
func byCreation(a, b *appsv1.ReplicaSet) int {
	if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
		return c
	}
	return cmp.Compare(a.Name, b.Name)
}

// getAllReplicaSetsAndSyncRevision splits rsList into the new ReplicaSet
// and the old ones, creating the new one when create is set and it does
// not exist, and brings revisions up to date (the new ReplicaSet's and the
// Deployment's).
func (c *Controller) getAllReplicaSetsAndSyncRevision(ctx context.Context, d *appsv1.Deployment, rsList []*appsv1.ReplicaSet, create bool) (*appsv1.ReplicaSet, []*appsv1.ReplicaSet, error) {
	existing := findNewReplicaSet(d, rsList)
	var oldRSs []*appsv1.ReplicaSet
	for _, rs := range rsList {
		if existing == nil || rs.UID != existing.UID {
			oldRSs = append(oldRSs, rs)
		}
	}
	newRS, err := c.getNewReplicaSet(ctx, d, existing, oldRSs, create)
	if err != nil {
		return nil, nil, err
	}
	return newRS, oldRSs, nil
}

// getNewReplicaSet brings the existing new ReplicaSet's annotations and
// minReadySeconds up to date, or creates it when create is set.
func (c *Controller) getNewReplicaSet(ctx context.Context, d *appsv1.Deployment, existing *appsv1.ReplicaSet, oldRSs []*appsv1.ReplicaSet, create bool) (*appsv1.ReplicaSet, error) {
	newRevision := strconv.FormatInt(maxRevision(oldRSs)+1, 10)
	switch {
	case existing != nil:
		return c.syncNewReplicaSet(ctx, d, existing, newRevision)
	case create:
		return c.createNewReplicaSet(ctx, d, oldRSs, newRevision)
	}
	return nil, nil
}

// createNewReplicaSet creates the ReplicaSet of d's template, as large as
// the strategy allows now, and records its revision and the Progressing
// condition NewReplicaSetCreated on d.
func (c *Controller) createNewReplicaSet(ctx context.Context, d *appsv1.Deployment, oldRSs []*appsv1.ReplicaSet, newRevision string) (*appsv1.ReplicaSet, error) {
	newRS := newReplicaSetFor(d, computeHash(&d.Spec.Template, d.Status.CollisionCount))
	replicas, err := newRSNewReplicas(d, append(slices.Clone(oldRSs), newRS), newRS)
	if err != nil {
		return nil, err
	}
	*newRS.Spec.Replicas = replicas
	setNewReplicaSetAnnotations(d, newRS, newRevision, false)

	created, err := c.rsClient.Create(ctx, newRS)
	alreadyExisted := client.IsAlreadyExists(err)
	switch {
	case alreadyExisted:
		if created, err = c.resolveNameConflict(ctx, d, newRS, err); err != nil {
			return nil, err
		}
	case err != nil:
		msg := fmt.Sprintf("Failed to create new replica set %q: %v", newRS.Name, err)
		if hasProgressDeadline(d) {
			setCondition(&d.Status, c.newCondition(appsv1.DeploymentProgressing, corev1.ConditionFalse, FailedRSCreateReason, msg))
			_ = c.updateStatus(ctx, d) // the create's failure is the error to report
		}
		c.recorder.Eventf(d, corev1.EventTypeWarning, FailedRSCreateReason, "%s", msg)
		return nil, fmt.Errorf("create replica set %s: %w", newRS.Name, err)
	default:
		c.log.Info(fmt.Sprintf("new template → create rs %s (revision %s), scaled to %d", created.Name, newRevision, replicas),
			slog.String("object", d.Namespace+"/"+d.Name), slog.String("replicaSet", created.Name),
			slog.String("revision", newRevision), slog.Int("to", int(replicas)))
		if replicas > 0 {
			c.recorder.Eventf(d, corev1.EventTypeNormal, "ScalingReplicaSet",
				"Scaled up replica set %s from 0 to %d", created.Name, replicas)
		}
	}

	if d.Annotations[RevisionAnnotation] != newRevision {
		d.Annotations = withLabel(d.Annotations, RevisionAnnotation, newRevision)
		if err := c.update(ctx, d); err != nil {
			return nil, err
		}
	}
	if !alreadyExisted && hasProgressDeadline(d) {
		msg := fmt.Sprintf("Created new replica set %q", created.Name)
		setCondition(&d.Status, c.newCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, NewReplicaSetReason, msg))
		if err := c.updateStatus(ctx, d); err != nil {
			return nil, err
		}
	}
	return created, nil
}

// newReplicaSetFor returns the ReplicaSet of d's template (size 0), named
// "<deployment>-<hash>": its labels, selector and template labels carry
// pod-template-hash, so that it selects only its own pods.
func newReplicaSetFor(d *appsv1.Deployment, hash string) *appsv1.ReplicaSet {
	tmpl := *d.Spec.Template.DeepCopy()
	tmpl.Labels = withLabel(tmpl.Labels, appsv1.DefaultDeploymentUniqueLabelKey, hash)
	selector := d.Spec.Selector.DeepCopy()
	selector.MatchLabels = withLabel(selector.MatchLabels, appsv1.DefaultDeploymentUniqueLabelKey, hash)
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			Name:            d.Name + "-" + hash, // deterministic: a retry finds it
			Namespace:       d.Namespace,
			OwnerReferences: []metav1.OwnerReference{*controller.NewControllerRef(d, controllerKind)},
			Labels:          maps.Clone(tmpl.Labels),
		},
		Spec: appsv1.ReplicaSetSpec{
			Replicas:        new(int32),
			MinReadySeconds: d.Spec.MinReadySeconds,
			Selector:        selector,
			Template:        tmpl,
		},
	}
}

// resolveNameConflict handles a create of newRS that found the name taken
// (createErr): it is either our own ReplicaSet, which the cache has not
// shown us yet, and is returned; or another template's, a hash collision,
// which is counted in d's status.collisionCount, so that the next sync
// hashes differently, and returned as an error.
func (c *Controller) resolveNameConflict(ctx context.Context, d *appsv1.Deployment, newRS *appsv1.ReplicaSet, createErr error) (*appsv1.ReplicaSet, error) {
	cur, err := c.rsClient.Get(ctx, newRS.Namespace, newRS.Name)
	if err != nil {
		return nil, err
	}
	if ref := metav1.GetControllerOfNoCopy(cur); ref != nil && ref.UID == d.UID && equalIgnoreHash(&d.Spec.Template, &cur.Spec.Template) {
		return cur, nil
	}
	if d.Status.CollisionCount == nil {
		d.Status.CollisionCount = new(int32)
	}
	*d.Status.CollisionCount++
	c.log.Info(fmt.Sprintf("replica set %s exists with another template → collisionCount %d", newRS.Name, *d.Status.CollisionCount),
		slog.String("object", d.Namespace+"/"+d.Name), slog.String("replicaSet", newRS.Name),
		slog.Int("collisionCount", int(*d.Status.CollisionCount)))
	if err := c.updateStatus(ctx, d); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("create replica set %s: hash collision: %w", newRS.Name, createErr)
}

// syncNewReplicaSet brings an existing new ReplicaSet's annotations
// (revision, copied Deployment annotations) and minReadySeconds up to
// date, and the Deployment's revision to the ReplicaSet's.
func (c *Controller) syncNewReplicaSet(ctx context.Context, d *appsv1.Deployment, existing *appsv1.ReplicaSet, newRevision string) (*appsv1.ReplicaSet, error) {
	rs := existing.DeepCopy()
	changed := setNewReplicaSetAnnotations(d, rs, newRevision, true)
	if changed || rs.Spec.MinReadySeconds != d.Spec.MinReadySeconds {
		rs.Spec.MinReadySeconds = d.Spec.MinReadySeconds
		updated, err := c.rsClient.Update(ctx, rs)
		if err != nil {
			return nil, fmt.Errorf("update replica set %s: %w", rs.Name, err)
		}
		return updated, nil
	}

	// The revision the ReplicaSet carries is the one the Deployment shows.
	if rev := rs.Annotations[RevisionAnnotation]; d.Annotations[RevisionAnnotation] != rev {
		d.Annotations = withLabel(d.Annotations, RevisionAnnotation, rev)
		if err := c.update(ctx, d); err != nil {
			return nil, err
		}
	}
	// A Deployment that never recorded progress starts counting from the
	// moment its new ReplicaSet is first noticed.
	if hasProgressDeadline(d) && getCondition(d.Status, appsv1.DeploymentProgressing) == nil {
		msg := fmt.Sprintf("Found new replica set %q", rs.Name)
		setCondition(&d.Status, c.newCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, FoundNewRSReason, msg))
		if err := c.updateStatus(ctx, d); err != nil {
			return nil, err
		}
	}
	return rs, nil
}

// setNewReplicaSetAnnotations copies d's annotations onto rs, raises rs's
// revision to newRevision when it is lower (keeping the revisions it had
// in RevisionHistoryAnnotation: a rollback to an old template), and, for a
// ReplicaSet about to be created, sets the replicas annotations. It reports
// whether rs changed.
func setNewReplicaSetAnnotations(d *appsv1.Deployment, rs *appsv1.ReplicaSet, newRevision string, exists bool) bool {
	changed := false
	for k, v := range d.Annotations {
		if annotationsNotCopied[k] || rs.Annotations[k] == v {
			continue
		}
		rs.Annotations = withLabel(rs.Annotations, k, v)
		changed = true
	}
	oldRevision, had := rs.Annotations[RevisionAnnotation]
	oldNum, err := strconv.ParseInt(oldRevision, 10, 64)
	if err != nil && oldRevision != "" {
		return changed // not a number: someone else's; leave it
	}
	newNum, _ := strconv.ParseInt(newRevision, 10, 64)
	if oldNum < newNum {
		rs.Annotations = withLabel(rs.Annotations, RevisionAnnotation, newRevision)
		changed = true
		if had {
			rs.Annotations[RevisionHistoryAnnotation] = appendRevisionHistory(rs.Annotations[RevisionHistoryAnnotation], oldRevision)
		}
	}
	if !exists && setReplicasAnnotations(rs, replicasOf(d), clampReplicas(maxTotalPods(d))) {
		changed = true
	}
	return changed
}

// appendRevisionHistory adds revision to a comma-separated history,
// dropping the oldest entries past maxRevisionHistoryChars.
func appendRevisionHistory(history, revision string) string {
	var revs []string
	if history != "" {
		revs = strings.Split(history, ",")
	}
	revs = append(revs, revision)
	for len(revs) > 1 && len(strings.Join(revs, ",")) > maxRevisionHistoryChars {
		revs = revs[1:]
	}
	return strings.Join(revs, ",")
}

// revisionOf returns rs's revision, 0 when it has none.
func revisionOf(rs *appsv1.ReplicaSet) int64 {
	n, _ := strconv.ParseInt(rs.Annotations[RevisionAnnotation], 10, 64)
	return n
}

func maxRevision(rss []*appsv1.ReplicaSet) int64 {
	var most int64
	for _, rs := range rss {
		most = max(most, revisionOf(rs))
	}
	return most
}

// cleanupDeployment deletes the old ReplicaSets beyond
// revisionHistoryLimit, lowest revision first, that have nothing left: no
// replicas wanted or running, their status current, not being deleted.
func (c *Controller) cleanupDeployment(ctx context.Context, oldRSs []*appsv1.ReplicaSet, d *appsv1.Deployment) error {
	if d.Spec.RevisionHistoryLimit == nil {
		return nil
	}
	var cleanable []*appsv1.ReplicaSet
	for _, rs := range oldRSs {
		if rs != nil && rs.DeletionTimestamp == nil {
			cleanable = append(cleanable, rs)
		}
	}
	excess := len(cleanable) - int(*d.Spec.RevisionHistoryLimit)
	if excess <= 0 {
		return nil
	}
	slices.SortFunc(cleanable, func(a, b *appsv1.ReplicaSet) int {
		if c := cmp.Compare(revisionOf(a), revisionOf(b)); c != 0 {
			return c
		}
		return byCreation(a, b)
	})
	key := d.Namespace + "/" + d.Name
	for _, rs := range cleanable[:excess] {
		if rs.Status.Replicas != 0 || specReplicas(rs) != 0 || rs.Generation > rs.Status.ObservedGeneration {
			continue // still has, or may still have, pods
		}
		c.log.Info(fmt.Sprintf("%d old replica sets, history limit %d → delete rs %s (revision %d)",
			len(cleanable), *d.Spec.RevisionHistoryLimit, rs.Name, revisionOf(rs)),
			slog.String("object", key), slog.Int("old", len(cleanable)), slog.Int("historyLimit", int(*d.Spec.RevisionHistoryLimit)),
			slog.String("replicaSet", rs.Name), slog.Int64("revision", revisionOf(rs)))
		err := c.rsClient.Delete(ctx, rs.Namespace, rs.Name, metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{UID: &rs.UID, ResourceVersion: &rs.ResourceVersion},
		})
		if err != nil && !client.IsNotFound(err) {
			return fmt.Errorf("delete old replica set %s: %w", rs.Name, err)
		}
	}
	return nil
}

// withLabel returns m (a label or annotation map) with key set to value,
// allocating m when nil. It may modify m: pass copies of cached maps.
func withLabel(m map[string]string, key, value string) map[string]string {
	if m == nil {
		m = map[string]string{}
	}
	m[key] = value
	return m
}
