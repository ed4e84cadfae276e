package apiserver_test

import (
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/internal/testenv"
)

func rcPath(ns, name string) string {
	p := "/api/v1/namespaces/" + ns + "/replicationcontrollers"
	if name != "" {
		p += "/" + name
	}
	return p
}

// replicationController is an RC of replicas pods labelled app=name, with
// no selector: the server defaults it from the template's labels.
func replicationController(name string, replicas int32) *corev1.ReplicationController {
	return &corev1.ReplicationController{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ReplicationController"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ReplicationControllerSpec{
			Replicas: &replicas,
			Template: &corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx:1.27"}}},
			},
		},
	}
}

// TestReplicationControllers serves v1 replicationcontrollers as
// kube-apiserver does: defaulted from the template, validated with kube's
// field paths, scaled through the scale subresource, printed with kube's
// columns.
func TestReplicationControllers(t *testing.T) {
	env := testenv.Start(t)

	t.Run("a selector that does not match the template is refused, nothing stored", func(t *testing.T) {
		bad := replicationController("bad", 1)
		bad.Spec.Selector = map[string]string{"app": "other"}
		before := revision(t, env)
		st := do(t, env, http.MethodPost, rcPath("default", ""), jsonType, bad).
			wantStatus(t, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid)
		var fields []string
		if st.Details != nil {
			for _, c := range st.Details.Causes {
				fields = append(fields, c.Field)
			}
		}
		if !slices.Contains(fields, "spec.template.metadata.labels") ||
			!strings.Contains(st.Message, "`selector` does not match template `labels`") {
			t.Errorf("causes name %v, message %q; want spec.template.metadata.labels and kube's message", fields, st.Message)
		}
		if after := revision(t, env); after != before {
			t.Errorf("etcd revision moved from %d to %d: something was written", before, after)
		}
		do(t, env, http.MethodGet, rcPath("default", "bad"), "", nil).wantStatus(t, http.StatusNotFound, metav1.StatusReasonNotFound)
	})

	t.Run("a template without labels leaves nothing to select", func(t *testing.T) {
		bad := replicationController("unlabelled", 1)
		bad.Spec.Template.Labels = nil
		st := do(t, env, http.MethodPost, rcPath("default", ""), jsonType, bad).
			wantStatus(t, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid)
		if st.Details == nil || len(st.Details.Causes) == 0 || st.Details.Causes[0].Field != "spec.selector" {
			t.Errorf("details %+v, want spec.selector required", st.Details)
		}
	})

	in := replicationController("web", 2)
	in.Status.Replicas = 9 // a client may not set the status on create
	rc := create[corev1.ReplicationController](t, env, rcPath("default", ""), in)
	t.Run("defaults", func(t *testing.T) {
		want := map[string]string{"app": "web"}
		if !maps.Equal(rc.Spec.Selector, want) || !maps.Equal(rc.Labels, want) {
			t.Errorf("selector %v labels %v, want both the template's %v", rc.Spec.Selector, rc.Labels, want)
		}
		if rc.Generation != 1 || rc.Status.Replicas != 0 {
			t.Errorf("generation %d status %+v, want 1 and empty", rc.Generation, rc.Status)
		}
	})

	t.Run("scale", func(t *testing.T) {
		path := rcPath("default", "web") + "/scale"
		sc := get[autoscalingv1.Scale](t, env, path)
		if sc.Kind != "Scale" || sc.Spec.Replicas != 2 || sc.Status.Selector != "app=web" {
			t.Fatalf("scale %+v", sc)
		}
		sc.Spec.Replicas = 5
		update[autoscalingv1.Scale](t, env, path, sc)
		if got := get[corev1.ReplicationController](t, env, rcPath("default", "web")); *got.Spec.Replicas != 5 || got.Generation != 2 {
			t.Errorf("after the scale: replicas %d generation %d, want 5 and 2", *got.Spec.Replicas, got.Generation)
		}
		do(t, env, http.MethodPatch, path, mergePatch, `{"spec":{"replicas":-1}}`).
			wantStatus(t, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid)
	})

	t.Run("status", func(t *testing.T) {
		cur := get[corev1.ReplicationController](t, env, rcPath("default", "web"))
		cur.Status = corev1.ReplicationControllerStatus{Replicas: 5, ReadyReplicas: 3, ObservedGeneration: cur.Generation}
		cur.Spec.Replicas = ptr(int32(1)) // the status subresource does not move the spec
		got := update[corev1.ReplicationController](t, env, rcPath("default", "web")+"/status", cur)
		if got.Status.Replicas != 5 || *got.Spec.Replicas != 5 {
			t.Errorf("status %+v replicas %d, want status written and replicas still 5", got.Status, *got.Spec.Replicas)
		}
	})

	t.Run("kubectl get rc", func(t *testing.T) {
		var table metav1.Table
		getAccept(t, env, rcPath("default", ""), kubectlAccept).want(t, http.StatusOK).into(t, &table)
		var cols []string
		for _, c := range table.ColumnDefinitions {
			cols = append(cols, c.Name)
		}
		if want := []string{"Name", "Desired", "Current", "Ready", "Age", "Containers", "Images", "Selector"}; !slices.Equal(cols, want) {
			t.Errorf("columns %v, want %v", cols, want)
		}
		if len(table.Rows) != 1 {
			t.Fatalf("%d rows, want 1", len(table.Rows))
		}
		if c := table.Rows[0].Cells; c[0] != "web" || c[1] != float64(5) || c[2] != float64(5) || c[3] != float64(3) || c[7] != "app=web" {
			t.Errorf("row %v", c)
		}
	})

	// kube-apiserver orphans a v1 RC's pods when a delete names no
	// policy: no garbage collector runs here, so the orphan finalizer
	// holds the RC. kubectl's Background cascades and removes it at once.
	t.Run("a delete without a policy orphans", func(t *testing.T) {
		create[corev1.ReplicationController](t, env, rcPath("default", ""), replicationController("old", 0))
		do(t, env, http.MethodDelete, rcPath("default", "old"), "", nil).want(t, http.StatusOK)
		got := get[corev1.ReplicationController](t, env, rcPath("default", "old"))
		if got.DeletionTimestamp == nil || !slices.Equal(got.Finalizers, []string{metav1.FinalizerOrphanDependents}) {
			t.Errorf("deletionTimestamp %v finalizers %v, want set and [orphan]", got.DeletionTimestamp, got.Finalizers)
		}

		create[corev1.ReplicationController](t, env, rcPath("default", ""), replicationController("cascaded", 0))
		do(t, env, http.MethodDelete, rcPath("default", "cascaded")+"?propagationPolicy=Background", "", nil).want(t, http.StatusOK)
		do(t, env, http.MethodGet, rcPath("default", "cascaded"), "", nil).wantStatus(t, http.StatusNotFound, metav1.StatusReasonNotFound)
	})
}
