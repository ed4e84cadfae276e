package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// runWatch is the fan-out scenario: watchers concurrent watches of one
// namespace's pods, then pods created at a steady rate. For every
// (watcher, pod) pair the delivery latency is the time from the create's
// 201 reaching the client to the ADDED event reaching that watcher; an
// event that arrives before the 201 counts as 0.
func (h *harness) runWatch(ctx context.Context, rep int) error {
	watchers, pods, rate := h.cfg.watchers, h.cfg.watchPods, 50
	c, err := h.startCluster(ctx, clusterOptions{Profiling: h.profiling()})
	if err != nil {
		return err
	}
	defer c.stop()
	const ns = "fan"
	if err := createNamespace(ctx, c, ns); err != nil {
		return err
	}
	rv, err := listRV(ctx, podsURL(c, ns))
	if err != nil {
		return err
	}

	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	recv := make([][]time.Time, watchers)
	var received atomic.Int64
	var ready, done sync.WaitGroup
	errs := make(chan error, watchers)
	tr := &http.Transport{MaxIdleConnsPerHost: watchers, DisableCompression: true}
	defer tr.CloseIdleConnections()
	wc := &http.Client{Transport: tr}
	url := podsURL(c, ns) + "?watch=true&resourceVersion=" + rv
	for w := range watchers {
		recv[w] = make([]time.Time, pods)
		ready.Add(1)
		done.Go(func() {
			if err := watchOne(wctx, wc, url, recv[w], &received, ready.Done); err != nil {
				errs <- err
			}
		})
		if w%100 == 99 {
			time.Sleep(10 * time.Millisecond) // do not flood the accept queue
		}
	}
	ready.Wait()
	select {
	case err := <-errs:
		return err
	default:
	}
	etcdWatches, err := c.metric(ctx, `minictl_etcd_watches{resource="pods"}`)
	if err != nil {
		return err
	}
	registered, err := c.metric(ctx, `apiserver_registered_watchers{resource="pods"}`)
	if err != nil {
		return err
	}

	prof := h.cpuProfile(ctx, c, rep, "watch", pods/rate)
	acks := make([]time.Time, pods)
	var creates sync.WaitGroup
	tick := time.NewTicker(time.Second / time.Duration(rate))
	for i := range pods {
		<-tick.C
		creates.Go(func() {
			body := podJSON(ns, fmt.Sprintf("w-%05d", i), unscheduled)
			if _, err := expect(ctx, http.StatusCreated, http.MethodPost, podsURL(c, ns), "application/json", body); err != nil {
				errs <- err
				return
			}
			acks[i] = time.Now()
		})
	}
	tick.Stop()
	creates.Wait()
	select {
	case err := <-errs:
		return err
	default:
	}
	// Give stragglers up to 10s, then count what never came.
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) && received.Load() < int64(watchers*pods) {
		time.Sleep(10 * time.Millisecond)
	}
	prof.wait()
	if w2, err := c.metric(ctx, `minictl_etcd_watches{resource="pods"}`); err == nil {
		etcdWatches = max(etcdWatches, w2)
	}
	cancel()
	done.Wait()

	var lat []time.Duration
	missed := 0
	for w := range recv {
		for i, t := range recv[w] {
			if t.IsZero() {
				missed++
				continue
			}
			lat = append(lat, max(0, t.Sub(acks[i])))
		}
	}
	slices.Sort(lat)
	h.res.addDuration("watch", fmt.Sprintf("delivery p50 (%d watchers)", watchers), percentile(lat, 50))
	h.res.addDuration("watch", fmt.Sprintf("delivery p99 (%d watchers)", watchers), percentile(lat, 99))
	h.res.addDuration("watch", fmt.Sprintf("delivery max (%d watchers)", watchers), percentile(lat, 100))
	h.res.add("watch", "missed events", "events", float64(missed))
	h.res.add("watch", `etcd watches on pods`, "watches", etcdWatches)
	h.res.add("watch", "HTTP watchers registered on pods", "watchers", registered)
	return nil
}

// watchOne reads one watch stream, recording when each pod w-<i> was first
// ADDED. ready is called once the response headers arrived. It returns
// when ctx ends.
func watchOne(ctx context.Context, wc *http.Client, url string, recv []time.Time, received *atomic.Int64, ready func()) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		ready()
		return err
	}
	resp, err := wc.Do(req)
	ready()
	if err != nil {
		return fmt.Errorf("watch: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("watch: %s", resp.Status)
	}
	r := bufio.NewReaderSize(resp.Body, 1<<16)
	namePrefix := []byte(`"name":"w-`)
	for {
		line, err := r.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			// A line longer than the buffer is not one of ours.
			for err == bufio.ErrBufferFull {
				_, err = r.ReadSlice('\n')
			}
			continue
		}
		if err != nil {
			return nil // ctx ended, or the server closed: missed events will show it
		}
		now := time.Now()
		if !bytes.HasPrefix(line, []byte(`{"type":"ADDED"`)) {
			continue
		}
		// The first "name" in the object is metadata.name.
		j := bytes.Index(line, namePrefix)
		if j < 0 {
			continue
		}
		rest := line[j+len(namePrefix):]
		end := bytes.IndexByte(rest, '"')
		if end < 0 {
			continue
		}
		i, err := strconv.Atoi(string(rest[:end]))
		if err == nil && i >= 0 && i < len(recv) && recv[i].IsZero() {
			recv[i] = now
			received.Add(1)
		}
	}
}
