package job

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
	"github.com/minictl/minictl/controllers/internal/controller"
	"github.com/minictl/minictl/controllers/internal/controllertest"
)

// These tests run the controller against a real API server on a real
// etcd. No kubelet or scheduler runs: a test plays the kubelet, writing a
// pod's status as it would when the pod's containers exit.

const ns = "default"

type running struct {
	pods     *client.Client[*corev1.Pod]
	jobs     *client.Client[*batchv1.Job]
	recorder *record.FakeRecorder
}

func runController(t *testing.T) *running {
	t.Helper()
	env := controllertest.Start(t)
	rec := &record.FakeRecorder{}
	c, err := New(Options{
		Common: controller.Common{Client: env.Client, Informers: env.Informers, Recorder: rec, Logger: controllertest.Logger(t)},
		// Failures back off briefly, so that a test sees the back-off
		// without waiting for it long.
		BackoffBase: 100 * time.Millisecond, BackoffMax: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	controllertest.Run(t, env.Informers, 2, c)
	return &running{pods: client.For[*corev1.Pod](env.Client), jobs: client.For[*batchv1.Job](env.Client), recorder: rec}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func newJob(name string, mutate func(j *batchv1.Job)) *batchv1.Job {
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "work", Image: "busybox"}},
		}}},
	}
	if mutate != nil {
		mutate(j)
	}
	return j
}

func (r *running) create(t *testing.T, j *batchv1.Job) *batchv1.Job {
	t.Helper()
	out, err := r.jobs.Create(testCtx(t), j)
	if err != nil {
		t.Fatalf("create job: %v", err)
	}
	return out
}

func (r *running) get(t *testing.T, name string) *batchv1.Job {
	t.Helper()
	j, err := r.jobs.Get(testCtx(t), ns, name)
	if err != nil {
		t.Fatalf("get job: %v", err)
	}
	return j
}

// podsOf returns the pods j controls, oldest first.
func (r *running) podsOf(t *testing.T, j *batchv1.Job) []*corev1.Pod {
	t.Helper()
	list, err := r.pods.List(testCtx(t), ns, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list pods: %v", err)
	}
	var out []*corev1.Pod
	for _, p := range list.Items {
		if ref := metav1.GetControllerOf(p); ref != nil && ref.UID == j.UID {
			out = append(out, p)
		}
	}
	return out
}

func running_(pods []*corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range pods {
		if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed && p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// waitActive waits until j has n pods running, and returns them.
func (r *running) waitActive(t *testing.T, j *batchv1.Job, n int) []*corev1.Pod {
	t.Helper()
	var pods []*corev1.Pod
	controllertest.Eventually(t, fmt.Sprintf("%d active pods of %s", n, j.Name), func() (bool, string) {
		pods = running_(r.podsOf(t, j))
		return len(pods) == n, fmt.Sprintf("%d", len(pods))
	})
	return pods
}

// exit ends pod as a kubelet would when its one container exits with
// code: Succeeded for 0, else Failed.
func (r *running) exit(t *testing.T, pod *corev1.Pod, code int32) {
	t.Helper()
	phase := corev1.PodSucceeded
	if code != 0 {
		phase = corev1.PodFailed
	}
	now := metav1.Now()
	for attempt := 0; ; attempt++ {
		cur, err := r.pods.Get(testCtx(t), pod.Namespace, pod.Name)
		if err != nil {
			t.Fatalf("get pod: %v", err)
		}
		cur.Status.Phase = phase
		cur.Status.ContainerStatuses = []corev1.ContainerStatus{{
			Name: "work", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, FinishedAt: now}},
		}}
		if _, err = r.pods.UpdateStatus(testCtx(t), cur); err == nil {
			return
		}
		if !client.IsConflict(err) || attempt > 5 {
			t.Fatalf("update pod status: %v", err)
		}
	}
}

func (r *running) waitCondition(t *testing.T, name string, ct batchv1.JobConditionType) *batchv1.Job {
	t.Helper()
	var j *batchv1.Job
	controllertest.Eventually(t, fmt.Sprintf("%s %s", name, ct), func() (bool, string) {
		j = r.get(t, name)
		c := findCondition(j.Status.Conditions, ct)
		return c != nil && c.Status == corev1.ConditionTrue, fmt.Sprintf("status %+v", j.Status)
	})
	return j
}

func conditionTypes(j *batchv1.Job) []string {
	var out []string
	for _, c := range j.Status.Conditions {
		out = append(out, string(c.Type)+"="+string(c.Status)+"/"+c.Reason)
	}
	return out
}

func (r *running) hasEvent(prefix string) bool {
	for _, e := range r.recorder.Events() {
		if strings.HasPrefix(e, prefix) {
			return true
		}
	}
	return false
}

// TestCompletionsWithParallelism runs a Job of 5 completions, 2 at a time:
// never more than 2 active, replacements as pods succeed, exactly 5 pods,
// then SuccessCriteriaMet and Complete, every finalizer gone.
func TestCompletionsWithParallelism(t *testing.T) {
	r := runController(t)
	j := r.create(t, newJob("five", func(j *batchv1.Job) {
		j.Spec.Completions, j.Spec.Parallelism = new(int32(5)), new(int32(2))
	}))
	for done := 0; done < 5; {
		want := min(2, 5-done)
		active := r.waitActive(t, j, want)
		for _, p := range active {
			if !slices.Contains(p.Finalizers, batchv1.JobTrackingFinalizer) {
				t.Errorf("pod %s has finalizers %v, want the tracking finalizer", p.Name, p.Finalizers)
			}
		}
		r.exit(t, active[0], 0)
		done++
		if n := len(running_(r.podsOf(t, j))); n > 2 {
			t.Fatalf("%d active pods, parallelism is 2", n)
		}
	}
	j = r.waitCondition(t, "five", batchv1.JobComplete)
	if j.Status.Succeeded != 5 || j.Status.Failed != 0 || j.Status.Active != 0 || j.Status.CompletionTime == nil || j.Status.StartTime == nil {
		t.Errorf("status %+v, want 5 succeeded, none active, start and completion times", j.Status)
	}
	if got, want := conditionTypes(j), []string{"SuccessCriteriaMet=True/CompletionsReached", "Complete=True/CompletionsReached"}; !slices.Equal(got, want) {
		t.Errorf("conditions %v, want %v", got, want)
	}
	if u := j.Status.UncountedTerminatedPods; u == nil || len(u.Succeeded)+len(u.Failed) != 0 {
		t.Errorf("uncountedTerminatedPods %+v, want empty", u)
	}
	pods := r.podsOf(t, j)
	if len(pods) != 5 {
		t.Errorf("%d pods, want 5", len(pods))
	}
	for _, p := range pods {
		if slices.Contains(p.Finalizers, batchv1.JobTrackingFinalizer) {
			t.Errorf("pod %s still has the tracking finalizer", p.Name)
		}
	}
	if !r.hasEvent("Normal Completed Job completed") || !r.hasEvent("Normal SuccessfulCreate Created pod: five-") {
		t.Errorf("events %v, want SuccessfulCreate and Completed", r.recorder.Events())
	}
}

// TestBackoffLimit fails a Job whose every pod fails, after backoffLimit+1
// pods, with BackoffLimitExceeded.
func TestBackoffLimit(t *testing.T) {
	r := runController(t)
	j := r.create(t, newJob("failing", func(j *batchv1.Job) { j.Spec.BackoffLimit = new(int32(2)) }))
	for range 3 {
		r.exit(t, r.waitActive(t, j, 1)[0], 1)
	}
	j = r.waitCondition(t, "failing", batchv1.JobFailed)
	if j.Status.Failed != 3 || j.Status.Succeeded != 0 || len(r.podsOf(t, j)) != 3 {
		t.Errorf("failed %d succeeded %d pods %d, want 3 0 3", j.Status.Failed, j.Status.Succeeded, len(r.podsOf(t, j)))
	}
	if got, want := conditionTypes(j), []string{"FailureTarget=True/BackoffLimitExceeded", "Failed=True/BackoffLimitExceeded"}; !slices.Equal(got, want) {
		t.Errorf("conditions %v, want %v", got, want)
	}
	if c := findCondition(j.Status.Conditions, batchv1.JobFailed); c.Message != "Job has reached the specified backoff limit" {
		t.Errorf("message %q", c.Message)
	}
	if !r.hasEvent("Warning BackoffLimitExceeded Job has reached the specified backoff limit") {
		t.Errorf("events %v, want BackoffLimitExceeded", r.recorder.Events())
	}
}

// TestIndexed gives each pod its index, and completes once every index
// succeeded, whatever the order.
func TestIndexed(t *testing.T) {
	r := runController(t)
	j := r.create(t, newJob("idx", func(j *batchv1.Job) {
		j.Spec.Completions, j.Spec.Parallelism = new(int32(3)), new(int32(3))
		j.Spec.CompletionMode = new(batchv1.IndexedCompletion)
	}))
	pods := r.waitActive(t, j, 3)
	byIndex := map[string]*corev1.Pod{}
	for _, p := range pods {
		ix := p.Annotations[batchv1.JobCompletionIndexAnnotation]
		byIndex[ix] = p
		if p.Labels[batchv1.JobCompletionIndexAnnotation] != ix || p.Spec.Hostname != "idx-"+ix || !strings.HasPrefix(p.Name, "idx-"+ix+"-") {
			t.Errorf("pod %s: label %q hostname %q, want index %s", p.Name, p.Labels[batchv1.JobCompletionIndexAnnotation], p.Spec.Hostname, ix)
		}
		env := p.Spec.Containers[0].Env
		if len(env) != 1 || env[0].Name != "JOB_COMPLETION_INDEX" || env[0].ValueFrom == nil ||
			env[0].ValueFrom.FieldRef.FieldPath != "metadata.annotations['batch.kubernetes.io/job-completion-index']" {
			t.Errorf("pod %s env %+v, want JOB_COMPLETION_INDEX from the annotation", p.Name, env)
		}
	}
	if len(byIndex) != 3 || byIndex["0"] == nil || byIndex["2"] == nil {
		t.Fatalf("indexes %v, want 0, 1, 2", byIndex)
	}
	r.exit(t, byIndex["2"], 0)
	controllertest.Eventually(t, "completedIndexes 2", func() (bool, string) {
		j = r.get(t, "idx")
		return j.Status.CompletedIndexes == "2" && j.Status.Succeeded == 1, fmt.Sprintf("%+v", j.Status)
	})
	r.exit(t, byIndex["1"], 1) // index 1 fails once: a new pod for it
	var again []*corev1.Pod
	controllertest.Eventually(t, "a new pod for index 1", func() (bool, string) {
		again = running_(r.podsOf(t, j))
		return len(again) == 2, fmt.Sprintf("%d running", len(again))
	})
	for _, p := range again {
		r.exit(t, p, 0)
	}
	j = r.waitCondition(t, "idx", batchv1.JobComplete)
	if j.Status.CompletedIndexes != "0-2" || j.Status.Succeeded != 3 || j.Status.Failed != 1 {
		t.Errorf("completedIndexes %q succeeded %d failed %d, want 0-2, 3 and 1", j.Status.CompletedIndexes, j.Status.Succeeded, j.Status.Failed)
	}
}

// TestPodFailurePolicy: an Ignore rule lets a failure go uncounted and
// replaces the pod; a FailJob rule fails the Job at once with its message.
func TestPodFailurePolicy(t *testing.T) {
	r := runController(t)
	j := r.create(t, newJob("policy", func(j *batchv1.Job) {
		j.Spec.BackoffLimit = new(int32(0))
		j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{
			{Action: batchv1.PodFailurePolicyActionIgnore, OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
				Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{3}}},
			{Action: batchv1.PodFailurePolicyActionFailJob, OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
				Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{42}}},
		}}
	}))
	first := r.waitActive(t, j, 1)[0]
	r.exit(t, first, 3)
	second := r.waitActive(t, j, 1)[0]
	if second.UID == first.UID {
		t.Fatal("no replacement")
	}
	if got := r.get(t, "policy"); got.Status.Failed != 0 || isFinished(got) {
		t.Errorf("after an ignored failure: failed %d, conditions %v; want 0 and running", got.Status.Failed, conditionTypes(got))
	}
	r.exit(t, second, 42)
	j = r.waitCondition(t, "policy", batchv1.JobFailed)
	c := findCondition(j.Status.Conditions, batchv1.JobFailed)
	want := fmt.Sprintf("Container work for pod default/%s failed with exit code 42 matching FailJob rule at index 1", second.Name)
	if c.Reason != batchv1.JobReasonPodFailurePolicy || c.Message != want || j.Status.Failed != 1 {
		t.Errorf("Failed %s %q, failed %d; want PodFailurePolicy %q and 1", c.Reason, c.Message, j.Status.Failed, want)
	}
}

// TestSuspend: a suspended Job runs nothing; resumed, it starts (startTime
// anew); suspended again, its pods go without counting as failures.
func TestSuspend(t *testing.T) {
	r := runController(t)
	j := r.create(t, newJob("later", func(j *batchv1.Job) {
		j.Spec.Suspend = new(true)
		j.Spec.Parallelism, j.Spec.Completions = new(int32(2)), new(int32(4))
	}))
	j = r.waitCondition(t, "later", batchv1.JobSuspended)
	if j.Status.StartTime != nil || len(r.podsOf(t, j)) != 0 {
		t.Errorf("suspended: startTime %v, %d pods; want none", j.Status.StartTime, len(r.podsOf(t, j)))
	}
	setSuspend := func(v bool) {
		t.Helper()
		if _, err := r.jobs.Patch(testCtx(t), ns, "later", "application/merge-patch+json", fmt.Appendf(nil, `{"spec":{"suspend":%t}}`, v)); err != nil {
			t.Fatal(err)
		}
	}
	setSuspend(false)
	r.waitActive(t, j, 2)
	controllertest.Eventually(t, "resumed", func() (bool, string) {
		j = r.get(t, "later")
		c := findCondition(j.Status.Conditions, batchv1.JobSuspended)
		return c != nil && c.Status == corev1.ConditionFalse && c.Reason == "JobResumed" && j.Status.StartTime != nil, fmt.Sprintf("%v", conditionTypes(j))
	})
	setSuspend(true)
	controllertest.Eventually(t, "pods gone", func() (bool, string) {
		n := len(r.podsOf(t, j))
		return n == 0, fmt.Sprintf("%d pods", n)
	})
	j = r.waitCondition(t, "later", batchv1.JobSuspended)
	if j.Status.Failed != 0 || j.Status.Active != 0 {
		t.Errorf("suspended again: failed %d active %d, want 0 and 0", j.Status.Failed, j.Status.Active)
	}
	if !r.hasEvent("Normal Suspended Job suspended") || !r.hasEvent("Normal Resumed Job resumed") {
		t.Errorf("events %v", r.recorder.Events())
	}
}

// TestActiveDeadline fails a Job still running after activeDeadlineSeconds,
// and stops its pods.
func TestActiveDeadline(t *testing.T) {
	r := runController(t)
	j := r.create(t, newJob("slow", func(j *batchv1.Job) { j.Spec.ActiveDeadlineSeconds = new(int64(1)) }))
	// startTime is stored to the second, so the deadline may pass a few
	// milliseconds after the first pod was created, as in Kubernetes:
	// the pod is counted rather than watched while it runs.
	j = r.waitCondition(t, "slow", batchv1.JobFailed)
	c := findCondition(j.Status.Conditions, batchv1.JobFailed)
	if c.Reason != batchv1.JobReasonDeadlineExceeded || c.Message != "Job was active longer than specified deadline" {
		t.Errorf("Failed %s %q", c.Reason, c.Message)
	}
	if j.Status.Failed != 1 || j.Status.Active != 0 {
		t.Errorf("status failed=%d active=%d; want the one pod it started counted failed, none active", j.Status.Failed, j.Status.Active)
	}
	controllertest.Eventually(t, "the pod deleted", func() (bool, string) {
		return len(running_(r.podsOf(t, j))) == 0, ""
	})
}

// TestBackoffLimitPerIndex fails an index for good after its own limit,
// lets the others finish, then fails the Job with FailedIndexes.
func TestBackoffLimitPerIndex(t *testing.T) {
	r := runController(t)
	j := r.create(t, newJob("per-index", func(j *batchv1.Job) {
		j.Spec.Completions, j.Spec.Parallelism = new(int32(2)), new(int32(2))
		j.Spec.CompletionMode = new(batchv1.IndexedCompletion)
		j.Spec.BackoffLimitPerIndex = new(int32(1))
	}))
	pods := r.waitActive(t, j, 2)
	byIndex := map[string]*corev1.Pod{}
	for _, p := range pods {
		byIndex[p.Annotations[batchv1.JobCompletionIndexAnnotation]] = p
	}
	r.exit(t, byIndex["0"], 1)
	var retry *corev1.Pod
	controllertest.Eventually(t, "a retry of index 0", func() (bool, string) {
		for _, p := range running_(r.podsOf(t, j)) {
			if p.Annotations[batchv1.JobCompletionIndexAnnotation] == "0" {
				retry = p
			}
		}
		return retry != nil, ""
	})
	if got := retry.Annotations[batchv1.JobIndexFailureCountAnnotation]; got != "1" {
		t.Errorf("the retry's failure count %q, want 1", got)
	}
	r.exit(t, retry, 1)
	controllertest.Eventually(t, "index 0 failed", func() (bool, string) {
		j = r.get(t, "per-index")
		return deref(j.Status.FailedIndexes, "") == "0", fmt.Sprintf("%+v", j.Status)
	})
	if isFinished(j) {
		t.Fatalf("finished with index 1 still running: %v", conditionTypes(j))
	}
	r.exit(t, byIndex["1"], 0)
	j = r.waitCondition(t, "per-index", batchv1.JobFailed)
	if c := findCondition(j.Status.Conditions, batchv1.JobFailed); c.Reason != batchv1.JobReasonFailedIndexes || j.Status.CompletedIndexes != "1" {
		t.Errorf("Failed %s, completedIndexes %q; want FailedIndexes and 1", c.Reason, j.Status.CompletedIndexes)
	}
}

// TestSuccessPolicy completes an Indexed Job once its leader index
// succeeded, stopping the rest.
func TestSuccessPolicy(t *testing.T) {
	r := runController(t)
	j := r.create(t, newJob("leader", func(j *batchv1.Job) {
		j.Spec.Completions, j.Spec.Parallelism = new(int32(3)), new(int32(3))
		j.Spec.CompletionMode = new(batchv1.IndexedCompletion)
		j.Spec.SuccessPolicy = &batchv1.SuccessPolicy{Rules: []batchv1.SuccessPolicyRule{{SucceededIndexes: new("0")}}}
	}))
	for _, p := range r.waitActive(t, j, 3) {
		if p.Annotations[batchv1.JobCompletionIndexAnnotation] == "0" {
			r.exit(t, p, 0)
		}
	}
	controllertest.Eventually(t, "the others deleted", func() (bool, string) {
		return len(running_(r.podsOf(t, j))) == 0, ""
	})
	j = r.waitCondition(t, "leader", batchv1.JobComplete)
	if got, want := conditionTypes(j), []string{"SuccessCriteriaMet=True/SuccessPolicy", "Complete=True/SuccessPolicy"}; !slices.Equal(got, want) {
		t.Errorf("conditions %v, want %v", got, want)
	}
	if c := findCondition(j.Status.Conditions, batchv1.JobComplete); c.Message != "Matched rules at index 0" {
		t.Errorf("message %q", c.Message)
	}
}

// TestDeletedJobFreesItsPods: the pods of a deleted Job lose the tracking
// finalizer, so that they can go.
func TestDeletedJobFreesItsPods(t *testing.T) {
	r := runController(t)
	j := r.create(t, newJob("gone", nil))
	pod := r.waitActive(t, j, 1)[0]
	if err := r.jobs.Delete(testCtx(t), ns, "gone", metav1.DeleteOptions{PropagationPolicy: new(metav1.DeletePropagationOrphan)}); err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, "the finalizer removed", func() (bool, string) {
		p, err := r.pods.Get(testCtx(t), ns, pod.Name)
		if err != nil {
			return false, err.Error()
		}
		return !slices.Contains(p.Finalizers, batchv1.JobTrackingFinalizer), fmt.Sprintf("%v", p.Finalizers)
	})
}

// TestAdoptsAnOrphan: a Job with a manual selector adopts a matching pod,
// with the tracking finalizer, runs no other, and counts its success.
func TestAdoptsAnOrphan(t *testing.T) {
	r := runController(t)
	orphan, err := r.pods.Create(testCtx(t), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "stray", Namespace: ns, Labels: map[string]string{"app": "batch"}},
		Spec:       corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "work", Image: "busybox"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	j := r.create(t, newJob("adopter", func(j *batchv1.Job) {
		j.Spec.ManualSelector = new(true)
		j.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "batch"}}
		j.Spec.Template.Labels = map[string]string{"app": "batch"}
	}))
	controllertest.Eventually(t, "the orphan adopted with the tracking finalizer", func() (bool, string) {
		p, err := r.pods.Get(testCtx(t), ns, "stray")
		if err != nil {
			return false, err.Error()
		}
		ref := metav1.GetControllerOf(p)
		return ref != nil && ref.UID == j.UID && slices.Contains(p.Finalizers, batchv1.JobTrackingFinalizer),
			fmt.Sprintf("owner %v finalizers %v", ref, p.Finalizers)
	})
	r.exit(t, orphan, 0)
	j = r.waitCondition(t, "adopter", batchv1.JobComplete)
	if pods := r.podsOf(t, j); len(pods) != 1 || j.Status.Succeeded != 1 {
		t.Errorf("%d pods, succeeded %d; want the adopted one alone, counted", len(pods), j.Status.Succeeded)
	}
}
