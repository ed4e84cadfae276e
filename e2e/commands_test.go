package e2e

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/internal/minitest"
)

// TestContainerCommands is what a pod's command does on a simulated node,
// end to end on the built binary with --fast: a container that keeps
// crashing goes CrashLoopBackOff with a growing restart count (the
// back-off 1s doubling), and `sh -c "sleep 1; exit 0"` with restartPolicy
// Never runs a second and ends Succeeded.
func TestContainerCommands(t *testing.T) {
	c := up(t, minitest.FreeAddr(t), t.TempDir(), "--fast")
	pods := client.For[*corev1.Pod](c.client(t))
	ctx := context.Background()
	shPod := func(name string, policy corev1.RestartPolicy, script string) {
		t.Helper()
		_, err := pods.Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: corev1.PodSpec{
				RestartPolicy: policy,
				Containers:    []corev1.Container{{Name: "main", Image: "busybox:1.36", Command: []string{"sh", "-c", script}}},
			},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	shPod("crash", corev1.RestartPolicyAlways, "echo starting; exit 1")
	shPod("once", corev1.RestartPolicyNever, "sleep 1; exit 0")

	status := func(name string) (*corev1.Pod, *corev1.ContainerStatus, string) {
		pod, err := pods.Get(ctx, "default", name)
		if err != nil {
			return nil, nil, err.Error()
		}
		if len(pod.Status.ContainerStatuses) != 1 {
			return pod, nil, fmt.Sprintf("phase %s, no container status", pod.Status.Phase)
		}
		cs := &pod.Status.ContainerStatuses[0]
		return pod, cs, fmt.Sprintf("phase %s, container %+v", pod.Status.Phase, cs.State)
	}

	eventually(t, "once Succeeded with exit code 0", func() (bool, string) {
		pod, cs, state := status("once")
		return cs != nil && pod.Status.Phase == corev1.PodSucceeded &&
			cs.State.Terminated != nil && cs.State.Terminated.ExitCode == 0 && cs.State.Terminated.Reason == "Completed", state
	})

	backingOff := map[int32]bool{}
	eventually(t, "crash in CrashLoopBackOff at three restart counts", func() (bool, string) {
		pod, cs, state := status("crash")
		if cs == nil {
			return false, state
		}
		if w := cs.State.Waiting; w != nil && w.Reason == "CrashLoopBackOff" && pod.Status.Phase == corev1.PodRunning {
			last := cs.LastTerminationState.Terminated
			if last == nil || last.ExitCode != 1 || last.Reason != "Error" {
				t.Errorf("lastState while backing off = %+v, want terminated with exit code 1, Error", last)
			}
			backingOff[cs.RestartCount] = true
		}
		return len(backingOff) >= 3, fmt.Sprintf("%s; backing off at restart counts %v", state, backingOff)
	})
}
