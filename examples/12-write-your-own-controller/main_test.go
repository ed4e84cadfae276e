package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/internal/minitest"
)

// The lesson's claim, in Go: run() keeps ConfigMap default/pods-by-node
// equal to the pods of a Deployment as it scales, and deletes it when the
// last pod goes.
func TestRunFollowsADeployment(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a whole cluster")
	}
	url := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	var out minitest.Buffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"--server", url}, &out) }()

	rc, err := client.New(&client.Config{Server: url})
	if err != nil {
		t.Fatal(err)
	}
	deployments := client.For[*appsv1.Deployment](rc)
	pods := client.For[*corev1.Pod](rc)
	configMaps := client.For[*corev1.ConfigMap](rc)

	labels := map[string]string{"app": "web"}
	replicas := int32(3)
	if _, err := deployments.Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "nginx", Image: "nginx:1.27"}}},
			},
		},
	}); err != nil {
		t.Fatal(err)
	}

	// follows waits until the ConfigMap lists exactly n running pods, as
	// the API server has them.
	follows := func(n int) {
		t.Helper()
		var last string
		deadline := time.Now().Add(time.Minute)
		for time.Now().Before(deadline) {
			want := map[string][]string{}
			list, err := pods.List(ctx, "default", metav1.ListOptions{LabelSelector: "app=web"})
			if err != nil {
				t.Fatal(err)
			}
			running := 0
			for _, p := range list.Items {
				if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
					want[p.Spec.NodeName] = append(want[p.Spec.NodeName], p.Name)
					running++
				}
			}
			wantData := map[string]string{}
			for node, names := range want {
				slices.Sort(names)
				wantData[node] = strings.Join(names, ",")
			}
			cm, err := configMaps.Get(ctx, "default", configMapName)
			switch {
			case client.IsNotFound(err) && n == 0 && running == 0:
				return
			case err == nil && running == n && len(list.Items) == n && maps.Equal(cm.Data, wantData):
				return
			case err == nil:
				last = fmt.Sprintf("ConfigMap %v, pods %v", cm.Data, wantData)
			default:
				last = fmt.Sprintf("ConfigMap: %v, pods %v", err, wantData)
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatalf("the ConfigMap did not follow %d pods; last: %s\ncontroller:\n%s", n, last, out.String())
	}
	scale := func(n int) {
		t.Helper()
		patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, n)
		if _, err := deployments.Patch(ctx, "default", "web", types.MergePatchType, []byte(patch)); err != nil {
			t.Fatal(err)
		}
	}

	follows(3)
	scale(5)
	follows(5)
	scale(1)
	follows(1)
	scale(0)
	follows(0)
	// The ConfigMap can be gone on the server a moment before the delete's
	// answer reaches the controller and it logs the deletion.
	for deadline := time.Now().Add(time.Minute); !strings.Contains(out.String(), "default: ConfigMap deleted"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no deletion in the controller's log:\n%s", out.String())
		}
	}

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
}

// startCluster runs `minictl up --fast` on a free loopback port, as
// examples.Up does for the lessons, until the test ends; it returns the API
// server's URL once the three nodes are Ready.
func startCluster(t *testing.T) string {
	t.Helper()
	addr := minitest.FreeAddr(t)
	up := minitest.Up(t, true, addr, t.TempDir(), "--fast")
	url := "http://" + addr
	up.WaitNodesReady(t, url, 3, time.Minute)
	return url
}
