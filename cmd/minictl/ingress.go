package main

import (
	"context"
	"log/slog"

	"github.com/minictl/minictl/auth/user"
	"github.com/minictl/minictl/client/record"
	"github.com/minictl/minictl/cloud/sim"
	"github.com/minictl/minictl/controllers/ingress"
	"github.com/minictl/minictl/informer"
)

// ingressWorkers is how many Ingresses the simulated ingress controller
// syncs at once.
const ingressWorkers = 2

// runIngressController runs minictl's simulated ingress controller, the
// stand-in for a third-party one such as ingress-nginx, until ctx ends: as
// its own user (and so held to its own ClusterRole on the secure port),
// with its own informers, giving the Ingresses of the class "sim" load
// balancers of the simulated cloud at cloudURL.
func runIngressController(ctx context.Context, connect connector, cloudURL string, log *slog.Logger) error {
	rc, err := connect(user.SimIngressController)
	if err != nil {
		return err
	}
	cl, err := sim.NewClient(cloudURL, sim.ClientOptions{})
	if err != nil {
		return err
	}
	log = log.With("component", ingress.Name)
	factory := informer.NewSharedInformerFactory(rc, informer.FactoryOptions{Logger: log})
	defer factory.Shutdown()
	rec := record.NewRecorder(rc, record.Options{Component: ingress.Name, Logger: log})
	var opts ingress.Options
	opts.Client, opts.Informers, opts.Recorder, opts.Logger = rc, factory, rec, log
	opts.Cloud = cl
	c, err := ingress.New(opts)
	if err != nil {
		return err
	}
	return runWithRecorder(ctx, rec, func() error {
		factory.Start(ctx)
		c.Run(ctx, ingressWorkers)
		return nil
	})
}
