package informer

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// held is every table of shared parts in the process.
var held = heldParts{
	strings:    table[struct{}]{perGeneration: stringsPerGeneration},
	conditions: table[[]corev1.PodCondition]{perGeneration: conditionsPerGeneration},
	pods:       table[*corev1.Pod]{perGeneration: podsPerGeneration},
}

// heldParts is the tables of shared parts, one per kind of part. Parts of
// one Go type held for different fields (a container's requests and
// limits, a pod's overhead) share a table: equal values are equal
// wherever they are.
//
// Lock order: a table's hold function may intern strings, so the strings
// table's lock is taken after any other's; no other two are held at once.
type heldParts struct {
	strings table[struct{}] // interned strings, each an entry's key

	stringMaps    table[map[string]string] // labels, annotations, node selectors
	stringSlices  table[[]string]          // finalizers, commands, arguments
	ownerRefs     table[[]metav1.OwnerReference]
	resourceLists table[corev1.ResourceList]

	containers       table[[]corev1.Container]
	ports            table[[]corev1.ContainerPort]
	env              table[[]corev1.EnvVar]
	envFrom          table[[]corev1.EnvFromSource]
	volumeMounts     table[[]corev1.VolumeMount]
	probes           table[*corev1.Probe]
	lifecycles       table[*corev1.Lifecycle]
	securityContexts table[*corev1.SecurityContext]

	volumes             table[[]corev1.Volume]
	volumeSources       table[corev1.VolumeSource]
	tolerations         table[[]corev1.Toleration]
	affinities          table[*corev1.Affinity]
	podSecurityContexts table[*corev1.PodSecurityContext]
	topologySpread      table[[]corev1.TopologySpreadConstraint]
	imagePullSecrets    table[[]corev1.LocalObjectReference]
	dnsConfigs          table[*corev1.PodDNSConfig]
	readinessGates      table[[]corev1.PodReadinessGate]

	conditions table[[]corev1.PodCondition]
	hostIPs    table[[]corev1.HostIP]

	pods table[*corev1.Pod]
}

// partTable is what every table is, whatever it holds.
type partTable interface {
	len() int
	bound() int
	reset()
}

// tables is every table of h.
func (h *heldParts) tables() []partTable {
	return []partTable{
		&h.strings, &h.stringMaps, &h.stringSlices, &h.ownerRefs, &h.resourceLists,
		&h.containers, &h.ports, &h.env, &h.envFrom, &h.volumeMounts, &h.probes, &h.lifecycles, &h.securityContexts,
		&h.volumes, &h.volumeSources, &h.tolerations, &h.affinities, &h.podSecurityContexts, &h.topologySpread,
		&h.imagePullSecrets, &h.dnsConfigs, &h.readinessGates,
		&h.conditions, &h.hostIPs, &h.pods,
	}
}

// SharePodParts is a TransformFunc that makes a pod share what it has in
// common with the pods already cached by any informer of the process. A
// pod version another informer holds is replaced by that informer's
// object, whole. Otherwise each part listed below that equals a held
// part, field for field, is replaced by the held one, and a part equal to
// none is held for the pods after it. Objects that are not pods are
// returned as they are.
//
// Equal means equal protobuf encodings, compared byte for byte (a
// Quantity by its canonical form, a time to the nanosecond): exactly
// what a client of the API can tell apart. A nil and an empty slice or
// map encode alike, as they do on the wire.
//
// The parts shared, when not empty:
//
//   - metadata: labels, annotations, owner references, finalizers.
//   - spec: containers and init containers as whole lists or, when they
//     mount the service account volume (whose name the API server makes
//     up for each pod), each container's ports, env, resources, probes,
//     lifecycle and security context; volumes as a whole list or, again
//     because of that volume, each volume's source; tolerations,
//     affinity, security context, node selector, topology spread
//     constraints, image pull secrets, DNS config, readiness gates, the
//     overhead and the pod's own resources.
//   - status: host IPs, each container status's resources, and the
//     conditions, which carry times: those of pods that started in the
//     same second, as a ReplicaSet's pods often do.
//
// Strings that many pods repeat are interned: namespace, generateName,
// node, scheduler and service account names, policies, images, the
// phase, the QoS class, the host IP, condition types and reasons.
//
// Cached objects must never be changed (see the package doc): a change
// to one pod's shared part would change it in every pod, in every
// component, that shares it.
func SharePodParts(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	e := keyBuffers.Get().(*encoder)
	defer keyBuffers.Put(e)
	// The same version of a pod comes to every informer that lists it:
	// the controller manager's, the scheduler's, its node's kubelet's.
	// The first to come is held whole for the others.
	key, whole := appendMessage(e.whole[:0], pod)
	e.whole = key
	if whole {
		if p, ok := held.pods.lookup(key); ok {
			return p, nil
		}
	}
	e.meta(&pod.ObjectMeta)
	e.spec(&pod.Spec)
	e.status(&pod.Status)
	if whole {
		return held.pods.share(key, pod, nil), nil
	}
	return pod, nil
}

// serviceAccountVolumePrefix begins the name of the service account
// token volume the API server's admission adds to a pod: the name ends
// with five characters made up for that pod, so the lists that name it
// (volumes, volume mounts, containers) differ from pod to pod.
const serviceAccountVolumePrefix = "kube-api-access-"

// meta shares the parts of a pod's metadata; its name, uid and
// resourceVersion are its own.
func (e *encoder) meta(m *metav1.ObjectMeta) {
	m.Namespace = intern(m.Namespace)
	m.GenerateName = intern(m.GenerateName)
	m.Labels = e.stringMap(m.Labels)
	m.Annotations = e.stringMap(m.Annotations)
	m.OwnerReferences = shareSlice(&held.ownerRefs, e, m.OwnerReferences, clip)
	m.Finalizers = e.stringSlice(m.Finalizers)
}

// spec shares the parts of a pod's spec.
func (e *encoder) spec(s *corev1.PodSpec) {
	s.InitContainers = e.containers(s.InitContainers)
	s.Containers = e.containers(s.Containers)
	s.Volumes = e.volumes(s.Volumes)
	s.Tolerations = shareSlice(&held.tolerations, e, s.Tolerations, clip)
	s.Affinity = sharePtr(&held.affinities, e, s.Affinity)
	s.SecurityContext = sharePtr(&held.podSecurityContexts, e, s.SecurityContext)
	s.NodeSelector = e.stringMap(s.NodeSelector)
	s.TopologySpreadConstraints = shareSlice(&held.topologySpread, e, s.TopologySpreadConstraints, clip)
	s.ImagePullSecrets = shareSlice(&held.imagePullSecrets, e, s.ImagePullSecrets, clip)
	s.DNSConfig = sharePtr(&held.dnsConfigs, e, s.DNSConfig)
	s.ReadinessGates = shareSlice(&held.readinessGates, e, s.ReadinessGates, clip)
	s.Overhead = e.resourceList(s.Overhead)
	if s.Resources != nil {
		s.Resources.Requests = e.resourceList(s.Resources.Requests)
		s.Resources.Limits = e.resourceList(s.Resources.Limits)
	}

	s.NodeName = intern(s.NodeName)
	s.SchedulerName = intern(s.SchedulerName)
	s.ServiceAccountName = intern(s.ServiceAccountName)
	s.DeprecatedServiceAccount = intern(s.DeprecatedServiceAccount)
	s.PriorityClassName = intern(s.PriorityClassName)
	s.DNSPolicy = internAs(s.DNSPolicy)
	s.RestartPolicy = internAs(s.RestartPolicy)
}

// containers shares cs whole if it can; otherwise, when a container
// mounts the service account volume, it shares each container's parts.
func (e *encoder) containers(cs []corev1.Container) []corev1.Container {
	if len(cs) == 0 {
		return cs
	}
	whole := true
	for i := range cs {
		if mountsServiceAccount(cs[i].VolumeMounts) {
			whole = false
			break
		}
	}
	if whole {
		return shareSlice(&held.containers, e, cs, holdContainers)
	}
	for i := range cs {
		e.container(&cs[i])
	}
	return cs
}

// mountsServiceAccount reports whether one of mounts is the service
// account volume.
func mountsServiceAccount(mounts []corev1.VolumeMount) bool {
	for i := range mounts {
		if strings.HasPrefix(mounts[i].Name, serviceAccountVolumePrefix) {
			return true
		}
	}
	return false
}

// container shares the parts of c that pods of one template have in
// common; its volume mounts are shared only if they do not name the
// service account volume, which differs from pod to pod.
func (e *encoder) container(c *corev1.Container) {
	c.Name = intern(c.Name)
	c.Image = intern(c.Image)
	c.Command = e.stringSlice(c.Command)
	c.Args = e.stringSlice(c.Args)
	c.Ports = shareSlice(&held.ports, e, c.Ports, clip)
	c.Env = shareSlice(&held.env, e, c.Env, clip)
	c.EnvFrom = shareSlice(&held.envFrom, e, c.EnvFrom, clip)
	c.Resources.Requests = e.resourceList(c.Resources.Requests)
	c.Resources.Limits = e.resourceList(c.Resources.Limits)
	if mountsServiceAccount(c.VolumeMounts) {
		for i := range c.VolumeMounts {
			c.VolumeMounts[i].MountPath = intern(c.VolumeMounts[i].MountPath)
		}
	} else {
		c.VolumeMounts = shareSlice(&held.volumeMounts, e, c.VolumeMounts, clip)
	}
	c.LivenessProbe = sharePtr(&held.probes, e, c.LivenessProbe)
	c.ReadinessProbe = sharePtr(&held.probes, e, c.ReadinessProbe)
	c.StartupProbe = sharePtr(&held.probes, e, c.StartupProbe)
	c.Lifecycle = sharePtr(&held.lifecycles, e, c.Lifecycle)
	c.SecurityContext = sharePtr(&held.securityContexts, e, c.SecurityContext)
	c.TerminationMessagePath = intern(c.TerminationMessagePath)
	c.TerminationMessagePolicy = internAs(c.TerminationMessagePolicy)
	c.ImagePullPolicy = internAs(c.ImagePullPolicy)
}

// holdContainers prepares containers to be held whole: their resource
// lists as holdResourceList prepares them.
func holdContainers(cs []corev1.Container) []corev1.Container {
	for i := range cs {
		holdResourceList(cs[i].Resources.Requests)
		holdResourceList(cs[i].Resources.Limits)
	}
	return clip(cs)
}

// volumes shares vs whole if no volume is the service account's;
// otherwise it shares each volume's source.
func (e *encoder) volumes(vs []corev1.Volume) []corev1.Volume {
	whole := true
	for i := range vs {
		if strings.HasPrefix(vs[i].Name, serviceAccountVolumePrefix) {
			whole = false
			break
		}
	}
	if whole {
		return shareSlice(&held.volumes, e, vs, clip)
	}
	for i := range vs {
		v := &vs[i]
		key, ok := appendMessage(e.buf[:0], &v.VolumeSource)
		e.buf = key
		if ok {
			v.VolumeSource = held.volumeSources.share(key, v.VolumeSource, nil)
		}
	}
	return vs
}

// status shares the parts of a pod's status; its addresses and start
// time are its own.
func (e *encoder) status(s *corev1.PodStatus) {
	s.Phase = internAs(s.Phase)
	s.QOSClass = internAs(s.QOSClass)
	s.HostIP = intern(s.HostIP)
	s.HostIPs = shareSlice(&held.hostIPs, e, s.HostIPs, clip)
	s.NominatedNodeName = intern(s.NominatedNodeName)
	s.Conditions = shareSlice(&held.conditions, e, s.Conditions, holdConditions)
	e.containerStatuses(s.InitContainerStatuses)
	e.containerStatuses(s.ContainerStatuses)
}

// holdConditions interns the strings of conditions to be held.
func holdConditions(cs []corev1.PodCondition) []corev1.PodCondition {
	for i := range cs {
		c := &cs[i]
		c.Type = internAs(c.Type)
		c.Status = internAs(c.Status)
		c.Reason = intern(c.Reason)
	}
	return clip(cs)
}

// containerStatuses interns the names and images of list, and shares its
// resource lists; the statuses themselves hold container IDs and times,
// which are each pod's own.
func (e *encoder) containerStatuses(list []corev1.ContainerStatus) {
	for i := range list {
		cs := &list[i]
		cs.Name = intern(cs.Name)
		cs.Image = intern(cs.Image)
		cs.ImageID = intern(cs.ImageID)
		cs.AllocatedResources = e.resourceList(cs.AllocatedResources)
		if cs.Resources != nil {
			cs.Resources.Requests = e.resourceList(cs.Resources.Requests)
			cs.Resources.Limits = e.resourceList(cs.Resources.Limits)
		}
	}
}

// stringMap returns the held map equal to m, or holds m.
func (e *encoder) stringMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return m
	}
	e.keys = e.sortedKeys(m)
	key := e.buf[:0]
	for _, k := range e.keys {
		key = appendString(appendString(key, k), m[k])
	}
	e.buf = key
	return held.stringMaps.share(key, m, nil)
}

// stringSlice returns the held slice equal to s, or holds s.
func (e *encoder) stringSlice(s []string) []string {
	if len(s) == 0 {
		return s
	}
	key := e.buf[:0]
	for _, v := range s {
		key = appendString(key, v)
	}
	e.buf = key
	return held.stringSlices.share(key, s, clip[string])
}

// resourceList returns the held list equal to l, or holds l.
func (e *encoder) resourceList(l corev1.ResourceList) corev1.ResourceList {
	if len(l) == 0 {
		return l
	}
	e.keys = e.keys[:0]
	for name := range l {
		e.keys = append(e.keys, string(name))
	}
	slices.Sort(e.keys)
	key := e.buf[:0]
	for _, name := range e.keys {
		q := l[corev1.ResourceName(name)]
		key = appendString(key, name)
		key = appendString(key, q.String())
	}
	e.buf = key
	return held.resourceLists.share(key, l, holdResourceList)
}

// holdResourceList fills in each quantity's cached string (which
// Quantity.String otherwise writes on its first call) before the list is
// shared, so that readers of a shared quantity only ever read it.
func holdResourceList(l corev1.ResourceList) corev1.ResourceList {
	for name, q := range l {
		_ = q.String()
		l[name] = q
	}
	return l
}

// sortedKeys is m's keys in order, in e's scratch slice.
func (e *encoder) sortedKeys(m map[string]string) []string {
	keys := e.keys[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
