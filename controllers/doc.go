// Package controllers is minictl's kube-controller-manager: the manager
// (flags, leader election, health, metrics, events) and, in one package
// each, the controllers it runs.
//
// Every controller has the same shape, top to bottom in one file, the way
// kubernetes/sample-controller reads, on the skeleton in
// controllers/internal/controller:
//
//   - Name: its kube-controller-manager name ("replicaset", "endpoint"),
//     which is its --controllers name, its logger's controller attribute
//     and its workqueue's name. The manager's table uses it.
//   - Options: controller.Common embedded (the *client.RESTClient it
//     writes through, the *informer.SharedInformerFactory it reads from,
//     a record.EventRecorder, a *slog.Logger, a prometheus.Registerer for
//     its metrics and its workqueues', a clock.Clock), and its own knobs
//     (timings, thresholds) with Kubernetes' defaults, exported as
//     Default... constants that the manager's DefaultConfig uses.
//   - New(Options) (*Controller, error): Complete(Name) checks the common
//     options and applies their defaults (nil recorder: none; nil logger:
//     discard; nil clock: real) in one place; then it takes informers
//     from the shared factory (never builds its own), adds event handlers
//     that ONLY enqueue keys, and adds the indexes it needs.
//   - Run(ctx, workers): waits for its informers' caches to sync, starts
//     controller.Workers(workers) workers (at least one), blocks until ctx
//     is done, then shuts the queue down and waits for the workers.
//   - processNextWorkItem: takes a key, syncs it, and hands the result to
//     controller.HandleErr, the only place that decides retry
//     (AddRateLimited), forget, or look again later (a sync that returns
//     workqueue.RequeueAfter); conflicts are logged at Debug, every other
//     failure at Warn.
//   - sync(ctx, key): one linear story that reads desired and observed state
//     from listers (never from the API on the hot path), computes the
//     difference, acts through the API, and updates status. It logs one line
//     per decision, as a story a learner can follow: the message is the
//     human wording, the attributes are the data (object, from, to, counts),
//     and the logger the manager gives it already names the controller:
//     log.Info("want 3, have 2 → create 1", slog.String("object", key), ...)
//     is "replicaset  default/web  want 3, have 2 → create 1" on the timeline.
//
// TestEveryControllerUsesTheSkeleton checks the shape of every controller
// the manager knows, and that the manager knows every controller package.
//
// Controllers see the cluster only through the API: they import client,
// informer and api, never apiserver or store.
package controllers
