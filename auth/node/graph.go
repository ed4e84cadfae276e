package node

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
)

// Kind is a kind of object the graph relates to nodes.
type Kind string

const (
	Pod                   Kind = "pod"
	Secret                Kind = "secret"
	ConfigMap             Kind = "configmap"
	PersistentVolumeClaim Kind = "pvc"
	PersistentVolume      Kind = "pv"
	ServiceAccount        Kind = "serviceaccount"
	VolumeAttachment      Kind = "volumeattachment"
)

// Ref names one object of the graph.
type Ref struct {
	Kind            Kind
	Namespace, Name string
}

// Graph answers whether a node is related to an object: whether a pod
// bound to it is that object or references it.
type Graph interface {
	HasPath(node string, to Ref) bool
}

// Index is a Graph kept from pods alone: for each node, every object its
// pods reference, counted, so that one pod leaving takes away only what
// no other pod of the node still references. A pod without a node gives
// nothing to anyone. Index is safe for concurrent use.
type Index struct {
	mu sync.RWMutex
	// pods is, by namespace/name, the node each pod is bound to and what
	// it references, as last set.
	pods map[podKey]podEntry
	// refs counts, by node, the pods of the node that reference each
	// object (a pod references itself).
	refs map[string]map[Ref]int
}

type podKey struct{ namespace, name string }

type podEntry struct {
	node string
	refs []Ref
}

// NewIndex returns an empty Index.
func NewIndex() *Index {
	return &Index{pods: map[podKey]podEntry{}, refs: map[string]map[Ref]int{}}
}

// HasPath reports whether a pod bound to node is, or references, to.
func (x *Index) HasPath(node string, to Ref) bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.refs[node][to] > 0
}

// SetPod records pod as it is now, replacing what an earlier version of it
// gave its node.
func (x *Index) SetPod(pod *corev1.Pod) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.setLocked(pod)
}

// DeletePod forgets the pod namespace/name.
func (x *Index) DeletePod(namespace, name string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.removeLocked(podKey{namespace, name})
}

// Reset replaces everything the index knows by pods.
func (x *Index) Reset(pods []*corev1.Pod) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.pods, x.refs = map[podKey]podEntry{}, map[string]map[Ref]int{}
	for _, p := range pods {
		x.setLocked(p)
	}
}

func (x *Index) setLocked(pod *corev1.Pod) {
	k := podKey{pod.Namespace, pod.Name}
	x.removeLocked(k)
	node := pod.Spec.NodeName
	if node == "" {
		return
	}
	e := podEntry{node: node, refs: References(pod)}
	x.pods[k] = e
	counts := x.refs[node]
	if counts == nil {
		counts = map[Ref]int{}
		x.refs[node] = counts
	}
	for _, r := range e.refs {
		counts[r]++
	}
}

func (x *Index) removeLocked(k podKey) {
	e, ok := x.pods[k]
	if !ok {
		return
	}
	delete(x.pods, k)
	counts := x.refs[e.node]
	for _, r := range e.refs {
		if counts[r]--; counts[r] <= 0 {
			delete(counts, r)
		}
	}
	if len(counts) == 0 {
		delete(x.refs, e.node)
	}
}

// References lists what a kubelet running pod must read, as kube's node
// graph relates it to the pod's node: the pod itself, its service
// account, and the secrets, config maps and claims it names in image pull
// secrets, environment and volumes. Each appears once.
func References(pod *corev1.Pod) []Ref {
	ns := pod.Namespace
	seen := map[Ref]bool{}
	var out []Ref
	add := func(k Kind, name string) {
		r := Ref{Kind: k, Namespace: ns, Name: name}
		if name != "" && !seen[r] {
			seen[r] = true
			out = append(out, r)
		}
	}
	add(Pod, pod.Name)
	add(ServiceAccount, pod.Spec.ServiceAccountName)
	for _, s := range pod.Spec.ImagePullSecrets {
		add(Secret, s.Name)
	}
	env := func(envFrom []corev1.EnvFromSource, vars []corev1.EnvVar) {
		for _, e := range envFrom {
			if e.SecretRef != nil {
				add(Secret, e.SecretRef.Name)
			}
			if e.ConfigMapRef != nil {
				add(ConfigMap, e.ConfigMapRef.Name)
			}
		}
		for _, v := range vars {
			if v.ValueFrom == nil {
				continue
			}
			if v.ValueFrom.SecretKeyRef != nil {
				add(Secret, v.ValueFrom.SecretKeyRef.Name)
			}
			if v.ValueFrom.ConfigMapKeyRef != nil {
				add(ConfigMap, v.ValueFrom.ConfigMapKeyRef.Name)
			}
		}
	}
	for _, c := range pod.Spec.InitContainers {
		env(c.EnvFrom, c.Env)
	}
	for _, c := range pod.Spec.Containers {
		env(c.EnvFrom, c.Env)
	}
	for _, c := range pod.Spec.EphemeralContainers {
		env(c.EnvFrom, c.Env)
	}
	secretRef := func(r *corev1.LocalObjectReference) {
		if r != nil {
			add(Secret, r.Name)
		}
	}
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.Secret != nil:
			add(Secret, v.Secret.SecretName)
		case v.ConfigMap != nil:
			add(ConfigMap, v.ConfigMap.Name)
		case v.PersistentVolumeClaim != nil:
			add(PersistentVolumeClaim, v.PersistentVolumeClaim.ClaimName)
		case v.Ephemeral != nil:
			// A generic ephemeral volume's claim is named after the pod
			// and the volume.
			add(PersistentVolumeClaim, pod.Name+"-"+v.Name)
		case v.Projected != nil:
			for _, src := range v.Projected.Sources {
				if src.Secret != nil {
					add(Secret, src.Secret.Name)
				}
				if src.ConfigMap != nil {
					add(ConfigMap, src.ConfigMap.Name)
				}
			}
		case v.CSI != nil:
			secretRef(v.CSI.NodePublishSecretRef)
		case v.CephFS != nil:
			secretRef(v.CephFS.SecretRef)
		case v.RBD != nil:
			secretRef(v.RBD.SecretRef)
		case v.FlexVolume != nil:
			secretRef(v.FlexVolume.SecretRef)
		case v.ISCSI != nil:
			secretRef(v.ISCSI.SecretRef)
		case v.ScaleIO != nil:
			secretRef(v.ScaleIO.SecretRef)
		case v.StorageOS != nil:
			secretRef(v.StorageOS.SecretRef)
		case v.Cinder != nil:
			secretRef(v.Cinder.SecretRef)
		case v.AzureFile != nil:
			add(Secret, v.AzureFile.SecretName)
		}
	}
	return out
}

// RefsOf lists the objects of kind the pods of node reference.
func (x *Index) RefsOf(node string, kind Kind) []Ref {
	x.mu.RLock()
	defer x.mu.RUnlock()
	var out []Ref
	for r := range x.refs[node] {
		if r.Kind == kind {
			out = append(out, r)
		}
	}
	return out
}
