package api

import (
	policyv1 "k8s.io/api/policy/v1"
)

// PodDisruptionBudgets (policy/v1): how many of a set of pods voluntary
// disruptions (evictions) may take down at once.

// A new budget starts at generation 1 with an empty status; an update
// keeps the status and bumps the generation when the spec changed.

func preparePodDisruptionBudgetForCreate(pdb *policyv1.PodDisruptionBudget) {
	pdb.Generation = 1
	pdb.Status = policyv1.PodDisruptionBudgetStatus{}
}

func preparePodDisruptionBudgetForUpdate(pdb, old *policyv1.PodDisruptionBudget) {
	pdb.Status = old.Status
	pdb.Generation = nextGeneration(old, pdb.Spec, old.Spec)
}
