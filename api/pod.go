package api

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// DefaultTolerationSeconds is how long a pod stays bound to a node that
// became not-ready or unreachable before it is evicted, unless it says
// otherwise: kube-apiserver's --default-not-ready-toleration-seconds and
// --default-unreachable-toleration-seconds.
const DefaultTolerationSeconds int64 = 300

// DefaultServiceAccountName is the service account a pod runs as when it
// names none.
const DefaultServiceAccountName = "default"

// podFieldLabels are the keys of podFields.
var podFieldLabels = []string{
	"spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
	"spec.hostNetwork", "status.phase", "status.podIP", "status.nominatedNodeName",
}

// defaultPod sets what kube-apiserver sets on a Pod: the PodSpec defaults
// every pod template also gets, then what only a Pod gets (requests from
// limits, service links, and the service account its ServiceAccount
// admission plugin sets). The not-ready/unreachable tolerations are the API
// server's DefaultTolerationSeconds admission, with the server's seconds.
func defaultPod(pod *corev1.Pod) {
	spec := &pod.Spec
	defaultPodSpec(spec)
	for i := range spec.InitContainers {
		defaultRequestsFromLimits(&spec.InitContainers[i].Resources)
	}
	for i := range spec.Containers {
		defaultRequestsFromLimits(&spec.Containers[i].Resources)
	}
	if spec.EnableServiceLinks == nil {
		spec.EnableServiceLinks = ptrTo(corev1.DefaultEnableServiceLinks)
	}
	if spec.HostNetwork {
		defaultHostNetworkPorts(spec.InitContainers)
		defaultHostNetworkPorts(spec.Containers)
	}
	if spec.ServiceAccountName == "" {
		spec.ServiceAccountName = DefaultServiceAccountName
		spec.DeprecatedServiceAccount = DefaultServiceAccountName
	}
}

// defaultPodSpec sets the defaults of a PodSpec wherever it appears: in a
// Pod and in the pod template of a ReplicaSet or Deployment.
func defaultPodSpec(spec *corev1.PodSpec) {
	if spec.DNSPolicy == "" {
		spec.DNSPolicy = corev1.DNSClusterFirst
	}
	if spec.RestartPolicy == "" {
		spec.RestartPolicy = corev1.RestartPolicyAlways
	}
	if spec.SecurityContext == nil {
		spec.SecurityContext = &corev1.PodSecurityContext{}
	}
	if spec.TerminationGracePeriodSeconds == nil {
		spec.TerminationGracePeriodSeconds = ptrTo(int64(corev1.DefaultTerminationGracePeriodSeconds))
	}
	if spec.SchedulerName == "" {
		spec.SchedulerName = corev1.DefaultSchedulerName
	}
	// serviceAccount is the deprecated spelling of serviceAccountName; the
	// API reads either and writes both.
	if spec.ServiceAccountName == "" {
		spec.ServiceAccountName = spec.DeprecatedServiceAccount
	}
	spec.DeprecatedServiceAccount = spec.ServiceAccountName
	for i := range spec.InitContainers {
		defaultContainer(&spec.InitContainers[i])
	}
	for i := range spec.Containers {
		defaultContainer(&spec.Containers[i])
	}
	for i := range spec.Volumes {
		defaultVolume(&spec.Volumes[i])
	}
}

func defaultContainer(c *corev1.Container) {
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = defaultPullPolicy(c.Image)
	}
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = corev1.TerminationMessagePathDefault
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
	}
	for i := range c.Ports {
		if c.Ports[i].Protocol == "" {
			c.Ports[i].Protocol = corev1.ProtocolTCP
		}
	}
	for i := range c.Env {
		if ref := c.Env[i].ValueFrom; ref != nil && ref.FieldRef != nil && ref.FieldRef.APIVersion == "" {
			ref.FieldRef.APIVersion = "v1"
		}
	}
	for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
		defaultProbe(p)
	}
	if c.Lifecycle != nil {
		for _, h := range []*corev1.LifecycleHandler{c.Lifecycle.PostStart, c.Lifecycle.PreStop} {
			if h != nil {
				defaultHTTPGet(h.HTTPGet)
			}
		}
	}
}

// defaultPullPolicy is Always for an image whose tag is "latest" or absent
// (and that has no digest), IfNotPresent otherwise.
func defaultPullPolicy(image string) corev1.PullPolicy {
	if image == "" {
		return corev1.PullIfNotPresent
	}
	ref, digested := image, false
	if i := strings.IndexByte(ref, '@'); i >= 0 {
		ref, digested = ref[:i], true
	}
	tag := ""
	last := ref[strings.LastIndexByte(ref, '/')+1:] // a registry host may have a :port
	if i := strings.LastIndexByte(last, ':'); i >= 0 {
		tag = last[i+1:]
	}
	if tag == "latest" || (tag == "" && !digested) {
		return corev1.PullAlways
	}
	return corev1.PullIfNotPresent
}

func defaultProbe(p *corev1.Probe) {
	if p == nil {
		return
	}
	if p.TimeoutSeconds == 0 {
		p.TimeoutSeconds = 1
	}
	if p.PeriodSeconds == 0 {
		p.PeriodSeconds = 10
	}
	if p.SuccessThreshold == 0 {
		p.SuccessThreshold = 1
	}
	if p.FailureThreshold == 0 {
		p.FailureThreshold = 3
	}
	defaultHTTPGet(p.HTTPGet)
}

func defaultHTTPGet(h *corev1.HTTPGetAction) {
	if h == nil {
		return
	}
	if h.Path == "" {
		h.Path = "/"
	}
	if h.Scheme == "" {
		h.Scheme = corev1.URISchemeHTTP
	}
}

// defaultVolume makes a volume with no source an emptyDir and gives the
// file-projecting sources their default mode, 0644.
func defaultVolume(v *corev1.Volume) {
	if allPointersNil(v.VolumeSource) {
		v.EmptyDir = &corev1.EmptyDirVolumeSource{}
	}
	mode := int32(0o644)
	switch {
	case v.Secret != nil && v.Secret.DefaultMode == nil:
		v.Secret.DefaultMode = ptrTo(mode)
	case v.ConfigMap != nil && v.ConfigMap.DefaultMode == nil:
		v.ConfigMap.DefaultMode = ptrTo(mode)
	case v.DownwardAPI != nil && v.DownwardAPI.DefaultMode == nil:
		v.DownwardAPI.DefaultMode = ptrTo(mode)
	case v.Projected != nil && v.Projected.DefaultMode == nil:
		v.Projected.DefaultMode = ptrTo(mode)
	case v.HostPath != nil && v.HostPath.Type == nil:
		v.HostPath.Type = ptrTo(corev1.HostPathUnset)
	}
}

// allPointersNil reports whether every field of the struct s is a nil
// pointer: a VolumeSource that names no source.
func allPointersNil(s any) bool {
	v := reflect.ValueOf(s)
	for i := range v.NumField() {
		if f := v.Field(i); f.Kind() == reflect.Pointer && !f.IsNil() {
			return false
		}
	}
	return true
}

// defaultRequestsFromLimits sets each unset request to its limit. Only Pods
// get this, not pod templates.
func defaultRequestsFromLimits(r *corev1.ResourceRequirements) {
	if r.Limits == nil {
		return
	}
	if r.Requests == nil {
		r.Requests = corev1.ResourceList{}
	}
	for name, limit := range r.Limits {
		if _, ok := r.Requests[name]; !ok {
			r.Requests[name] = limit.DeepCopy()
		}
	}
}

// defaultHostNetworkPorts sets hostPort to containerPort: on the host
// network the two are the same port.
func defaultHostNetworkPorts(containers []corev1.Container) {
	for i := range containers {
		for j := range containers[i].Ports {
			if p := &containers[i].Ports[j]; p.HostPort == 0 {
				p.HostPort = p.ContainerPort
			}
		}
	}
}

// AddDefaultTolerations adds the tolerations kube-apiserver's
// DefaultTolerationSeconds admission adds to every pod: it tolerates the
// node.kubernetes.io/not-ready and node.kubernetes.io/unreachable NoExecute
// taints for seconds, so that a pod is evicted that long after its node
// stops reporting. A pod that already tolerates a taint (by its key or by an
// empty key, with effect NoExecute or any effect) keeps its own toleration.
func AddDefaultTolerations(pod *corev1.Pod, seconds int64) {
	AddDefaultToleration(pod, corev1.TaintNodeNotReady, seconds)
	AddDefaultToleration(pod, corev1.TaintNodeUnreachable, seconds)
}

// AddDefaultToleration adds a NoExecute toleration of the taint key for
// seconds, unless the pod already tolerates it: the API server's
// --default-not-ready-toleration-seconds and
// --default-unreachable-toleration-seconds.
func AddDefaultToleration(pod *corev1.Pod, key string, seconds int64) {
	if toleratesNoExecute(pod.Spec.Tolerations, key) {
		return
	}
	pod.Spec.Tolerations = append(pod.Spec.Tolerations, corev1.Toleration{
		Key:               key,
		Operator:          corev1.TolerationOpExists,
		Effect:            corev1.TaintEffectNoExecute,
		TolerationSeconds: ptrTo(seconds),
	})
}

func toleratesNoExecute(tolerations []corev1.Toleration, key string) bool {
	for _, t := range tolerations {
		if (t.Key == key || t.Key == "") && (t.Effect == corev1.TaintEffectNoExecute || t.Effect == "") {
			return true
		}
	}
	return false
}

// preparePodForCreate resets what only the server and the kubelet write: a
// new pod is Pending, with its QoS class computed, generation 1, and a
// PodScheduled=False condition while scheduling gates hold it back.
func preparePodForCreate(pod *corev1.Pod) {
	pod.Generation = 1
	pod.Status = corev1.PodStatus{Phase: corev1.PodPending, QOSClass: PodQOSClass(pod)}
	if len(pod.Spec.SchedulingGates) > 0 {
		pod.Status.Conditions = []corev1.PodCondition{{
			Type:    corev1.PodScheduled,
			Status:  corev1.ConditionFalse,
			Reason:  corev1.PodReasonSchedulingGated,
			Message: "Scheduling is blocked due to non-empty scheduling gates",
		}}
	}
}

// preparePodForUpdate keeps the status, which only the status subresource
// changes, and bumps the generation when the spec changed.
func preparePodForUpdate(pod, old *corev1.Pod) {
	pod.Status = old.Status
	pod.Generation = nextGeneration(old, pod.Spec, old.Spec)
}

// preparePodForStatusUpdate keeps the owner references, which the garbage
// collector depends on and a kubelet must not rewrite, and the QoS class
// set at creation if the writer left it out, as kube's status strategy for
// pods does.
func preparePodForStatusUpdate(pod, old *corev1.Pod) {
	pod.OwnerReferences = old.OwnerReferences
	if pod.Status.QOSClass == "" {
		pod.Status.QOSClass = old.Status.QOSClass
	}
}

func validatePod(pod *corev1.Pod) field.ErrorList {
	return validatePodSpec(&pod.Spec, field.NewPath("spec"))
}

var (
	supportedRestartPolicies = []corev1.RestartPolicy{corev1.RestartPolicyAlways, corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever}
	supportedDNSPolicies     = []corev1.DNSPolicy{corev1.DNSClusterFirstWithHostNet, corev1.DNSClusterFirst, corev1.DNSDefault, corev1.DNSNone}
	supportedPullPolicies    = []corev1.PullPolicy{corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever}
	supportedMessagePolicies = []corev1.TerminationMessagePolicy{corev1.TerminationMessageReadFile, corev1.TerminationMessageFallbackToLogsOnError}
	supportedPortProtocols   = []corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP}
	supportedTaintEffects    = []corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute}
)

// validatePodSpec checks a pod's spec, or a pod template's, at fldPath.
// It expects a defaulted spec: a field that defaulting fills is checked only
// when set.
func validatePodSpec(spec *corev1.PodSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	volumes, volErrs := validateVolumes(spec.Volumes, fldPath.Child("volumes"))
	errs = append(errs, volErrs...)

	names := sets.New[string]()
	if len(spec.Containers) == 0 {
		errs = append(errs, field.Required(fldPath.Child("containers"), ""))
	}
	for i := range spec.Containers {
		errs = append(errs, validateContainer(&spec.Containers[i], volumes, names, fldPath.Child("containers").Index(i))...)
	}
	for i := range spec.InitContainers {
		c := &spec.InitContainers[i]
		idxPath := fldPath.Child("initContainers").Index(i)
		errs = append(errs, validateContainer(c, volumes, names, idxPath)...)
		if c.RestartPolicy != nil && *c.RestartPolicy != corev1.ContainerRestartPolicyAlways {
			errs = append(errs, field.NotSupported(idxPath.Child("restartPolicy"), *c.RestartPolicy,
				[]corev1.ContainerRestartPolicy{corev1.ContainerRestartPolicyAlways}))
		}
	}

	if p := spec.RestartPolicy; p != "" && !contains(supportedRestartPolicies, p) {
		errs = append(errs, field.NotSupported(fldPath.Child("restartPolicy"), p, supportedRestartPolicies))
	}
	if p := spec.DNSPolicy; p != "" && !contains(supportedDNSPolicies, p) {
		errs = append(errs, field.NotSupported(fldPath.Child("dnsPolicy"), p, supportedDNSPolicies))
	}
	if s := spec.TerminationGracePeriodSeconds; s != nil {
		errs = append(errs, apivalidation.ValidateNonnegativeField(*s, fldPath.Child("terminationGracePeriodSeconds"))...)
	}
	if s := spec.ActiveDeadlineSeconds; s != nil && (*s < 1 || *s > math.MaxUint32) {
		errs = append(errs, field.Invalid(fldPath.Child("activeDeadlineSeconds"), *s, validation.InclusiveRangeError(1, math.MaxUint32)))
	}
	errs = append(errs, validateLabels(spec.NodeSelector, fldPath.Child("nodeSelector"))...)
	errs = append(errs, validateNames(spec.NodeName, nameIsDNSSubdomain, fldPath.Child("nodeName"))...)
	errs = append(errs, validateNames(spec.ServiceAccountName, nameIsDNSSubdomain, // apivalidation.ValidateServiceAccountName
		fldPath.Child("serviceAccountName"))...)
	errs = append(errs, validateNames(spec.Hostname, nameIsDNSLabel, fldPath.Child("hostname"))...)
	errs = append(errs, validateNames(spec.Subdomain, nameIsDNSLabel, fldPath.Child("subdomain"))...)
	errs = append(errs, validateTolerations(spec.Tolerations, fldPath.Child("tolerations"))...)
	return errs
}

// validateNames checks an optional name-valued field.
func validateNames(name string, fn apivalidation.ValidateNameFunc, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if name == "" {
		return nil
	}
	for _, msg := range fn(name, false) {
		errs = append(errs, field.Invalid(fldPath, name, msg))
	}
	return errs
}

func validateVolumes(volumes []corev1.Volume, fldPath *field.Path) (sets.Set[string], field.ErrorList) {
	var errs field.ErrorList
	names := sets.New[string]()
	for i, v := range volumes {
		namePath := fldPath.Index(i).Child("name")
		switch {
		case v.Name == "":
			errs = append(errs, field.Required(namePath, ""))
		case names.Has(v.Name):
			errs = append(errs, field.Duplicate(namePath, v.Name))
		default:
			for _, msg := range isDNS1123Label(v.Name) {
				errs = append(errs, field.Invalid(namePath, v.Name, msg))
			}
		}
		names.Insert(v.Name)
	}
	return names, errs
}

// validateContainer checks one container; names holds the container names
// seen so far in the pod, which must be unique across all its containers.
func validateContainer(c *corev1.Container, volumes, names sets.Set[string], fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	namePath := fldPath.Child("name")
	switch {
	case c.Name == "":
		errs = append(errs, field.Required(namePath, ""))
	case names.Has(c.Name):
		errs = append(errs, field.Duplicate(namePath, c.Name))
	default:
		for _, msg := range isDNS1123Label(c.Name) {
			errs = append(errs, field.Invalid(namePath, c.Name, msg))
		}
	}
	names.Insert(c.Name)

	switch {
	case c.Image == "":
		errs = append(errs, field.Required(fldPath.Child("image"), ""))
	case strings.TrimSpace(c.Image) != c.Image:
		errs = append(errs, field.Invalid(fldPath.Child("image"), c.Image, "must not have leading or trailing whitespace"))
	}
	if p := c.ImagePullPolicy; p != "" && !contains(supportedPullPolicies, p) {
		errs = append(errs, field.NotSupported(fldPath.Child("imagePullPolicy"), p, supportedPullPolicies))
	}
	if p := c.TerminationMessagePolicy; p != "" && !contains(supportedMessagePolicies, p) {
		errs = append(errs, field.NotSupported(fldPath.Child("terminationMessagePolicy"), p, supportedMessagePolicies))
	}
	errs = append(errs, validateContainerPorts(c.Ports, fldPath.Child("ports"))...)
	for i, env := range c.Env {
		namePath := fldPath.Child("env").Index(i).Child("name")
		if env.Name == "" {
			errs = append(errs, field.Required(namePath, ""))
		}
		for _, msg := range validation.IsRelaxedEnvVarName(env.Name) {
			errs = append(errs, field.Invalid(namePath, env.Name, msg))
		}
	}
	mountPaths := sets.New[string]()
	for i, m := range c.VolumeMounts {
		idxPath := fldPath.Child("volumeMounts").Index(i)
		switch {
		case m.Name == "":
			errs = append(errs, field.Required(idxPath.Child("name"), ""))
		case !volumes.Has(m.Name):
			errs = append(errs, field.NotFound(idxPath.Child("name"), m.Name))
		}
		switch {
		case m.MountPath == "":
			errs = append(errs, field.Required(idxPath.Child("mountPath"), ""))
		case mountPaths.Has(m.MountPath):
			errs = append(errs, field.Invalid(idxPath.Child("mountPath"), m.MountPath, "must be unique"))
		}
		mountPaths.Insert(m.MountPath)
	}
	errs = append(errs, validateResourceRequirements(&c.Resources, fldPath.Child("resources"))...)
	return errs
}

func validateContainerPorts(ports []corev1.ContainerPort, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := sets.New[string]()
	for i, p := range ports {
		idxPath := fldPath.Index(i)
		if p.Name != "" {
			for _, msg := range isValidPortName(p.Name) {
				errs = append(errs, field.Invalid(idxPath.Child("name"), p.Name, msg))
			}
			if names.Has(p.Name) {
				errs = append(errs, field.Duplicate(idxPath.Child("name"), p.Name))
			}
			names.Insert(p.Name)
		}
		if p.ContainerPort == 0 {
			errs = append(errs, field.Required(idxPath.Child("containerPort"), ""))
		} else {
			errs = append(errs, validatePortNum(p.ContainerPort, idxPath.Child("containerPort"))...)
		}
		if p.HostPort != 0 {
			errs = append(errs, validatePortNum(p.HostPort, idxPath.Child("hostPort"))...)
		}
		errs = append(errs, validateProtocol(p.Protocol, idxPath.Child("protocol"))...)
	}
	return errs
}

func validatePortNum(port int32, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsValidPortNum(int(port)) {
		errs = append(errs, field.Invalid(fldPath, port, msg))
	}
	return errs
}

// validateProtocol checks a defaulted protocol: empty is left to defaulting.
func validateProtocol(p corev1.Protocol, fldPath *field.Path) field.ErrorList {
	if p == "" || contains(supportedPortProtocols, p) {
		return nil
	}
	return field.ErrorList{field.NotSupported(fldPath, p, supportedPortProtocols)}
}

// validateResourceRequirements checks that requests and limits name
// container resources, are not negative, and that no request exceeds its
// limit.
func validateResourceRequirements(r *corev1.ResourceRequirements, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	limPath, reqPath := fldPath.Child("limits"), fldPath.Child("requests")
	for _, name := range sortedKeys(r.Limits) {
		errs = append(errs, validateContainerResource(name, r.Limits[name], limPath.Key(string(name)))...)
	}
	for _, name := range sortedKeys(r.Requests) {
		req := r.Requests[name]
		errs = append(errs, validateContainerResource(name, req, reqPath.Key(string(name)))...)
		if lim, ok := r.Limits[name]; ok && req.Cmp(lim) > 0 {
			errs = append(errs, field.Invalid(reqPath.Key(string(name)), req.String(),
				fmt.Sprintf("must be less than or equal to %s limit of %s", name, lim.String())))
		}
	}
	return errs
}

func validateContainerResource(name corev1.ResourceName, q resource.Quantity, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range isQualifiedName(string(name)) {
		errs = append(errs, field.Invalid(fldPath, name, msg))
	}
	if !strings.Contains(string(name), "/") && !isStandardContainerResource(name) {
		errs = append(errs, field.Invalid(fldPath, name, "must be a standard resource for containers"))
	}
	return append(errs, validateNonNegativeQuantity(q, fldPath)...)
}

func isStandardContainerResource(name corev1.ResourceName) bool {
	switch name {
	case corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage:
		return true
	}
	return strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix)
}

func validateTolerations(tolerations []corev1.Toleration, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, t := range tolerations {
		idxPath := fldPath.Index(i)
		if t.Key != "" {
			for _, msg := range isQualifiedName(t.Key) {
				errs = append(errs, field.Invalid(idxPath.Child("key"), t.Key, msg))
			}
		}
		if t.Key == "" && t.Operator != corev1.TolerationOpExists {
			errs = append(errs, field.Invalid(idxPath.Child("operator"), t.Operator,
				"operator must be Exists when `key` is empty, which means \"match all values and all keys\""))
		}
		if t.TolerationSeconds != nil && t.Effect != corev1.TaintEffectNoExecute {
			errs = append(errs, field.Invalid(idxPath.Child("effect"), t.Effect,
				"effect must be 'NoExecute' when `tolerationSeconds` is set"))
		}
		switch t.Operator {
		case corev1.TolerationOpEqual, "":
			for _, msg := range isValidLabelValue(t.Value) {
				errs = append(errs, field.Invalid(idxPath.Child("value"), t.Value, msg))
			}
		case corev1.TolerationOpExists:
			if t.Value != "" {
				errs = append(errs, field.Invalid(idxPath.Child("value"), t.Value, "value must be empty when `operator` is 'Exists'"))
			}
		default:
			errs = append(errs, field.NotSupported(idxPath.Child("operator"), t.Operator,
				[]corev1.TolerationOperator{corev1.TolerationOpEqual, corev1.TolerationOpExists}))
		}
		if t.Effect != "" && !contains(supportedTaintEffects, t.Effect) {
			errs = append(errs, field.NotSupported(idxPath.Child("effect"), t.Effect, supportedTaintEffects))
		}
	}
	return errs
}

// podUpdatableFields is what kube-apiserver tells a client whose pod update
// changed anything else in the spec.
const podUpdatableFields = "`spec.containers[*].image`,`spec.initContainers[*].image`," +
	"`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations)," +
	"`spec.schedulingGates` (only removals),`spec.nodeName` (only from \"\" to a node)"

// validatePodUpdate enforces that a pod's spec is immutable but for
// container images, a shrinking activeDeadlineSeconds, added tolerations,
// removed scheduling gates, and a nodeName set once.
func validatePodUpdate(pod, old *corev1.Pod) field.ErrorList {
	specPath := field.NewPath("spec")
	if len(pod.Spec.Containers) != len(old.Spec.Containers) {
		return field.ErrorList{field.Forbidden(specPath.Child("containers"), "pod updates may not add or remove containers")}
	}
	if len(pod.Spec.InitContainers) != len(old.Spec.InitContainers) {
		return field.ErrorList{field.Forbidden(specPath.Child("initContainers"), "pod updates may not add or remove containers")}
	}

	var errs field.ErrorList
	adsPath := specPath.Child("activeDeadlineSeconds")
	switch newADS, oldADS := pod.Spec.ActiveDeadlineSeconds, old.Spec.ActiveDeadlineSeconds; {
	case newADS == nil && oldADS != nil:
		errs = append(errs, field.Invalid(adsPath, newADS, "must not update from a positive integer to nil value"))
	case newADS != nil && oldADS != nil && *newADS > *oldADS:
		errs = append(errs, field.Invalid(adsPath, *newADS, "must be less than or equal to previous value"))
	}
	if old.Spec.NodeName != "" && pod.Spec.NodeName != old.Spec.NodeName {
		errs = append(errs, field.Invalid(specPath.Child("nodeName"), pod.Spec.NodeName, "may not be changed once set"))
	}
	if !keepsTolerations(pod.Spec.Tolerations, old.Spec.Tolerations) {
		errs = append(errs, field.Forbidden(specPath.Child("tolerations"), "existing toleration can not be modified except its tolerationSeconds"))
	}
	if !sets.New(old.Spec.SchedulingGates...).IsSuperset(sets.New(pod.Spec.SchedulingGates...)) {
		errs = append(errs, field.Forbidden(specPath.Child("schedulingGates"), "only deletion is allowed, but found new scheduling gate"))
	}

	// Put back from old every field that may change (its rules are checked
	// above); whatever still differs may not change.
	munged := pod.Spec.DeepCopy()
	for i := range munged.Containers {
		munged.Containers[i].Image = old.Spec.Containers[i].Image
	}
	for i := range munged.InitContainers {
		munged.InitContainers[i].Image = old.Spec.InitContainers[i].Image
	}
	munged.ActiveDeadlineSeconds = old.Spec.ActiveDeadlineSeconds
	munged.Tolerations = old.Spec.Tolerations
	munged.SchedulingGates = old.Spec.SchedulingGates
	munged.NodeName = old.Spec.NodeName
	if changed := changedFields(*munged, old.Spec, specPath); len(changed) > 0 {
		errs = append(errs, field.Forbidden(specPath, fmt.Sprintf("pod updates may not change fields other than %s (changed: %s)",
			podUpdatableFields, strings.Join(changed, ", "))))
	}
	return errs
}

// keepsTolerations reports whether every old toleration is still in
// tolerations, with at most its tolerationSeconds changed.
func keepsTolerations(tolerations, old []corev1.Toleration) bool {
	for _, o := range old {
		found := false
		for _, t := range tolerations {
			o.TolerationSeconds = t.TolerationSeconds
			if apiequality.Semantic.DeepEqual(o, t) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// changedFields names the top-level fields of two structs of the same type
// that differ, by their JSON names under fldPath.
func changedFields(a, b any, fldPath *field.Path) []string {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	var changed []string
	for i := range va.NumField() {
		if apiequality.Semantic.DeepEqual(va.Field(i).Interface(), vb.Field(i).Interface()) {
			continue
		}
		name, _, _ := strings.Cut(va.Type().Field(i).Tag.Get("json"), ",")
		changed = append(changed, fldPath.Child(name).String())
	}
	return changed
}

func podFields(pod *corev1.Pod) fields.Set {
	podIP := pod.Status.PodIP
	if len(pod.Status.PodIPs) > 0 {
		podIP = pod.Status.PodIPs[0].IP
	}
	return fields.Set{
		"spec.nodeName":            pod.Spec.NodeName,
		"spec.restartPolicy":       string(pod.Spec.RestartPolicy),
		"spec.schedulerName":       pod.Spec.SchedulerName,
		"spec.serviceAccountName":  pod.Spec.ServiceAccountName,
		"spec.hostNetwork":         strconv.FormatBool(pod.Spec.HostNetwork),
		"status.phase":             string(pod.Status.Phase),
		"status.podIP":             podIP,
		"status.nominatedNodeName": pod.Status.NominatedNodeName,
	}
}

// IsPodTerminal reports whether pod has finished for good: phase Succeeded
// or Failed. A terminal pod never runs again.
func IsPodTerminal(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

// PodIsReady reports whether pod's Ready condition is True: it passes its
// readiness checks and belongs in its services' endpoints.
func PodIsReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// PodQOSClass computes the pod's quality-of-service class from the cpu and
// memory requests and limits of its containers: BestEffort when none is
// set, Guaranteed when every container limits both and requests equal
// limits, Burstable otherwise.
func PodQOSClass(pod *corev1.Pod) corev1.PodQOSClass {
	// The sums of the positive cpu and memory requests and limits, and
	// whether any container set each.
	names := [2]corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory}
	var requests, limits [2]resource.Quantity
	var requested, limited [2]bool
	guaranteed := true
	for _, containers := range [2][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range containers {
			res := &containers[i].Resources
			both := true
			for k, name := range names {
				if q, ok := res.Requests[name]; ok && q.Sign() > 0 {
					requests[k].Add(q)
					requested[k] = true
				}
				if q, ok := res.Limits[name]; ok && q.Sign() > 0 {
					limits[k].Add(q)
					limited[k] = true
				} else {
					both = false
				}
			}
			if !both {
				guaranteed = false // a container that does not limit both cpu and memory
			}
		}
	}
	if requested == [2]bool{} && limited == [2]bool{} {
		return corev1.PodQOSBestEffort
	}
	if guaranteed && requested == limited {
		for k := range names {
			if requested[k] && limits[k].Cmp(requests[k]) != 0 {
				return corev1.PodQOSBurstable
			}
		}
		return corev1.PodQOSGuaranteed
	}
	return corev1.PodQOSBurstable
}
