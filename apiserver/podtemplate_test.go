package apiserver_test

import (
	"net/http"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/internal/testenv"
)

// TestPodTemplates serves v1 podtemplates as kube-apiserver does: the
// template defaulted and validated as a pod's spec, the generation moving
// with the template only, and kubectl's columns.
func TestPodTemplates(t *testing.T) {
	env := testenv.Start(t)
	path := "/api/v1/namespaces/default/podtemplates"
	pt := create[corev1.PodTemplate](t, env, path, &corev1.PodTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "batch"},
		Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "batch"}},
			Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever, // any policy, unlike a ReplicaSet's template
				Containers:    []corev1.Container{{Name: "work", Image: "busybox"}, {Name: "log", Image: "fluentd:1.16"}},
			},
		},
	})
	c := pt.Template.Spec.Containers[0]
	if pt.Generation != 1 || c.ImagePullPolicy != corev1.PullAlways || c.TerminationMessagePath == "" ||
		pt.Template.Spec.DNSPolicy != corev1.DNSClusterFirst {
		t.Errorf("created: generation %d, container %+v, dnsPolicy %q: want generation 1 and a pod's defaults",
			pt.Generation, c, pt.Template.Spec.DNSPolicy)
	}

	pt.Labels = map[string]string{"team": "a"}
	pt = update[corev1.PodTemplate](t, env, path+"/batch", pt)
	if pt.Generation != 1 {
		t.Errorf("a label change moved the generation to %d", pt.Generation)
	}
	pt.Template.Spec.Containers[0].Image = "busybox:1.37"
	pt = update[corev1.PodTemplate](t, env, path+"/batch", pt)
	if pt.Generation != 2 {
		t.Errorf("a template change left the generation at %d, want 2", pt.Generation)
	}

	st := do(t, env, http.MethodPost, path, "application/json",
		`{"metadata":{"name":"empty"},"template":{"spec":{"containers":[]}}}`).wantStatus(t, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid)
	if !strings.Contains(st.Message, "template.spec.containers: Required value") {
		t.Errorf("no containers: %q", st.Message)
	}

	var tb metav1.Table
	getAccept(t, env, path, kubectlAccept).want(t, http.StatusOK).into(t, &tb)
	if got, want := strings.Join(columnNames(&tb), ","), "Name,Containers,Images,Pod Labels"; got != want {
		t.Errorf("columns %s, want %s", got, want)
	}
	if len(tb.Rows) != 1 || tb.Rows[0].Cells[1] != "work,log" || tb.Rows[0].Cells[2] != "busybox:1.37,fluentd:1.16" || tb.Rows[0].Cells[3] != "app=batch" {
		t.Errorf("rows %+v", tb.Rows)
	}
}
