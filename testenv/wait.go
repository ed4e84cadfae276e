package testenv

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/client"
)

// waitCluster waits for what a test's first object needs: the default
// ServiceAccount, without which the ServiceAccount admission plugin
// refuses pods, and every node Ready, without which the scheduler has
// nowhere to put them.
func (e *Env) waitCluster(ctx context.Context, rc *client.RESTClient) {
	e.t.Helper()
	if e.controllerRuns("serviceaccount") {
		sas := client.For[*corev1.ServiceAccount](rc)
		e.poll(ctx, "the default ServiceAccount in namespace default", func() (bool, error) {
			_, err := sas.Get(ctx, "default", "default")
			if client.IsNotFound(err) {
				return false, nil
			}
			return err == nil, err
		})
	}
	if e.cfg.nodes > 0 {
		nodes := client.For[*corev1.Node](rc)
		e.poll(ctx, fmt.Sprintf("%d Ready nodes", e.cfg.nodes), func() (bool, error) {
			list, err := nodes.List(ctx, "", metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			ready := 0
			for _, n := range list.Items {
				for _, c := range n.Status.Conditions {
					if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
						ready++
					}
				}
			}
			return ready >= e.cfg.nodes, nil
		})
	}
}

// poll calls done until it reports true, and ends the test when ctx
// ends first or the components stopped, naming what it waited for.
func (e *Env) poll(ctx context.Context, what string, done func() (bool, error)) {
	e.t.Helper()
	var lastErr error
	for {
		ok, err := done()
		if ok {
			return
		}
		if err != nil {
			lastErr = err
		}
		e.mu.Lock()
		cerr := e.clusterErr
		e.mu.Unlock()
		if cerr != nil {
			e.t.Fatalf("testenv: waiting for %s: the cluster's components stopped: %v", what, cerr)
		}
		select {
		case <-ctx.Done():
			e.t.Fatalf("testenv: %s not there after %s (last error: %v)", what, readyTimeout, lastErr)
		case <-time.After(5 * time.Millisecond):
		}
	}
}
