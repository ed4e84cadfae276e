package controllertest

import (
	"context"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/client"
)

// PodQuota gives namespace a ResourceQuota "pods" of at most pods pods, and
// writes its status (hard, and nothing used) as the resourcequota
// controller would, so that the API server's admission enforces it without
// that controller running. Admission then counts each pod it admits.
func PodQuota(t testing.TB, rc *client.RESTClient, namespace string, pods int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hard := corev1.ResourceList{corev1.ResourcePods: resource.MustParse(strconv.Itoa(pods))}
	quotas := client.For[*corev1.ResourceQuota](rc)
	q, err := quotas.Create(ctx, &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "pods", Namespace: namespace},
		Spec:       corev1.ResourceQuotaSpec{Hard: hard},
	})
	if err != nil {
		t.Fatalf("create quota: %v", err)
	}
	q.Status = corev1.ResourceQuotaStatus{Hard: hard, Used: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}}
	if _, err := quotas.UpdateStatus(ctx, q); err != nil {
		t.Fatalf("write quota status: %v", err)
	}
}
