// Package kubelet is minictl's simulated node agent: a kubelet with no
// containers, which does through the API everything a real one does there
// (as kwok simulates it), so that nodes and pods move as in a real cluster.
//
// Design, one line per part:
//
//   - kubelet.go: the Kubelet (Options, New, Run), its pod workers and how
//     the annotations below steer them.
//   - node.go: registering the Node, renewing its Lease, reporting its
//     status.
//   - status.go: the next status of a pod: its phases, containers and
//     conditions (the kubelet's status manager and container runtime, in
//     one pure function).
//   - script.go: what a container's command does: a small shell read
//     into the lines it prints and when, and when it exits.
//   - backoff.go: the containers' restart back-off (CrashLoopBackOff).
//   - runlog.go: the containers' logs, written as their runs go.
//   - ipam.go: pod IPs from the node's pod CIDR (host-local IPAM).
//   - volumes.go: whether a pod's claims are ready to mount here (the
//     volume manager's wait).
//   - server.go: the kubelet's HTTP API on the node address:
//     /containerLogs (what the API server's pods/log proxies to) and
//     /healthz.
//   - usage.go, resourcemetrics.go: what the node and its containers use
//     (CPU as cumulative counters, working set memory), served at
//     /metrics/resource for the resource metrics API.
//   - containerlog/: what the simulated containers printed, read back as
//     kubectl logs asks (tail, since, timestamps, limitBytes, previous,
//     follow).
//
// Properties:
//
//   - The Node is registered Ready, with the capacity given (allocatable
//     the same), labels kubernetes.io/hostname, kubernetes.io/os,
//     kubernetes.io/arch and type=sim, a simulated InternalIP (by default
//     127.0.1.<n>, a loopback address of its own on Linux), and nodeInfo
//     kubeletVersion v1.36.0-minictl.
//   - The kubelet listens on its InternalIP before it registers, and the
//     Node's status.daemonEndpoints.kubeletEndpoint.Port is the port it
//     listens on. GET /containerLogs/{namespace}/{pod}/{container} answers
//     with the container's log as text/plain (streamed with follow=true
//     until the run ends), with the kubelet's query parameters, codes and
//     messages; the server stops, and every follower with it, when Run's
//     context ends.
//   - The Lease kube-node-lease/<node>, owned by the Node, is renewed every
//     HeartbeatInterval (leaseDurationSeconds 40): it is what tells the
//     node lifecycle controller that the node is alive. The node status is
//     computed every StatusUpdateInterval and written, with fresh
//     lastHeartbeatTimes, when it changed or NodeStatusReportFrequency (5
//     minutes) has passed since it was last written, as kube's kubelet
//     does.
//   - A pod bound to the node is admitted at once, unless a host port it
//     asks for is taken by another pod admitted on the node and not
//     finished: then it is Failed, reason NodePorts, message "Pod was
//     rejected: Predicate NodePorts failed: ...". An admitted pod gets
//     startTime, hostIP and a pod IP no other unfinished pod of the node
//     has; its init containers run one at a time, in order, to completion
//     (sidecars only start), Pending and Initialized False (reason
//     ContainersNotInitialized) meanwhile; then its containers start
//     (image "sim://<image>", containerID "sim://<uid>/<name>") and it is
//     Running, with PodScheduled, Initialized, PodReadyToStartContainers,
//     ContainersReady and Ready True.
//   - A pod with claims (persistentVolumeClaim or generic ephemeral
//     volumes) starts only once each claim is Bound to a volume that names
//     it back and whose node affinity admits the node; the kubelet gets
//     them (it may not watch them) every second. Meanwhile the pod is
//     Pending, its containers waiting ContainerCreating and
//     PodReadyToStartContainers False, without startTime or IP; every
//     VolumeMountTimeout (2m3s) of waiting a FailedMount event says
//     "Unable to attach or mount volumes: unmounted volumes=[...],
//     unattached volumes=[...]: timed out waiting for the condition".
//   - A container runs what its command and args say (sh -c scripts of
//     sleep, exit, true, false, echo with ;, && and ||; see
//     containerScript): it exits by itself at the time and with the code
//     they give. What minictl does not simulate (nginx, neither command
//     nor args) runs until stopped, or, in an init container, completes
//     at once. Runs are timed from the status's times, which are to the
//     second; the kubelet wakes for them through its workqueue, on its
//     clock.
//   - An exited container is restarted by restartPolicy Always, or
//     OnFailure with a non-zero code (an init container on failure only):
//     the first time at once, then after a back-off of BackOffBase
//     doubling to MaxBackOff (10s to 5m by default), meanwhile waiting
//     CrashLoopBackOff, "back-off 10s restarting failed container=<name>
//     pod=<name>_<namespace>(<uid>)", with a BackOff event. Each restart
//     adds one to restartCount and keeps the ended run as lastState
//     terminated (exitCode, reason Completed or Error, startedAt,
//     finishedAt). A run longer than twice MaxBackOff resets the
//     back-off. Otherwise the container stays terminated, and the pod ends
//     Succeeded (all exited 0) or Failed, as the kubelet's getPhase reads
//     the containers; a failed init container under Never fails it.
//   - spec.activeDeadlineSeconds after startTime, the running containers
//     are killed (exit code 137) and the pod is Failed, reason
//     DeadlineExceeded, "Pod was active on the node longer than the
//     specified deadline", with a DeadlineExceeded event.
//   - A container with a readinessProbe is ready initialDelaySeconds
//     after it started (the probe always succeeds); one without is ready
//     at once.
//   - Each run of a container has a log (package containerlog): a first
//     line saying what runs, what it echoes at the time it does, and a
//     last line with its exit code; the run before is kept. A pod's logs
//     go when the pod is gone.
//   - A kubelet that restarts carries on from the pods' statuses: runs end
//     when their startedAt says, exits already shown are not applied
//     again; only the back-off, kept in memory as a kubelet does, starts
//     over.
//   - A pod being deleted has its containers stopped (exit code 0, phase
//     Succeeded) and is then removed (grace period 0, uid precondition),
//     after TerminationDelay.
//   - Status writes are compare-and-swap; on a conflict the pod is read
//     again and the step decided again.
//   - GET /metrics/resource answers with the kubelet's resource metrics
//     (Prometheus text, each sample stamped with the reading's time in
//     milliseconds): container_cpu_usage_seconds_total,
//     container_memory_working_set_bytes and container_start_time_seconds
//     of every running container, pod_* sums of them, and the node's
//     node_cpu_usage_seconds_total and node_memory_working_set_bytes. A
//     container uses a tenth of its requests (1m CPU and 8Mi without
//     them); the node adds 50m and 200Mi of its own. The CPU counters
//     grow at that rate between two readings; a reading takes the rates
//     the pods ask for from then on.
//
// Breaking things on purpose, through the API:
//
//   - Node annotation sim.minictl.io/heartbeat=stop: no Lease renewals and
//     no status writes while it is there, as if the node lost the API
//     server; removing it resumes both at once. Pods keep being run.
//   - Pod annotation sim.minictl.io/ready=false: containers, ContainersReady
//     and Ready False; removing it (or "true") makes them True again.
//   - Pod annotations sim.minictl.io/cpu-usage (e.g. "350m") and
//     sim.minictl.io/memory-usage (e.g. "200Mi"): what the whole pod uses,
//     shared evenly by its running containers, in place of their
//     defaults; one patch pushes the load up or down.
//   - Pod annotation sim.minictl.io/exit-code=N: the running containers
//     exit with N, once per value. restartPolicy Always, or OnFailure with
//     N≠0: they restart (restartCount+1, lastState terminated with exit code
//     N, reason Error or Completed) and the pod stays Running. Otherwise
//     they stay terminated with N, and the pod ends Succeeded (N=0) or
//     Failed. Removing the annotation and setting the same value again
//     applies it again.
package kubelet
