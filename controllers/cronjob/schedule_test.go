package cronjob

import (
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/api"
)

var t0 = time.Date(2026, 3, 10, 12, 0, 30, 0, time.UTC)

func scheduledCronJob(schedule string, created time.Time, last *time.Time, deadline *int64) *batchv1.CronJob {
	cj := &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: "default", CreationTimestamp: metav1.NewTime(created)},
		Spec:       batchv1.CronJobSpec{Schedule: schedule, StartingDeadlineSeconds: deadline},
	}
	if last != nil {
		cj.Status.LastScheduleTime = &metav1.Time{Time: *last}
	}
	return cj
}

func TestMostRecentScheduleTime(t *testing.T) {
	at := func(h, m int) time.Time { return time.Date(2026, 3, 10, h, m, 0, 0, time.UTC) }
	ptr := func(t time.Time) *time.Time { return &t }
	sixty := int64(60)
	tests := []struct {
		name       string
		schedule   string
		last       *time.Time
		deadline   *int64
		now        time.Time
		want       *time.Time
		wantMissed int64
	}{
		{"nothing due before the first time", "*/5 * * * *", nil, nil, at(12, 4), nil, 0},
		{"the first time", "*/5 * * * *", nil, nil, at(12, 5), ptr(at(12, 5)), 1},
		{"the last of several missed", "*/5 * * * *", nil, nil, at(12, 22), ptr(at(12, 20)), 4},
		{"nothing since the last", "*/5 * * * *", ptr(at(12, 20)), nil, at(12, 24), nil, 0},
		{"the next after the last", "*/5 * * * *", ptr(at(12, 20)), nil, at(12, 26), ptr(at(12, 25)), 1},
		{"a deadline hides older times", "*/5 * * * *", nil, &sixty, at(12, 22), nil, 0},
		{"a deadline keeps a recent time", "*/5 * * * *", nil, &sixty, at(12, 20).Add(30 * time.Second), ptr(at(12, 20)), 1},
		{"an irregular schedule", "30 6-16/4 * * *", nil, nil, at(23, 0), ptr(at(14, 30)), 0},
		{"every", "@every 7m", nil, nil, t0.Add(30 * time.Minute), ptr(t0.Add(28 * time.Minute)), 4},
		{"more than a hundred missed", "* * * * *", nil, nil, t0.Add(200 * time.Minute), ptr(at(15, 20)), 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cj := scheduledCronJob(tt.schedule, t0, tt.last, tt.deadline)
			sched, err := api.CronJobSchedule(cj)
			if err != nil {
				t.Fatal(err)
			}
			u, err := mostRecentScheduleTime(cj, tt.now, sched, true)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tt.want == nil && u.mostRecent != nil:
				t.Errorf("most recent = %s, want none", u.mostRecent)
			case tt.want != nil && (u.mostRecent == nil || !u.mostRecent.Equal(*tt.want)):
				t.Errorf("most recent = %v, want %s", u.mostRecent, tt.want)
			}
			if tt.wantMissed != 0 && u.missed != tt.wantMissed {
				t.Errorf("missed = %d, want %d", u.missed, tt.wantMissed)
			}
		})
	}

	t.Run("a schedule that never comes twice", func(t *testing.T) {
		cj := scheduledCronJob("59 23 31 2 *", t0, nil, nil)
		sched, err := api.CronJobSchedule(cj)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := mostRecentScheduleTime(cj, t0.Add(time.Hour), sched, true); err == nil {
			t.Errorf("31 February parsed into a schedule with a gap")
		}
	})
}

func TestNextScheduleDelay(t *testing.T) {
	cj := scheduledCronJob("*/5 * * * *", t0, nil, nil)
	sched, _ := api.CronJobSchedule(cj)
	// Created 12:00:30: the next time is 12:05, and the sync comes just after.
	if got, want := nextScheduleDelay(cj, t0, sched), 4*time.Minute+30*time.Second+nextScheduleDelta; got != want {
		t.Errorf("delay = %s, want %s", got, want)
	}
	// Times missed since creation: the next one from now.
	now := t0.Add(12 * time.Minute) // 12:12:30
	if got, want := nextScheduleDelay(cj, now, sched), 2*time.Minute+30*time.Second+nextScheduleDelta; got != want {
		t.Errorf("delay after missed times = %s, want %s", got, want)
	}
}

func TestJobFromTemplate(t *testing.T) {
	cj := scheduledCronJob("0 9 * * *", t0, nil, nil)
	cj.UID = "cj-uid"
	cj.Spec.TimeZone = ptrTo("Asia/Tokyo")
	cj.Spec.JobTemplate.Labels = map[string]string{"app": "report"}
	cj.Spec.JobTemplate.Annotations = map[string]string{"team": "a"}
	cj.Spec.JobTemplate.Spec.BackoffLimit = ptrTo(int32(2))
	scheduled := time.Date(2026, 3, 11, 0, 0, 0, 0, time.UTC)
	job, err := jobFromTemplate(cj, scheduled)
	if err != nil {
		t.Fatal(err)
	}
	if want := "hello-29553120"; job.Name != want {
		t.Errorf("name = %s, want %s (minutes since the epoch)", job.Name, want)
	}
	if got := job.Annotations[batchv1.CronJobScheduledTimestampAnnotation]; got != "2026-03-11T09:00:00+09:00" {
		t.Errorf("scheduled annotation = %q, want the time in Tokyo", got)
	}
	if job.Annotations["team"] != "a" || job.Labels["app"] != "report" || *job.Spec.BackoffLimit != 2 {
		t.Errorf("job %+v lost the template's labels, annotations or spec", job)
	}
	ref := metav1.GetControllerOf(job)
	if ref == nil || ref.Kind != "CronJob" || ref.APIVersion != "batch/v1" || ref.UID != "cj-uid" || !*ref.BlockOwnerDeletion {
		t.Errorf("controller reference = %+v", ref)
	}
	if cj.Spec.JobTemplate.Annotations[batchv1.CronJobScheduledTimestampAnnotation] != "" {
		t.Errorf("the template was changed")
	}
}

func ptrTo[T any](v T) *T { return &v }
