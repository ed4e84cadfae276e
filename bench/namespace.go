package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"time"
)

// runNamespace is the namespace deletion scenario, on `minictl up --nodes
// N` (enough room for every pod): a namespace with pods pods, all Running,
// is deleted; the figure is the time until the namespace is gone (its
// DELETED watch event).
func (h *harness) runNamespace(ctx context.Context, rep int) error {
	pods, nodes := h.cfg.nsPods, h.cfg.nsNodes
	const ns = "doomed"
	c, tr, err := h.startWithNodes(ctx, nodes, ns)
	if err != nil {
		return err
	}
	defer c.stop()
	defer tr.stop()
	running := tr.when(func(t *podTracker) bool { return t.runningLocked() >= pods })
	if _, err := createPods(ctx, c, ns, podBodies(ns, "pod-%05d", "", pods), 32); err != nil {
		return err
	}
	if _, err := tr.wait(running, h.cfg.reconcileTimeout); err != nil {
		return fmt.Errorf("%d pods running: %w", pods, err)
	}

	// Watch the namespace itself for its DELETED event.
	nsURL := c.URL + "/api/v1/namespaces"
	rv, err := listRV(ctx, nsURL)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(wctx, http.MethodGet,
		nsURL+"?watch=true&fieldSelector=metadata.name%3D"+ns+"&resourceVersion="+rv, nil)
	if err != nil {
		return err
	}
	resp, err := watchClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
		return fmt.Errorf("watch namespaces: %s: %s", resp.Status, body)
	}
	gone := make(chan time.Time, 1)
	go func() {
		r := bufio.NewReaderSize(resp.Body, 1<<16)
		for {
			line, err := r.ReadBytes('\n')
			if err != nil {
				return
			}
			if bytes.HasPrefix(line, []byte(`{"type":"DELETED"`)) {
				gone <- time.Now()
				return
			}
		}
	}()

	prof := h.cpuProfile(ctx, c, rep, "namespace", 3)
	start := time.Now()
	if _, err := expect(ctx, http.StatusOK, http.MethodDelete, nsURL+"/"+ns, "", nil); err != nil {
		return err
	}
	select {
	case at := <-gone:
		h.res.addSeconds("namespace", fmt.Sprintf("namespace with %d running pods deleted: gone", pods), at.Sub(start))
	case <-time.After(h.cfg.reconcileTimeout):
		return fmt.Errorf("namespace %s not gone after %s (%s)", ns, h.cfg.reconcileTimeout, tr.summary())
	}
	prof.wait()
	return nil
}
