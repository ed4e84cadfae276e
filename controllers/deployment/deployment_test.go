package deployment

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/controllers/internal/controllertest"
)

func TestCreatesOneReplicaSetNamedByTheTemplateHash(t *testing.T) {
	c := runControllers(t)
	d := c.createDeployment(t, newDeployment("web", 3, "nginx:1.27"))
	hash := computeHash(&d.Spec.Template, nil) // the template as stored, defaults and all

	var rs *appsv1.ReplicaSet
	controllertest.Eventually(t, "the replica set", func() (bool, string) {
		rss := c.replicaSetsOf(t, d)
		rs = rss["web-"+hash]
		return len(rss) == 1 && rs != nil, fmt.Sprintf("replica sets %v, want web-%s", slices.Collect(maps.Keys(rss)), hash)
	})
	if len(hash) < 5 || strings.Trim(hash, "bcdfghjklmnpqrstvwxz2456789") != "" {
		t.Errorf("hash %q is not in the safe alphabet", hash)
	}
	if rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey] != hash ||
		rs.Spec.Template.Labels[appsv1.DefaultDeploymentUniqueLabelKey] != hash ||
		rs.Spec.Selector.MatchLabels[appsv1.DefaultDeploymentUniqueLabelKey] != hash ||
		rs.Spec.Selector.MatchLabels["app"] != "web" {
		t.Errorf("pod-template-hash missing: labels %v, template labels %v, selector %v",
			rs.Labels, rs.Spec.Template.Labels, rs.Spec.Selector.MatchLabels)
	}
	if ref := metav1.GetControllerOf(rs); ref == nil || ref.Kind != "Deployment" || ref.Name != "web" ||
		ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
		t.Errorf("owner references %+v", rs.OwnerReferences)
	}
	// 25% of 3 rounds up to a surge of 1.
	if a := rs.Annotations; a[RevisionAnnotation] != "1" || a[DesiredReplicasAnnotation] != "3" || a[MaxReplicasAnnotation] != "4" {
		t.Errorf("annotations %v, want revision 1, desired 3, max 4", a)
	}
	controllertest.Eventually(t, "3 pods with the hash", func() (bool, string) {
		pods := c.podsOf(t, "app=web,pod-template-hash="+hash)
		return len(pods) == 3, fmt.Sprintf("%d pods", len(pods))
	})
	controllertest.Eventually(t, "the deployment's revision and status", func() (bool, string) {
		d := c.getDeployment(t, "web")
		return d.Annotations[RevisionAnnotation] == "1" && d.Status.Replicas == 3 && d.Status.UpdatedReplicas == 3 &&
				d.Status.ObservedGeneration == d.Generation,
			fmt.Sprintf("annotations %v, status %+v", d.Annotations, d.Status)
	})
	if n := countEvents(c.recorder, "Normal ScalingReplicaSet Scaled up replica set web-"+hash+" from 0 to 3"); n != 1 {
		t.Errorf("events %q, want one ScalingReplicaSet from 0 to 3", c.recorder.Events())
	}
}

func TestScalesThreeToTenToTwo(t *testing.T) {
	c := runControllers(t)
	d := c.createDeployment(t, newDeployment("web", 3, "nginx:1.27"))
	name := "web-" + computeHash(&d.Spec.Template, nil)

	for _, step := range []struct{ from, to int32 }{{0, 3}, {3, 10}, {10, 2}} {
		if step.from != 0 {
			c.updateDeployment(t, "web", func(d *appsv1.Deployment) { d.Spec.Replicas = &step.to })
		}
		controllertest.Eventually(t, fmt.Sprintf("%d pods", step.to), func() (bool, string) {
			rs := c.replicaSetsOf(t, d)[name]
			pods := c.podsOf(t, "app=web")
			return rs != nil && *rs.Spec.Replicas == step.to && len(pods) == int(step.to) &&
					rs.Annotations[DesiredReplicasAnnotation] == fmt.Sprint(step.to),
				fmt.Sprintf("%d pods", len(pods))
		})
	}
	events := c.recorder.Events()
	for _, want := range []string{
		"Normal ScalingReplicaSet Scaled up replica set " + name + " from 3 to 10",
		"Normal ScalingReplicaSet Scaled down replica set " + name + " from 10 to 2",
	} {
		if !slices.Contains(events, want) {
			t.Errorf("no event %q in %q", want, events)
		}
	}
	if rss := c.replicaSetsOf(t, d); len(rss) != 1 {
		t.Errorf("%d replica sets, want 1: scaling is not a rollout", len(rss))
	}
}

// TestRollingUpdateKeepsWithinSurgeAndUnavailability rolls image A to B
// with maxSurge 1, maxUnavailable 0, playing the kubelet, and checks at
// every moment it looks that at least 3 pods are ready and at most 4 exist.
func TestRollingUpdateKeepsWithinSurgeAndUnavailability(t *testing.T) {
	c := runControllers(t)
	const replicas, surge, unavailable = 3, 1, 0
	d := c.createDeployment(t, rolling(newDeployment("web", replicas, "nginx:A"), surge, unavailable))
	controllertest.Eventually(t, "the first rollout", func() (bool, string) {
		c.markAllReady(t, "app=web")
		d := c.getDeployment(t, "web")
		return d.Status.AvailableReplicas == replicas && d.Status.UpdatedReplicas == replicas,
			fmt.Sprintf("status %+v", d.Status)
	})
	oldHash := computeHash(&d.Spec.Template, nil)

	c.updateDeployment(t, "web", setImage("nginx:B"))
	observations := 0
	controllertest.Eventually(t, "the rollout to B", func() (bool, string) {
		pods := c.podsOf(t, "app=web")
		ready, old := 0, 0
		for _, p := range pods {
			if api.PodIsReady(p) {
				ready++
			}
			if p.Labels[appsv1.DefaultDeploymentUniqueLabelKey] == oldHash {
				old++
			}
		}
		observations++
		if ready < replicas-unavailable {
			t.Fatalf("%d pods ready, fewer than replicas - maxUnavailable = %d: %s", ready, replicas-unavailable, describe(pods))
		}
		if len(pods) > replicas+surge {
			t.Fatalf("%d pods, more than replicas + maxSurge = %d: %s", len(pods), replicas+surge, describe(pods))
		}
		// Play the kubelet: the new pods start and become ready.
		c.markAllReady(t, "app=web")

		d := c.getDeployment(t, "web")
		done := old == 0 && len(pods) == replicas && ready == replicas &&
			d.Status.UpdatedReplicas == replicas && d.Status.AvailableReplicas == replicas &&
			d.Status.ObservedGeneration == d.Generation
		return done, fmt.Sprintf("%s; status %+v", describe(pods), d.Status)
	})
	t.Logf("%d observations", observations)

	d = c.getDeployment(t, "web")
	newHash := computeHash(&d.Spec.Template, nil)
	rss := c.replicaSetsOf(t, d)
	if len(rss) != 2 {
		t.Fatalf("%d replica sets, want the old and the new", len(rss))
	}
	for name, rs := range rss {
		want := int32(0)
		if name == "web-"+newHash {
			want = replicas
		}
		if *rs.Spec.Replicas != want {
			t.Errorf("replica set %s wants %d replicas, want %d", name, *rs.Spec.Replicas, want)
		}
	}
	if d.Annotations[RevisionAnnotation] != "2" || rss["web-"+newHash].Annotations[RevisionAnnotation] != "2" {
		t.Errorf("revision of deployment %q and new rs %q, want 2", d.Annotations[RevisionAnnotation],
			rss["web-"+newHash].Annotations[RevisionAnnotation])
	}
	controllertest.Eventually(t, "Progressing NewReplicaSetAvailable", func() (bool, string) {
		d := c.getDeployment(t, "web")
		p := condition(d, appsv1.DeploymentProgressing)
		return p != nil && p.Reason == NewRSAvailableReason && p.Status == corev1.ConditionTrue, fmt.Sprintf("%+v", p)
	})
}

func TestRecreateStopsEveryOldPodBeforeStartingNewOnes(t *testing.T) {
	c := runControllers(t)
	in := newDeployment("web", 2, "nginx:A")
	in.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
	d := c.createDeployment(t, in)
	c.runKubelet(t, "app=web")
	c.waitForRollout(t, "web")
	oldHash := computeHash(&d.Spec.Template, nil)

	c.updateDeployment(t, "web", setImage("nginx:B"))
	sawNone := false
	controllertest.Eventually(t, "the new pods", func() (bool, string) {
		pods := c.podsOf(t, "app=web")
		old := 0
		for _, p := range pods {
			if p.Labels[appsv1.DefaultDeploymentUniqueLabelKey] == oldHash {
				old++
			}
		}
		if old > 0 && old != len(pods) {
			t.Fatalf("old and new pods run together: %s", describe(pods))
		}
		if len(pods) == 0 {
			sawNone = true
		}
		d := c.getDeployment(t, "web")
		return old == 0 && len(pods) == 2 && d.Status.AvailableReplicas == 2 && d.Status.UpdatedReplicas == 2,
			describe(pods)
	})
	if !sawNone {
		t.Log("never observed the moment with no pods (it can be brief)")
	}
	d = c.getDeployment(t, "web")
	for name, rs := range c.replicaSetsOf(t, d) {
		if name == "web-"+oldHash && *rs.Spec.Replicas != 0 {
			t.Errorf("old replica set still wants %d", *rs.Spec.Replicas)
		}
	}
}

func TestRevisionsRollbackAndHistoryLimit(t *testing.T) {
	c := runControllers(t)
	in := newDeployment("web", 1, "nginx:A")
	limit := int32(1)
	in.Spec.RevisionHistoryLimit = &limit
	d := c.createDeployment(t, in)
	c.runKubelet(t, "app=web")
	c.waitForRollout(t, "web")
	hashA := computeHash(&d.Spec.Template, nil)

	// A → B → A: going back to A reuses its replica set, whose revision
	// becomes 3 and remembers it was 1.
	c.updateDeployment(t, "web", setImage("nginx:B"))
	c.waitForRollout(t, "web")
	c.updateDeployment(t, "web", setImage("nginx:A"))
	d = c.waitForRollout(t, "web")
	rsA := c.replicaSetsOf(t, d)["web-"+hashA]
	if rsA == nil || rsA.Annotations[RevisionAnnotation] != "3" || rsA.Annotations[RevisionHistoryAnnotation] != "1" {
		t.Fatalf("replica set of A: %v, want revision 3 with history 1", rsA)
	}
	if d.Annotations[RevisionAnnotation] != "3" {
		t.Errorf("deployment revision %q, want 3", d.Annotations[RevisionAnnotation])
	}

	// → C (4) → D (5): with a history of 1, only the newest old replica
	// set (C) stays; B and then A are deleted, lowest revision first.
	c.updateDeployment(t, "web", setImage("nginx:C"))
	c.waitForRollout(t, "web")
	c.updateDeployment(t, "web", setImage("nginx:D"))
	c.waitForRollout(t, "web")
	controllertest.Eventually(t, "the history cleaned up", func() (bool, string) {
		d := c.getDeployment(t, "web")
		revs := map[string]string{}
		for name, rs := range c.replicaSetsOf(t, d) {
			revs[rs.Annotations[RevisionAnnotation]] = name
		}
		_, hasD := revs["5"]
		_, hasC := revs["4"]
		return len(revs) == 2 && hasD && hasC && d.Annotations[RevisionAnnotation] == "5",
			fmt.Sprintf("replica sets by revision %v, deployment revision %q", revs, d.Annotations[RevisionAnnotation])
	})
}

func TestConditionsAvailableAndProgressing(t *testing.T) {
	c := runControllers(t)
	in := newDeployment("web", 2, "nginx:A")
	deadline := int32(1)
	in.Spec.ProgressDeadlineSeconds = &deadline
	c.createDeployment(t, in)

	// No kubelet: nothing becomes ready, the deployment is unavailable and,
	// a second later, past its progress deadline.
	controllertest.Eventually(t, "ProgressDeadlineExceeded", func() (bool, string) {
		d := c.getDeployment(t, "web")
		a, p := condition(d, appsv1.DeploymentAvailable), condition(d, appsv1.DeploymentProgressing)
		ok := a != nil && a.Status == corev1.ConditionFalse && a.Reason == MinimumReplicasUnavailable &&
			p != nil && p.Status == corev1.ConditionFalse && p.Reason == TimedOutReason
		return ok, fmt.Sprintf("available %+v, progressing %+v", a, p)
	})

	// The pods become ready: available, and the rollout completes.
	c.runKubelet(t, "app=web")
	controllertest.Eventually(t, "Available and NewReplicaSetAvailable", func() (bool, string) {
		d := c.getDeployment(t, "web")
		a, p := condition(d, appsv1.DeploymentAvailable), condition(d, appsv1.DeploymentProgressing)
		ok := a != nil && a.Status == corev1.ConditionTrue && a.Reason == MinimumReplicasAvailable &&
			p != nil && p.Status == corev1.ConditionTrue && p.Reason == NewRSAvailableReason &&
			d.Status.AvailableReplicas == 2 && d.Status.UnavailableReplicas == 0 && d.Status.ReadyReplicas == 2
		return ok, fmt.Sprintf("available %+v, progressing %+v, status %+v", a, p, d.Status)
	})
}

func TestPausedDeploymentScalesButDoesNotRoll(t *testing.T) {
	c := runControllers(t)
	d := c.createDeployment(t, newDeployment("web", 2, "nginx:A"))
	c.runKubelet(t, "app=web")
	c.waitForRollout(t, "web")

	c.updateDeployment(t, "web", func(d *appsv1.Deployment) {
		d.Spec.Paused = true
		d.Spec.Template.Spec.Containers[0].Image = "nginx:B"
		three := int32(3)
		d.Spec.Replicas = &three
	})
	controllertest.Eventually(t, "3 pods of A and the Paused condition", func() (bool, string) {
		d := c.getDeployment(t, "web")
		p := condition(d, appsv1.DeploymentProgressing)
		pods := c.podsOf(t, "app=web")
		return len(pods) == 3 && p != nil && p.Reason == PausedDeployReason && p.Status == corev1.ConditionUnknown,
			fmt.Sprintf("%s; progressing %+v", describe(pods), p)
	})
	if rss := c.replicaSetsOf(t, d); len(rss) != 1 {
		t.Fatalf("%d replica sets while paused, want 1", len(rss))
	}

	c.updateDeployment(t, "web", func(d *appsv1.Deployment) { d.Spec.Paused = false })
	d = c.waitForRollout(t, "web")
	for _, p := range c.podsOf(t, "app=web") {
		if p.Spec.Containers[0].Image != "nginx:B" {
			t.Errorf("pod %s runs %s after the resume", p.Name, p.Spec.Containers[0].Image)
		}
	}
}

func TestAdoptsAMatchingOrphanReplicaSet(t *testing.T) {
	c := runControllers(t)
	zero := int32(0)
	orphan := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web-manual", Namespace: ns, Labels: map[string]string{"app": "web"}},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: &zero,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web", "v": "manual"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web", "v": "manual"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx:old"}}},
			},
		},
	}
	if _, err := c.rss.Create(testCtx(t), orphan); err != nil {
		t.Fatal(err)
	}
	d := c.createDeployment(t, newDeployment("web", 1, "nginx:A"))
	controllertest.Eventually(t, "the orphan adopted", func() (bool, string) {
		rss := c.replicaSetsOf(t, d)
		_, adopted := rss["web-manual"]
		return adopted && len(rss) == 2, fmt.Sprintf("owned %v", slices.Collect(maps.Keys(rss)))
	})
}

// describe lists pods as name(hash,ready) for failure messages.
func describe(pods []*corev1.Pod) string {
	var parts []string
	for _, p := range pods {
		parts = append(parts, fmt.Sprintf("%s(%s,ready=%v)", p.Name, p.Labels[appsv1.DefaultDeploymentUniqueLabelKey], api.PodIsReady(p)))
	}
	slices.Sort(parts)
	return fmt.Sprintf("%d pods %v", len(pods), parts)
}

// A Deployment of 2,000,000,000 replicas gets a ReplicaSet of that size:
// spec.replicas plus its 25% surge is more than an int32, and must not
// wrap around (which left the ReplicaSet at zero). A quota of 3 pods keeps
// the ReplicaSet controller from creating more than 3 of them.
func TestHugeDeploymentGetsAReplicaSetOfItsSize(t *testing.T) {
	c := runControllers(t)
	controllertest.PodQuota(t, c.rc, ns, 3)
	const huge = 2_000_000_000
	d := c.createDeployment(t, newDeployment("huge", huge, "nginx:1.27"))

	var rs *appsv1.ReplicaSet
	controllertest.Eventually(t, "a replica set of 2000000000", func() (bool, string) {
		for _, r := range c.replicaSetsOf(t, d) {
			rs = r
		}
		return rs != nil && *rs.Spec.Replicas == huge, fmt.Sprintf("replica sets %v", c.replicaSetsOf(t, d))
	})
	if a := rs.Annotations; a[DesiredReplicasAnnotation] != "2000000000" || a[MaxReplicasAnnotation] != "2147483647" {
		t.Errorf("annotations %v, want desired 2000000000 and max 2147483647 (2.5e9, clamped)", a)
	}
	controllertest.Eventually(t, "the quota refusing the 4th pod", func() (bool, string) {
		n := countEvents(c.recorder, "Warning FailedCreate")
		return n > 0, fmt.Sprintf("%d FailedCreate events", n)
	})
	if pods := c.podsOf(t, "app=huge"); len(pods) != 3 {
		t.Errorf("%d pods, want the 3 the quota allows", len(pods))
	}
	controllertest.Eventually(t, "the deployment's status", func() (bool, string) {
		d := c.getDeployment(t, "huge")
		return d.Status.Replicas == 3 && d.Status.UnavailableReplicas == huge, fmt.Sprintf("status %+v", d.Status)
	})
}
