package api

import (
	"reflect"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func minimalCronJob() *batchv1.CronJob {
	tmpl := webTemplate()
	tmpl.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
	return &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: "default"},
		Spec: batchv1.CronJobSpec{
			Schedule:    "*/1 * * * *",
			JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: tmpl}},
		},
	}
}

func TestDefaultCronJob(t *testing.T) {
	cj := minimalCronJob()
	cj.Spec.JobTemplate.Spec.Template.Spec.RestartPolicy = ""
	CronJobs.Default(cj)
	spec := cj.Spec
	if spec.ConcurrencyPolicy != batchv1.AllowConcurrent {
		t.Errorf("concurrencyPolicy = %q, want Allow", spec.ConcurrencyPolicy)
	}
	if spec.Suspend == nil || *spec.Suspend {
		t.Errorf("suspend = %v, want false", spec.Suspend)
	}
	if spec.SuccessfulJobsHistoryLimit == nil || *spec.SuccessfulJobsHistoryLimit != 3 {
		t.Errorf("successfulJobsHistoryLimit = %v, want 3", spec.SuccessfulJobsHistoryLimit)
	}
	if spec.FailedJobsHistoryLimit == nil || *spec.FailedJobsHistoryLimit != 1 {
		t.Errorf("failedJobsHistoryLimit = %v, want 1", spec.FailedJobsHistoryLimit)
	}
	pod := spec.JobTemplate.Spec.Template.Spec
	if pod.RestartPolicy != corev1.RestartPolicyAlways || pod.DNSPolicy != corev1.DNSClusterFirst || pod.SchedulerName != corev1.DefaultSchedulerName {
		t.Errorf("template pod spec not defaulted as a pod's: restartPolicy %q dnsPolicy %q schedulerName %q",
			pod.RestartPolicy, pod.DNSPolicy, pod.SchedulerName)
	}
	if spec.JobTemplate.Spec.BackoffLimit != nil || spec.JobTemplate.Spec.Completions != nil {
		t.Errorf("job template spec got a Job's defaults: %+v", spec.JobTemplate.Spec)
	}

	t.Run("given values stay", func(t *testing.T) {
		cj := minimalCronJob()
		cj.Spec.ConcurrencyPolicy = batchv1.ForbidConcurrent
		cj.Spec.Suspend = ptrTo(true)
		cj.Spec.SuccessfulJobsHistoryLimit = ptrTo(int32(0))
		cj.Spec.FailedJobsHistoryLimit = ptrTo(int32(7))
		CronJobs.Default(cj)
		s := cj.Spec
		if s.ConcurrencyPolicy != batchv1.ForbidConcurrent || !*s.Suspend || *s.SuccessfulJobsHistoryLimit != 0 || *s.FailedJobsHistoryLimit != 7 {
			t.Errorf("spec = %+v, want the given values", s)
		}
	})
}

func TestValidateCronJob(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(cj *batchv1.CronJob)
		want   []string
		detail string
	}{
		{"valid", func(cj *batchv1.CronJob) {}, nil, ""},
		{"descriptor", func(cj *batchv1.CronJob) { cj.Spec.Schedule = "@hourly" }, nil, ""},
		{"every", func(cj *batchv1.CronJob) { cj.Spec.Schedule = "@every 1h30m" }, nil, ""},
		{"time zone", func(cj *batchv1.CronJob) { cj.Spec.TimeZone = ptrTo("Europe/Paris") }, nil, ""},
		{"52-character name", func(cj *batchv1.CronJob) { cj.Name = strings.Repeat("a", 52) }, nil, ""},
		{"minute out of range", func(cj *batchv1.CronJob) { cj.Spec.Schedule = "61 * * * *" },
			[]string{"spec.schedule: Invalid value"}, "end of range (61) above maximum (59): 61"},
		{"too few fields", func(cj *batchv1.CronJob) { cj.Spec.Schedule = "* * *" },
			[]string{"spec.schedule: Invalid value"}, "expected exactly 5 fields, found 3"},
		{"no schedule", func(cj *batchv1.CronJob) { cj.Spec.Schedule = "" },
			[]string{"spec.schedule: Required value"}, ""},
		{"TZ in schedule", func(cj *batchv1.CronJob) { cj.Spec.Schedule = "TZ=UTC 0 * * * *" },
			[]string{"spec.schedule: Invalid value"}, "cannot use TZ or CRON_TZ in schedule, use timeZone field instead"},
		{"CRON_TZ in schedule", func(cj *batchv1.CronJob) { cj.Spec.Schedule = "CRON_TZ=UTC 0 * * * *" },
			[]string{"spec.schedule: Invalid value"}, "cannot use TZ or CRON_TZ in schedule, use timeZone field instead"},
		{"unknown time zone", func(cj *batchv1.CronJob) { cj.Spec.TimeZone = ptrTo("Mars/Olympus") },
			[]string{"spec.timeZone: Invalid value"}, "unknown time zone Mars/Olympus"},
		{"time zone with a space", func(cj *batchv1.CronJob) { cj.Spec.TimeZone = ptrTo("Europe/New York") },
			[]string{"spec.timeZone: Invalid value"}, "unknown time zone Europe/New York"},
		{"empty time zone", func(cj *batchv1.CronJob) { cj.Spec.TimeZone = ptrTo("") },
			[]string{"spec.timeZone: Invalid value"}, "timeZone must be nil or non-empty string"},
		{"Local time zone", func(cj *batchv1.CronJob) { cj.Spec.TimeZone = ptrTo("Local") },
			[]string{"spec.timeZone: Invalid value"}, "timeZone must be an explicit time zone"},
		{"53-character name", func(cj *batchv1.CronJob) { cj.Name = strings.Repeat("a", 53) },
			[]string{"metadata.name: Invalid value"}, "must be no more than 52 characters"},
		{"negative startingDeadlineSeconds", func(cj *batchv1.CronJob) { cj.Spec.StartingDeadlineSeconds = ptrTo(int64(-1)) },
			[]string{"spec.startingDeadlineSeconds: Invalid value"}, ""},
		{"unknown concurrencyPolicy", func(cj *batchv1.CronJob) { cj.Spec.ConcurrencyPolicy = "Sometimes" },
			[]string{"spec.concurrencyPolicy: Unsupported value"}, ""},
		{"negative history limits", func(cj *batchv1.CronJob) {
			cj.Spec.SuccessfulJobsHistoryLimit = ptrTo(int32(-1))
			cj.Spec.FailedJobsHistoryLimit = ptrTo(int32(-1))
		}, []string{"spec.failedJobsHistoryLimit: Invalid value", "spec.successfulJobsHistoryLimit: Invalid value"}, ""},
		{"restartPolicy Always", func(cj *batchv1.CronJob) {
			cj.Spec.JobTemplate.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyAlways
		}, []string{"spec.jobTemplate.spec.template.spec.restartPolicy: Unsupported value"}, ""},
		{"template without containers", func(cj *batchv1.CronJob) { cj.Spec.JobTemplate.Spec.Template.Spec.Containers = nil },
			[]string{"spec.jobTemplate.spec.template.spec.containers: Required value"}, ""},
		{"selector", func(cj *batchv1.CronJob) {
			cj.Spec.JobTemplate.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
		}, []string{"spec.jobTemplate.spec.selector: Invalid value"}, "`selector` will be auto-generated"},
		{"manualSelector", func(cj *batchv1.CronJob) { cj.Spec.JobTemplate.Spec.ManualSelector = ptrTo(true) },
			[]string{"spec.jobTemplate.spec.manualSelector: Unsupported value"}, ""},
		{"negative backoffLimit", func(cj *batchv1.CronJob) { cj.Spec.JobTemplate.Spec.BackoffLimit = ptrTo(int32(-1)) },
			[]string{"spec.jobTemplate.spec.backoffLimit: Invalid value"}, ""},
		{"Indexed without completions", func(cj *batchv1.CronJob) {
			cj.Spec.JobTemplate.Spec.CompletionMode = ptrTo(batchv1.IndexedCompletion)
		}, []string{"spec.jobTemplate.spec.completions: Required value"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cj := minimalCronJob()
			CronJobs.Default(cj)
			tt.mutate(cj)
			errs := CronJobs.ValidateObject(cj, nil)
			checkErrors(t, errs, tt.want...)
			if tt.detail != "" {
				checkDetail(t, errs, tt.detail)
			}
		})
	}
}

func TestValidateCronJobUpdate(t *testing.T) {
	t.Run("a long name may stay", func(t *testing.T) {
		old := minimalCronJob()
		old.Name = strings.Repeat("a", 60)
		CronJobs.Default(old)
		cj := old.DeepCopy()
		cj.Spec.Schedule = "@daily"
		checkErrors(t, CronJobs.ValidateObject(cj, old))
	})
	t.Run("TZ may stay in a schedule that had it", func(t *testing.T) {
		old := minimalCronJob()
		old.Spec.Schedule = "TZ=UTC 0 * * * *"
		CronJobs.Default(old)
		cj := old.DeepCopy()
		cj.Spec.Schedule = "TZ=UTC 30 * * * *"
		checkErrors(t, CronJobs.ValidateObject(cj, old))

		cj.Spec.TimeZone = ptrTo("UTC")
		errs := CronJobs.ValidateObject(cj, old)
		checkErrors(t, errs, "spec.schedule: Invalid value")
		checkDetail(t, errs, "cannot use both timeZone field and TZ or CRON_TZ in schedule")
	})
	t.Run("TZ may not be added", func(t *testing.T) {
		old := minimalCronJob()
		CronJobs.Default(old)
		cj := old.DeepCopy()
		cj.Spec.Schedule = "TZ=UTC 0 * * * *"
		checkErrors(t, CronJobs.ValidateObject(cj, old), "spec.schedule: Invalid value")
	})
}

func TestCronJobSchedule(t *testing.T) {
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	cj := minimalCronJob()
	cj.Spec.Schedule = "0 9 * * *"
	cj.Spec.TimeZone = ptrTo("Asia/Tokyo") // UTC+9, no daylight saving
	sched, err := CronJobSchedule(cj)
	if err != nil {
		t.Fatal(err)
	}
	want := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC) // 09:00 in Tokyo
	if got := sched.Next(at); !got.Equal(want) {
		t.Errorf("next run after %s = %s, want %s", at, got.UTC(), want)
	}
}

func TestCronJobTable(t *testing.T) {
	cj := minimalCronJob()
	cj.CreationTimestamp = ago(10 * time.Minute)
	cj.Spec.Suspend = ptrTo(false)
	cj.Status.Active = []corev1.ObjectReference{{Name: "hello-1"}, {Name: "hello-2"}}
	cj.Status.LastScheduleTime = ptrTo(ago(30 * time.Second))
	row := CronJobs.TableRow(cj, tableNow)
	want := []any{"hello", "*/1 * * * *", "<none>", "False", int64(2), "30s", "10m", "app", "nginx:1.27", "<none>"}
	if !reflect.DeepEqual(row.Cells, want) {
		t.Errorf("cells = %#v\nwant    %#v", row.Cells, want)
	}
	var names []string
	for _, c := range CronJobs.TableColumns() {
		if c.Priority == 0 {
			names = append(names, c.Name)
		}
	}
	if got := strings.Join(names, ","); got != "Name,Schedule,Timezone,Suspend,Active,Last Schedule,Age" {
		t.Errorf("columns = %s", got)
	}

	cj.Spec.TimeZone = ptrTo("Europe/Paris")
	cj.Spec.Suspend = nil
	cj.Status = batchv1.CronJobStatus{}
	row = CronJobs.TableRow(cj, tableNow)
	if got := row.Cells[2:6]; !reflect.DeepEqual(got, []any{"Europe/Paris", "<unset>", int64(0), "<none>"}) {
		t.Errorf("timezone, suspend, active, last schedule = %#v", got)
	}
}
