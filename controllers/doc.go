// Package controllers is minictl's kube-controller-manager: the manager
// (flags, leader election, health, metrics, events) and, in one package
// each, the controllers it runs.
//
// Every controller has the same shape, top to bottom in one file, the way
// kubernetes/sample-controller reads:
//
//   - Options: what it needs, passed in explicitly: the *client.RESTClient it
//     writes through, the *informer.SharedInformerFactory it reads from, an
//     EventRecorder (Eventf(obj, type, reason, format, args...)), a
//     *slog.Logger, a prometheus.Registerer for its workqueue's metrics, and
//     its own knobs (timings, thresholds) with Kubernetes' defaults.
//   - New(Options) (*Controller, error): takes informers from the shared
//     factory (never builds its own), adds event handlers that ONLY enqueue
//     keys, and adds the indexes it needs.
//   - Run(ctx, workers): waits for its informers' caches to sync, starts
//     workers, blocks until ctx is done, then shuts the queue down and waits
//     for the workers.
//   - processNextWorkItem: the only place that decides retry (AddRateLimited)
//     or forget.
//   - sync(ctx, key): one linear story that reads desired and observed state
//     from listers (never from the API on the hot path), computes the
//     difference, acts through the API, and updates status. It logs one line
//     per decision, as a story a learner can follow: the message is the
//     human wording, the attributes are the data (object, from, to, counts),
//     and the logger the manager gives it already names the controller:
//     log.Info("want 3, have 2 → create 1", slog.String("object", key), ...)
//     is "replicaset  default/web  want 3, have 2 → create 1" on the timeline.
//
// Controllers see the cluster only through the API: they import client,
// informer and api, never apiserver or store.
package controllers
