package apiserver

import (
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/auth/user"
)

// Who is who, in the spirit of kube-apiserver's API Priority and Fairness:
// a request's user and what it asks for put it in a flow schema, and the
// flow schema in a priority level, each named as in kube's defaults:
//
//	flow schema              priority level   requests
//	system-leader-election   leader-election  the controller manager's and the scheduler's Leases in kube-system
//	system-node-high         node-high        the kubelets' Nodes and Leases: their heartbeats
//	system-nodes             system           the kubelets' other requests (pod status)
//	kube-controller-manager  workload-high    the controller manager's other requests
//	kube-scheduler           workload-high    the scheduler's other requests (bindings)
//	kube-system-service-accounts workload-high the controllers, as their ServiceAccounts in kube-system
//	global-default           global-default   every other client
//
// Exempt from every limit, as in kube: health probes (/healthz, /livez,
// /readyz), /metrics, /debug/ (loopback only) and long-running requests
// (watches).

// The users minictl's own components act as, by kube's names for them.
const (
	UserKubeControllerManager = user.KubeControllerManager
	UserKubeScheduler         = user.KubeScheduler
	nodeUserPrefix            = user.NodeUserPrefix
	kubeSystemAccountPrefix   = user.ServiceAccountUsernamePrefix + "kube-system:"
)

// NodeUser is the user the kubelet of node acts as, system:node:<node>.
func NodeUser(node string) string { return nodeUserPrefix + node }

// systemAgentPrefix begins the User-Agent of minictl's own components.
const systemAgentPrefix = "minictl/"

// SystemUserAgent is the User-Agent with which one of minictl's own
// components, reaching the server through the plain loopback listener,
// says which user it acts for: "minictl/system:kube-scheduler". Every
// request there acts as the admin (auth.go); the name only gives the
// component's requests their priority level, as the user a proxy forwards
// for. On the secure port the authenticated user decides.
func SystemUserAgent(user string) string { return systemAgentPrefix + user }

// requestUser is the user r's priority level is chosen by: the
// authenticated user on the secure port; on the plain listener, a system
// user its User-Agent names, or "" for every other client.
func requestUser(r *http.Request) string {
	if !viaProxy(r) {
		if u, ok := user.From(r.Context()); ok {
			return u.Name
		}
		return ""
	}
	name, ok := strings.CutPrefix(r.UserAgent(), systemAgentPrefix)
	if !ok || !strings.HasPrefix(name, "system:") {
		return ""
	}
	return name
}

// levelConfig is a priority level's seats and queue.
type levelConfig struct {
	seats, queue int
}

// The system's priority levels: the seats of each are the nominal
// concurrency kube-apiserver gives it at its default total of 600 seats
// (ceil(600 × shares / 245)), and its queue holds as many requests as
// kube's queues of it together (queues × queueLengthLimit 50). The
// global-default level has the seats of --max-requests-inflight (read-only)
// and --max-mutating-requests-inflight (mutating) and refuses at once, as
// kube-apiserver's max-in-flight filter does.
var systemLevels = map[string]levelConfig{
	"leader-election": {seats: 25, queue: 16 * 50},
	"node-high":       {seats: 98, queue: 64 * 50},
	"system":          {seats: 74, queue: 64 * 50},
	"workload-high":   {seats: 98, queue: 128 * 50},
}

// priorityLevel is a set of seats no other level uses: one pool, or for
// global-default one for read-only and one for mutating requests.
type priorityLevel struct {
	name               string
	readOnly, mutating *seats
}

func (l *priorityLevel) seats(mutating bool) *seats {
	if mutating {
		return l.mutating
	}
	return l.readOnly
}

// flowSchema is one row of the table above, with its series.
type flowSchema struct {
	name     string
	level    *priorityLevel
	inflight prometheus.Gauge   // apiserver_flowcontrol_current_inflight_requests
	inqueue  prometheus.Gauge   // apiserver_flowcontrol_current_inqueue_requests
	served   prometheus.Counter // apiserver_flowcontrol_dispatched_requests_total
}

// flowControl classifies requests and bounds them (inflight.go).
type flowControl struct {
	// resources is the catalogue served now (Server.serving).
	resources func() api.Catalogue

	systemLeaderElection, systemNodeHigh, systemNodes, kubeControllerManager, kubeScheduler, kubeSystemServiceAccounts, globalDefault *flowSchema

	kinds    [2]requestKind         // read-only, mutating
	rejected *prometheus.CounterVec // flow_schema, priority_level, reason
}

// flowControlConfig sizes the priority levels.
type flowControlConfig struct {
	maxReadOnly, maxMutating int // global-default's seats; < 0: no limit
	levels                   map[string]levelConfig
	queueWait                time.Duration
}

func newFlowControl(resources func() api.Catalogue, cfg flowControlConfig, m *metrics) *flowControl {
	level := func(name string) *priorityLevel {
		c := cfg.levels[name]
		s := newSeats(c.seats, c.queue, cfg.queueWait)
		return &priorityLevel{name: name, readOnly: s, mutating: s}
	}
	schema := func(name string, l *priorityLevel) *flowSchema {
		return &flowSchema{
			name: name, level: l,
			inflight: m.flowInflight.WithLabelValues(l.name, name),
			inqueue:  m.flowInqueue.WithLabelValues(l.name, name),
			served:   m.flowServed.WithLabelValues(l.name, name),
		}
	}
	workloadHigh := level("workload-high")
	fc := &flowControl{
		resources:             resources,
		systemLeaderElection:  schema("system-leader-election", level("leader-election")),
		systemNodeHigh:        schema("system-node-high", level("node-high")),
		systemNodes:           schema("system-nodes", level("system")),
		kubeControllerManager: schema("kube-controller-manager", workloadHigh),
		kubeScheduler:         schema("kube-scheduler", workloadHigh),
		// The controllers running as their own ServiceAccounts
		// (--use-service-account-credentials).
		kubeSystemServiceAccounts: schema("kube-system-service-accounts", workloadHigh),
		globalDefault: schema("global-default", &priorityLevel{
			name:     "global-default",
			readOnly: newSeats(cfg.maxReadOnly, 0, 0),
			mutating: newSeats(cfg.maxMutating, 0, 0),
		}),
		rejected: m.flowRejected,
	}
	for i, kind := range []string{"readOnly", "mutating"} {
		fc.kinds[i] = requestKind{
			inflight: m.inflight.WithLabelValues(kind),
			dropped:  m.dropped.WithLabelValues(kind),
		}
	}
	return fc
}

// classify returns the flow schema of r, nil when r is exempt, and
// whether r mutates (anything but GET and HEAD, as kube counts verbs other
// than get, list and watch).
func (fc *flowControl) classify(r *http.Request) (*flowSchema, bool) {
	ri := fc.requestInfo(r)
	if exempt(r, ri) {
		return nil, false
	}
	mutating := r.Method != http.MethodGet && r.Method != http.MethodHead
	switch user := requestUser(r); {
	case user == UserKubeControllerManager || user == UserKubeScheduler:
		if ri != nil && ri.res == api.Leases && ri.namespace == metav1.NamespaceSystem {
			return fc.systemLeaderElection, mutating
		}
		if user == UserKubeScheduler {
			return fc.kubeScheduler, mutating
		}
		return fc.kubeControllerManager, mutating
	case strings.HasPrefix(user, kubeSystemAccountPrefix):
		return fc.kubeSystemServiceAccounts, mutating
	case strings.HasPrefix(user, nodeUserPrefix):
		if ri != nil && (ri.res == api.Nodes || ri.res == api.Leases) {
			return fc.systemNodeHigh, mutating
		}
		return fc.systemNodes, mutating
	}
	return fc.globalDefault, mutating
}

// exempt reports whether r is outside every limit: a health probe,
// /metrics, /debug/, or long-running (a watch, a pod's log). ri is r's
// resource, nil for other paths.
func exempt(r *http.Request, ri *requestInfo) bool {
	if ri != nil {
		return ri.longRunning()
	}
	p := r.URL.Path
	for _, prefix := range []string{"/healthz", "/livez", "/readyz", "/metrics", "/debug/"} {
		if strings.HasPrefix(p, prefix) {
			return true
		}
	}
	return false
}

// requestInfo reads r's path as the routes do: the resource it names and
// the verb, or nil for a path outside /api/v1/ and /apis/<g>/<v>/ or a
// resource not served.
func (fc *flowControl) requestInfo(r *http.Request) *requestInfo {
	var group, version, rest string
	if p, ok := strings.CutPrefix(r.URL.Path, "/api/v1/"); ok {
		version, rest = "v1", p
	} else if p, ok := strings.CutPrefix(r.URL.Path, "/apis/"); ok {
		var found bool
		if group, p, found = strings.Cut(p, "/"); !found {
			return nil
		}
		if version, rest, found = strings.Cut(p, "/"); !found {
			return nil
		}
	} else {
		return nil
	}
	ri, ok := parseResourcePath(fc.resources(), group, version, splitPath(rest))
	if !ok {
		return nil
	}
	ri.verb, _ = verbFor(r, ri)
	return ri
}
