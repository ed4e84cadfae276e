package node

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/auth/authorizer"
	"github.com/minictl/minictl/auth/user"
)

func kubelet(node string) *user.Info {
	return &user.Info{Name: user.NodeUserPrefix + node, Groups: []string{user.NodesGroup, user.AllAuthenticated}}
}

func podOn(name, node string, secrets ...string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: corev1.PodSpec{NodeName: node}}
	for i, s := range secrets {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: string(rune('a' + i)), VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: s}}})
	}
	return p
}

func TestIndexCountsReferencesPerNode(t *testing.T) {
	x := NewIndex()
	shared := Ref{Kind: Secret, Namespace: "ns", Name: "shared"}
	x.SetPod(podOn("a", "node-1", "shared"))
	x.SetPod(podOn("b", "node-1", "shared", "only-b"))
	x.SetPod(podOn("pending", "", "pending-secret"))
	if !x.HasPath("node-1", shared) || x.HasPath("node-2", shared) {
		t.Fatal("shared secret: want node-1 only")
	}
	if x.HasPath("", Ref{Kind: Secret, Namespace: "ns", Name: "pending-secret"}) {
		t.Fatal("a pod without a node gave its secret to someone")
	}
	x.DeletePod("ns", "a")
	if !x.HasPath("node-1", shared) {
		t.Fatal("deleting one of two pods took away the secret the other still mounts")
	}
	// b moves to another node and drops only-b.
	x.SetPod(podOn("b", "node-2", "shared"))
	if x.HasPath("node-1", shared) || !x.HasPath("node-2", shared) {
		t.Fatal("after b moved: want shared on node-2 only")
	}
	if x.HasPath("node-2", Ref{Kind: Secret, Namespace: "ns", Name: "only-b"}) {
		t.Fatal("a reference b no longer has is still there")
	}
	x.Reset(nil)
	if x.HasPath("node-2", shared) {
		t.Fatal("Reset kept an old reference")
	}
}

func TestReferences(t *testing.T) {
	p := podOn("web", "n", "vol")
	p.Spec.ServiceAccountName = "sa"
	p.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "pull"}}
	p.Spec.Containers = []corev1.Container{{Name: "c",
		EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm-env"}}}},
		Env:     []corev1.EnvVar{{Name: "X", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "env"}, Key: "k"}}}},
	}}
	p.Spec.Volumes = append(p.Spec.Volumes,
		corev1.Volume{Name: "claim", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}},
		corev1.Volume{Name: "proj", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "cm-proj"}}},
		}}}})
	got := map[Ref]bool{}
	for _, r := range References(p) {
		got[r] = true
	}
	for _, want := range []Ref{
		{Pod, "ns", "web"}, {ServiceAccount, "ns", "sa"}, {Secret, "ns", "pull"}, {Secret, "ns", "vol"}, {Secret, "ns", "env"},
		{ConfigMap, "ns", "cm-env"}, {ConfigMap, "ns", "cm-proj"}, {PersistentVolumeClaim, "ns", "data"},
	} {
		if !got[want] {
			t.Errorf("missing %v in %v", want, got)
		}
	}
	if len(got) != 8 {
		t.Errorf("got %d references, want 8: %v", len(got), got)
	}
}

func TestAuthorize(t *testing.T) {
	x := NewIndex()
	p := podOn("web", "node-1", "mine")
	p.Spec.ServiceAccountName = "sa"
	x.SetPod(p)
	z := New(x)
	res := func(u *user.Info, verb, group, resource, sub, ns, name string) authorizer.Attributes {
		return authorizer.Attributes{User: u, Verb: verb, ResourceRequest: true, APIGroup: group, Resource: resource, Subresource: sub, Namespace: ns, Name: name}
	}
	n1 := kubelet("node-1")
	watchPods := res(n1, "watch", "", "pods", "", "", "")
	watchPods.FieldSelector = "spec.nodeName=node-1"
	watchOthers := watchPods
	watchOthers.FieldSelector = "spec.nodeName=node-2"
	noGroup := &user.Info{Name: "system:node:node-1"}
	for _, tc := range []struct {
		name   string
		a      authorizer.Attributes
		want   authorizer.Decision
		reason string
	}{
		{"its pod's secret", res(n1, "get", "", "secrets", "", "ns", "mine"), authorizer.Allow, ""},
		{"another secret", res(n1, "get", "", "secrets", "", "ns", "other"), authorizer.NoOpinion, "no relationship found between node 'node-1' and this object"},
		{"list all secrets", res(n1, "list", "", "secrets", "", "ns", ""), authorizer.NoOpinion, "No Object name found"},
		{"write a secret", res(n1, "update", "", "secrets", "", "ns", "mine"), authorizer.NoOpinion, "can only read resources of this type"},
		{"other node's view", res(kubelet("node-2"), "get", "", "secrets", "", "ns", "mine"), authorizer.NoOpinion, "no relationship found between node 'node-2' and this object"},
		{"its pod", res(n1, "get", "", "pods", "", "ns", "web"), authorizer.Allow, ""},
		{"watch its pods", watchPods, authorizer.Allow, ""},
		{"watch other pods", watchOthers, authorizer.NoOpinion, "can only list/watch pods with spec.nodeName field selector"},
		{"pod status", res(n1, "patch", "", "pods", "status", "ns", "anything"), authorizer.Allow, ""},
		{"token", res(n1, "create", "", "serviceaccounts", "token", "ns", "sa"), authorizer.Allow, ""},
		{"other token", res(n1, "create", "", "serviceaccounts", "token", "ns", "default"), authorizer.NoOpinion, "no relationship found between node 'node-1' and this object"},
		{"own node", res(n1, "get", "", "nodes", "", "", "node-1"), authorizer.Allow, ""},
		{"other node", res(n1, "get", "", "nodes", "", "", "node-2"), authorizer.NoOpinion, "node 'node-1' cannot read 'node-2', only its own Node object"},
		{"all nodes", res(n1, "list", "", "nodes", "", "", ""), authorizer.NoOpinion, "node 'node-1' cannot read all nodes, only its own Node object"},
		{"own lease", res(n1, "update", "coordination.k8s.io", "leases", "", "kube-node-lease", "node-1"), authorizer.Allow, ""},
		{"other lease", res(n1, "update", "coordination.k8s.io", "leases", "", "kube-node-lease", "node-2"), authorizer.NoOpinion, "can only access node lease with the same name as the requesting node"},
		{"lease elsewhere", res(n1, "get", "coordination.k8s.io", "leases", "", "default", "node-1"), authorizer.NoOpinion, `can only access leases in the "kube-node-lease" system namespace`},
		{"events", res(n1, "create", "", "events", "", "ns", ""), authorizer.Allow, ""},
		{"services", res(n1, "watch", "", "services", "", "", ""), authorizer.Allow, ""},
		{"csr", res(n1, "create", "certificates.k8s.io", "certificatesigningrequests", "", "", ""), authorizer.Allow, ""},
		{"delete a deployment", res(n1, "delete", "apps", "deployments", "", "ns", "web"), authorizer.NoOpinion, ""},
		{"not in system:nodes", res(noGroup, "get", "", "secrets", "", "ns", "mine"), authorizer.NoOpinion, ""},
		{"no node name", res(kubelet(""), "get", "", "secrets", "", "ns", "mine"), authorizer.NoOpinion, `unknown node for user "system:node:"`},
		{"a path", authorizer.Attributes{User: n1, Verb: "get", Path: "/healthz"}, authorizer.NoOpinion, ""},
	} {
		d, reason, err := z.Authorize(context.Background(), tc.a)
		if err != nil || d != tc.want || reason != tc.reason {
			t.Errorf("%s: got %v %q %v, want %v %q", tc.name, d, reason, err, tc.want, tc.reason)
		}
	}
}
