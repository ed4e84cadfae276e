package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/internal/minitest"
)

// The lesson's claim, in Go: with the CRD of crd.json created, run()
// keeps the status of PodsByNode default/web equal to the pods of a
// Deployment as it scales, through the status subresource, and follows a
// change of its spec.
func TestRunFollowsADeployment(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a whole cluster")
	}
	url := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	rc, err := client.New(&client.Config{Server: url})
	if err != nil {
		t.Fatal(err)
	}
	createCRD(ctx, t, rc)
	res, err := discover(ctx, rc)
	if err != nil {
		t.Fatal(err)
	}
	custom := client.ForResource(rc, res)
	deployments := client.For[*appsv1.Deployment](rc)
	pods := client.For[*corev1.Pod](rc)

	pbn := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": group + "/v1", "kind": "PodsByNode",
		"metadata": map[string]any{"namespace": "default", "name": "web"},
		"spec":     map[string]any{"selector": "app=web"},
	}}
	if _, err := custom.Create(ctx, pbn); err != nil {
		t.Fatal(err)
	}

	var out minitest.Buffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"--server", url}, &out) }()

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

	// follows waits until the status lists exactly the n running pods that
	// selector picks, as the API server has them, for generation.
	follows := func(selector string, n int, generation int64) {
		t.Helper()
		var last string
		deadline := time.Now().Add(time.Minute)
		for time.Now().Before(deadline) {
			want := PodsByNodeStatus{ObservedGeneration: generation, Nodes: map[string][]string{}}
			list, err := pods.List(ctx, "default", metav1.ListOptions{LabelSelector: selector})
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range list.Items {
				if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
					want.Nodes[p.Spec.NodeName] = append(want.Nodes[p.Spec.NodeName], p.Name)
					want.Pods++
				}
			}
			for _, names := range want.Nodes {
				slices.Sort(names)
			}
			if len(want.Nodes) == 0 {
				want.Nodes = nil
			}
			obj, err := custom.Get(ctx, "default", "web")
			if err != nil {
				t.Fatal(err)
			}
			var got PodsByNode
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.(*unstructured.Unstructured).Object, &got); err != nil {
				t.Fatal(err)
			}
			if want.Pods == n && len(list.Items) == n && sameStatus(got.Status, want) {
				return
			}
			last = fmt.Sprintf("status %+v, pods %+v", got.Status, want)
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatalf("the status did not follow %d pods of %s; last: %s\ncontroller:\n%s", n, selector, last, out.String())
	}
	scale := func(n int) {
		t.Helper()
		patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, n)
		if _, err := deployments.Patch(ctx, "default", "web", types.MergePatchType, []byte(patch)); err != nil {
			t.Fatal(err)
		}
	}

	follows("app=web", 3, 1)
	scale(5)
	follows("app=web", 5, 1)
	scale(1)
	follows("app=web", 1, 1)
	// A new spec: the status follows it, and says which generation it saw.
	if _, err := custom.Patch(ctx, "default", "web", types.MergePatchType, []byte(`{"spec":{"selector":"app=other"}}`)); err != nil {
		t.Fatal(err)
	}
	follows("app=other", 0, 2)
	if _, err := custom.Patch(ctx, "default", "web", types.MergePatchType, []byte(`{"spec":{"selector":"app=web"}}`)); err != nil {
		t.Fatal(err)
	}
	follows("app=web", 1, 3)
	scale(0)
	follows("app=web", 0, 3)

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
}

// Without the CRD, run() says what to do instead of waiting forever.
func TestRunNeedsTheCRD(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a whole cluster")
	}
	url := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out minitest.Buffer
	err := run(ctx, []string{"--server", url}, &out)
	if err == nil || !strings.Contains(err.Error(), "create the CustomResourceDefinition (crd.json) first") {
		t.Fatalf("run without the CRD: %v, want an error naming crd.json", err)
	}
}

// createCRD creates the CRD of crd.json and waits until it is Established.
func createCRD(ctx context.Context, t *testing.T, rc *client.RESTClient) {
	t.Helper()
	b, err := os.ReadFile("crd.json")
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := json.Unmarshal(b, &crd); err != nil {
		t.Fatal(err)
	}
	crds := client.For[*apiextensionsv1.CustomResourceDefinition](rc)
	if _, err := crds.Create(ctx, &crd); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		got, err := crds.Get(ctx, "", crd.Name)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range got.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("CRD %s not Established: %+v", crd.Name, got.Status.Conditions)
		}
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
