package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// runReconcile is the ReplicaSet scenario, on `minictl up --nodes N` with
// every other setting at its default: a ReplicaSet of 0 replicas scaled
// to replicas; the time until that many pods exist, and until all of them
// run; then a tenth of them deleted (gracefully, as kubectl delete does),
// and the time until the ReplicaSet has replaced them all, and until the
// replacements run.
func (h *harness) runReconcile(ctx context.Context, rep int) error {
	replicas, nodes := h.cfg.replicas, h.cfg.nodes
	victims := replicas / 10
	const ns = "rs"
	c, tr, err := h.startWithNodes(ctx, nodes, ns)
	if err != nil {
		return err
	}
	defer c.stop()
	defer tr.stop()

	rsURL := c.URL + "/apis/apps/v1/namespaces/" + ns + "/replicasets"
	rs := fmt.Appendf(nil, `{"apiVersion":"apps/v1","kind":"ReplicaSet","metadata":{"name":"web"},`+
		`"spec":{"replicas":0,"selector":{"matchLabels":{"app":"web"}},`+
		`"template":{"metadata":{"labels":{"app":"web","tier":"web"}},"spec":{%s}}}}`, podSpec)
	if _, err := expect(ctx, http.StatusCreated, http.MethodPost, rsURL, "application/json", rs); err != nil {
		return err
	}
	if err := waitObserved(ctx, rsURL+"/web", 30*time.Second); err != nil {
		return err
	}

	created := tr.when(func(t *podTracker) bool { return t.countLocked() >= replicas })
	running := tr.when(func(t *podTracker) bool { return t.runningLocked() >= replicas })
	timeout := h.cfg.reconcileTimeout
	prof := h.cpuProfile(ctx, c, rep, "reconcile", 10)
	start := time.Now()
	if _, err := expect(ctx, http.StatusOK, http.MethodPatch, rsURL+"/web", "application/merge-patch+json",
		fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, replicas)); err != nil {
		return err
	}
	at, err := tr.wait(created, timeout)
	if err != nil {
		return fmt.Errorf("%d pods: %w", replicas, err)
	}
	h.res.addSeconds("reconcile", fmt.Sprintf("ReplicaSet 0 → %d: pods created", replicas), at.Sub(start))
	if at, err = tr.wait(running, timeout); err != nil {
		return fmt.Errorf("%d pods running: %w", replicas, err)
	}
	h.res.addSeconds("reconcile", fmt.Sprintf("ReplicaSet 0 → %d: all Running", replicas), at.Sub(start))
	prof.wait()

	names := tr.runningNames()
	slices.Sort(names)
	names = names[:victims]
	replaced := tr.when(func(t *podTracker) bool {
		return t.goneOrDeletingLocked(names) && t.activeLocked() >= replicas
	})
	replacedRunning := tr.when(func(t *podTracker) bool {
		return t.goneOrDeletingLocked(names) && t.runningLocked() >= replicas
	})
	start = time.Now()
	if err := deletePods(ctx, c, ns, names, 32); err != nil {
		return err
	}
	if at, err = tr.wait(replaced, timeout); err != nil {
		return fmt.Errorf("%d replaced: %w", victims, err)
	}
	h.res.addSeconds("reconcile", fmt.Sprintf("%d pods deleted: all replaced", victims), at.Sub(start))
	if at, err = tr.wait(replacedRunning, timeout); err != nil {
		return fmt.Errorf("%d replacements running: %w", victims, err)
	}
	h.res.addSeconds("reconcile", fmt.Sprintf("%d pods deleted: replacements Running", victims), at.Sub(start))
	return nil
}

// waitObserved waits until the ReplicaSet at url has been seen by its
// controller (status.observedGeneration caught up with its generation).
func waitObserved(ctx context.Context, url string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		data, err := expect(ctx, http.StatusOK, http.MethodGet, url, "", nil)
		if err != nil {
			return err
		}
		var rs struct {
			Metadata struct {
				Generation int64 `json:"generation"`
			} `json:"metadata"`
			Status struct {
				ObservedGeneration int64 `json:"observedGeneration"`
			} `json:"status"`
		}
		if err := json.Unmarshal(data, &rs); err != nil {
			return err
		}
		if rs.Status.ObservedGeneration >= rs.Metadata.Generation && rs.Metadata.Generation > 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("ReplicaSet not observed by its controller after %s", timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// deletePods deletes the named pods with clients concurrent clients, with
// default options (a running pod is deleted gracefully).
func deletePods(ctx context.Context, c *cluster, ns string, names []string, clients int) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for range clients {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(names) {
					return
				}
				code, body, err := do(ctx, http.MethodDelete, podsURL(c, ns)+"/"+names[i], "", nil)
				if err == nil && code != http.StatusOK && code != http.StatusNotFound {
					err = fmt.Errorf("delete pod %s: %d %.200s", names[i], code, body)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

// startWithNodes starts `minictl up --nodes nodes` for a scenario whose pods
// run: it returns once the nodes are Ready and the controller manager
// leads, with namespace ns made and its pods tracked. The caller stops
// both.
func (h *harness) startWithNodes(ctx context.Context, nodes int, ns string) (*cluster, *podTracker, error) {
	c, err := h.startCluster(ctx, clusterOptions{Profiling: h.profiling(), Args: []string{"--nodes", fmt.Sprint(nodes)}})
	if err != nil {
		return nil, nil, err
	}
	tr, err := func() (*podTracker, error) {
		if err := waitNodesReady(ctx, c, nodes, 60*time.Second); err != nil {
			return nil, err
		}
		if err := waitLeader(ctx, c, 60*time.Second); err != nil {
			return nil, err
		}
		if err := createNamespace(ctx, c, ns); err != nil {
			return nil, err
		}
		return trackPods(ctx, c, ns)
	}()
	if err != nil {
		c.stop()
		return nil, nil, err
	}
	return c, tr, nil
}
