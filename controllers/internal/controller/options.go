package controller

import (
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/client/record"
	"github.com/minictl/minictl/clock"
	"github.com/minictl/minictl/informer"
)

// Common is what every controller is built from. Each controller's Options
// embeds it, and adds only the knobs of its own; the manager fills it the
// same way for all of them.
type Common struct {
	// Client is what the controller reads from and writes to the API
	// through. Required.
	Client *client.RESTClient
	// Informers is the shared factory the controller takes its informers
	// from; it never builds its own. Required; the caller starts it after
	// New.
	Informers *informer.SharedInformerFactory
	// Recorder records the controller's Events; nil records none.
	Recorder record.EventRecorder
	// Logger tells the controller's story; nil discards it. The controller
	// adds controller=<its name> to it: the caller must not.
	Logger *slog.Logger
	// Metrics, if set, receives the controller's metrics and its
	// workqueues'.
	Metrics prometheus.Registerer
	// Clock is the controller's time source, and its workqueues'; nil is
	// the real clock.
	Clock clock.Clock
}

// Complete checks that c has what every controller needs, a Client and
// Informers, and returns it WithDefaults(name). name is the controller's
// kube-controller-manager name; it also prefixes the error.
func (c Common) Complete(name string) (Common, error) {
	if c.Client == nil || c.Informers == nil {
		return c, fmt.Errorf("%s: Options.Client and Options.Informers are required", name)
	}
	return c.WithDefaults(name), nil
}

// WithDefaults returns c with its nil fields defaulted (Recorder
// record.Discard, Logger discarding, Clock the real clock; Metrics stays
// nil: no metrics) and its Logger carrying controller=name. Tests that build
// a controller without informers call it; New calls Complete.
func (c Common) WithDefaults(name string) Common {
	if c.Recorder == nil {
		c.Recorder = record.Discard
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	c.Logger = c.Logger.With("controller", name)
	c.Clock = clock.Or(c.Clock)
	return c
}
