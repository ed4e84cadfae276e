package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/cloud/sim"
	"github.com/minictl/minictl/internal/minitest"
)

// TestUpNodeWhoseMachineIsDeletedGoesAndItsPodsAreRecreated runs `minictl
// up` on the simulated cloud with its nodes spread over three zones. The
// cloud-node controller initializes every node from its machine (provider
// ID, zone label, no uninitialized taint). Then one machine is deleted
// through the cloud's API: its kubelet stops with it, the node goes
// NotReady, the cloud-node-lifecycle controller deletes it with a
// DeletingNode event, and the Deployment's pods that were on it are made
// again on the other nodes.
func TestUpNodeWhoseMachineIsDeletedGoesAndItsPodsAreRecreated(t *testing.T) {
	addr, cloudAddr := minitest.FreeAddr(t), minitest.FreeAddr(t)
	c := up(t, addr, t.TempDir(), "--fast", "--nodes", "3", "--zones", "zone-a,zone-b,zone-c", "--cloud-listen", cloudAddr)
	c.WaitNodesReady(t, c.URL, 3, clusterTimeout)
	rc := c.client(t)
	ctx := context.Background()
	nodes := client.For[*corev1.Node](rc)
	cl, err := sim.NewClient("http://"+cloudAddr, sim.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}

	eventually(t, "every node initialized from its machine", func() (bool, string) {
		l, err := nodes.List(ctx, "", metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		var zones []string
		for _, n := range l.Items {
			if n.Spec.ProviderID == "" || slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == "node.cloudprovider.kubernetes.io/uninitialized" }) {
				return false, fmt.Sprintf("%s: providerID %q, taints %v", n.Name, n.Spec.ProviderID, n.Spec.Taints)
			}
			zones = append(zones, n.Labels[corev1.LabelTopologyZone])
		}
		slices.Sort(zones)
		return slices.Equal(zones, []string{"zone-a", "zone-b", "zone-c"}), fmt.Sprint(zones)
	})

	pods := client.For[*corev1.Pod](rc)
	if _, err := client.For[*appsv1.Deployment](rc).Create(ctx, deploymentObj("web", 3, "nginx:1.27")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "3 pods running", func() (bool, string) {
		l := livePods(t, pods, "web")
		return len(l) == 3 && runningReady(l) == 3, fmt.Sprintf("%d pods, %d running", len(l), runningReady(l))
	})
	victim := livePods(t, pods, "web")[0].Spec.NodeName
	in, err := cl.InstanceByName(ctx, victim)
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.DeleteInstance(ctx, in.ID); err != nil {
		t.Fatal(err)
	}

	eventually(t, victim+" deleted", func() (bool, string) {
		_, err := nodes.Get(ctx, "", victim)
		return client.IsNotFound(err), fmt.Sprint(err)
	})
	events, err := client.For[*corev1.Event](rc).List(ctx, "", metav1.ListOptions{FieldSelector: "reason=DeletingNode"})
	if err != nil {
		t.Fatal(err)
	}
	want := "Deleting node " + victim + " because it does not exist in the cloud provider"
	if !slices.ContainsFunc(events.Items, func(e *corev1.Event) bool { return e.Message == want }) {
		t.Errorf("no event %q among %d DeletingNode events", want, len(events.Items))
	}
	eventually(t, "3 pods running on the nodes left", func() (bool, string) {
		l := livePods(t, pods, "web")
		for _, p := range l {
			if p.Spec.NodeName == victim {
				return false, p.Name + " still on " + victim
			}
		}
		return len(l) == 3 && runningReady(l) == 3, fmt.Sprintf("%d pods, %d running", len(l), runningReady(l))
	})
}
