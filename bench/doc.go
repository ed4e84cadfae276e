// Command bench measures minictl against the physical limit of the machine
// it runs on: `make bench` (or `make bench-quick` for a fast look).
//
// Every scenario starts the built binary (`minictl up` on a free loopback
// port, with a temporary data dir) and talks to it over HTTP exactly as a
// client would; the embedded etcd runs in that process, on this machine.
// Each scenario runs -reps times (3 by default) and the table reports the
// median, min and max of every figure; -json writes the same for machines.
//
// Design, one line per part:
//
//   - main.go: flags, the order of the scenarios, the machine description.
//   - cluster.go: start, probe (/readyz, /metrics, VmRSS) and stop one
//     `minictl up` process.
//   - results.go: figures, targets, the table and the JSON.
//   - objects.go: the pod and ReplicaSet the scenarios create, and the
//     HTTP helpers they share.
//   - tracker.go: a watch that follows every pod of a namespace and tells
//     when a condition first became true.
//   - create.go: pod creates against raw etcd transactions, lists, memory.
//   - watch.go: 1,000 watchers on one namespace.
//   - reconcile.go: a ReplicaSet scaled to 2,000 pods, and 200 replaced.
//   - namespace.go: a namespace of 1,000 running pods deleted.
//   - startup.go: `minictl up` to /readyz, empty and with 30,000 pods.
//   - apply.go: server-side apply of an unchanged Deployment.
//   - customresource.go: pod-sized custom objects created alternately
//     with pods; the time from a definition's create to its first object.
//   - workloads.go: a Job of 1,000 completions at parallelism 100; a
//     DaemonSet on 100 nodes.
//   - hpa.go: one pass of the autoscaler over 200 autoscalers, steady and
//     when every one of them rescales, from the controller's own metrics.
//   - testenv.go: package testenv's Start to ready, in this process, and
//     the heap of one idle environment with controllers (the one scenario
//     that does not run the binary).
//   - scale.go, scalewatch.go: `make bench-scale`, run only when -only
//     names it: pods at 100/s through ReplicaSets up to 150,000 on 5,000
//     nodes, Kubernetes' SLOs meanwhile, then memory and idle CPU per
//     step (SCALE.md).
//
// Properties:
//
//   - The harness measures; it never fails because a figure misses its
//     target. It fails only if minictl cannot be started or answers a
//     request with an error it should not.
//   - Load only targets loopback, and every loop is bounded by a count and
//     a deadline.
//   - Figures are what a client sees: latencies run from sending the
//     request to reading the last byte of the answer.
//   - The machine is part of the measurement: the run ends by saying how
//     much CPU other processes used meanwhile.
//
// For a look inside: -pprof DIR starts minictl with --profiling and saves
// a CPU profile of each scenario's main phase (and the allocations of the
// creates); -logs DIR keeps each minictl's log and final /metrics; -only
// runs some scenarios.
package main
