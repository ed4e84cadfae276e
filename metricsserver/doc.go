// Package metricsserver is minictl's metrics-server: it scrapes every
// kubelet's resource metrics and keeps what the resource metrics API
// (metrics.k8s.io/v1beta1, read by kubectl top and the
// HorizontalPodAutoscaler) answers with.
//
// In Kubernetes, metrics-server is a separate Deployment that
// kube-apiserver reaches through the APIService v1beta1.metrics.k8s.io
// (API aggregation). minictl takes a shortcut: its API server runs this
// package and serves metrics.k8s.io itself, with no APIService object.
// What a client sees is the same.
//
// Design, one line per part:
//
//   - scrape.go: one kubelet's GET /metrics/resource, read into points
//     (the cumulative CPU counter, the working set, the start time, the
//     time of the sample).
//   - storage.go: the last two points of every node and container, and
//     the usage they give: CPU is the counter's rate between the two,
//     memory the last working set, as metrics-server's storage computes
//     them.
//   - server.go: the Server (Options, New, Run): a scrape of every node
//     each resolution, and the NodeMetrics and PodMetrics of what it kept.
//
// Properties:
//
//   - A kubelet is found at its Node's InternalIP and
//     status.daemonEndpoints.kubeletEndpoint port (plain HTTP, as
//     minictl's kubelets serve). Every node is scraped at once, each
//     within nine tenths of the resolution.
//   - Each scrape replaces what was kept: a node that failed it, and its
//     pods, have no metrics until two later scrapes succeed.
//   - A node or pod has metrics once two points of it (of every running
//     container, for a pod) are kept; the window is the time between them
//     and the timestamp the later one's. A container that restarted
//     starts over. As in metrics-server, a container started less than
//     one resolution (and at least 10s) before its first point counts
//     from its start, so it has metrics from its first scrape.
//   - Only Running pods have metrics.
package metricsserver
