package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/internal/minitest"
)

// TestCronJob runs the cronjob controller on the real clock of the built
// binary: a CronJob on every minute starts its Job within a minute, named
// for its schedule time; with concurrencyPolicy Forbid and a Job whose pods
// run until told otherwise, the next minute starts nothing and says why.
// A schedule with a minute of 61 is refused naming spec.schedule.
func TestCronJob(t *testing.T) {
	c := up(t, minitest.FreeAddr(t), t.TempDir(), "--fast")
	rc := c.client(t)
	ctx := context.Background()
	cronJobs, jobs := client.For[*batchv1.CronJob](rc), client.For[*batchv1.Job](rc)
	events := client.For[*corev1.Event](rc)
	const path = "/apis/batch/v1/namespaces/default/cronjobs"

	code, st := c.do(http.MethodPost, path, "application/json",
		`{"apiVersion":"batch/v1","kind":"CronJob","metadata":{"name":"bad"},"spec":{"schedule":"61 * * * *",`+
			`"jobTemplate":{"spec":{"template":{"spec":{"restartPolicy":"Never","containers":[{"name":"c","image":"busybox"}]}}}}}}`)
	if msg, _ := st["message"].(string); code != http.StatusUnprocessableEntity || !strings.Contains(msg, "spec.schedule") {
		t.Errorf("a minute of 61: %d %v, want 422 naming spec.schedule", code, st)
	}

	tick, err := cronJobs.Create(ctx, &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: "tick", Namespace: "default"},
		Spec: batchv1.CronJobSpec{
			Schedule:          "*/1 * * * *",
			ConcurrencyPolicy: batchv1.ForbidConcurrent,
			JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers:    []corev1.Container{{Name: "sleep", Image: "busybox", Command: []string{"sleep", "infinity"}}},
				},
			}}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}

	owned := func() []*batchv1.Job {
		t.Helper()
		list, err := jobs.List(ctx, "default", metav1.ListOptions{})
		if err != nil {
			t.Fatalf("list jobs: %v", err)
		}
		var out []*batchv1.Job
		for _, j := range list.Items {
			if metav1.IsControlledBy(j, tick) {
				out = append(out, j)
			}
		}
		return out
	}
	// A minute at most, and a little for the controller to act.
	within := func(what string, d time.Duration, cond func() (bool, string)) {
		t.Helper()
		deadline := time.Now().Add(d)
		var last string
		for time.Now().Before(deadline) {
			ok, state := cond()
			if ok {
				return
			}
			last = state
			time.Sleep(250 * time.Millisecond)
		}
		t.Fatalf("timed out waiting for %s: %s", what, last)
	}

	var first *batchv1.Job
	within("the first Job", 75*time.Second, func() (bool, string) {
		js := owned()
		if len(js) > 0 {
			first = js[0]
		}
		return len(js) == 1, fmt.Sprintf("%d jobs", len(js))
	})
	scheduled, err := time.Parse(time.RFC3339, first.Annotations[batchv1.CronJobScheduledTimestampAnnotation])
	if err != nil {
		t.Fatalf("job %s: scheduled-timestamp: %v", first.Name, err)
	}
	if want := fmt.Sprintf("tick-%d", scheduled.Unix()/60); first.Name != want || scheduled.Second() != 0 {
		t.Errorf("job %s scheduled at %s, want %s on a whole minute", first.Name, scheduled, want)
	}
	within("tick to list its Job as active", 10*time.Second, func() (bool, string) {
		cur, err := cronJobs.Get(ctx, "default", "tick")
		if err != nil {
			return false, err.Error()
		}
		return len(cur.Status.Active) == 1 && cur.Status.Active[0].UID == first.UID && cur.Status.LastScheduleTime != nil,
			fmt.Sprintf("status %+v", cur.Status)
	})

	// The next minute: the first Job still runs, so Forbid starts nothing.
	within("JobAlreadyActive at the next minute", 75*time.Second, func() (bool, string) {
		list, err := events.List(ctx, "default", metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range list.Items {
			if e.Reason == "JobAlreadyActive" && e.InvolvedObject.UID == tick.UID && e.Source.Component == "cronjob-controller" {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d events", len(list.Items))
	})
	if js := owned(); len(js) != 1 {
		t.Errorf("%d jobs while %s is active under Forbid, want 1", len(js), first.Name)
	}
}
