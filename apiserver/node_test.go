package apiserver_test

import (
	"fmt"
	"net/http"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/apiserver"
	"github.com/minictl/minictl/auth/user"
	"github.com/minictl/minictl/internal/testenv"
)

// startNodeCluster starts a secureEnv with kubelets' identities: bearer
// tokens node-1 and node-2 are system:node:node-1 and system:node:node-2
// in system:nodes, authorized by the Node mode alone, with NodeRestriction
// on. Its plain listener is the admin.
func startNodeCluster(t *testing.T) *secureEnv {
	t.Helper()
	return startNodeClusterWith(t, apiserver.Config{})
}

// startNodeClusterWith is startNodeCluster with cfg's other settings.
func startNodeClusterWith(t *testing.T, cfg apiserver.Config) *secureEnv {
	t.Helper()
	nodes := map[string]*user.Info{}
	for _, n := range []string{"node-1", "node-2"} {
		nodes[n] = &user.Info{Name: user.NodeUserPrefix + n, Groups: []string{user.NodesGroup, user.AllAuthenticated}}
	}
	cfg.AuthorizationModes = []string{"Node"}
	cfg.EnableAdmissionPlugins = []string{"NodeRestriction"}
	return startSecureEnv(t, secureOptions{server: cfg, tokens: usersByToken(nodes)})
}

// forbidden checks a 403 and its message.
func (r *reply) forbidden(t *testing.T, message string) {
	t.Helper()
	st := r.wantStatus(t, http.StatusForbidden, metav1.StatusReasonForbidden)
	if st.Message != message {
		t.Fatalf("message:\n got  %s\n want %s", st.Message, message)
	}
}

func secret(name string) *corev1.Secret {
	return &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		StringData: map[string]string{"k": "v"},
	}
}

func podMounting(name, node, secretName string) *corev1.Pod {
	p := pod(name, node, nil)
	p.Spec.Volumes = []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secretName}}}}
	return p
}

func secretPath(name string) string { return "/api/v1/namespaces/default/secrets/" + name }

func TestNodeReadsOnlySecretsOfItsPods(t *testing.T) {
	c := startNodeCluster(t)
	for _, s := range []string{"mine", "theirs", "pending", "later"} {
		create[corev1.Secret](t, c.Env, "/api/v1/namespaces/default/secrets", secret(s))
	}
	create[corev1.Pod](t, c.Env, podPath("default", ""), podMounting("web", "node-1", "mine"))
	create[corev1.Pod](t, c.Env, podPath("default", ""), podMounting("other", "node-2", "theirs"))
	create[corev1.Pod](t, c.Env, podPath("default", ""), podMounting("unscheduled", "", "pending"))

	eventually(t, "node-1 reads the secret its pod mounts", func() (bool, string) {
		r := c.as(t, "node-1", http.MethodGet, secretPath("mine"), nil)
		return r.code == http.StatusOK, truncate(r.body)
	})
	var s corev1.Secret
	c.as(t, "node-1", http.MethodGet, secretPath("mine"), nil).into(t, &s)
	if string(s.Data["k"]) != "v" {
		t.Fatalf("secret data: %v", s.Data)
	}
	c.as(t, "node-1", http.MethodGet, secretPath("theirs"), nil).forbidden(t,
		`secrets "theirs" is forbidden: User "system:node:node-1" cannot get resource "secrets" in API group "" in the namespace "default": no relationship found between node 'node-1' and this object`)
	c.as(t, "node-1", http.MethodGet, secretPath("pending"), nil).forbidden(t,
		`secrets "pending" is forbidden: User "system:node:node-1" cannot get resource "secrets" in API group "" in the namespace "default": no relationship found between node 'node-1' and this object`)
	c.as(t, "node-1", http.MethodGet, "/api/v1/namespaces/default/secrets", nil).forbidden(t,
		`secrets is forbidden: User "system:node:node-1" cannot list resource "secrets" in API group "" in the namespace "default": No Object name found`)
	c.as(t, "node-2", http.MethodGet, secretPath("theirs"), nil).want(t, http.StatusOK)

	// Scheduling the pending pod to node-1 gives node-1 its secret;
	// deleting node-1's pod takes its secret away.
	create[corev1.Binding](t, c.Env, podPath("default", "unscheduled")+"/binding", &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: "unscheduled"}, Target: corev1.ObjectReference{Kind: "Node", Name: "node-1"},
	})
	eventually(t, "node-1 reads the secret of the pod just bound to it", func() (bool, string) {
		r := c.as(t, "node-1", http.MethodGet, secretPath("pending"), nil)
		return r.code == http.StatusOK, truncate(r.body)
	})
	do(t, c.Env, http.MethodDelete, podPath("default", "web")+"?gracePeriodSeconds=0", "", nil).want(t, http.StatusOK)
	eventually(t, "node-1 loses the secret of its deleted pod", func() (bool, string) {
		r := c.as(t, "node-1", http.MethodGet, secretPath("mine"), nil)
		return r.code == http.StatusForbidden, truncate(r.body)
	})
}

// When more pods changed than the watch cache keeps events for, the graph
// lists the cache again instead of following its events, and is as right.
func TestNodeGraphCatchesUpPastTheWatchWindow(t *testing.T) {
	c := startNodeClusterWith(t, apiserver.Config{WatchCacheSize: 3})
	for _, s := range []string{"first", "second"} {
		create[corev1.Secret](t, c.Env, "/api/v1/namespaces/default/secrets", secret(s))
	}
	create[corev1.Pod](t, c.Env, podPath("default", ""), podMounting("a", "node-1", "first"))
	eventually(t, "node-1 reads first", func() (bool, string) {
		r := c.as(t, "node-1", http.MethodGet, secretPath("first"), nil)
		return r.code == http.StatusOK, truncate(r.body)
	})
	for i := range 5 {
		create[corev1.Pod](t, c.Env, podPath("default", ""), pod(fmt.Sprintf("filler-%d", i), "node-2", nil))
	}
	do(t, c.Env, http.MethodDelete, podPath("default", "a")+"?gracePeriodSeconds=0", "", nil).want(t, http.StatusOK)
	create[corev1.Pod](t, c.Env, podPath("default", ""), podMounting("b", "node-1", "second"))
	eventually(t, "node-1 reads second", func() (bool, string) {
		r := c.as(t, "node-1", http.MethodGet, secretPath("second"), nil)
		return r.code == http.StatusOK, truncate(r.body)
	})
	c.as(t, "node-1", http.MethodGet, secretPath("first"), nil).forbidden(t,
		`secrets "first" is forbidden: User "system:node:node-1" cannot get resource "secrets" in API group "" in the namespace "default": no relationship found between node 'node-1' and this object`)
}

func nodeObj(name string, labels map[string]string) *corev1.Node {
	return &corev1.Node{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"}, ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

func lease(name string) *coordinationv1.Lease {
	holder := name
	return &coordinationv1.Lease{
		TypeMeta:   metav1.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: corev1.NamespaceNodeLease},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder},
	}
}

const leases = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"

func TestNodeWritesOnlyItsOwn(t *testing.T) {
	c := startNodeCluster(t)
	// A kubelet registers its own Node, with kubelet labels only.
	c.as(t, "node-1", http.MethodPost, "/api/v1/nodes", nodeObj("node-1", map[string]string{corev1.LabelHostname: "node-1", "node.kubernetes.io/pool": "a"})).want(t, http.StatusCreated)
	c.as(t, "node-1", http.MethodPost, "/api/v1/nodes", nodeObj("node-2", nil)).forbidden(t,
		`nodes "node-2" is forbidden: node "node-1" is not allowed to modify node "node-2"`)
	c.as(t, "node-2", http.MethodPost, "/api/v1/nodes", nodeObj("node-2", map[string]string{"node-role.kubernetes.io/control-plane": ""})).forbidden(t,
		`nodes "node-2" is forbidden: node "node-2" is not allowed to set the following labels: node-role.kubernetes.io/control-plane`)
	create[corev1.Node](t, c.Env, "/api/v1/nodes", nodeObj("node-2", nil))

	status := map[string]any{"status": map[string]any{"conditions": []map[string]any{{"type": "Ready", "status": "True"}}}}
	c.patch(t, "node-1", mergePatch, "/api/v1/nodes/node-1/status", status).want(t, http.StatusOK)
	c.patch(t, "node-1", mergePatch, "/api/v1/nodes/node-2/status", status).forbidden(t,
		`nodes "node-2" is forbidden: node "node-1" is not allowed to modify node "node-2"`)
	c.patch(t, "node-1", mergePatch, "/api/v1/nodes/node-1",
		map[string]any{"spec": map[string]any{"taints": []map[string]any{}}, "metadata": map[string]any{"labels": map[string]any{"topology.kubernetes.io/zone": "z1"}}}).want(t, http.StatusOK)
	c.patch(t, "node-1", mergePatch, "/api/v1/nodes/node-1",
		map[string]any{"spec": map[string]any{"taints": []map[string]any{{"key": "k", "effect": "NoSchedule"}}}}).forbidden(t,
		`nodes "node-1" is forbidden: node "node-1" is not allowed to modify taints`)
	c.patch(t, "node-1", mergePatch, "/api/v1/nodes/node-1",
		map[string]any{"metadata": map[string]any{"labels": map[string]any{"node-restriction.kubernetes.io/trusted": "yes", corev1.LabelHostname: nil}}}).forbidden(t,
		`nodes "node-1" is forbidden: is not allowed to modify labels: node-restriction.kubernetes.io/trusted`)
	c.as(t, "node-1", http.MethodGet, "/api/v1/nodes/node-2", nil).forbidden(t,
		`nodes "node-2" is forbidden: User "system:node:node-1" cannot get resource "nodes" in API group "" at the cluster scope: node 'node-1' cannot read 'node-2', only its own Node object`)
	if n := get[corev1.Node](t, c.Env, "/api/v1/nodes/node-2"); len(n.Status.Conditions) != 0 || len(n.Labels) != 0 {
		t.Fatalf("node-2 was changed by refused requests: %+v", n)
	}

	// Its own Lease, and no other.
	c.as(t, "node-1", http.MethodPost, leases, lease("node-1")).want(t, http.StatusCreated)
	c.as(t, "node-1", http.MethodPost, leases, lease("node-2")).forbidden(t,
		`leases.coordination.k8s.io "node-2" is forbidden: can only access node lease with the same name as the requesting node`)
	create[coordinationv1.Lease](t, c.Env, leases, lease("node-2"))
	renew := map[string]any{"spec": map[string]any{"renewTime": "2026-01-02T03:04:05.000000Z"}}
	c.patch(t, "node-1", mergePatch, leases+"/node-1", renew).want(t, http.StatusOK)
	c.patch(t, "node-1", mergePatch, leases+"/node-2", renew).forbidden(t,
		`leases.coordination.k8s.io "node-2" is forbidden: User "system:node:node-1" cannot patch resource "leases" in API group "coordination.k8s.io" in the namespace "kube-node-lease": can only access node lease with the same name as the requesting node`)
	if l := get[coordinationv1.Lease](t, c.Env, leases+"/node-2"); l.Spec.RenewTime != nil {
		t.Fatalf("node-2's lease was renewed by node-1: %+v", l.Spec)
	}

	// The status of its pods, and no other's.
	create[corev1.Pod](t, c.Env, podPath("default", ""), pod("web", "node-1", nil))
	create[corev1.Pod](t, c.Env, podPath("default", ""), pod("other", "node-2", nil))
	running := map[string]any{"status": map[string]any{"phase": "Running"}}
	c.patch(t, "node-1", mergePatch, podPath("default", "web")+"/status", running).want(t, http.StatusOK)
	c.patch(t, "node-1", mergePatch, podPath("default", "other")+"/status", running).forbidden(t,
		`pods "other" is forbidden: node "node-1" can only update pod status for pods with spec.nodeName set to itself`)
	c.patch(t, "node-1", mergePatch, podPath("default", "web")+"/status",
		map[string]any{"metadata": map[string]any{"labels": map[string]any{"steal": "traffic"}}}).forbidden(t,
		`pods "web" is forbidden: node "node-1" cannot update labels through pod status`)
	c.patch(t, "node-1", mergePatch, podPath("default", "web"),
		map[string]any{"metadata": map[string]any{"labels": map[string]any{"steal": "traffic"}}}).forbidden(t,
		`pods "web" is forbidden: User "system:node:node-1" cannot patch resource "pods" in API group "" in the namespace "default"`)
	if p := get[corev1.Pod](t, c.Env, podPath("default", "other")); p.Status.Phase == corev1.PodRunning {
		t.Fatal("node-1 set the phase of node-2's pod")
	}

	// Its pods are listed by node; deletes and evictions only of its own.
	c.as(t, "node-1", http.MethodGet, "/api/v1/pods", nil).forbidden(t,
		`pods is forbidden: User "system:node:node-1" cannot list resource "pods" in API group "" at the cluster scope: can only list/watch pods with spec.nodeName field selector`)
	var list corev1.PodList
	c.as(t, "node-1", http.MethodGet, "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-1", nil).want(t, http.StatusOK).into(t, &list)
	if got := podNames(&list); len(got) != 1 || got[0] != "default/web" {
		t.Fatalf("node-1's pods: %v", got)
	}
	c.as(t, "node-1", http.MethodDelete, podPath("default", "other"), nil).forbidden(t,
		`pods "other" is forbidden: node "node-1" can only delete pods with spec.nodeName set to itself`)
	c.as(t, "node-1", http.MethodPost, podPath("default", "other")+"/eviction", map[string]any{
		"apiVersion": "policy/v1", "kind": "Eviction", "metadata": map[string]any{"name": "other", "namespace": "default"},
	}).forbidden(t, `pods "other" is forbidden: node node-1 can only evict pods with spec.nodeName set to itself`)
	get[corev1.Pod](t, c.Env, podPath("default", "other")) // still there

	// Only mirror pods bound to itself, owned by its Node.
	c.as(t, "node-1", http.MethodPost, podPath("default", ""), pod("sneaky", "node-1", nil)).forbidden(t,
		`pods "sneaky" is forbidden: pod does not have "kubernetes.io/config.mirror" annotation, node "node-1" can only create mirror pods`)
	n1 := get[corev1.Node](t, c.Env, "/api/v1/nodes/node-1")
	mirror := func(name, nodeName string) *corev1.Pod {
		p := pod(name, nodeName, nil)
		yes := true
		p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "hash"}
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "node-1", UID: n1.UID, Controller: &yes}}
		return p
	}
	c.as(t, "node-1", http.MethodPost, podPath("default", ""), mirror("static-elsewhere", "node-2")).forbidden(t,
		`pods "static-elsewhere" is forbidden: node "node-1" can only create pods with spec.nodeName set to itself`)
	withSecret := mirror("static-secret", "node-1")
	withSecret.Spec.Volumes = podMounting("x", "", "theirs").Spec.Volumes
	c.as(t, "node-1", http.MethodPost, podPath("default", ""), withSecret).forbidden(t,
		`pods "static-secret" is forbidden: node "node-1" can not create pods that reference secrets`)
	c.as(t, "node-1", http.MethodPost, podPath("default", ""), mirror("static-web", "node-1")).want(t, http.StatusCreated)
	c.as(t, "node-1", http.MethodDelete, podPath("default", "static-web")+"?gracePeriodSeconds=0", nil).want(t, http.StatusOK)

	// Refusals by the authorizer are counted (admission's are not).
	if n := metric(t, c.Env, `apiserver_authorization_decisions_total{decision="denied"}`); n != 4 {
		t.Fatalf("denied decisions: %v, want 4", n)
	}

	// The admin, on the plain listener, is restricted by none of it.
	do(t, c.Env, http.MethodPatch, "/api/v1/nodes/node-1", mergePatch,
		map[string]any{"spec": map[string]any{"taints": []map[string]any{{"key": "k", "effect": "NoSchedule"}}}}).want(t, http.StatusOK)
}

func TestUnknownAdmissionPluginIsRefused(t *testing.T) {
	env := testenv.Start(t)
	_, err := apiserver.New(apiserver.Config{Store: env.Store, EnableAdmissionPlugins: []string{"NodeRestrictions"}})
	if err == nil || err.Error() != `apiserver: unknown admission plugin "NodeRestrictions"` {
		t.Fatalf("got %v", err)
	}
}

// A kubelet reads the claims its pods use and the volumes those claims
// are bound to, and no other.
func TestNodeReadsTheVolumesOfItsPodsClaims(t *testing.T) {
	c := startNodeCluster(t)
	for _, name := range []string{"vol-a", "vol-b"} {
		create[corev1.PersistentVolume](t, c.Env, "/api/v1/persistentvolumes", &corev1.PersistentVolume{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolume"},
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
				AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/data/" + name}},
			},
		})
	}
	noClass := ""
	create[corev1.PersistentVolumeClaim](t, c.Env, "/api/v1/namespaces/default/persistentvolumeclaims", &corev1.PersistentVolumeClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: metav1.ObjectMeta{Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: &noClass,
			VolumeName:       "vol-a",
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	})
	p := pod("db", "node-1", nil)
	p.Spec.Volumes = []corev1.Volume{{Name: "store", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"},
	}}}
	create[corev1.Pod](t, c.Env, podPath("default", ""), p)

	eventually(t, "node-1 reads the volume its pod's claim is bound to", func() (bool, string) {
		r := c.as(t, "node-1", http.MethodGet, "/api/v1/persistentvolumes/vol-a", nil)
		return r.code == http.StatusOK, truncate(r.body)
	})
	c.as(t, "node-1", http.MethodGet, "/api/v1/namespaces/default/persistentvolumeclaims/data", nil).want(t, http.StatusOK)
	c.as(t, "node-1", http.MethodGet, "/api/v1/persistentvolumes/vol-b", nil).forbidden(t,
		`persistentvolumes "vol-b" is forbidden: User "system:node:node-1" cannot get resource "persistentvolumes" in API group "" at the cluster scope: no relationship found between node 'node-1' and this object`)
	c.as(t, "node-2", http.MethodGet, "/api/v1/persistentvolumes/vol-a", nil).want(t, http.StatusForbidden)
	c.as(t, "node-2", http.MethodGet, "/api/v1/namespaces/default/persistentvolumeclaims/data", nil).want(t, http.StatusForbidden)
}
