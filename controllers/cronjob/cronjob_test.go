package cronjob

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/client/record"
	"github.com/minictl/minictl/clock"
	"github.com/minictl/minictl/controllers/internal/controller"
	"github.com/minictl/minictl/controllers/internal/controllertest"
)

// These tests run the controller against a real API server on a real etcd,
// on a fake clock that only the test moves. No Job controller runs: a Job
// finishes when the test writes its status. The API server stamps
// creationTimestamp with the real time, and the fake clock starts at it,
// so schedule times are counted from the CronJob's real creation.

const ns = "default"

type running struct {
	clock    *clock.Fake
	cjs      *client.Client[*batchv1.CronJob]
	jobs     *client.Client[*batchv1.Job]
	recorder *record.FakeRecorder
}

func runController(t *testing.T) *running {
	t.Helper()
	env := controllertest.Start(t)
	rec := &record.FakeRecorder{}
	clk := clock.NewFake(time.Now())
	c, err := New(Options{Common: controller.Common{
		Client: env.Client, Informers: env.Informers, Recorder: rec, Logger: controllertest.Logger(t), Clock: clk,
	}})
	if err != nil {
		t.Fatal(err)
	}
	controllertest.Run(t, env.Informers, 2, c)
	return &running{
		clock: clk, recorder: rec,
		cjs: client.For[*batchv1.CronJob](env.Client), jobs: client.For[*batchv1.Job](env.Client),
	}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func newCronJob(name, schedule string) *batchv1.CronJob {
	return &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: batchv1.CronJobSpec{
			Schedule: schedule,
			JobTemplate: batchv1.JobTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers:    []corev1.Container{{Name: "work", Image: "busybox"}},
				}}},
			},
		},
	}
}

func (r *running) create(t *testing.T, cj *batchv1.CronJob) *batchv1.CronJob {
	t.Helper()
	out, err := r.cjs.Create(testCtx(t), cj)
	if err != nil {
		t.Fatalf("create cronjob: %v", err)
	}
	return out
}

func (r *running) get(t *testing.T, name string) *batchv1.CronJob {
	t.Helper()
	out, err := r.cjs.Get(testCtx(t), ns, name)
	if err != nil {
		t.Fatalf("get cronjob: %v", err)
	}
	return out
}

// minuteAfter is the first whole minute after t: when "*/1 * * * *" next
// fires.
func minuteAfter(t time.Time) time.Time { return t.Truncate(time.Minute).Add(time.Minute) }

// stepTo moves the clock to at once the controller waits for a time no
// later than at: the step then wakes it.
func (r *running) stepTo(t *testing.T, at time.Time) {
	t.Helper()
	r.waitForWaiter(t, at)
	r.clock.SetTime(at)
}

// waitForWaiter waits until the controller waits for a time no later than
// at: it has synced, and will sync again by at.
func (r *running) waitForWaiter(t *testing.T, at time.Time) {
	t.Helper()
	controllertest.Eventually(t, "the controller to wait for "+at.Format(time.RFC3339), func() (bool, string) {
		w := r.clock.Waiters()
		return len(w) > 0 && !w[0].After(at), fmt.Sprintf("waiting for %v", w)
	})
}

// ownedJobs returns the names of the Jobs cj controls, sorted.
func (r *running) ownedJobs(t *testing.T, cj *batchv1.CronJob) []string {
	t.Helper()
	list, err := r.jobs.List(testCtx(t), ns, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list jobs: %v", err)
	}
	var names []string
	for _, j := range list.Items {
		if metav1.IsControlledBy(j, cj) {
			names = append(names, j.Name)
		}
	}
	slices.Sort(names)
	return names
}

func (r *running) waitForJobs(t *testing.T, cj *batchv1.CronJob, want ...string) {
	t.Helper()
	slices.Sort(want)
	controllertest.Eventually(t, fmt.Sprintf("jobs %v", want), func() (bool, string) {
		got := r.ownedJobs(t, cj)
		return slices.Equal(got, want), fmt.Sprintf("jobs %v", got)
	})
}

func activeNames(cj *batchv1.CronJob) []string {
	var names []string
	for _, ref := range cj.Status.Active {
		names = append(names, ref.Name)
	}
	slices.Sort(names)
	return names
}

func (r *running) waitForActive(t *testing.T, name string, want ...string) *batchv1.CronJob {
	t.Helper()
	slices.Sort(want)
	var cj *batchv1.CronJob
	controllertest.Eventually(t, fmt.Sprintf("%s active %v", name, want), func() (bool, string) {
		cj = r.get(t, name)
		return slices.Equal(activeNames(cj), want), fmt.Sprintf("active %v", activeNames(cj))
	})
	return cj
}

// finish writes what the Job controller writes when a Job ends.
func (r *running) finish(t *testing.T, name string, how batchv1.JobConditionType, started, ended time.Time) {
	t.Helper()
	job, err := r.jobs.Get(testCtx(t), ns, name)
	if err != nil {
		t.Fatalf("get job: %v", err)
	}
	start, end := metav1.NewTime(started), metav1.NewTime(ended)
	job.Status.StartTime = &start
	cond := func(typ batchv1.JobConditionType) batchv1.JobCondition {
		return batchv1.JobCondition{Type: typ, Status: corev1.ConditionTrue, LastProbeTime: end, LastTransitionTime: end}
	}
	if how == batchv1.JobComplete {
		job.Status.Succeeded = 1
		job.Status.CompletionTime = &end
		job.Status.Conditions = []batchv1.JobCondition{cond(batchv1.JobSuccessCriteriaMet), cond(batchv1.JobComplete)}
	} else {
		job.Status.Failed = 1
		job.Status.Conditions = []batchv1.JobCondition{cond(batchv1.JobFailureTarget), cond(batchv1.JobFailed)}
	}
	if _, err := r.jobs.UpdateStatus(testCtx(t), job); err != nil {
		t.Fatalf("finish job %s: %v", name, err)
	}
}

func jobNameAt(cj string, at time.Time) string { return fmt.Sprintf("%s-%d", cj, at.Unix()/60) }

func (r *running) events(reason string) []string { return r.recorder.WithReason(reason) }

func TestScheduleCreatesJobsAtTheirTimes(t *testing.T) {
	r := runController(t)
	cj := r.create(t, newCronJob("hello", "*/1 * * * *"))
	m1 := minuteAfter(cj.CreationTimestamp.Time)

	r.waitForWaiter(t, m1.Add(time.Second))
	r.clock.SetTime(m1.Add(-time.Second))
	if jobs := r.ownedJobs(t, cj); len(jobs) != 0 {
		t.Fatalf("jobs %v a second before the first schedule time", jobs)
	}

	r.stepTo(t, m1.Add(time.Second))
	first := jobNameAt("hello", m1)
	r.waitForJobs(t, cj, first)
	job, err := r.jobs.Get(testCtx(t), ns, first)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := job.Annotations[batchv1.CronJobScheduledTimestampAnnotation], m1.UTC().Format(time.RFC3339); got != want {
		t.Errorf("scheduled-timestamp %q, want %q", got, want)
	}
	if job.Labels["app"] != "hello" || job.Spec.Template.Spec.Containers[0].Image != "busybox" {
		t.Errorf("job %s does not carry the template: labels %v", job.Name, job.Labels)
	}
	got := r.waitForActive(t, "hello", first)
	if got.Status.LastScheduleTime == nil || !got.Status.LastScheduleTime.Equal(&metav1.Time{Time: m1}) {
		t.Errorf("lastScheduleTime %v, want %s", got.Status.LastScheduleTime, m1)
	}
	if ref := got.Status.Active[0]; ref.Kind != "Job" || ref.APIVersion != "batch/v1" || ref.UID != job.UID {
		t.Errorf("active reference %+v, want the Job's", ref)
	}

	// Allow: the next time starts a second Job beside the running first.
	m2 := m1.Add(time.Minute)
	r.stepTo(t, m2.Add(time.Second))
	second := jobNameAt("hello", m2)
	r.waitForJobs(t, cj, first, second)
	r.waitForActive(t, "hello", first, second)
	if n := len(r.events("SuccessfulCreate")); n != 2 {
		t.Errorf("%d SuccessfulCreate events, want 2: %v", n, r.recorder.Events())
	}
}

func TestForbidSkipsWhileAJobIsActive(t *testing.T) {
	r := runController(t)
	in := newCronJob("forbid", "*/1 * * * *")
	in.Spec.ConcurrencyPolicy = batchv1.ForbidConcurrent
	cj := r.create(t, in)
	m1 := minuteAfter(cj.CreationTimestamp.Time)
	m2 := m1.Add(time.Minute)

	r.stepTo(t, m1.Add(time.Second))
	first := jobNameAt("forbid", m1)
	r.waitForActive(t, "forbid", first)

	r.stepTo(t, m2.Add(time.Second))
	controllertest.Eventually(t, "JobAlreadyActive", func() (bool, string) {
		return len(r.events("JobAlreadyActive")) > 0, strings.Join(r.recorder.Events(), "; ")
	})
	if jobs := r.ownedJobs(t, cj); !slices.Equal(jobs, []string{first}) {
		t.Fatalf("jobs %v while %s is active, want only it", jobs, first)
	}

	// Once the first is done, the time it held up starts at once: there
	// is no deadline to have missed.
	r.finish(t, first, batchv1.JobComplete, m1, m2.Add(2*time.Second))
	second := jobNameAt("forbid", m2)
	r.waitForJobs(t, cj, first, second)
	got := r.waitForActive(t, "forbid", second)
	if got.Status.LastSuccessfulTime == nil || !got.Status.LastSuccessfulTime.Equal(&metav1.Time{Time: m2.Add(2 * time.Second)}) {
		t.Errorf("lastSuccessfulTime %v, want the first job's completion", got.Status.LastSuccessfulTime)
	}
	if len(r.events("SawCompletedJob")) == 0 {
		t.Errorf("no SawCompletedJob event: %v", r.recorder.Events())
	}
}

func TestReplaceDeletesTheActiveJob(t *testing.T) {
	r := runController(t)
	in := newCronJob("replace", "*/1 * * * *")
	in.Spec.ConcurrencyPolicy = batchv1.ReplaceConcurrent
	cj := r.create(t, in)
	m1 := minuteAfter(cj.CreationTimestamp.Time)
	m2 := m1.Add(time.Minute)

	r.stepTo(t, m1.Add(time.Second))
	first := jobNameAt("replace", m1)
	r.waitForActive(t, "replace", first)

	r.stepTo(t, m2.Add(time.Second))
	second := jobNameAt("replace", m2)
	r.waitForJobs(t, cj, second)
	r.waitForActive(t, "replace", second)
	if ev := r.events("SuccessfulDelete"); len(ev) != 1 || !strings.Contains(ev[0], first) {
		t.Errorf("SuccessfulDelete events %v, want one for %s", ev, first)
	}
}

func TestSuspendStartsNothingUntilResumed(t *testing.T) {
	r := runController(t)
	in := newCronJob("paused", "*/1 * * * *")
	in.Spec.Suspend = ptrTo(true)
	cj := r.create(t, in)
	control := r.create(t, newCronJob("control", "*/1 * * * *"))
	m1 := minuteAfter(cj.CreationTimestamp.Time)
	if c1 := minuteAfter(control.CreationTimestamp.Time); !c1.Equal(m1) {
		t.Skipf("the two CronJobs were created either side of a minute (%s, %s)", m1, c1)
	}

	r.stepTo(t, m1.Add(30*time.Second))
	r.waitForJobs(t, control, jobNameAt("control", m1))
	if jobs := r.ownedJobs(t, cj); len(jobs) != 0 {
		t.Fatalf("suspended CronJob started %v", jobs)
	}

	// Resumed, it starts the time it missed: no deadline says it is late.
	cur := r.get(t, "paused")
	cur.Spec.Suspend = ptrTo(false)
	if _, err := r.cjs.Update(testCtx(t), cur); err != nil {
		t.Fatal(err)
	}
	r.waitForJobs(t, cj, jobNameAt("paused", m1))
}

func TestStartingDeadlineSecondsMissesLateTimes(t *testing.T) {
	r := runController(t)
	in := newCronJob("deadline", "*/1 * * * *")
	in.Spec.Suspend = ptrTo(true)
	in.Spec.StartingDeadlineSeconds = ptrTo(int64(10))
	cj := r.create(t, in)
	m1 := minuteAfter(cj.CreationTimestamp.Time)
	m2 := m1.Add(time.Minute)

	// 30s after m1, with a 10s deadline, m1 is too late to start.
	r.clock.SetTime(m1.Add(30 * time.Second))
	cur := r.get(t, "deadline")
	cur.Spec.Suspend = ptrTo(false)
	if _, err := r.cjs.Update(testCtx(t), cur); err != nil {
		t.Fatal(err)
	}
	// The sync after the resume waits for m2: it has decided about m1.
	r.stepTo(t, m2.Add(time.Second))
	r.waitForJobs(t, cj, jobNameAt("deadline", m2))
	got := r.waitForActive(t, "deadline", jobNameAt("deadline", m2))
	if !got.Status.LastScheduleTime.Equal(&metav1.Time{Time: m2}) {
		t.Errorf("lastScheduleTime %v, want %s", got.Status.LastScheduleTime, m2)
	}
}

func TestHistoryLimitsDeleteTheOldestFinishedJobs(t *testing.T) {
	r := runController(t)
	in := newCronJob("history", "*/1 * * * *")
	in.Spec.SuccessfulJobsHistoryLimit = ptrTo(int32(1))
	in.Spec.FailedJobsHistoryLimit = ptrTo(int32(0))
	cj := r.create(t, in)
	m1 := minuteAfter(cj.CreationTimestamp.Time)
	m2, m3 := m1.Add(time.Minute), m1.Add(2*time.Minute)
	j1, j2, j3 := jobNameAt("history", m1), jobNameAt("history", m2), jobNameAt("history", m3)

	r.stepTo(t, m1.Add(time.Second))
	r.waitForActive(t, "history", j1)
	r.finish(t, j1, batchv1.JobComplete, m1, m1.Add(10*time.Second))
	r.waitForActive(t, "history")

	r.stepTo(t, m2.Add(time.Second))
	r.waitForActive(t, "history", j2)
	r.finish(t, j2, batchv1.JobComplete, m2, m2.Add(10*time.Second))
	// Two succeeded, a limit of one: the older goes.
	r.waitForJobs(t, cj, j2)

	r.stepTo(t, m3.Add(time.Second))
	r.waitForActive(t, "history", j3)
	r.finish(t, j3, batchv1.JobFailed, m3, m3.Add(10*time.Second))
	// No failed Job is kept.
	r.waitForJobs(t, cj, j2)
	got := r.waitForActive(t, "history")
	if got.Status.LastSuccessfulTime == nil || !got.Status.LastSuccessfulTime.Equal(&metav1.Time{Time: m2.Add(10 * time.Second)}) {
		t.Errorf("lastSuccessfulTime %v, want %s's completion", got.Status.LastSuccessfulTime, j2)
	}
	if n := len(r.events("SuccessfulDelete")); n != 2 {
		t.Errorf("%d SuccessfulDelete events, want 2: %v", n, r.recorder.Events())
	}
}

func TestTimeZone(t *testing.T) {
	r := runController(t)
	in := newCronJob("tokyo", "0 9 * * *")
	in.Spec.TimeZone = ptrTo("Asia/Tokyo") // UTC+9 all year
	cj := r.create(t, in)
	// 09:00 in Tokyo is midnight UTC.
	next := cj.CreationTimestamp.UTC().Truncate(24 * time.Hour).Add(24 * time.Hour)

	r.waitForWaiter(t, next.Add(time.Second))
	r.clock.SetTime(next.Add(-time.Minute))
	if jobs := r.ownedJobs(t, cj); len(jobs) != 0 {
		t.Fatalf("jobs %v before 09:00 in Tokyo", jobs)
	}
	r.stepTo(t, next.Add(time.Second))
	name := jobNameAt("tokyo", next)
	r.waitForJobs(t, cj, name)
	job, err := r.jobs.Get(testCtx(t), ns, name)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := job.Annotations[batchv1.CronJobScheduledTimestampAnnotation], next.In(mustLoad(t, "Asia/Tokyo")).Format(time.RFC3339); got != want || !strings.HasSuffix(got, "T09:00:00+09:00") {
		t.Errorf("scheduled-timestamp %q, want %q", got, want)
	}
}

func TestMissingActiveJobIsForgotten(t *testing.T) {
	r := runController(t)
	cj := r.create(t, newCronJob("gone", "*/1 * * * *"))
	m1 := minuteAfter(cj.CreationTimestamp.Time)
	r.stepTo(t, m1.Add(time.Second))
	first := jobNameAt("gone", m1)
	r.waitForActive(t, "gone", first)

	if err := r.jobs.Delete(testCtx(t), ns, first, metav1.DeleteOptions{PropagationPolicy: new(metav1.DeletePropagationBackground)}); err != nil {
		t.Fatal(err)
	}
	r.waitForActive(t, "gone")
	if len(r.events("MissingJob")) != 1 {
		t.Errorf("MissingJob events %v, want one", r.events("MissingJob"))
	}
}

func mustLoad(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func TestTooManyMissedTimesStartsOnlyTheLast(t *testing.T) {
	r := runController(t)
	cj := r.create(t, newCronJob("late", "*/1 * * * *"))
	m1 := minuteAfter(cj.CreationTimestamp.Time)
	// The controller was away for 200 minutes: the last time starts, and
	// the gap is reported.
	last := m1.Add(199 * time.Minute)
	r.stepTo(t, last.Add(time.Second))
	r.waitForJobs(t, cj, jobNameAt("late", last))
	controllertest.Eventually(t, "TooManyMissedTimes", func() (bool, string) {
		return len(r.events("TooManyMissedTimes")) == 1, strings.Join(r.recorder.Events(), "; ")
	})
}

func TestAJobItDidNotCreateIsReported(t *testing.T) {
	r := runController(t)
	cj := r.create(t, newCronJob("manual", "@yearly"))
	// What kubectl create job --from=cronjob/manual makes.
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name: "manual-now", Namespace: ns,
			Annotations:     map[string]string{"cronjob.kubernetes.io/instantiate": "manual"},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(cj, controllerKind)},
		},
		Spec: cj.Spec.JobTemplate.Spec,
	}
	if _, err := r.jobs.Create(testCtx(t), job); err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, "UnexpectedJob", func() (bool, string) {
		ev := r.events("UnexpectedJob")
		return len(ev) > 0 && strings.Contains(ev[0], "manual-now"), strings.Join(r.recorder.Events(), "; ")
	})
	if got := r.get(t, "manual"); len(got.Status.Active) != 0 {
		t.Errorf("active %v: a Job it did not start is not its to track", activeNames(got))
	}
}
