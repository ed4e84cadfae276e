// Package scheduler is minictl's kube-scheduler: it binds each pending pod
// to a node that can run it, through the pods/{name}/binding subresource.
//
// Design, one line per part:
//
//   - scheduler.go: the Scheduler, shaped like a controller (Options, New,
//     Run, processNextWorkItem, sync), with the assumed-pod cache and what
//     each node's pods use, kept up to date by the pod handlers (a
//     decision costs the number of nodes, not of pods).
//   - filter.go: which nodes can run a pod, and the FailedScheduling
//     message that says why none can (kube-scheduler's filter plugins and
//     FitError).
//   - score.go: which of those is best (the LeastAllocated score).
//   - volumes.go: what the pod's PersistentVolumeClaims ask of a node, and
//     the wait for them to be bound before the pod is (kube-scheduler's
//     VolumeBinding plugin).
//   - resources.go: what a pod requests and what a node's pods use.
//   - nodeports/: which host ports a pod takes and when two conflict
//     (kube-scheduler's NodePorts plugin), shared with the kubelet.
//
// Properties:
//
//   - A pod is placed when it is not bound, names this scheduler in
//     spec.schedulerName, is not being deleted, has not finished and has no
//     scheduling gates.
//   - A node fits when it is not cordoned, is Ready, has no NoSchedule or
//     NoExecute taint the pod does not tolerate, matches the pod's
//     nodeSelector and required node affinity, has free every host port
//     the pod's containers ask for (see package nodeports; the kubelet
//     admits pods by the same rule), and has room for the pod's
//     requests (cpu, memory, any other resource it asks for, and one more
//     pod) after those of the unfinished pods bound to it.
//   - A pod with claims (persistentVolumeClaim or generic ephemeral
//     volumes) waits until each exists and is not being deleted, and until
//     each claim of an Immediate class is bound (the
//     persistentvolume-binder's work): "pod has unbound immediate
//     PersistentVolumeClaims". Then a node fits only if the volume of each
//     bound claim is reachable from it (the volume's node affinity), and
//     each unbound claim of a WaitForFirstConsumer class finds there an
//     Available volume to bind, or a class that may provision there (a
//     provisioner other than kubernetes.io/no-provisioner, and
//     allowedTopologies admitting the node). A pod without claims reads
//     nothing of this.
//   - Once a node is chosen for such a pod, the scheduler writes the
//     chosen volumes' claimRef and each claim to provision's
//     volume.kubernetes.io/selected-node annotation, and binds the pod only
//     when every claim is Bound to a volume reachable from the node. That
//     wait, and the binding after it, run beside the workers (as
//     kube-scheduler's binding cycles do), so that the pods behind it are
//     placed meanwhile. If
//     that takes longer than the bind timeout (600s), or cannot happen
//     (a provisioner gave up and took the annotation off), the pod gets a
//     FailedScheduling event and PodScheduled False with reason
//     SchedulerError, the annotation it wrote is taken off so that the
//     next attempt may choose another node, and the pod is tried again
//     after its backoff.
//   - Of the nodes that fit, the one left with the most free cpu and
//     memory wins; a tie goes to the first name.
//   - Decisions are made one at a time, and a pod counts on its node from
//     the moment it is decided on (it is "assumed"), before the binding
//     reaches the informer: two quick decisions never overcommit a node.
//     The bindings themselves, and the API calls after them, run on
//     several workers at once.
//   - A pod no node fits gets a FailedScheduling event and its PodScheduled
//     condition set to False with reason Unschedulable and the same
//     message. It waits, as in kube-scheduler's unschedulable pods, until a
//     node is added or changes in a way that matters, or a bound pod is
//     deleted or finishes, and is then tried again once its backoff (1s
//     doubling to 10s) is over; or, when nothing changes, after 5 minutes.
//     So a thousand pending pods cost an attempt each per change that may
//     make room, not one each per backoff.
//   - A binding refused because the pod is already bound, or gone, is not
//     an error: the pod is someone else's now.
//
// The scheduler sees the cluster only through the API: it reads pods and
// nodes from shared informers and writes bindings, pod status and events.
package scheduler
