package apiserver_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/minictl/minictl/internal/testenv"
)

func appsPath(ns, resource, name string) string {
	p := "/apis/apps/v1/namespaces/" + ns + "/" + resource
	if name != "" {
		p += "/" + name
	}
	return p
}

func daemonSet(name string) *appsv1.DaemonSet {
	labels := map[string]string{"app": name}
	return &appsv1.DaemonSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "agent:1"}}},
			},
		},
	}
}

// TestDaemonSets serves apps/v1 daemonsets and controllerrevisions as
// kube-apiserver does: defaulted, validated with kube's field paths, the
// template generation moved by template changes only, a revision's data
// patched back as kubectl rollout undo does, and that data immutable.
func TestDaemonSets(t *testing.T) {
	env := testenv.Start(t)

	t.Run("a selector that does not match the template is refused, nothing stored", func(t *testing.T) {
		bad := daemonSet("bad")
		bad.Spec.Template.Labels = map[string]string{"app": "other"}
		before := revision(t, env)
		st := do(t, env, http.MethodPost, appsPath("default", "daemonsets", ""), jsonType, bad).
			wantStatus(t, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid)
		var fields []string
		if st.Details != nil {
			for _, c := range st.Details.Causes {
				fields = append(fields, c.Field)
			}
		}
		if !slices.Contains(fields, "spec.template.metadata.labels") || !strings.Contains(st.Message, "`selector` does not match template `labels`") {
			t.Errorf("causes name %v, message %q", fields, st.Message)
		}
		if after := revision(t, env); after != before {
			t.Errorf("etcd revision moved from %d to %d: something was written", before, after)
		}
	})

	ds := create[appsv1.DaemonSet](t, env, appsPath("default", "daemonsets", ""), daemonSet("agent"))
	t.Run("defaults", func(t *testing.T) {
		ru := ds.Spec.UpdateStrategy.RollingUpdate
		if ds.Spec.UpdateStrategy.Type != appsv1.RollingUpdateDaemonSetStrategyType || ru == nil ||
			ru.MaxUnavailable.String() != "1" || ru.MaxSurge.String() != "0" || *ds.Spec.RevisionHistoryLimit != 10 {
			t.Errorf("spec %+v", ds.Spec)
		}
		if ds.Generation != 1 || ds.Annotations[appsv1.DeprecatedTemplateGeneration] != "1" {
			t.Errorf("generation %d annotations %v, want 1 and template generation 1", ds.Generation, ds.Annotations)
		}
	})

	t.Run("the selector is immutable", func(t *testing.T) {
		cur := get[appsv1.DaemonSet](t, env, appsPath("default", "daemonsets", "agent"))
		cur.Spec.Selector.MatchLabels["tier"] = "x"
		cur.Spec.Template.Labels["tier"] = "x"
		st := do(t, env, http.MethodPut, appsPath("default", "daemonsets", "agent"), jsonType, cur).
			wantStatus(t, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid)
		if !strings.Contains(st.Message, "spec.selector") || !strings.Contains(st.Message, "field is immutable") {
			t.Errorf("message %q", st.Message)
		}
	})

	t.Run("maxUnavailable and maxSurge both zero", func(t *testing.T) {
		st := do(t, env, http.MethodPatch, appsPath("default", "daemonsets", "agent"), mergePatch,
			`{"spec":{"updateStrategy":{"rollingUpdate":{"maxUnavailable":0}}}}`).
			wantStatus(t, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid)
		if !strings.Contains(st.Message, "spec.updateStrategy.rollingUpdate.maxUnavailable") || !strings.Contains(st.Message, "cannot be 0 when maxSurge is 0") {
			t.Errorf("message %q", st.Message)
		}
	})

	data := `{"spec":{"template":{"$patch":"replace","metadata":{"labels":{"app":"agent"}},"spec":{"containers":[{"image":"agent:1","name":"agent"}]}}}}`
	t.Run("an image change moves the template generation; a revision's patch puts the template back", func(t *testing.T) {
		changed := patch[appsv1.DaemonSet](t, env, appsPath("default", "daemonsets", "agent"), mergePatch,
			`{"spec":{"template":{"spec":{"containers":[{"name":"agent","image":"agent:2","env":[{"name":"A","value":"b"}]}]}}}}`)
		if changed.Generation != 2 || changed.Annotations[appsv1.DeprecatedTemplateGeneration] != "2" {
			t.Errorf("generation %d annotations %v, want 2 and 2", changed.Generation, changed.Annotations)
		}
		limited := patch[appsv1.DaemonSet](t, env, appsPath("default", "daemonsets", "agent"), mergePatch, `{"spec":{"minReadySeconds":5}}`)
		if limited.Generation != 3 || limited.Annotations[appsv1.DeprecatedTemplateGeneration] != "2" {
			t.Errorf("generation %d annotations %v, want 3 and template generation still 2", limited.Generation, limited.Annotations)
		}
		undone := patch[appsv1.DaemonSet](t, env, appsPath("default", "daemonsets", "agent"), strategicPtch, data)
		c := undone.Spec.Template.Spec.Containers
		if len(c) != 1 || c[0].Image != "agent:1" || len(c[0].Env) != 0 || undone.Annotations[appsv1.DeprecatedTemplateGeneration] != "3" {
			t.Errorf("containers %+v template generation %s, want agent:1 without env, 3", c, undone.Annotations[appsv1.DeprecatedTemplateGeneration])
		}
	})

	t.Run("controllerrevisions", func(t *testing.T) {
		cr := &appsv1.ControllerRevision{
			TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "ControllerRevision"},
			ObjectMeta: metav1.ObjectMeta{Name: "agent-abc"},
			Data:       runtime.RawExtension{Raw: []byte(data)},
			Revision:   1,
		}
		got := create[appsv1.ControllerRevision](t, env, appsPath("default", "controllerrevisions", ""), cr)
		if string(got.Data.Raw) != data {
			t.Errorf("data %s, want it as written", got.Data.Raw)
		}
		got.Revision = 3
		update[appsv1.ControllerRevision](t, env, appsPath("default", "controllerrevisions", "agent-abc"), got)
		st := do(t, env, http.MethodPatch, appsPath("default", "controllerrevisions", "agent-abc"), mergePatch, `{"data":{"other":1}}`).
			wantStatus(t, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid)
		if !strings.Contains(st.Message, "data: Invalid value") || !strings.Contains(st.Message, "field is immutable") {
			t.Errorf("message %q", st.Message)
		}
		noData := cr.DeepCopy()
		noData.Name, noData.Data = "empty", runtime.RawExtension{}
		do(t, env, http.MethodPost, appsPath("default", "controllerrevisions", ""), jsonType, noData).
			wantStatus(t, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid)
	})
}
