package ttlafterfinished

import (
	"context"

	"slices"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/controllers/internal/controller"
	"github.com/minictl/minictl/controllers/internal/controllertest"
)

// These tests run the controller against a real API server on a real
// etcd, with no job controller and no garbage collector: a test finishes
// a Job by writing its status, and a foreground delete leaves the Job in
// place, marked for deletion with the foregroundDeletion finalizer.

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestDeletesFinishedJobsAfterTheirTTL(t *testing.T) {
	env := controllertest.Start(t)
	c, err := New(Options{Common: controller.Common{Client: env.Client, Informers: env.Informers, Logger: controllertest.Logger(t)}})
	if err != nil {
		t.Fatal(err)
	}
	controllertest.Run(t, env.Informers, 2, c)
	jobs := client.For[*batchv1.Job](env.Client)

	create := func(name string, ttl *int32, finished corev1.ConditionStatus, finishedAgo time.Duration) {
		t.Helper()
		j, err := jobs.Create(testCtx(t), &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: batchv1.JobSpec{TTLSecondsAfterFinished: ttl, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "busybox"}},
			}}},
		})
		if err != nil {
			t.Fatal(err)
		}
		if finished == "" {
			return
		}
		at := metav1.NewTime(time.Now().Add(-finishedAgo))
		j.Status.StartTime = &at
		j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: finished, LastTransitionTime: at}}
		if _, err := jobs.UpdateStatus(testCtx(t), j); err != nil {
			t.Fatal(err)
		}
	}
	deleting := func(name string) bool {
		j, err := jobs.Get(testCtx(t), "default", name)
		if client.IsNotFound(err) {
			return true
		}
		if err != nil {
			t.Fatal(err)
		}
		return j.DeletionTimestamp != nil && slices.Contains(j.Finalizers, metav1.FinalizerDeleteDependents)
	}

	create("expired", new(int32(0)), corev1.ConditionTrue, time.Minute)
	create("soon", new(int32(2)), corev1.ConditionTrue, 0)
	create("later", new(int32(3600)), corev1.ConditionTrue, 0)
	create("running", new(int32(0)), "", 0)
	create("no-ttl", nil, corev1.ConditionTrue, time.Hour)

	controllertest.Eventually(t, "the expired job deleted in the foreground", func() (bool, string) {
		return deleting("expired"), ""
	})
	controllertest.Eventually(t, "the job with a 2s TTL deleted", func() (bool, string) {
		return deleting("soon"), ""
	})
	j, err := jobs.Get(testCtx(t), "default", "soon")
	if err != nil {
		t.Fatal(err)
	}
	finished := j.Status.Conditions[0].LastTransitionTime.Time
	if early := finished.Add(2 * time.Second).Sub(j.DeletionTimestamp.Time); early > time.Second { // timestamps have whole seconds
		t.Errorf("deleted at %s, %s before its TTL expired", j.DeletionTimestamp, early)
	}
	for _, name := range []string{"later", "running", "no-ttl"} {
		if deleting(name) {
			t.Errorf("%s was deleted", name)
		}
	}

}
