package sim

import (
	"context"
	"fmt"
)

// RunMachine runs what lives on the machine id, boot, for as long as the
// machine runs: boot starts when the machine is running, its context ends
// when the machine is stopped (and boot starts again, afresh, when it is
// started), and when the machine is deleted boot ends for good and
// RunMachine returns nil. This is how minictl up's simulated kubelets
// live on the cloud's instances: a stopped or deleted machine's kubelet
// falls silent, as a real one would.
//
// RunMachine returns when ctx ends, after boot has returned, or with
// boot's error when boot fails on its own. The cloud's fault switch does
// not touch it: an outage of the cloud's API stops no machine.
func (c *Cloud) RunMachine(ctx context.Context, id string, boot func(context.Context) error) error {
	var sw *software // nil while boot is not running
	halt := func() {
		if sw != nil {
			sw.stop()
			sw = nil
		}
	}
	defer halt()
	for {
		changed := c.Changed()
		in, err := c.Instance(id)
		if IsNotFound(err) {
			halt()
			c.log.Info(fmt.Sprintf("machine %s is gone; what ran on it has stopped", id), "instance", id)
			return nil
		}
		switch running := in.State == StateRunning; {
		case running && sw == nil:
			sw = startSoftware(ctx, boot)
		case !running && sw != nil:
			halt()
		}
		var exited <-chan error
		if sw != nil {
			exited = sw.done
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		case err := <-exited:
			sw.cancel()
			sw = nil
			if ctx.Err() != nil {
				return nil
			}
			if err != nil {
				return fmt.Errorf("machine %s (%s): %w", id, in.Name, err)
			}
			return nil
		}
	}
}

// software is one run of a machine's boot function.
type software struct {
	cancel context.CancelFunc
	done   chan error // receives boot's result, once
}

func startSoftware(ctx context.Context, boot func(context.Context) error) *software {
	ctx, cancel := context.WithCancel(ctx)
	sw := &software{cancel: cancel, done: make(chan error, 1)}
	go func() { sw.done <- boot(ctx) }()
	return sw
}

// stop ends the run and waits for boot to return.
func (sw *software) stop() {
	sw.cancel()
	<-sw.done
}
