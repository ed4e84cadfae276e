package api

import (
	appsv1 "k8s.io/api/apps/v1"
)

// DaemonSets (apps/v1): one pod on every eligible node. Their
// ControllerRevisions hold the templates a DaemonSet has had.

// A new DaemonSet starts at generation 1 with an empty status; an update
// keeps the status and bumps the generation when the spec changed.

func prepareDaemonSetForCreate(ds *appsv1.DaemonSet) {
	ds.Generation = 1
	ds.Status = appsv1.DaemonSetStatus{}
}

func prepareDaemonSetForUpdate(ds, old *appsv1.DaemonSet) {
	ds.Status = old.Status
	ds.Generation = nextGeneration(old, ds.Spec, old.Spec)
}
