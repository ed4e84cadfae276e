package e2e

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/internal/minitest"
)

// TestReplicationController is the seed's first controller, end to end on
// the built binary: a ReplicationController keeps 3 pods Running, the
// first of them an orphan it adopts; it scales through its scale
// subresource; a deleted pod is replaced, and so is one relabelled out of
// its selector, which is let go; the Events name the RC; deleting the RC
// takes its pods with it. And its pods have no process to exec into, which
// the API says.
func TestReplicationController(t *testing.T) {
	c := up(t, minitest.FreeAddr(t), t.TempDir(), "--fast")
	rc := c.client(t)
	ctx := context.Background()
	rcs, pods := client.For[*corev1.ReplicationController](rc), client.For[*corev1.Pod](rc)

	orphan, err := pods.Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "stray", Namespace: "default", Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	// No selector: the server defaults it from the template's labels.
	web, err := rcs.Create(ctx, &corev1.ReplicationController{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: corev1.ReplicationControllerSpec{
			Replicas: ptrTo(int32(3)),
			Template: &corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}},
			},
		},
	})
	if err != nil {
		t.Fatal(err)
	}

	// owned waits for n live pods selected by app=web, all Running, Ready
	// and controlled by the RC, and returns them.
	owned := func(n int) []*corev1.Pod {
		t.Helper()
		var live []*corev1.Pod
		eventually(t, fmt.Sprintf("%d pods of the RC running", n), func() (bool, string) {
			live = livePods(t, pods, "web")
			mine := 0
			for _, p := range live {
				if ref := metav1.GetControllerOf(p); ref != nil && ref.Kind == "ReplicationController" && ref.UID == web.UID {
					mine++
				}
			}
			return len(live) == n && mine == n && runningReady(live) == n,
				fmt.Sprintf("%d pods, %d the RC's, %d running", len(live), mine, runningReady(live))
		})
		return live
	}

	first := owned(3)
	if !slices.ContainsFunc(first, func(p *corev1.Pod) bool { return p.UID == orphan.UID }) {
		t.Errorf("the orphan stray was not adopted: %v", names(first))
	}
	eventually(t, "status: 3 ready at the current generation", func() (bool, string) {
		cur, err := rcs.Get(ctx, "default", "web")
		if err != nil {
			return false, err.Error()
		}
		s := cur.Status
		return s.Replicas == 3 && s.ReadyReplicas == 3 && s.AvailableReplicas == 3 && s.ObservedGeneration == cur.Generation,
			fmt.Sprintf("%+v at generation %d", s, cur.Generation)
	})

	t.Run("exec says the containers are simulated", func(t *testing.T) {
		code, st := c.do(http.MethodPost, "/api/v1/namespaces/default/pods/"+first[0].Name+"/exec?command=ls&stdout=true", "", "")
		msg, _ := st["message"].(string)
		if code != http.StatusBadRequest || st["reason"] != "BadRequest" || !strings.Contains(msg, "minictl's containers are simulated") {
			t.Errorf("exec: %d %v", code, st)
		}
	})

	scale, err := rcs.GetScale(ctx, "default", "web")
	if err != nil {
		t.Fatal(err)
	}
	scale.Spec.Replicas = 5
	scale.ResourceVersion = ""
	if _, err := rcs.UpdateScale(ctx, scale); err != nil {
		t.Fatal(err)
	}
	scaled := owned(5)

	victim := scaled[0].Name
	if err := pods.Delete(ctx, "default", victim, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The victim is being deleted, so it is no longer live: 5 live pods
	// means a replacement.
	if live := owned(5); slices.Contains(names(live), victim) {
		t.Errorf("the deleted pod %s is still among %v", victim, names(live))
	}

	leaving := owned(5)[0].Name
	if _, err := pods.Patch(ctx, "default", leaving, "application/merge-patch+json", []byte(`{"metadata":{"labels":{"app":"debug"}}}`)); err != nil {
		t.Fatal(err)
	}
	// Relabelled, it is no longer selected by app=web: 5 such pods means
	// a replacement.
	owned(5)
	eventually(t, "the relabelled pod released", func() (bool, string) {
		cur, err := pods.Get(ctx, "default", leaving)
		if err != nil {
			return false, err.Error()
		}
		return metav1.GetControllerOf(cur) == nil, fmt.Sprintf("owners %v", cur.OwnerReferences)
	})

	events := client.For[*corev1.Event](rc)
	eventually(t, "SuccessfulCreate events on the RC from replication-controller", func() (bool, string) {
		l, err := events.List(ctx, "default", metav1.ListOptions{FieldSelector: "involvedObject.kind=ReplicationController,involvedObject.name=web"})
		if err != nil {
			return false, err.Error()
		}
		reasons := map[string]int32{}
		for _, e := range l.Items {
			// kube-controller-manager's name for the RC's Events.
			if e.Source.Component == "replication-controller" {
				reasons[e.Reason] += e.Count
			}
		}
		// 2 for 3 pods (the orphan counted), 2 for the scale to 5, 1 for
		// the deleted pod, 1 for the relabelled one.
		return reasons["SuccessfulCreate"] >= 6, fmt.Sprint(reasons)
	})

	// Deleted as kubectl deletes (Background), the RC takes its pods with
	// it; the released pod stays.
	background := metav1.DeletePropagationBackground
	if err := rcs.Delete(ctx, "default", "web", metav1.DeleteOptions{PropagationPolicy: &background}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the RC's pods collected, the released one left", func() (bool, string) {
		live := livePods(t, pods, "web")
		_, err := pods.Get(ctx, "default", leaving)
		return len(live) == 0 && err == nil, fmt.Sprintf("pods %v, released pod: %v", names(live), err)
	})
}

// TestReplicationControllerDeletedWithoutAPolicy: as in kube-apiserver, a
// v1 RC deleted with no propagation policy (a plain curl -X DELETE)
// orphans its pods: the garbage collector takes the RC's controller
// reference off each of them and then lets the RC go; the pods keep
// running.
func TestReplicationControllerDeletedWithoutAPolicy(t *testing.T) {
	c := up(t, minitest.FreeAddr(t), t.TempDir(), "--fast")
	ctx := context.Background()
	rcs, pods := client.For[*corev1.ReplicationController](c.client(t)), client.For[*corev1.Pod](c.client(t))
	code, _ := c.do(http.MethodPost, "/api/v1/namespaces/default/replicationcontrollers", "application/json",
		`{"apiVersion":"v1","kind":"ReplicationController","metadata":{"name":"db"},
		  "spec":{"replicas":2,"template":{"metadata":{"labels":{"app":"db"}},
		  "spec":{"containers":[{"name":"db","image":"redis:7"}]}}}}`)
	if code != http.StatusCreated {
		t.Fatalf("create: %d", code)
	}
	eventually(t, "2 pods running", func() (bool, string) {
		l := livePods(t, pods, "db")
		return len(l) == 2 && runningReady(l) == 2, fmt.Sprintf("%d pods, %d running", len(l), runningReady(l))
	})
	if code, st := c.do(http.MethodDelete, "/api/v1/namespaces/default/replicationcontrollers/db", "", ""); code != http.StatusOK {
		t.Fatalf("delete: %d %v", code, st)
	}
	eventually(t, "the RC gone, its 2 pods running without an owner", func() (bool, string) {
		_, err := rcs.Get(ctx, "default", "db")
		l := livePods(t, pods, "db")
		var owners []metav1.OwnerReference
		for _, p := range l {
			owners = append(owners, p.OwnerReferences...)
		}
		return client.IsNotFound(err) && len(l) == 2 && runningReady(l) == 2 && len(owners) == 0,
			fmt.Sprintf("rc: %v; %d pods, %d running, owners %v", err, len(l), runningReady(l), owners)
	})
}

func names(pods []*corev1.Pod) []string {
	out := make([]string, len(pods))
	for i, p := range pods {
		out[i] = p.Name
	}
	return out
}
