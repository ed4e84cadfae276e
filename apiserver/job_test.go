package apiserver_test

import (
	"net/http"
	"slices"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/internal/testenv"
)

func jobPath(ns, name string) string {
	p := "/apis/batch/v1/namespaces/" + ns + "/jobs"
	if name != "" {
		p += "/" + name
	}
	return p
}

func job(name string) *batchv1.Job {
	return &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "pi", Image: "perl:5.34"}},
		}}},
	}
}

// TestJobs serves batch/v1 jobs as kube-apiserver does: a selector
// generated from the new Job's uid, kube's defaults, 422s that name the
// field and store nothing, an immutable template, the status.successful
// field selector.
func TestJobs(t *testing.T) {
	env := testenv.Start(t)

	t.Run("parallelism -1 is refused, naming the field, nothing stored", func(t *testing.T) {
		bad := job("bad")
		bad.Spec.Parallelism = ptr(int32(-1))
		before := revision(t, env)
		st := do(t, env, http.MethodPost, jobPath("default", ""), jsonType, bad).
			wantStatus(t, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid)
		if st.Details == nil || len(st.Details.Causes) != 1 || st.Details.Causes[0].Field != "spec.parallelism" {
			t.Errorf("details %+v, want one cause naming spec.parallelism", st.Details)
		}
		if after := revision(t, env); after != before {
			t.Errorf("etcd revision moved from %d to %d: something was written", before, after)
		}
	})

	t.Run("a template that restarts Always is refused", func(t *testing.T) {
		bad := job("always")
		bad.Spec.Template.Spec.RestartPolicy = ""
		st := do(t, env, http.MethodPost, jobPath("default", ""), jsonType, bad).
			wantStatus(t, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid)
		if st.Details == nil || len(st.Details.Causes) != 1 || st.Details.Causes[0].Field != "spec.template.spec.restartPolicy" {
			t.Errorf("details %+v, want spec.template.spec.restartPolicy", st.Details)
		}
	})

	in := job("pi")
	in.Status.Succeeded = 3 // a client may not set the status on create
	created := create[batchv1.Job](t, env, jobPath("default", ""), in)
	uid := string(created.UID)
	t.Run("defaults and the generated selector", func(t *testing.T) {
		if uid == "" || created.Spec.Selector == nil || created.Spec.Selector.MatchLabels["batch.kubernetes.io/controller-uid"] != uid {
			t.Errorf("selector %v, want batch.kubernetes.io/controller-uid=%s", created.Spec.Selector, uid)
		}
		l := created.Spec.Template.Labels
		if l["batch.kubernetes.io/job-name"] != "pi" || l["job-name"] != "pi" || l["controller-uid"] != uid {
			t.Errorf("template labels %v, want the job's name and uid", l)
		}
		if created.Labels["batch.kubernetes.io/job-name"] != "pi" || created.Labels["batch.kubernetes.io/controller-uid"] != uid {
			t.Errorf("labels %v, want the template's, the generated ones", created.Labels)
		}
		if *created.Spec.Completions != 1 || *created.Spec.Parallelism != 1 || *created.Spec.BackoffLimit != 6 ||
			*created.Spec.CompletionMode != batchv1.NonIndexedCompletion || *created.Spec.Suspend {
			t.Errorf("spec %+v, want kube's defaults", created.Spec)
		}
		if created.Status.Succeeded != 0 || created.Generation != 1 {
			t.Errorf("status %+v generation %d, want empty and 1", created.Status, created.Generation)
		}
	})

	t.Run("the template is immutable", func(t *testing.T) {
		st := do(t, env, http.MethodPatch, jobPath("default", "pi"), mergePatch,
			`{"spec":{"template":{"spec":{"containers":[{"name":"pi","image":"perl:5.36"}]}}}}`).
			wantStatus(t, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid)
		if st.Details == nil || len(st.Details.Causes) == 0 || st.Details.Causes[0].Field != "spec.template" {
			t.Errorf("details %+v, want spec.template", st.Details)
		}
		patch[batchv1.Job](t, env, jobPath("default", "pi"), mergePatch, `{"spec":{"parallelism":3}}`)
	})

	t.Run("status and the status.successful field selector", func(t *testing.T) {
		cur := get[batchv1.Job](t, env, jobPath("default", "pi"))
		cur.Status.Succeeded = 1
		cur = update[batchv1.Job](t, env, jobPath("default", "pi")+"/status", cur)
		var list batchv1.JobList
		do(t, env, http.MethodGet, jobPath("default", "")+"?"+query("fieldSelector", "status.successful=1"), "", nil).want(t, http.StatusOK).into(t, &list)
		if len(list.Items) != 1 || list.Items[0].Name != "pi" {
			t.Errorf("status.successful=1 lists %d jobs, want pi", len(list.Items))
		}
		cur.Status.Active = -1
		do(t, env, http.MethodPut, jobPath("default", "pi")+"/status", jsonType, cur).
			wantStatus(t, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid)
	})

	t.Run("kubectl get jobs", func(t *testing.T) {
		var table metav1.Table
		getAccept(t, env, jobPath("default", ""), kubectlAccept).want(t, http.StatusOK).into(t, &table)
		var cols []string
		for _, c := range table.ColumnDefinitions {
			cols = append(cols, c.Name)
		}
		if want := []string{"Name", "Status", "Completions", "Duration", "Age", "Containers", "Images", "Selector"}; !slices.Equal(cols, want) {
			t.Errorf("columns %v, want %v", cols, want)
		}
		if len(table.Rows) != 1 {
			t.Fatalf("%d rows, want 1", len(table.Rows))
		}
		if c := table.Rows[0].Cells; c[0] != "pi" || c[1] != "Running" || c[2] != "1/1" || c[7] != "batch.kubernetes.io/controller-uid="+uid {
			t.Errorf("row %v", c)
		}
	})
}

// A Job deleted with no propagation policy keeps its pods, as batch/v1
// always has: kube-apiserver orphans them (the "orphan" finalizer, for
// the garbage collector to honour) and says so in a warning; a delete or
// deletecollection that names a policy gets none.
func TestJobDeleteOrphansByDefault(t *testing.T) {
	env := testenv.Start(t)
	const want = `299 - "child pods are preserved by default when jobs are deleted; ` +
		`set propagationPolicy=Background to remove them or set propagationPolicy=Orphan to suppress this warning"`
	for _, name := range []string{"plain", "background", "listed"} {
		create[batchv1.Job](t, env, jobPath("default", ""), job(name))
	}

	r := do(t, env, http.MethodDelete, jobPath("default", "plain"), "", nil).want(t, http.StatusOK)
	if got := r.header.Values("Warning"); !slices.Equal(got, []string{want}) {
		t.Errorf("delete with no policy: Warning headers %q, want %q", got, want)
	}
	var plain batchv1.Job
	do(t, env, http.MethodGet, jobPath("default", "plain"), "", nil).want(t, http.StatusOK).into(t, &plain)
	if plain.DeletionTimestamp == nil || !slices.Equal(plain.Finalizers, []string{metav1.FinalizerOrphanDependents}) {
		t.Errorf("deleted with no policy: deletionTimestamp %v, finalizers %q; want the orphan finalizer", plain.DeletionTimestamp, plain.Finalizers)
	}

	r = do(t, env, http.MethodDelete, jobPath("default", "background")+"?propagationPolicy=Background", "", nil).want(t, http.StatusOK)
	if got := r.header.Values("Warning"); len(got) != 0 {
		t.Errorf("delete with a policy: Warning headers %q", got)
	}
	do(t, env, http.MethodGet, jobPath("default", "background"), "", nil).want(t, http.StatusNotFound)

	r = do(t, env, http.MethodDelete, jobPath("default", "")+"?fieldSelector=metadata.name%3Dlisted", "", nil).want(t, http.StatusOK)
	if got := r.header.Values("Warning"); !slices.Equal(got, []string{want}) {
		t.Errorf("deletecollection with no policy: Warning headers %q, want %q", got, want)
	}
}
