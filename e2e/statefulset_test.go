package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/internal/minitest"
)

// TestStatefulSet runs a 3-replica OrderedReady StatefulSet with a claim
// template on the built binary: a watch of its pods sees web-1 added only
// once web-0 is Ready, and web-2 once web-1 is; each pod runs with its
// claim data-web-<i> Bound to a volume the standard class provisioned for
// the node the scheduler chose for the pod. A pod deleted comes back with
// its name and its claim; scaled down to 1, the set deletes web-2, then
// web-1, and keeps their claims.
func TestStatefulSet(t *testing.T) {
	c := up(t, minitest.FreeAddr(t), t.TempDir(), "--fast", "--nodes", "3")
	rc := c.client(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sets, pods := client.For[*appsv1.StatefulSet](rc), client.For[*corev1.Pod](rc)
	claims, volumes := client.For[*corev1.PersistentVolumeClaim](rc), client.For[*corev1.PersistentVolume](rc)

	w, err := pods.Watch(ctx, "default", metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if _, err := sets.Create(ctx, webSet(3)); err != nil {
		t.Fatal(err)
	}

	ready := map[string]bool{}
	var added []string
	for len(ready) < 3 {
		ev, ok := <-w.Events()
		if !ok {
			t.Fatalf("watch ended: %v", w.Err())
		}
		p := ev.Object
		switch ev.Type {
		case watch.Added:
			added = append(added, p.Name)
			for j := range len(added) - 1 {
				if prev := fmt.Sprintf("web-%d", j); !ready[prev] {
					t.Fatalf("%s ADDED before %s was Ready (added so far %v)", p.Name, prev, added)
				}
			}
		case watch.Modified:
			if runningAndReady(p) {
				ready[p.Name] = true
			}
		}
	}
	w.Stop()
	if !slices.Equal(added, []string{"web-0", "web-1", "web-2"}) {
		t.Errorf("pods added %v, want web-0, web-1, web-2 in order", added)
	}

	for i := range 3 {
		pod, err := pods.Get(ctx, "default", fmt.Sprintf("web-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		claim, err := claims.Get(ctx, "default", fmt.Sprintf("data-web-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if claim.Status.Phase != corev1.ClaimBound || claim.Spec.VolumeName == "" {
			t.Errorf("claim %s is %s (volume %q), want Bound", claim.Name, claim.Status.Phase, claim.Spec.VolumeName)
			continue
		}
		pv, err := volumes.Get(ctx, "", claim.Spec.VolumeName)
		if err != nil {
			t.Fatal(err)
		}
		if !volumeOnNode(pv, pod.Spec.NodeName) {
			t.Errorf("volume %s of %s is not on %s, the node of %s: affinity %+v", pv.Name, claim.Name, pod.Spec.NodeName, pod.Name, pv.Spec.NodeAffinity)
		}
	}
	podComesBack(t, pods, claims, "web-1")
	scaleDownInReverse(t, sets, pods, claims)
}

// webSet is the StatefulSet of these tests: n OrderedReady replicas of
// app=web, each mounting its 1Gi claim data-web-<i> of the default class,
// every other field left to the API's defaults.
func webSet(n int32) *appsv1.StatefulSet {
	labels := map[string]string{"app": "web"}
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: appsv1.StatefulSetSpec{
			Replicas: &n, ServiceName: "web",
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "web", Image: "web:1",
					VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/var/lib/web"}},
				}}},
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
				},
			}},
		},
	}
}

// podComesBack deletes pod name and waits for the set to make it again: a
// new pod (another uid) with the same name, Running and Ready, mounting
// the same claim, which is the same object (same uid) still Bound to the
// same volume.
func podComesBack(t *testing.T, pods *client.Client[*corev1.Pod], claims *client.Client[*corev1.PersistentVolumeClaim], name string) {
	t.Helper()
	ctx := context.Background()
	old, err := pods.Get(ctx, "default", name)
	if err != nil {
		t.Fatal(err)
	}
	claimName := "data-" + name
	claim, err := claims.Get(ctx, "default", claimName)
	if err != nil {
		t.Fatal(err)
	}
	if err := pods.Delete(ctx, "default", name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var pod *corev1.Pod
	eventually(t, name+" made again, Running and Ready", func() (bool, string) {
		p, err := pods.Get(ctx, "default", name)
		if err != nil {
			return false, err.Error()
		}
		pod = p
		return p.UID != old.UID && p.DeletionTimestamp == nil && runningAndReady(p),
			fmt.Sprintf("uid %s (old %s), phase %s", p.UID, old.UID, p.Status.Phase)
	})
	if got := podClaims(pod); !slices.Equal(got, []string{claimName}) {
		t.Errorf("the new %s mounts claims %v, want [%s]", name, got, claimName)
	}
	again, err := claims.Get(ctx, "default", claimName)
	if err != nil {
		t.Fatal(err)
	}
	if again.UID != claim.UID || again.Status.Phase != corev1.ClaimBound || again.Spec.VolumeName != claim.Spec.VolumeName {
		t.Errorf("claim %s after its pod came back: uid %s, %s to %q; want uid %s, Bound to %q",
			claimName, again.UID, again.Status.Phase, again.Spec.VolumeName, claim.UID, claim.Spec.VolumeName)
	}
}

// scaleDownInReverse scales the 3 replicas of web to 1 and watches the
// pods go: web-2 is deleted, and gone, before web-1 is deleted, as
// OrderedReady promises; the claims of both stay, Bound to the same
// volumes, as the default retention policy (Retain when scaled) says.
func scaleDownInReverse(t *testing.T, sets *client.Client[*appsv1.StatefulSet], pods *client.Client[*corev1.Pod], claims *client.Client[*corev1.PersistentVolumeClaim]) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	set, err := sets.Get(ctx, "default", "web")
	if err != nil {
		t.Fatal(err)
	}
	if rp := set.Spec.PersistentVolumeClaimRetentionPolicy; rp == nil ||
		rp.WhenScaled != appsv1.RetainPersistentVolumeClaimRetentionPolicyType || rp.WhenDeleted != appsv1.RetainPersistentVolumeClaimRetentionPolicyType {
		t.Errorf("persistentVolumeClaimRetentionPolicy %+v, want Retain when deleted and when scaled", rp)
	}
	before := map[string]*corev1.PersistentVolumeClaim{}
	for _, name := range []string{"data-web-1", "data-web-2"} {
		if before[name], err = claims.Get(ctx, "default", name); err != nil {
			t.Fatal(err)
		}
	}
	list, err := pods.List(ctx, "default", metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		t.Fatal(err)
	}
	w, err := pods.Watch(ctx, "default", metav1.ListOptions{LabelSelector: "app=web", ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	scale, err := sets.GetScale(ctx, "default", "web")
	if err != nil {
		t.Fatal(err)
	}
	scale.Spec.Replicas = 1
	if _, err := sets.UpdateScale(ctx, scale); err != nil {
		t.Fatal(err)
	}

	// What the watch shows, in order: each pod's first sighting with a
	// deletionTimestamp, and its removal.
	var story []string
	terminating := map[string]bool{}
	for !slices.Contains(story, "web-1 gone") {
		ev, ok := <-w.Events()
		if !ok {
			t.Fatalf("watch ended: %v (so far %v)", w.Err(), story)
		}
		p := ev.Object
		switch {
		case ev.Type == watch.Deleted:
			story = append(story, p.Name+" gone")
		case ev.Type == watch.Modified && p.DeletionTimestamp != nil && !terminating[p.Name]:
			terminating[p.Name] = true
			story = append(story, p.Name+" terminating")
		}
	}
	if want := []string{"web-2 terminating", "web-2 gone", "web-1 terminating", "web-1 gone"}; !slices.Equal(story, want) {
		t.Errorf("scale down from 3 to 1, seen from a watch: %v, want %v", story, want)
	}
	eventually(t, "status.replicas 1", func() (bool, string) {
		s, err := sets.Get(ctx, "default", "web")
		if err != nil {
			return false, err.Error()
		}
		return s.Status.Replicas == 1 && s.Status.ReadyReplicas == 1, fmt.Sprintf("status %+v", s.Status)
	})
	if _, err := pods.Get(ctx, "default", "web-0"); err != nil {
		t.Errorf("web-0 after the scale down: %v", err)
	}
	for name, claim := range before {
		after, err := claims.Get(ctx, "default", name)
		if err != nil {
			t.Errorf("claim %s after its pod was scaled away: %v; want it kept", name, err)
			continue
		}
		if after.UID != claim.UID || after.DeletionTimestamp != nil || after.Status.Phase != corev1.ClaimBound || after.Spec.VolumeName != claim.Spec.VolumeName {
			t.Errorf("claim %s after its pod was scaled away: uid %s, %s to %q, deleting %v; want it as it was, Bound to %q",
				name, after.UID, after.Status.Phase, after.Spec.VolumeName, after.DeletionTimestamp != nil, claim.Spec.VolumeName)
		}
	}
}

func runningAndReady(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodRunning && slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
		return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
	})
}

// podClaims lists the claims pod mounts.
func podClaims(pod *corev1.Pod) []string {
	var out []string
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			out = append(out, v.PersistentVolumeClaim.ClaimName)
		}
	}
	return out
}

// volumeOnNode reports whether pv's node affinity names node by hostname
// or name.
func volumeOnNode(pv *corev1.PersistentVolume, node string) bool {
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return false
	}
	for _, term := range pv.Spec.NodeAffinity.Required.NodeSelectorTerms {
		for _, req := range slices.Concat(term.MatchExpressions, term.MatchFields) {
			if slices.Contains(req.Values, node) {
				return true
			}
		}
	}
	return false
}

// TestStatefulSetPartitionedUpdate rolls a template change out to a
// 3-replica set with updateStrategy.rollingUpdate.partition 2: only web-2
// is made again from the new revision, web-0 and web-1 stay as they were,
// and the status says so as kube's does (currentRevision the old
// revision with 2 current replicas, updateRevision the new one with 1
// updated replica). Lowering the partition to 0 finishes the rollout,
// web-1 before web-0, and the new revision becomes the current one.
func TestStatefulSetPartitionedUpdate(t *testing.T) {
	c := up(t, minitest.FreeAddr(t), t.TempDir(), "--fast", "--nodes", "3")
	rc := c.client(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sets, pods := client.For[*appsv1.StatefulSet](rc), client.For[*corev1.Pod](rc)

	set, partition := webSet(3), int32(2)
	set.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{
		Type:          appsv1.RollingUpdateStatefulSetStrategyType,
		RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: &partition},
	}
	if _, err := sets.Create(ctx, set); err != nil {
		t.Fatal(err)
	}
	first := waitSetStatus(t, sets, "3 replicas Ready on one revision", func(st appsv1.StatefulSetStatus) bool {
		return st.ReadyReplicas == 3 && st.UpdatedReplicas == 3 && st.CurrentReplicas == 3 && st.CurrentRevision == st.UpdateRevision
	}).Status.CurrentRevision
	before := map[string]*corev1.Pod{}
	for i := range 3 {
		name := fmt.Sprintf("web-%d", i)
		p, err := pods.Get(ctx, "default", name)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.Labels[appsv1.ControllerRevisionHashLabelKey]; got != first {
			t.Errorf("%s %s is %q, want the current revision %q", name, appsv1.ControllerRevisionHashLabelKey, got, first)
		}
		before[name] = p
	}

	if _, err := sets.Patch(ctx, "default", "web", types.StrategicMergePatchType,
		[]byte(`{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"web:2"}]}}}}`)); err != nil {
		t.Fatal(err)
	}
	set = waitSetStatus(t, sets, "web-2 updated, web-0 and web-1 current", func(st appsv1.StatefulSetStatus) bool {
		return st.ReadyReplicas == 3 && st.UpdatedReplicas == 1 && st.CurrentReplicas == 2 && st.UpdateRevision != first
	})
	if st := set.Status; st.CurrentRevision != first || st.Replicas != 3 || st.ObservedGeneration != set.Generation {
		t.Errorf("status during the partitioned rollout: %+v; want currentRevision %s, replicas 3, observedGeneration %d", st, first, set.Generation)
	}
	second := set.Status.UpdateRevision
	for name, old := range before {
		p, err := pods.Get(ctx, "default", name)
		if err != nil {
			t.Fatal(err)
		}
		want, same := first, true
		if name == "web-2" {
			want, same = second, false
		}
		if got := p.Labels[appsv1.ControllerRevisionHashLabelKey]; got != want || (p.UID == old.UID) != same {
			t.Errorf("%s after the template change: revision %q, made again %v; want revision %q, made again %v",
				name, got, p.UID != old.UID, want, !same)
		}
		if img := p.Spec.Containers[0].Image; (img == "web:2") != (name == "web-2") {
			t.Errorf("%s runs %s", name, img)
		}
	}

	list, err := pods.List(ctx, "default", metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		t.Fatal(err)
	}
	w, err := pods.Watch(ctx, "default", metav1.ListOptions{LabelSelector: "app=web", ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if _, err := sets.Patch(ctx, "default", "web", types.MergePatchType,
		[]byte(`{"spec":{"updateStrategy":{"rollingUpdate":{"partition":0}}}}`)); err != nil {
		t.Fatal(err)
	}
	var replaced []string
	for len(replaced) < 2 {
		ev, ok := <-w.Events()
		if !ok {
			t.Fatalf("watch ended: %v (replaced so far %v)", w.Err(), replaced)
		}
		if ev.Type == watch.Deleted {
			replaced = append(replaced, ev.Object.Name)
		}
	}
	w.Stop()
	if !slices.Equal(replaced, []string{"web-1", "web-0"}) {
		t.Errorf("pods replaced once the partition is 0: %v, want web-1, then web-0", replaced)
	}
	set = waitSetStatus(t, sets, "the rollout finished", func(st appsv1.StatefulSetStatus) bool {
		return st.ReadyReplicas == 3 && st.UpdatedReplicas == 3 && st.CurrentRevision == st.UpdateRevision
	})
	if st := set.Status; st.CurrentRevision != second || st.CurrentReplicas != 3 {
		t.Errorf("status after the rollout: %+v; want currentRevision %s with 3 current replicas", st, second)
	}
	for i := range 3 {
		p, err := pods.Get(ctx, "default", fmt.Sprintf("web-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if got := p.Labels[appsv1.ControllerRevisionHashLabelKey]; got != second || p.Spec.Containers[0].Image != "web:2" {
			t.Errorf("%s after the rollout: revision %q, image %s; want %q, web:2", p.Name, got, p.Spec.Containers[0].Image, second)
		}
	}
}

// waitSetStatus waits for web's status to satisfy ok and returns the set.
func waitSetStatus(t *testing.T, sets *client.Client[*appsv1.StatefulSet], what string, ok func(appsv1.StatefulSetStatus) bool) *appsv1.StatefulSet {
	t.Helper()
	var set *appsv1.StatefulSet
	eventually(t, what, func() (bool, string) {
		s, err := sets.Get(context.Background(), "default", "web")
		if err != nil {
			return false, err.Error()
		}
		set = s
		return s.Status.ObservedGeneration == s.Generation && ok(s.Status), fmt.Sprintf("generation %d, status %+v", s.Generation, s.Status)
	})
	return set
}
