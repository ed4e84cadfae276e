package e2e

import (
	"context"
	"fmt"
	"regexp"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/cloud/sim"
	"github.com/minictl/minictl/internal/minitest"
)

var cloudLine = regexp.MustCompile(`(?m)^  cloud:\s+(http://\S+)`)

// TestNodesLiveOnTheCloudsMachines: `minictl up --nodes 2` runs each node
// on an instance of the simulated cloud it prints in its banner, and a
// machine deleted in the cloud takes its node down with it.
func TestNodesLiveOnTheCloudsMachines(t *testing.T) {
	addr := minitest.FreeAddr(t)
	c := up(t, addr, t.TempDir(), "--nodes", "2", "--fast")
	c.WaitNodesReady(t, c.URL, 2, clusterTimeout)
	var url string
	eventually(t, "the cloud's URL in the banner", func() (bool, string) {
		m := cloudLine.FindStringSubmatch(c.Stdout.String())
		if m != nil {
			url = m[1]
		}
		return m != nil, c.Stdout.String()
	})
	cl, err := sim.NewClient(url, sim.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	instances, err := cl.ListInstances(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(instances) != 2 || instances[0].Name != "node-1" || instances[1].Name != "node-2" ||
		instances[0].State != sim.StateRunning || instances[0].ProviderID != "sim://sim-a/node-1" {
		t.Fatalf("GET /v1/instances: %+v, want node-1 and node-2 running", instances)
	}

	if err := cl.DeleteInstance(ctx, instances[0].ID); err != nil {
		t.Fatal(err)
	}
	nodes := client.For[*corev1.Node](c.client(t))
	// The cloud-node-lifecycle controller deletes node-1 within a
	// monitor period of its going NotReady: gone counts as down.
	eventually(t, "node-1 NotReady (or deleted) and node-2 Ready", func() (bool, string) {
		one, err1 := nodes.Get(ctx, "", "node-1")
		two, err2 := nodes.Get(ctx, "", "node-2")
		if client.IsNotFound(err1) {
			one, err1 = &corev1.Node{}, nil
		}
		if err1 != nil || err2 != nil {
			return false, fmt.Sprint(err1, err2)
		}
		r1, r2 := readyStatus(one), readyStatus(two)
		return r1 != corev1.ConditionTrue && r2 == corev1.ConditionTrue, fmt.Sprintf("node-1 Ready=%s, node-2 Ready=%s", r1, r2)
	})
}

func readyStatus(n *corev1.Node) corev1.ConditionStatus {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status
		}
	}
	return ""
}
