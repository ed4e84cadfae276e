// Package replicationcontroller is the ReplicationController controller:
// it keeps exactly spec.replicas pods that match each
// ReplicationController's selector, as kube-controller-manager's
// replicationcontroller does.
//
// It has no loop of its own. Like kube's replication manager, it is the
// ReplicaSet controller (package controllers/replicaset) run over
// ReplicationControllers seen as ReplicaSets (conversion.go), so it keeps
// every property documented there: adoption of matching orphans and
// release of pods that stop matching, expectations, slow-start batches,
// the order of deletion, the status. What is its own: its name (in logs,
// metrics and the manager's --controllers), and the object it names in
// pods' controller references ("v1" ReplicationController), in Events and
// in status writes.
package replicationcontroller

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/minictl/minictl/controllers/internal/controller"
	"github.com/minictl/minictl/controllers/replicaset"
)

// Name is the controller's kube-controller-manager name: its --controllers
// name, its logger's controller attribute and its workqueue's name.
const Name = "replicationcontroller"

// Options is what the controller needs: the options every controller takes
// (Client and Informers required), and its own.
type Options struct {
	controller.Common
	// BurstReplicas caps the creates or deletes of one sync; 0 means
	// replicaset.DefaultBurstReplicas.
	BurstReplicas int
}

// Controller is the ReplicationController controller. Create it with New,
// then Run it.
type Controller struct {
	rs *replicaset.Controller[*corev1.ReplicationController]
}

// New returns a controller reading pods and ReplicationControllers from
// opts.Informers, with its event handlers registered. Nothing runs until
// Run.
func New(opts Options) (*Controller, error) {
	var err error
	if opts.Common, err = opts.Complete(Name); err != nil {
		return nil, err
	}
	rs, err := replicaset.NewFor(replicaset.Options{Common: opts.Common, BurstReplicas: opts.BurstReplicas}, ReplicationControllers)
	if err != nil {
		return nil, err // prefixed with Name already
	}
	return &Controller{rs: rs}, nil
}

// Run is the ReplicaSet controller's Run: it waits for the caches to sync,
// runs controller.Workers(workers) workers, and blocks until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) {
	c.rs.Run(ctx, controller.Workers(workers))
}
