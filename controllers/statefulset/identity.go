package statefulset

import (
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/controllers/internal/controller"
)

// A StatefulSet's pods have an identity that outlives them, as kube gives
// it (pkg/controller/statefulset/stateful_set_utils.go):
//
//   - pod i is named "<set>-<i>", i counting from spec.ordinals.start;
//   - its hostname is its name and its subdomain spec.serviceName, so
//     the headless Service gives it a stable DNS name;
//   - it carries the labels statefulset.kubernetes.io/pod-name,
//     apps.kubernetes.io/pod-index and controller-revision-hash;
//   - for each volumeClaimTemplate t it mounts the claim
//     "<t>-<set>-<i>", which is created before the pod and outlives it.

// startOrdinal is the first ordinal of set's pods.
func startOrdinal(set *appsv1.StatefulSet) int {
	if set.Spec.Ordinals != nil {
		return int(set.Spec.Ordinals.Start)
	}
	return 0
}

// replicas is set's desired number of pods.
func replicas(set *appsv1.StatefulSet) int {
	if set.Spec.Replicas == nil {
		return 1
	}
	return int(*set.Spec.Replicas)
}

// podName is the name of set's pod with ordinal.
func podName(set *appsv1.StatefulSet, ordinal int) string {
	return fmt.Sprintf("%s-%d", set.Name, ordinal)
}

// ordinalOf returns the ordinal of pod in set, and false when pod's name
// is not "<set>-<n>".
func ordinalOf(set *appsv1.StatefulSet, pod *corev1.Pod) (int, bool) {
	rest, ok := strings.CutPrefix(pod.Name, set.Name+"-")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n < 0 || strconv.Itoa(n) != rest {
		return 0, false
	}
	return n, true
}

// claimName is the name of the claim of template for set's pod ordinal.
func claimName(set *appsv1.StatefulSet, template string, ordinal int) string {
	return fmt.Sprintf("%s-%s-%d", template, set.Name, ordinal)
}

// claimsFor returns the claims set's pod ordinal mounts, by template name:
// each template under its pod's claim name, labelled with the template's
// labels and the selector's matchLabels, as kube makes them.
func claimsFor(set *appsv1.StatefulSet, ordinal int) []*corev1.PersistentVolumeClaim {
	out := make([]*corev1.PersistentVolumeClaim, 0, len(set.Spec.VolumeClaimTemplates))
	for i := range set.Spec.VolumeClaimTemplates {
		t := &set.Spec.VolumeClaimTemplates[i]
		claim := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{
				Name: claimName(set, t.Name, ordinal), Namespace: set.Namespace,
				Labels: maps.Clone(t.Labels), Annotations: maps.Clone(t.Annotations),
			},
			Spec: *t.Spec.DeepCopy(),
		}
		if claim.Labels == nil {
			claim.Labels = map[string]string{}
		}
		if set.Spec.Selector != nil {
			maps.Copy(claim.Labels, set.Spec.Selector.MatchLabels)
		}
		out = append(out, claim)
	}
	return out
}

// newPod returns set's pod ordinal made from the template of revision
// (a StatefulSet whose template is that revision's) with hash as its
// controller-revision-hash.
func newPod(set, revision *appsv1.StatefulSet, ordinal int, hash string) (*corev1.Pod, error) {
	pod, err := controller.PodFromTemplate(&revision.Spec.Template, set, controller.NewControllerRef(set, controllerKind))
	if err != nil {
		return nil, err
	}
	pod.GenerateName = ""
	pod.Name = podName(set, ordinal)
	pod.Labels[appsv1.StatefulSetPodNameLabel] = pod.Name
	pod.Labels[appsv1.PodIndexLabel] = strconv.Itoa(ordinal)
	pod.Labels[appsv1.StatefulSetRevisionLabel] = hash
	pod.Spec.Hostname = pod.Name
	pod.Spec.Subdomain = set.Spec.ServiceName
	mountClaims(set, pod, ordinal)
	return pod, nil
}

// mountClaims makes each claim template a volume of pod, in place of any
// template volume of the same name.
func mountClaims(set *appsv1.StatefulSet, pod *corev1.Pod, ordinal int) {
	if len(set.Spec.VolumeClaimTemplates) == 0 {
		return
	}
	claims := map[string]bool{}
	var volumes []corev1.Volume
	for _, t := range set.Spec.VolumeClaimTemplates {
		claims[t.Name] = true
		volumes = append(volumes, corev1.Volume{
			Name: t.Name,
			VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{
				ClaimName: claimName(set, t.Name, ordinal),
			}},
		})
	}
	for _, v := range pod.Spec.Volumes {
		if !claims[v.Name] {
			volumes = append(volumes, v)
		}
	}
	pod.Spec.Volumes = volumes
}

// identityMatches reports whether pod still has the identity of ordinal
// in set: its name, the pod-name and pod-index labels, hostname and
// subdomain.
func identityMatches(set *appsv1.StatefulSet, pod *corev1.Pod, ordinal int) bool {
	return pod.Name == podName(set, ordinal) &&
		pod.Labels[appsv1.StatefulSetPodNameLabel] == pod.Name &&
		pod.Labels[appsv1.PodIndexLabel] == strconv.Itoa(ordinal) &&
		pod.Spec.Hostname == pod.Name && pod.Spec.Subdomain == set.Spec.ServiceName
}

// revisionOf is the controller-revision-hash a pod was made from.
func revisionOf(pod *corev1.Pod) string { return pod.Labels[appsv1.StatefulSetRevisionLabel] }

func isRunningAndReady(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodRunning && controller.IsPodAvailable(pod, 0, time.Time{})
}

func isTerminating(pod *corev1.Pod) bool { return pod.DeletionTimestamp != nil }

func isFailed(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded
}
