package api

import (
	batchv1 "k8s.io/api/batch/v1"
)

// Jobs and CronJobs (batch/v1): work that runs to completion, once or on
// a schedule.

// A new Job or CronJob starts at generation 1 with an empty status; an
// update keeps the status and bumps the generation when the spec changed.

func prepareCronJobForCreate(cj *batchv1.CronJob) {
	cj.Generation = 1
	cj.Status = batchv1.CronJobStatus{}
}

func prepareCronJobForUpdate(cj, old *batchv1.CronJob) {
	cj.Status = old.Status
	cj.Generation = nextGeneration(old, cj.Spec, old.Spec)
}
