// Package compat proves that the real tools work against minictl: an
// unmodified kubectl, built from k8s.io/kubectl at the release minictl's
// wire types come from (cmd/kubectl), and client-go's typed clientset and
// shared informers.
//
// It is a module of its own so that minictl itself never imports
// client-go, kubectl or their dependencies. Its tests build the minictl
// binary and kubectl, start `minictl up` on a free loopback port with a
// temporary data dir, and drive it the way a user does:
//
//   - kubectl_test.go: version, api-resources, get (tables, -o wide, -A,
//     all, -w), create and apply of a multi-document file, re-apply after
//     an edit (a strategic merge patch computed from minictl's OpenAPI),
//     edit, scale, delete, describe, events, explain, validation; a
//     ReplicationController, and exec answered by the simulated containers;
//     logs, --tail, --timestamps and -f through pods/log and the kubelet;
//     drain, evicting through the eviction subresource and held back by a
//     PodDisruptionBudget, and get pdb;
//     a CronJob created, printed, and run once with create job --from;
//   - commands_test.go: pods whose commands the simulated kubelets run,
//     as kubectl get pods shows them (Completed, Error, CrashLoopBackOff,
//     Init:0/1);
//     a DaemonSet's and a StatefulSet's rollout status, history and undo;
//     Jobs: create, the server's columns, wait --for=condition=complete;
//   - clientgo_test.go: create, get, update with conflict retry, patch,
//     delete through kubernetes.Clientset, and shared informers that sync,
//     follow churn and end equal to a fresh list.
//
// Assertions about pods becoming Running need the simulated nodes of
// `minictl up`; without nodes they skip and say so.
package compat
