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
//     conditions (the kubelet's status manager, in one pure function).
//   - ipam.go: pod IPs from the node's pod CIDR (host-local IPAM).
//   - server.go: the kubelet's HTTP API on the node address:
//     /containerLogs (what the API server's pods/log proxies to) and
//     /healthz.
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
//     HeartbeatInterval (leaseDurationSeconds 40); the node status, with
//     fresh lastHeartbeatTimes, is written every StatusUpdateInterval.
//   - A pod bound to the node goes Pending → Running at once: startTime,
//     hostIP, a pod IP no other unfinished pod of the node has, containers
//     running (image "sim://<image>", containerID "sim://<uid>/<name>"),
//     conditions PodScheduled, Initialized, PodReadyToStartContainers,
//     ContainersReady and Ready True.
//   - A pod being deleted has its containers stopped (exit code 0, phase
//     Succeeded) and is then removed (grace period 0, uid precondition),
//     after TerminationDelay.
//   - Status writes are compare-and-swap; on a conflict the pod is read
//     again and the step decided again.
//
// Breaking things on purpose, through the API:
//
//   - Node annotation sim.minictl.io/heartbeat=stop: no Lease renewals and
//     no status writes while it is there, as if the node lost the API
//     server; removing it resumes both at once. Pods keep being run.
//   - Pod annotation sim.minictl.io/ready=false: containers, ContainersReady
//     and Ready False; removing it (or "true") makes them True again.
//   - Pod annotation sim.minictl.io/exit-code=N: the running containers
//     exit with N, once per value. restartPolicy Always, or OnFailure with
//     N≠0: they restart (restartCount+1, lastState terminated with exit code
//     N, reason Error or Completed) and the pod stays Running. Otherwise
//     they stay terminated with N, and the pod ends Succeeded (N=0) or
//     Failed. Removing the annotation and setting the same value again
//     applies it again.
package kubelet
