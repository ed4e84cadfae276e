package apiserver_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/internal/testenv"
)

const cronJobsPath = "/apis/batch/v1/namespaces/default/cronjobs"

func cronJob(name, schedule string) *batchv1.CronJob {
	return &batchv1.CronJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "CronJob"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: batchv1.CronJobSpec{
			Schedule: schedule,
			JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyOnFailure,
					Containers:    []corev1.Container{{Name: "hello", Image: "busybox"}},
				},
			}}},
		},
	}
}

// cronJobCauseFields returns the fields a Status's causes name.
func cronJobCauseFields(st metav1.Status) []string {
	var fields []string
	if st.Details != nil {
		for _, c := range st.Details.Causes {
			fields = append(fields, c.Field)
		}
	}
	return fields
}

// TestCronJobs serves batch/v1 cronjobs as kube-apiserver does: defaulted,
// validated with kube's messages and field paths, printed with kube's
// columns.
func TestCronJobs(t *testing.T) {
	env := testenv.Start(t)

	refused := []struct {
		name, field, message string
		mutate               func(cj *batchv1.CronJob)
	}{
		{"a minute out of range", "spec.schedule", "end of range (61) above maximum (59): 61",
			func(cj *batchv1.CronJob) { cj.Spec.Schedule = "61 * * * *" }},
		{"a time zone in the schedule", "spec.schedule", "cannot use TZ or CRON_TZ in schedule, use timeZone field instead",
			func(cj *batchv1.CronJob) { cj.Spec.Schedule = "CRON_TZ=Europe/Paris 0 * * * *" }},
		{"an unknown time zone", "spec.timeZone", "unknown time zone Mars/Olympus",
			func(cj *batchv1.CronJob) { cj.Spec.TimeZone = ptr("Mars/Olympus") }},
		{"a name too long for its Jobs", "metadata.name", "must be no more than 52 characters",
			func(cj *batchv1.CronJob) { cj.Name = strings.Repeat("x", 53) }},
		{"pods that restart always", "spec.jobTemplate.spec.template.spec.restartPolicy", `Unsupported value: "Always"`,
			func(cj *batchv1.CronJob) { cj.Spec.JobTemplate.Spec.Template.Spec.RestartPolicy = "" }},
	}
	for _, tt := range refused {
		t.Run(tt.name+" is refused, nothing stored", func(t *testing.T) {
			bad := cronJob("bad", "*/1 * * * *")
			tt.mutate(bad)
			before := revision(t, env)
			st := do(t, env, http.MethodPost, cronJobsPath, jsonType, bad).
				wantStatus(t, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid)
			if !slices.Contains(cronJobCauseFields(st), tt.field) || !strings.Contains(st.Message, tt.message) {
				t.Errorf("causes name %v, message %q; want %s and %q", cronJobCauseFields(st), st.Message, tt.field, tt.message)
			}
			if after := revision(t, env); after != before {
				t.Errorf("etcd revision moved from %d to %d: something was written", before, after)
			}
		})
	}

	in := cronJob("hello", "@hourly")
	in.Spec.TimeZone = ptr("Europe/Paris")
	in.Status.Active = []corev1.ObjectReference{{Name: "forged"}} // a client may not set the status on create
	cj := create[batchv1.CronJob](t, env, cronJobsPath, in)
	t.Run("defaults", func(t *testing.T) {
		s := cj.Spec
		if s.ConcurrencyPolicy != batchv1.AllowConcurrent || s.Suspend == nil || *s.Suspend ||
			*s.SuccessfulJobsHistoryLimit != 3 || *s.FailedJobsHistoryLimit != 1 {
			t.Errorf("spec %+v, want kube's defaults", s)
		}
		if cj.Generation != 1 || len(cj.Status.Active) != 0 {
			t.Errorf("generation %d status %+v, want 1 and empty", cj.Generation, cj.Status)
		}
	})

	t.Run("an update may not bring a time zone into the schedule", func(t *testing.T) {
		cur := get[batchv1.CronJob](t, env, cronJobsPath+"/hello")
		cur.Spec.Schedule = "TZ=UTC 0 * * * *"
		st := do(t, env, http.MethodPut, cronJobsPath+"/hello", jsonType, cur).
			wantStatus(t, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid)
		if !slices.Contains(cronJobCauseFields(st), "spec.schedule") {
			t.Errorf("causes name %v, want spec.schedule", cronJobCauseFields(st))
		}
	})

	t.Run("kubectl get cronjobs", func(t *testing.T) {
		var table metav1.Table
		getAccept(t, env, cronJobsPath, kubectlAccept).want(t, http.StatusOK).into(t, &table)
		var cols []string
		for _, c := range table.ColumnDefinitions {
			cols = append(cols, c.Name)
		}
		want := []string{"Name", "Schedule", "Timezone", "Suspend", "Active", "Last Schedule", "Age", "Containers", "Images", "Selector"}
		if !slices.Equal(cols, want) {
			t.Errorf("columns %v, want %v", cols, want)
		}
		if len(table.Rows) != 1 {
			t.Fatalf("%d rows, want 1", len(table.Rows))
		}
		c := table.Rows[0].Cells
		if c[0] != "hello" || c[1] != "@hourly" || c[2] != "Europe/Paris" || c[3] != "False" || c[4] != float64(0) || c[5] != "<none>" {
			t.Errorf("row %v", c)
		}
	})
}
