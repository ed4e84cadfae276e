package api

import (
	"cmp"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Table is how a kind prints in `kubectl get`: the columns kube-apiserver's
// printers declare for it (k8s.io/kubernetes pkg/printers/internalversion)
// and the function that fills one object's row. The API server answers
// `Accept: application/json;as=Table;v=v1;g=meta.k8s.io` with these rows,
// and kubectl prints them as they come: the columns a user sees are the
// server's, not kubectl's.
//
// Every column is always filled; kubectl shows those with priority 0 and
// adds the rest for `-o wide`.
type Table struct {
	Columns []metav1.TableColumnDefinition
	// Row returns obj's cells, one per column, each a string or an int64,
	// and the row's conditions (a pod that has finished says so). AGE and
	// the like are measured from now.
	Row func(obj Object, now time.Time) ([]any, []metav1.TableRowCondition)
}

// TableColumns returns the columns r's table has.
func (r *Resource) TableColumns() []metav1.TableColumnDefinition {
	if r.Table == nil {
		return defaultColumns
	}
	return r.Table.Columns
}

// TableRow returns obj's row, without the object itself, which is the API
// server's to add in the form the client asked for.
func (r *Resource) TableRow(obj Object, now time.Time) metav1.TableRow {
	if r.Table == nil {
		return metav1.TableRow{Cells: []any{obj.GetName(), obj.GetCreationTimestamp().UTC().Format(time.RFC3339)}}
	}
	cells, conds := r.Table.Row(obj, now)
	return metav1.TableRow{Cells: cells, Conditions: conds}
}

var (
	objectMetaDoc = metav1.ObjectMeta{}.SwaggerDoc()

	nameColumn = metav1.TableColumnDefinition{Name: "Name", Type: "string", Format: "name", Description: objectMetaDoc["name"]}
	ageColumn  = metav1.TableColumnDefinition{Name: "Age", Type: "string", Description: objectMetaDoc["creationTimestamp"]}

	// defaultColumns are kube-apiserver's for kinds without a printer.
	defaultColumns = []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "Created At", Type: "date", Description: objectMetaDoc["creationTimestamp"]},
	}
)

// printer adapts a typed row function that has no conditions.
func printer[T Object](columns []metav1.TableColumnDefinition, row func(obj T, now time.Time) []any) *Table {
	return &Table{Columns: columns, Row: func(obj Object, now time.Time) ([]any, []metav1.TableRowCondition) {
		return row(obj.(T), now), nil
	}}
}

// age is kubectl's AGE: a short human duration since t.
func age(t metav1.Time, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// containerCells lays out the names and the images of containers, comma
// separated, for the CONTAINERS and IMAGES columns.
func containerCells(containers []corev1.Container) (names, images string) {
	n := make([]string, len(containers))
	im := make([]string, len(containers))
	for i, c := range containers {
		n[i], im[i] = c.Name, c.Image
	}
	return strings.Join(n, ","), strings.Join(im, ",")
}

// Pods.

var podTable = &Table{
	Columns: []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "Ready", Type: "string", Description: "The aggregate readiness state of this pod for accepting traffic."},
		{Name: "Status", Type: "string", Description: "The aggregate status of the containers in this pod."},
		{Name: "Restarts", Type: "string", Description: "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted."},
		ageColumn,
		{Name: "IP", Type: "string", Priority: 1, Description: corev1.PodStatus{}.SwaggerDoc()["podIP"]},
		{Name: "Node", Type: "string", Priority: 1, Description: corev1.PodSpec{}.SwaggerDoc()["nodeName"]},
		{Name: "Nominated Node", Type: "string", Priority: 1, Description: corev1.PodStatus{}.SwaggerDoc()["nominatedNodeName"]},
		{Name: "Readiness Gates", Type: "string", Priority: 1, Description: corev1.PodSpec{}.SwaggerDoc()["readinessGates"]},
	},
	Row: func(obj Object, now time.Time) ([]any, []metav1.TableRowCondition) {
		return podRow(obj.(*corev1.Pod), now)
	},
}

var (
	podSucceededConditions = []metav1.TableRowCondition{{Type: metav1.RowCompleted, Status: metav1.ConditionTrue, Reason: string(corev1.PodSucceeded), Message: "The pod has completed successfully."}}
	podFailedConditions    = []metav1.TableRowCondition{{Type: metav1.RowCompleted, Status: metav1.ConditionTrue, Reason: string(corev1.PodFailed), Message: "The pod failed."}}
)

// nodeUnreachablePodReason is the reason the node lifecycle controller
// gives pods on a node that stopped answering.
const nodeUnreachablePodReason = "NodeLost"

func podRow(pod *corev1.Pod, now time.Time) ([]any, []metav1.TableRowCondition) {
	var conds []metav1.TableRowCondition
	switch pod.Status.Phase {
	case corev1.PodSucceeded:
		conds = podSucceededConditions
	case corev1.PodFailed:
		conds = podFailedConditions
	}
	st := podPrintStatus(pod)
	restarts := strconv.Itoa(st.restarts)
	if st.restarts != 0 && !st.lastRestart.IsZero() {
		restarts = fmt.Sprintf("%d (%s ago)", st.restarts, age(st.lastRestart, now))
	}
	ip := ""
	if len(pod.Status.PodIPs) > 0 {
		ip = pod.Status.PodIPs[0].IP
	}
	gates := "<none>"
	if len(pod.Spec.ReadinessGates) > 0 {
		ok := 0
		for _, g := range pod.Spec.ReadinessGates {
			for _, c := range pod.Status.Conditions {
				if c.Type == g.ConditionType {
					if c.Status == corev1.ConditionTrue {
						ok++
					}
					break
				}
			}
		}
		gates = fmt.Sprintf("%d/%d", ok, len(pod.Spec.ReadinessGates))
	}
	return []any{
		pod.Name, fmt.Sprintf("%d/%d", st.ready, st.total), st.reason, restarts, age(pod.CreationTimestamp, now),
		orNone(ip), orNone(pod.Spec.NodeName), orNone(pod.Status.NominatedNodeName), gates,
	}, conds
}

// podStatus is what the READY, STATUS and RESTARTS columns summarise.
type podStatus struct {
	ready, total int
	reason       string
	restarts     int
	lastRestart  metav1.Time
}

// podPrintStatus computes a pod's STATUS the way kubectl users know it:
// the phase, or its reason; Init:N/M while init containers run; the waiting
// or terminated reason of a container (CrashLoopBackOff, Completed,
// ExitCode:1); Terminating once deletion has begun. Sidecars (restartable
// init containers) count among the containers.
func podPrintStatus(pod *corev1.Pod) podStatus {
	st := podStatus{total: len(pod.Spec.Containers), reason: string(pod.Status.Phase)}
	if pod.Status.Reason != "" {
		st.reason = pod.Status.Reason
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Reason == corev1.PodReasonSchedulingGated {
			st.reason = corev1.PodReasonSchedulingGated
		}
	}
	sidecars := map[string]bool{}
	for _, c := range pod.Spec.InitContainers {
		if isSidecar(c) {
			sidecars[c.Name] = true
			st.total++
		}
	}
	initializing, sidecarRestarts, lastSidecarRestart := st.addInitContainers(pod, sidecars)
	if !initializing || podConditionTrue(pod, corev1.PodInitialized) {
		// Once initialized, only sidecars' restarts count beside the
		// containers'.
		st.restarts, st.lastRestart = sidecarRestarts, lastSidecarRestart
		st.addContainers(pod)
	}
	switch {
	case pod.DeletionTimestamp != nil && pod.Status.Reason == nodeUnreachablePodReason:
		st.reason = "Unknown"
	case pod.DeletionTimestamp != nil && !IsPodTerminal(pod):
		st.reason = "Terminating"
	}
	return st
}

// addInitContainers counts the init containers' restarts and readiness
// and, while one has not finished, says why (Init:N/M, Init:<reason>). It
// reports whether the pod is still initializing, and the sidecars'
// restarts.
func (st *podStatus) addInitContainers(pod *corev1.Pod, sidecars map[string]bool) (initializing bool, sidecarRestarts int, lastSidecarRestart metav1.Time) {
	for i, c := range pod.Status.InitContainerStatuses {
		st.restarts += int(c.RestartCount)
		laterOf(&st.lastRestart, c.LastTerminationState)
		if sidecars[c.Name] {
			sidecarRestarts += int(c.RestartCount)
			laterOf(&lastSidecarRestart, c.LastTerminationState)
		}
		switch {
		case c.State.Terminated != nil && c.State.Terminated.ExitCode == 0:
			continue
		case sidecars[c.Name] && c.Started != nil && *c.Started:
			if c.Ready {
				st.ready++
			}
			continue
		case c.State.Terminated != nil:
			switch t := c.State.Terminated; {
			case t.Reason != "":
				st.reason = "Init:" + t.Reason
			case t.Signal != 0:
				st.reason = fmt.Sprintf("Init:Signal:%d", t.Signal)
			default:
				st.reason = fmt.Sprintf("Init:ExitCode:%d", t.ExitCode)
			}
		case c.State.Waiting != nil && c.State.Waiting.Reason != "" && c.State.Waiting.Reason != "PodInitializing":
			st.reason = "Init:" + c.State.Waiting.Reason
		default:
			st.reason = fmt.Sprintf("Init:%d/%d", i, len(pod.Spec.InitContainers))
		}
		return true, sidecarRestarts, lastSidecarRestart
	}
	return false, sidecarRestarts, lastSidecarRestart
}

// addContainers counts the containers' restarts and readiness; the reason
// a container waits or ended (the last one listed wins) is the pod's.
func (st *podStatus) addContainers(pod *corev1.Pod) {
	hasRunning := false
	for i := len(pod.Status.ContainerStatuses) - 1; i >= 0; i-- {
		c := pod.Status.ContainerStatuses[i]
		st.restarts += int(c.RestartCount)
		laterOf(&st.lastRestart, c.LastTerminationState)
		switch {
		case c.State.Waiting != nil && c.State.Waiting.Reason != "":
			st.reason = c.State.Waiting.Reason
		case c.State.Terminated != nil && c.State.Terminated.Reason != "":
			st.reason = c.State.Terminated.Reason
		case c.State.Terminated != nil && c.State.Terminated.Signal != 0:
			st.reason = fmt.Sprintf("Signal:%d", c.State.Terminated.Signal)
		case c.State.Terminated != nil:
			st.reason = fmt.Sprintf("ExitCode:%d", c.State.Terminated.ExitCode)
		case c.Ready && c.State.Running != nil:
			hasRunning = true
			st.ready++
		}
	}
	// A pod with a container still running is not Completed.
	if st.reason == "Completed" && hasRunning {
		st.reason = "NotReady"
		if podConditionTrue(pod, corev1.PodReady) {
			st.reason = "Running"
		}
	}
}

func isSidecar(c corev1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

func podConditionTrue(pod *corev1.Pod, t corev1.PodConditionType) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// laterOf moves *last to when s's last run finished, if that is later.
func laterOf(last *metav1.Time, s corev1.ContainerState) {
	if s.Terminated != nil && last.Before(&s.Terminated.FinishedAt) {
		*last = s.Terminated.FinishedAt
	}
}

// Workloads.

var (
	containersColumn = metav1.TableColumnDefinition{Name: "Containers", Type: "string", Priority: 1, Description: "Names of each container in the template."}
	imagesColumn     = metav1.TableColumnDefinition{Name: "Images", Type: "string", Priority: 1, Description: "Images referenced by each container in the template."}
)

var replicaSetTable = printer([]metav1.TableColumnDefinition{
	nameColumn,
	{Name: "Desired", Type: "integer", Description: appsv1.ReplicaSetSpec{}.SwaggerDoc()["replicas"]},
	{Name: "Current", Type: "integer", Description: appsv1.ReplicaSetStatus{}.SwaggerDoc()["replicas"]},
	{Name: "Ready", Type: "integer", Description: appsv1.ReplicaSetStatus{}.SwaggerDoc()["readyReplicas"]},
	ageColumn, containersColumn, imagesColumn,
	{Name: "Selector", Type: "string", Priority: 1, Description: appsv1.ReplicaSetSpec{}.SwaggerDoc()["selector"]},
}, func(rs *appsv1.ReplicaSet, now time.Time) []any {
	names, images := containerCells(rs.Spec.Template.Spec.Containers)
	return []any{
		rs.Name, int64(deref(rs.Spec.Replicas)), int64(rs.Status.Replicas), int64(rs.Status.ReadyReplicas), age(rs.CreationTimestamp, now),
		names, images, metav1.FormatLabelSelector(rs.Spec.Selector),
	}
})

var replicationControllerTable = printer([]metav1.TableColumnDefinition{
	nameColumn,
	{Name: "Desired", Type: "integer", Description: corev1.ReplicationControllerSpec{}.SwaggerDoc()["replicas"]},
	{Name: "Current", Type: "integer", Description: corev1.ReplicationControllerStatus{}.SwaggerDoc()["replicas"]},
	{Name: "Ready", Type: "integer", Description: corev1.ReplicationControllerStatus{}.SwaggerDoc()["readyReplicas"]},
	ageColumn, containersColumn, imagesColumn,
	{Name: "Selector", Type: "string", Priority: 1, Description: corev1.ReplicationControllerSpec{}.SwaggerDoc()["selector"]},
}, func(rc *corev1.ReplicationController, now time.Time) []any {
	var names, images string
	if rc.Spec.Template != nil {
		names, images = containerCells(rc.Spec.Template.Spec.Containers)
	}
	return []any{
		rc.Name, int64(deref(rc.Spec.Replicas)), int64(rc.Status.Replicas), int64(rc.Status.ReadyReplicas), age(rc.CreationTimestamp, now),
		names, images, labels.FormatLabels(rc.Spec.Selector),
	}
})

// jobTable is kube-apiserver's: STATUS is the first of Complete, Failed,
// Terminating, Suspended, FailureTarget, SuccessCriteriaMet that holds,
// else Running; COMPLETIONS is succeeded/completions ("1/1 of 3" for a
// work queue of parallelism 3); DURATION runs from startTime to
// completionTime, or to now.
var jobTable = printer([]metav1.TableColumnDefinition{
	nameColumn,
	{Name: "Status", Type: "string", Description: "Status of the job."},
	{Name: "Completions", Type: "string", Description: batchv1.JobStatus{}.SwaggerDoc()["succeeded"]},
	{Name: "Duration", Type: "string", Description: "Time required to complete the job."},
	ageColumn, containersColumn, imagesColumn,
	{Name: "Selector", Type: "string", Priority: 1, Description: batchv1.JobSpec{}.SwaggerDoc()["selector"]},
}, func(job *batchv1.Job, now time.Time) []any {
	var completions string
	switch parallelism := deref(job.Spec.Parallelism); {
	case job.Spec.Completions != nil:
		completions = fmt.Sprintf("%d/%d", job.Status.Succeeded, *job.Spec.Completions)
	case parallelism > 1:
		completions = fmt.Sprintf("%d/1 of %d", job.Status.Succeeded, parallelism)
	default:
		completions = fmt.Sprintf("%d/1", job.Status.Succeeded)
	}
	var took string
	switch st := job.Status; {
	case st.StartTime == nil:
	case st.CompletionTime == nil:
		took = duration.HumanDuration(now.Sub(st.StartTime.Time))
	default:
		took = duration.HumanDuration(st.CompletionTime.Sub(st.StartTime.Time))
	}
	names, images := containerCells(job.Spec.Template.Spec.Containers)
	return []any{
		job.Name, jobPrintStatus(job), completions, took, age(job.CreationTimestamp, now),
		names, images, metav1.FormatLabelSelector(job.Spec.Selector),
	}
})

func jobPrintStatus(job *batchv1.Job) string {
	has := func(t batchv1.JobConditionType) bool {
		for _, c := range job.Status.Conditions {
			if c.Type == t && c.Status == corev1.ConditionTrue {
				return true
			}
		}
		return false
	}
	switch {
	case has(batchv1.JobComplete):
		return "Complete"
	case has(batchv1.JobFailed):
		return "Failed"
	case job.DeletionTimestamp != nil:
		return "Terminating"
	case has(batchv1.JobSuspended):
		return "Suspended"
	case has(batchv1.JobFailureTarget):
		return "FailureTarget"
	case has(batchv1.JobSuccessCriteriaMet):
		return "SuccessCriteriaMet"
	}
	return "Running"
}

var deploymentTable = printer([]metav1.TableColumnDefinition{
	nameColumn,
	{Name: "Ready", Type: "string", Description: "Number of the pod with ready state"},
	{Name: "Up-to-date", Type: "string", Description: appsv1.DeploymentStatus{}.SwaggerDoc()["updatedReplicas"]},
	{Name: "Available", Type: "string", Description: appsv1.DeploymentStatus{}.SwaggerDoc()["availableReplicas"]},
	ageColumn, containersColumn, imagesColumn,
	{Name: "Selector", Type: "string", Priority: 1, Description: appsv1.DeploymentSpec{}.SwaggerDoc()["selector"]},
}, func(d *appsv1.Deployment, now time.Time) []any {
	names, images := containerCells(d.Spec.Template.Spec.Containers)
	selector := "<invalid>"
	if sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector); err == nil {
		selector = sel.String()
	}
	return []any{
		d.Name, fmt.Sprintf("%d/%d", d.Status.ReadyReplicas, deref(d.Spec.Replicas)),
		int64(d.Status.UpdatedReplicas), int64(d.Status.AvailableReplicas), age(d.CreationTimestamp, now),
		names, images, selector,
	}
})

// podDisruptionBudgetTable is kube-apiserver's: a bound not set reads N/A.
var podDisruptionBudgetTable = printer([]metav1.TableColumnDefinition{
	nameColumn,
	{Name: "Min Available", Type: "string", Description: "The minimum number of pods that must be available."},
	{Name: "Max Unavailable", Type: "string", Description: "The maximum number of pods that may be unavailable."},
	{Name: "Allowed Disruptions", Type: "integer", Description: "Calculated number of pods that may be disrupted at this time."},
	ageColumn,
}, func(pdb *policyv1.PodDisruptionBudget, now time.Time) []any {
	bound := func(v *intstr.IntOrString) string {
		if v == nil {
			return "N/A"
		}
		return v.String()
	}
	return []any{pdb.Name, bound(pdb.Spec.MinAvailable), bound(pdb.Spec.MaxUnavailable), int64(pdb.Status.DisruptionsAllowed), age(pdb.CreationTimestamp, now)}
})

var daemonSetTable = printer([]metav1.TableColumnDefinition{
	nameColumn,
	{Name: "Desired", Type: "integer", Description: appsv1.DaemonSetStatus{}.SwaggerDoc()["desiredNumberScheduled"]},
	{Name: "Current", Type: "integer", Description: appsv1.DaemonSetStatus{}.SwaggerDoc()["currentNumberScheduled"]},
	{Name: "Ready", Type: "integer", Description: appsv1.DaemonSetStatus{}.SwaggerDoc()["numberReady"]},
	{Name: "Up-to-date", Type: "integer", Description: appsv1.DaemonSetStatus{}.SwaggerDoc()["updatedNumberScheduled"]},
	{Name: "Available", Type: "integer", Description: appsv1.DaemonSetStatus{}.SwaggerDoc()["numberAvailable"]},
	{Name: "Node Selector", Type: "string", Description: appsv1.DaemonSetSpec{}.SwaggerDoc()["template"]},
	ageColumn, containersColumn, imagesColumn,
	{Name: "Selector", Type: "string", Priority: 1, Description: appsv1.DaemonSetSpec{}.SwaggerDoc()["selector"]},
}, func(ds *appsv1.DaemonSet, now time.Time) []any {
	names, images := containerCells(ds.Spec.Template.Spec.Containers)
	st := ds.Status
	return []any{
		ds.Name, int64(st.DesiredNumberScheduled), int64(st.CurrentNumberScheduled), int64(st.NumberReady),
		int64(st.UpdatedNumberScheduled), int64(st.NumberAvailable), labels.FormatLabels(ds.Spec.Template.Spec.NodeSelector),
		age(ds.CreationTimestamp, now), names, images, metav1.FormatLabelSelector(ds.Spec.Selector),
	}
})

// controllerRevisionTable names the controller as kubectl names a
// resource: "daemonset.apps/web".
var controllerRevisionTable = printer([]metav1.TableColumnDefinition{
	nameColumn,
	{Name: "Controller", Type: "string", Description: "Controller of the object"},
	{Name: "Revision", Type: "string", Description: appsv1.ControllerRevision{}.SwaggerDoc()["revision"]},
	ageColumn,
}, func(cr *appsv1.ControllerRevision, now time.Time) []any {
	controller := "<none>"
	if ref := metav1.GetControllerOfNoCopy(cr); ref != nil {
		if gv, err := schema.ParseGroupVersion(ref.APIVersion); err == nil {
			controller = strings.ToLower(gv.WithKind(ref.Kind).GroupKind().String()) + "/" + ref.Name
		}
	}
	return []any{cr.Name, controller, cr.Revision, age(cr.CreationTimestamp, now)}
})

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// Cluster.

var nodeTable = printer([]metav1.TableColumnDefinition{
	nameColumn,
	{Name: "Status", Type: "string", Description: "The status of the node"},
	{Name: "Roles", Type: "string", Description: "The roles of the node"},
	ageColumn,
	{Name: "Version", Type: "string", Description: corev1.NodeSystemInfo{}.SwaggerDoc()["kubeletVersion"]},
	{Name: "Internal-IP", Type: "string", Priority: 1, Description: corev1.NodeStatus{}.SwaggerDoc()["addresses"]},
	{Name: "External-IP", Type: "string", Priority: 1, Description: corev1.NodeStatus{}.SwaggerDoc()["addresses"]},
	{Name: "OS-Image", Type: "string", Priority: 1, Description: corev1.NodeSystemInfo{}.SwaggerDoc()["osImage"]},
	{Name: "Kernel-Version", Type: "string", Priority: 1, Description: corev1.NodeSystemInfo{}.SwaggerDoc()["kernelVersion"]},
	{Name: "Container-Runtime", Type: "string", Priority: 1, Description: corev1.NodeSystemInfo{}.SwaggerDoc()["containerRuntimeVersion"]},
}, func(node *corev1.Node, now time.Time) []any {
	var status []string
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			if c.Status == corev1.ConditionTrue {
				status = append(status, string(c.Type))
			} else {
				status = append(status, "Not"+string(c.Type))
			}
			break
		}
	}
	if len(status) == 0 {
		status = append(status, "Unknown")
	}
	if node.Spec.Unschedulable {
		status = append(status, "SchedulingDisabled")
	}
	info := node.Status.NodeInfo
	unknown := func(s string) string {
		if s == "" {
			return "<unknown>"
		}
		return s
	}
	return []any{
		node.Name, strings.Join(status, ","), orNone(strings.Join(nodeRoles(node), ",")), age(node.CreationTimestamp, now), info.KubeletVersion,
		nodeAddress(node, corev1.NodeInternalIP), nodeAddress(node, corev1.NodeExternalIP),
		unknown(info.OSImage), unknown(info.KernelVersion), unknown(info.ContainerRuntimeVersion),
	}
})

// nodeRoles reads a node's roles from node-role.kubernetes.io/<role>
// labels and the older kubernetes.io/role=<role>.
func nodeRoles(node *corev1.Node) []string {
	var roles []string
	for k, v := range node.Labels {
		switch {
		case strings.HasPrefix(k, "node-role.kubernetes.io/"):
			if role := strings.TrimPrefix(k, "node-role.kubernetes.io/"); role != "" {
				roles = append(roles, role)
			}
		case k == "kubernetes.io/role" && v != "":
			roles = append(roles, v)
		}
	}
	slices.Sort(roles)
	return slices.Compact(roles)
}

func nodeAddress(node *corev1.Node, t corev1.NodeAddressType) string {
	for _, a := range node.Status.Addresses {
		if a.Type == t {
			return a.Address
		}
	}
	return "<none>"
}

var namespaceTable = printer([]metav1.TableColumnDefinition{
	nameColumn,
	{Name: "Status", Type: "string", Description: "The status of the namespace"},
	ageColumn,
}, func(ns *corev1.Namespace, now time.Time) []any {
	return []any{ns.Name, string(ns.Status.Phase), age(ns.CreationTimestamp, now)}
})

var eventTable = printer([]metav1.TableColumnDefinition{
	{Name: "Last Seen", Type: "string", Description: corev1.Event{}.SwaggerDoc()["lastTimestamp"]},
	{Name: "Type", Type: "string", Description: corev1.Event{}.SwaggerDoc()["type"]},
	{Name: "Reason", Type: "string", Description: corev1.Event{}.SwaggerDoc()["reason"]},
	{Name: "Object", Type: "string", Description: corev1.Event{}.SwaggerDoc()["involvedObject"]},
	{Name: "Subobject", Type: "string", Priority: 1, Description: corev1.ObjectReference{}.SwaggerDoc()["fieldPath"]},
	{Name: "Source", Type: "string", Priority: 1, Description: corev1.Event{}.SwaggerDoc()["source"]},
	{Name: "Message", Type: "string", Description: corev1.Event{}.SwaggerDoc()["message"]},
	{Name: "First Seen", Type: "string", Priority: 1, Description: corev1.Event{}.SwaggerDoc()["firstTimestamp"]},
	{Name: "Count", Type: "string", Priority: 1, Description: corev1.Event{}.SwaggerDoc()["count"]},
	{Name: "Name", Type: "string", Priority: 1, Format: "name", Description: objectMetaDoc["name"]},
}, func(ev *corev1.Event, now time.Time) []any {
	first := age(ev.FirstTimestamp, now)
	if ev.FirstTimestamp.IsZero() {
		first = age(metav1.Time(ev.EventTime), now)
	}
	last := age(ev.LastTimestamp, now)
	if ev.LastTimestamp.IsZero() {
		last = first
	}
	count := ev.Count
	if ev.Series != nil {
		last, count = age(metav1.Time(ev.Series.LastObservedTime), now), ev.Series.Count
	} else if count == 0 {
		count = 1 // singleton events of the events.k8s.io API have no count
	}
	target := strings.ToLower(ev.InvolvedObject.Kind)
	if ev.InvolvedObject.Name != "" {
		target += "/" + ev.InvolvedObject.Name
	}
	component := cmp.Or(ev.Source.Component, ev.ReportingController)
	source := component
	if host := cmp.Or(ev.Source.Host, ev.ReportingInstance); host != "" {
		source = component + ", " + host
	}
	return []any{
		last, ev.Type, ev.Reason, target, ev.InvolvedObject.FieldPath, source,
		strings.TrimSpace(ev.Message), first, int64(count), ev.Name,
	}
})

var leaseTable = printer([]metav1.TableColumnDefinition{
	nameColumn,
	{Name: "Holder", Type: "string", Description: coordinationv1.LeaseSpec{}.SwaggerDoc()["holderIdentity"]},
	ageColumn,
}, func(l *coordinationv1.Lease, now time.Time) []any {
	return []any{l.Name, deref(l.Spec.HolderIdentity), age(l.CreationTimestamp, now)}
})

// Services and configuration.

var serviceTable = printer([]metav1.TableColumnDefinition{
	nameColumn,
	{Name: "Type", Type: "string", Description: corev1.ServiceSpec{}.SwaggerDoc()["type"]},
	{Name: "Cluster-IP", Type: "string", Description: corev1.ServiceSpec{}.SwaggerDoc()["clusterIP"]},
	{Name: "External-IP", Type: "string", Description: corev1.ServiceSpec{}.SwaggerDoc()["externalIPs"]},
	{Name: "Port(s)", Type: "string", Description: corev1.ServiceSpec{}.SwaggerDoc()["ports"]},
	ageColumn,
	{Name: "Selector", Type: "string", Priority: 1, Description: corev1.ServiceSpec{}.SwaggerDoc()["selector"]},
}, func(svc *corev1.Service, now time.Time) []any {
	clusterIP := "<none>"
	if len(svc.Spec.ClusterIPs) > 0 {
		clusterIP = svc.Spec.ClusterIPs[0]
	}
	ports := make([]string, len(svc.Spec.Ports))
	for i, p := range svc.Spec.Ports {
		ports[i] = fmt.Sprintf("%d/%s", p.Port, p.Protocol)
		if p.NodePort > 0 {
			ports[i] = fmt.Sprintf("%d:%d/%s", p.Port, p.NodePort, p.Protocol)
		}
	}
	return []any{
		svc.Name, string(svc.Spec.Type), clusterIP, serviceExternalIP(svc), orNone(strings.Join(ports, ",")),
		age(svc.CreationTimestamp, now), labels.FormatLabels(svc.Spec.Selector),
	}
})

// serviceExternalIP is the EXTERNAL-IP column: external IPs, a load
// balancer's ingress (or <pending> until it has one), or an ExternalName.
func serviceExternalIP(svc *corev1.Service) string {
	switch svc.Spec.Type {
	case corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort:
		return orNone(strings.Join(svc.Spec.ExternalIPs, ","))
	case corev1.ServiceTypeLoadBalancer:
		var ips []string
		for _, in := range svc.Status.LoadBalancer.Ingress {
			switch {
			case in.IP != "":
				ips = append(ips, in.IP)
			case in.Hostname != "":
				ips = append(ips, in.Hostname)
			}
		}
		slices.Sort(ips)
		ips = append(slices.Compact(ips), svc.Spec.ExternalIPs...)
		if len(ips) == 0 {
			return "<pending>"
		}
		return strings.Join(ips, ",")
	case corev1.ServiceTypeExternalName:
		return svc.Spec.ExternalName
	}
	return "<unknown>"
}

var endpointsTable = printer([]metav1.TableColumnDefinition{
	nameColumn,
	{Name: "Endpoints", Type: "string", Description: corev1.Endpoints{}.SwaggerDoc()["subsets"]},
	ageColumn,
}, func(ep *corev1.Endpoints, now time.Time) []any {
	return []any{ep.Name, formatEndpoints(ep), age(ep.CreationTimestamp, now)}
})

// formatEndpoints lists the first three ip:port pairs and how many more
// there are.
func formatEndpoints(ep *corev1.Endpoints) string {
	if len(ep.Subsets) == 0 {
		return "<none>"
	}
	const max = 3
	var list []string
	count := 0
	add := func(s string) {
		count++
		if len(list) < max {
			list = append(list, s)
		}
	}
	for _, ss := range ep.Subsets {
		if len(ss.Ports) == 0 {
			for _, a := range ss.Addresses {
				add(a.IP)
			}
			continue
		}
		for _, p := range ss.Ports {
			for _, a := range ss.Addresses {
				add(net.JoinHostPort(a.IP, strconv.Itoa(int(p.Port))))
			}
		}
	}
	s := strings.Join(list, ",")
	if count > max {
		return fmt.Sprintf("%s + %d more...", s, count-max)
	}
	return s
}

var podTemplateTable = printer([]metav1.TableColumnDefinition{
	nameColumn,
	{Name: "Containers", Type: "string", Description: "Names of each container in the template."},
	{Name: "Images", Type: "string", Description: "Images referenced by each container in the template."},
	{Name: "Pod Labels", Type: "string", Description: "The labels for the pod template."},
}, func(pt *corev1.PodTemplate, now time.Time) []any {
	names, images := containerCells(pt.Template.Spec.Containers)
	return []any{pt.Name, names, images, labels.FormatLabels(pt.Template.Labels)}
})

var configMapTable = printer([]metav1.TableColumnDefinition{
	nameColumn,
	{Name: "Data", Type: "string", Description: corev1.ConfigMap{}.SwaggerDoc()["data"]},
	ageColumn,
}, func(cm *corev1.ConfigMap, now time.Time) []any {
	return []any{cm.Name, int64(len(cm.Data) + len(cm.BinaryData)), age(cm.CreationTimestamp, now)}
})

var secretTable = printer([]metav1.TableColumnDefinition{
	nameColumn,
	{Name: "Type", Type: "string", Description: corev1.Secret{}.SwaggerDoc()["type"]},
	{Name: "Data", Type: "string", Description: corev1.Secret{}.SwaggerDoc()["data"]},
	ageColumn,
}, func(s *corev1.Secret, now time.Time) []any {
	return []any{s.Name, string(s.Type), int64(len(s.Data)), age(s.CreationTimestamp, now)}
})

var serviceAccountTable = printer([]metav1.TableColumnDefinition{
	nameColumn,
	{Name: "Secrets", Type: "string", Description: corev1.ServiceAccount{}.SwaggerDoc()["secrets"]},
	ageColumn,
}, func(sa *corev1.ServiceAccount, now time.Time) []any {
	return []any{sa.Name, int64(len(sa.Secrets)), age(sa.CreationTimestamp, now)}
})

var resourceQuotaTable = printer([]metav1.TableColumnDefinition{
	nameColumn,
	ageColumn,
	{Name: "Request", Type: "string", Description: "Request represents a minimum amount of cpu/memory that a container may consume."},
	{Name: "Limit", Type: "string", Description: "Limits control the maximum amount of cpu/memory that a container may use independent of contention on the node."},
}, func(q *corev1.ResourceQuota, now time.Time) []any {
	var requests, limits []string
	for _, name := range sortedKeys(q.Status.Hard) {
		used, hard := q.Status.Used[name], q.Status.Hard[name]
		s := fmt.Sprintf("%s: %s/%s", name, used.String(), hard.String())
		if strings.HasPrefix(string(name), "limits.") {
			limits = append(limits, s)
		} else {
			requests = append(requests, s)
		}
	}
	return []any{q.Name, age(q.CreationTimestamp, now), strings.Join(requests, ", "), strings.Join(limits, ", ")}
})

// Admission webhooks.

var webhooksColumn = metav1.TableColumnDefinition{Name: "Webhooks", Type: "integer", Description: "Webhooks indicates the number of webhooks in this configuration."}

var mutatingWebhookConfigurationTable = printer([]metav1.TableColumnDefinition{
	nameColumn, webhooksColumn, ageColumn,
}, func(c *admissionregistrationv1.MutatingWebhookConfiguration, now time.Time) []any {
	return []any{c.Name, int64(len(c.Webhooks)), age(c.CreationTimestamp, now)}
})

var validatingWebhookConfigurationTable = printer([]metav1.TableColumnDefinition{
	nameColumn, webhooksColumn, ageColumn,
}, func(c *admissionregistrationv1.ValidatingWebhookConfiguration, now time.Time) []any {
	return []any{c.Name, int64(len(c.Webhooks)), age(c.CreationTimestamp, now)}
})

// Validating admission policies.

var validatingAdmissionPolicyTable = printer([]metav1.TableColumnDefinition{
	nameColumn,
	{Name: "Validations", Type: "integer", Description: "Validations indicates the number of validation rules defined in this configuration"},
	{Name: "ParamKind", Type: "string", Description: "ParamKind specifies the kind of resources used to parameterize this policy"},
	ageColumn,
}, func(p *admissionregistrationv1.ValidatingAdmissionPolicy, now time.Time) []any {
	return []any{p.Name, int64(len(p.Spec.Validations)), paramKindColumn(p.Spec.ParamKind), age(p.CreationTimestamp, now)}
})

var validatingAdmissionPolicyBindingTable = printer([]metav1.TableColumnDefinition{
	nameColumn,
	{Name: "PolicyName", Type: "string", Description: "PolicyName indicates the name of the policy definition which configuration this binding is specifying"},
	{Name: "ParamRef", Type: "string", Description: "ParamRef specifies the parameter resource used to configure the admission control policy"},
	ageColumn,
}, func(b *admissionregistrationv1.ValidatingAdmissionPolicyBinding, now time.Time) []any {
	return []any{b.Name, b.Spec.PolicyName, paramRefColumn(b.Spec.ParamRef), age(b.CreationTimestamp, now)}
})
