package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/internal/minitest"
)

// shellJob is a Job whose pods' one container runs `sh -c script`, which
// the simulated kubelet runs.
func shellJob(name, script string, mutate func(j *batchv1.Job)) *batchv1.Job {
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{
			Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "work", Image: "busybox", Command: []string{"sh", "-c", script}}},
			},
		}},
	}
	if mutate != nil {
		mutate(j)
	}
	return j
}

// TestJobs runs Jobs on the built binary, their pods running what their
// commands say: a Job of 5 completions, 2 at a time, each pod `sleep 1;
// exit 0`, never has more than 2 pods active (seen from a watch of its
// pods) and completes with exactly 5 succeeded; a Job whose pods exit 1
// fails with BackoffLimitExceeded after backoffLimit+1 pods; an Indexed
// Job's pods carry their index and echo it from $JOB_COMPLETION_INDEX; a
// negative parallelism is refused naming the field; a finished Job with
// ttlSecondsAfterFinished is deleted.
func TestJobs(t *testing.T) {
	c := up(t, minitest.FreeAddr(t), t.TempDir(), "--fast")
	rc := c.client(t)
	ctx := context.Background()
	jobs, pods := client.For[*batchv1.Job](rc), client.For[*corev1.Pod](rc)

	podsOf := func(name string) []*corev1.Pod {
		t.Helper()
		list, err := pods.List(ctx, "default", metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=" + name})
		if err != nil {
			t.Fatal(err)
		}
		return list.Items
	}
	waitFinished := func(name string, want batchv1.JobConditionType) *batchv1.Job {
		t.Helper()
		var j *batchv1.Job
		eventually(t, fmt.Sprintf("job %s %s", name, want), func() (bool, string) {
			var err error
			if j, err = jobs.Get(ctx, "default", name); err != nil {
				return false, err.Error()
			}
			for _, c := range j.Status.Conditions {
				if c.Type == want && c.Status == corev1.ConditionTrue {
					return true, ""
				}
			}
			return false, fmt.Sprintf("status %+v", j.Status)
		})
		return j
	}

	t.Run("parallelism -1 is refused naming the field", func(t *testing.T) {
		code, body := c.do(http.MethodPost, "/apis/batch/v1/namespaces/default/jobs", "application/json",
			`{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"bad"},"spec":{"parallelism":-1,
			"template":{"spec":{"restartPolicy":"Never","containers":[{"name":"c","image":"busybox"}]}}}}`)
		causes, _ := field(body, "details", "causes").([]any)
		if code != http.StatusUnprocessableEntity || len(causes) != 1 || field(causes[0].(map[string]any), "field") != "spec.parallelism" {
			t.Errorf("HTTP %d %v, want 422 naming spec.parallelism", code, body)
		}
	})

	t.Run("5 completions, 2 at a time", func(t *testing.T) {
		w, err := pods.Watch(ctx, "default", metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=five"})
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		active, most := map[string]bool{}, 0
		done := make(chan struct{})
		go func() {
			defer close(done)
			for ev := range w.Events() {
				if ev.Type != watch.Added && ev.Type != watch.Modified && ev.Type != watch.Deleted {
					continue
				}
				p := ev.Object
				mu.Lock()
				active[p.Name] = ev.Type != watch.Deleted && p.DeletionTimestamp == nil &&
					p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
				n := 0
				for _, a := range active {
					if a {
						n++
					}
				}
				most = max(most, n)
				mu.Unlock()
			}
		}()
		if _, err := jobs.Create(ctx, shellJob("five", "sleep 1; exit 0", func(j *batchv1.Job) {
			j.Spec.Completions, j.Spec.Parallelism = ptrTo(int32(5)), ptrTo(int32(2))
		})); err != nil {
			t.Fatal(err)
		}
		j := waitFinished("five", batchv1.JobComplete)
		w.Stop()
		<-done
		if most > 2 || most == 0 {
			t.Errorf("at most %d pods were active at once, want 2 (parallelism)", most)
		}
		succeeded := 0
		for _, p := range podsOf("five") {
			if p.Status.Phase == corev1.PodSucceeded {
				succeeded++
			}
		}
		if succeeded != 5 || j.Status.Succeeded != 5 || j.Status.Failed != 0 || j.Status.CompletionTime == nil {
			t.Errorf("%d pods succeeded, status %+v; want exactly 5 and a completion time", succeeded, j.Status)
		}
	})

	t.Run("pods exiting 1 with backoffLimit 2", func(t *testing.T) {
		if _, err := jobs.Create(ctx, shellJob("crash", "exit 1", func(j *batchv1.Job) { j.Spec.BackoffLimit = ptrTo(int32(2)) })); err != nil {
			t.Fatal(err)
		}
		j := waitFinished("crash", batchv1.JobFailed)
		var reason string
		for _, c := range j.Status.Conditions {
			if c.Type == batchv1.JobFailed {
				reason = c.Reason
			}
		}
		if reason != batchv1.JobReasonBackoffLimitExceeded || j.Status.Failed != 3 || len(podsOf("crash")) != 3 {
			t.Errorf("reason %q, failed %d, %d pods; want BackoffLimitExceeded after 3 pods", reason, j.Status.Failed, len(podsOf("crash")))
		}
	})

	t.Run("an Indexed Job's pods carry their index", func(t *testing.T) {
		if _, err := jobs.Create(ctx, shellJob("idx", `echo "I am index $JOB_COMPLETION_INDEX"`, func(j *batchv1.Job) {
			j.Spec.Completions, j.Spec.Parallelism = ptrTo(int32(3)), ptrTo(int32(3))
			j.Spec.CompletionMode = ptrTo(batchv1.IndexedCompletion)
		})); err != nil {
			t.Fatal(err)
		}
		j := waitFinished("idx", batchv1.JobComplete)
		if j.Status.CompletedIndexes != "0-2" {
			t.Errorf("completedIndexes %q, want 0-2", j.Status.CompletedIndexes)
		}
		var indexes []string
		for _, p := range podsOf("idx") {
			ix := p.Annotations[batchv1.JobCompletionIndexAnnotation]
			indexes = append(indexes, ix)
			env := p.Spec.Containers[0].Env
			if len(env) != 1 || env[0].Name != "JOB_COMPLETION_INDEX" || env[0].ValueFrom == nil || env[0].ValueFrom.FieldRef == nil ||
				!strings.Contains(env[0].ValueFrom.FieldRef.FieldPath, batchv1.JobCompletionIndexAnnotation) {
				t.Errorf("pod %s env %+v, want JOB_COMPLETION_INDEX from its index annotation", p.Name, env)
			}
			if p.Spec.Hostname != "idx-"+ix {
				t.Errorf("pod %s hostname %q, want idx-%s", p.Name, p.Spec.Hostname, ix)
			}
			// What the container saw: its log, through pods/log.
			resp, err := http.Get(c.URL + "/api/v1/namespaces/default/pods/" + p.Name + "/log")
			if err != nil {
				t.Fatal(err)
			}
			log, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if want := "\nI am index " + ix + "\n"; !strings.Contains(string(log), want) {
				t.Errorf("pod %s log %q, want a line %q", p.Name, log, strings.TrimSpace(want))
			}
		}
		slices.Sort(indexes)
		if !slices.Equal(indexes, []string{"0", "1", "2"}) {
			t.Errorf("indexes %v, want 0, 1, 2", indexes)
		}
	})

	t.Run("ttlSecondsAfterFinished deletes a finished Job", func(t *testing.T) {
		if _, err := jobs.Create(ctx, shellJob("brief", "exit 0", func(j *batchv1.Job) { j.Spec.TTLSecondsAfterFinished = ptrTo(int32(1)) })); err != nil {
			t.Fatal(err)
		}
		waitFinished("brief", batchv1.JobComplete)
		eventually(t, "the job and its pod deleted", func() (bool, string) {
			_, err := jobs.Get(ctx, "default", "brief")
			n := len(podsOf("brief"))
			return client.IsNotFound(err) && n == 0, fmt.Sprintf("get: %v, %d pods", err, n)
		})
	})
}
