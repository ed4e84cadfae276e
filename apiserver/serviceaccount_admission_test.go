package apiserver_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"regexp"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/apiserver"
	"github.com/minictl/minictl/internal/testenv"
)

func TestServiceAccountAdmission(t *testing.T) {
	env := testenv.StartWith(t, testenv.Options{Server: apiserver.Config{ServiceAccountAdmission: true}})
	createNamespace(t, env, "team")

	// No ServiceAccount "default" yet: kube's refusal.
	st := do(t, env, http.MethodPost, "/api/v1/namespaces/team/pods", jsonType, pod("web", "", nil)).
		wantStatus(t, http.StatusForbidden, metav1.StatusReasonForbidden)
	if want := `pods "web" is forbidden: error looking up service account team/default: serviceaccount "default" not found`; st.Message != want {
		t.Errorf("message %q, want %q", st.Message, want)
	}

	create[corev1.ServiceAccount](t, env, "/api/v1/namespaces/team/serviceaccounts", &corev1.ServiceAccount{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"}, ObjectMeta: metav1.ObjectMeta{Name: "default"},
	})
	p := pod("web", "", nil)
	p.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "busybox"}}
	p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "own", Image: "busybox",
		VolumeMounts: []corev1.VolumeMount{{Name: "mine", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount"}}})
	p.Spec.Volumes = []corev1.Volume{{Name: "mine", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	got := create[corev1.Pod](t, env, "/api/v1/namespaces/team/pods", p)
	if got.Spec.ServiceAccountName != "default" {
		t.Errorf("serviceAccountName %q, want default", got.Spec.ServiceAccountName)
	}
	if len(got.Spec.Volumes) != 2 {
		t.Fatalf("volumes %+v, want mine and the token volume", got.Spec.Volumes)
	}
	v := got.Spec.Volumes[1]
	if !regexp.MustCompile(`^kube-api-access-[bcdfghjklmnpqrstvwxz2456789]{5}$`).MatchString(v.Name) || v.Projected == nil {
		t.Fatalf("token volume %+v", v)
	}
	src := v.Projected.Sources
	if len(src) != 3 || *v.Projected.DefaultMode != 0o644 ||
		src[0].ServiceAccountToken == nil || src[0].ServiceAccountToken.Path != "token" || *src[0].ServiceAccountToken.ExpirationSeconds != 3607 ||
		src[1].ConfigMap == nil || src[1].ConfigMap.Name != "kube-root-ca.crt" || src[1].ConfigMap.Items[0] != (corev1.KeyToPath{Key: "ca.crt", Path: "ca.crt"}) ||
		src[2].DownwardAPI == nil || src[2].DownwardAPI.Items[0].Path != "namespace" || src[2].DownwardAPI.Items[0].FieldRef.FieldPath != "metadata.namespace" {
		t.Errorf("token volume sources %+v", src)
	}
	want := corev1.VolumeMount{Name: v.Name, ReadOnly: true, MountPath: "/var/run/secrets/kubernetes.io/serviceaccount"}
	for _, c := range []corev1.Container{got.Spec.InitContainers[0], got.Spec.Containers[0]} {
		if len(c.VolumeMounts) != 1 || c.VolumeMounts[0] != want {
			t.Errorf("container %s mounts %+v, want %+v", c.Name, c.VolumeMounts, want)
		}
	}
	if m := got.Spec.Containers[1].VolumeMounts; len(m) != 1 || m[0].Name != "mine" {
		t.Errorf("a container with its own mount at the path got %+v", m)
	}

	// automountServiceAccountToken false, on the ServiceAccount or the pod.
	no, yes := false, true
	create[corev1.ServiceAccount](t, env, "/api/v1/namespaces/team/serviceaccounts", &corev1.ServiceAccount{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"}, ObjectMeta: metav1.ObjectMeta{Name: "quiet"},
		AutomountServiceAccountToken: &no,
	})
	q := pod("quiet", "", nil)
	q.Spec.ServiceAccountName = "quiet"
	if got := create[corev1.Pod](t, env, "/api/v1/namespaces/team/pods", q); len(got.Spec.Volumes) != 0 {
		t.Errorf("the pod of a ServiceAccount that does not automount got %+v", got.Spec.Volumes)
	}
	q = pod("loud", "", nil)
	q.Spec.ServiceAccountName, q.Spec.AutomountServiceAccountToken = "quiet", &yes
	if got := create[corev1.Pod](t, env, "/api/v1/namespaces/team/pods", q); len(got.Spec.Volumes) != 1 {
		t.Errorf("a pod that asks to automount got %+v", got.Spec.Volumes)
	}
	q = pod("silent", "", nil)
	q.Spec.AutomountServiceAccountToken = &no
	if got := create[corev1.Pod](t, env, "/api/v1/namespaces/team/pods", q); len(got.Spec.Volumes) != 0 {
		t.Errorf("a pod that does not automount got %+v", got.Spec.Volumes)
	}
}

// TestServiceAccountAdmissionWaitsForDefault: a pod asked for just before
// the serviceaccount controller creates "default" (a new namespace, a
// cluster just started) is admitted, as kube's plugin looks "default" up
// again for a second or two before it refuses the pod.
func TestServiceAccountAdmissionWaitsForDefault(t *testing.T) {
	env := testenv.StartWith(t, testenv.Options{Server: apiserver.Config{ServiceAccountAdmission: true}})
	createNamespace(t, env, "fresh")
	body, err := json.Marshal(pod("early", "", nil))
	if err != nil {
		t.Fatal(err)
	}
	code := make(chan int, 1)
	go func() {
		resp, err := env.Client().Post(env.URL+"/api/v1/namespaces/fresh/pods", jsonType, bytes.NewReader(body))
		if err != nil {
			code <- 0
			return
		}
		resp.Body.Close()
		code <- resp.StatusCode
	}()
	time.Sleep(300 * time.Millisecond) // the pod's first look finds nothing
	create[corev1.ServiceAccount](t, env, "/api/v1/namespaces/fresh/serviceaccounts", &corev1.ServiceAccount{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"}, ObjectMeta: metav1.ObjectMeta{Name: "default"},
	})
	if got := <-code; got != http.StatusCreated {
		t.Errorf("a pod asked for while default was being created: %d, want 201", got)
	}
}
