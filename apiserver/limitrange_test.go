package apiserver_test

import (
	"net/http"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/internal/testenv"
)

// TestLimitRangeAdmission: a LimitRange fills default requests and limits
// into containers that set none, and refuses pods outside min and max with
// a message that names the bound and the value.
func TestLimitRangeAdmission(t *testing.T) {
	env := testenv.Start(t)
	createNamespace(t, env, "limited")
	lr := &corev1.LimitRange{
		TypeMeta:   metav1.TypeMeta{Kind: "LimitRange", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: "bounds"},
		Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{
			Type:           corev1.LimitTypeContainer,
			Default:        corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
			DefaultRequest: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
			Min:            corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m")},
			Max:            corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")},
		}}},
	}
	create[corev1.LimitRange](t, env, "/api/v1/namespaces/limited/limitranges", lr)
	// The admission reads LimitRanges from the watch cache: wait for it.
	eventually(t, "limit range in the cache", func() (bool, string) {
		l := get[corev1.LimitRangeList](t, env, "/api/v1/namespaces/limited/limitranges?resourceVersion=0")
		return len(l.Items) == 1, "no limit range yet"
	})

	got := create[corev1.Pod](t, env, "/api/v1/namespaces/limited/pods", pod("defaulted", "", nil))
	res := got.Spec.Containers[0].Resources
	for name, want := range map[string]string{
		"requests.cpu": "100m", "requests.memory": "128Mi", "limits.cpu": "500m", "limits.memory": "256Mi",
	} {
		list := res.Requests
		if strings.HasPrefix(name, "limits") {
			list = res.Limits
		}
		q := list[corev1.ResourceName(strings.SplitN(name, ".", 2)[1])]
		if q.String() != want {
			t.Errorf("%s = %q, want %q", name, q.String(), want)
		}
	}

	// As kube-apiserver's LimitRanger, it says what it filled in.
	if got, want := got.Annotations["kubernetes.io/limit-ranger"],
		"LimitRanger plugin set: cpu, memory request for container "+got.Spec.Containers[0].Name+
			"; cpu, memory limit for container "+got.Spec.Containers[0].Name; got != want {
		t.Errorf("limit-ranger annotation = %q, want %q", got, want)
	}

	before := revision(t, env)
	big := pod("too-big", "", nil)
	big.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
	st := do(t, env, "POST", "/api/v1/namespaces/limited/pods", jsonType, big).wantStatus(t, http.StatusForbidden, metav1.StatusReasonForbidden)
	if !strings.Contains(st.Message, "maximum cpu usage per Container is 1, but limit is 2") {
		t.Errorf("message = %q", st.Message)
	}
	small := pod("too-small", "", nil)
	small.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")}
	st = do(t, env, "POST", "/api/v1/namespaces/limited/pods", jsonType, small).wantStatus(t, http.StatusForbidden, metav1.StatusReasonForbidden)
	if !strings.Contains(st.Message, "minimum cpu usage per Container is 50m, but request is 10m") {
		t.Errorf("message = %q", st.Message)
	}
	// The object is validated before the validating half of admission
	// runs, as in kube-apiserver: an invalid pod is refused as invalid
	// even when it is outside a range too.
	invalid := pod("invalid-and-too-big", "", nil)
	invalid.Spec.Containers[0].Image = ""
	invalid.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
	do(t, env, "POST", "/api/v1/namespaces/limited/pods", jsonType, invalid).wantStatus(t, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid)
	if after := revision(t, env); after != before {
		t.Errorf("a refused pod moved the revision from %d to %d", before, after)
	}
}
