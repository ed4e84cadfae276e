package apiserver_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/internal/testenv"
)

func TestStatusSubresource(t *testing.T) {
	env := testenv.Start(t)
	path := deployPath("default", "web")
	create[appsv1.Deployment](t, env, deployPath("default", ""), deployment("web", 1))

	t.Run("PUT status changes status only", func(t *testing.T) {
		in := get[appsv1.Deployment](t, env, path)
		in.Status.Replicas, in.Status.ReadyReplicas = 4, 3
		in.Spec.Replicas = ptr(int32(9)) // ignored
		in.Labels = map[string]string{"ignored": "yes"}
		got := update[appsv1.Deployment](t, env, path+"/status", in)
		if got.Status.Replicas != 4 || got.Status.ReadyReplicas != 3 {
			t.Errorf("status %+v", got.Status)
		}
		stored := get[appsv1.Deployment](t, env, path)
		if *stored.Spec.Replicas != 1 || stored.Generation != 1 {
			t.Errorf("spec.replicas %d generation %d: the status write changed the spec", *stored.Spec.Replicas, stored.Generation)
		}
		if stored.Status.Replicas != 4 {
			t.Errorf("stored status %+v", stored.Status)
		}
	})

	t.Run("PATCH status", func(t *testing.T) {
		got := patch[appsv1.Deployment](t, env, path+"/status", mergePatch,
			`{"spec":{"replicas":7},"status":{"availableReplicas":2}}`)
		if got.Status.AvailableReplicas != 2 || got.Status.Replicas != 4 || *got.Spec.Replicas != 1 {
			t.Errorf("status %+v spec.replicas %d", got.Status, *got.Spec.Replicas)
		}
	})

	t.Run("PUT status with a stale resourceVersion", func(t *testing.T) {
		in := get[appsv1.Deployment](t, env, path)
		in.ResourceVersion = "1"
		do(t, env, http.MethodPut, path+"/status", jsonType, in).wantStatus(t, http.StatusConflict, metav1.StatusReasonConflict)
	})

	t.Run("GET status is the object", func(t *testing.T) {
		got := get[appsv1.Deployment](t, env, path+"/status")
		if got.Name != "web" || got.Status.Replicas != 4 {
			t.Errorf("GET status: %s %+v", got.Name, got.Status)
		}
	})

	t.Run("a main-resource PUT cannot change status", func(t *testing.T) {
		in := get[appsv1.Deployment](t, env, path)
		in.Status.Replicas = 100
		in.Spec.Replicas = ptr(int32(2))
		got := update[appsv1.Deployment](t, env, path, in)
		if got.Status.Replicas != 4 || *got.Spec.Replicas != 2 {
			t.Errorf("status.replicas %d spec.replicas %d, want 4 and 2", got.Status.Replicas, *got.Spec.Replicas)
		}
		if stored := get[appsv1.Deployment](t, env, path); stored.Status.Replicas != 4 {
			t.Errorf("stored status.replicas %d", stored.Status.Replicas)
		}
	})

	t.Run("a main-resource patch cannot change status", func(t *testing.T) {
		got := patch[appsv1.Deployment](t, env, path, mergePatch, `{"status":{"replicas":50}}`)
		if got.Status.Replicas != 4 {
			t.Errorf("status.replicas %d, want 4", got.Status.Replicas)
		}
	})

	t.Run("a pod's status", func(t *testing.T) {
		create[corev1.Pod](t, env, podPath("default", ""), pod("p", "node-1", nil))
		got := patch[corev1.Pod](t, env, podPath("default", "p")+"/status", mergePatch,
			`{"status":{"phase":"Running","podIP":"10.0.0.5"}}`)
		if got.Status.Phase != corev1.PodRunning || got.Status.PodIP != "10.0.0.5" {
			t.Errorf("pod status %+v", got.Status)
		}
		// A create cannot set status either.
		in := pod("born-running", "", nil)
		in.Status.Phase = corev1.PodRunning
		if got := create[corev1.Pod](t, env, podPath("default", ""), in); got.Status.Phase != corev1.PodPending {
			t.Errorf("created pod phase %q, want Pending", got.Status.Phase)
		}
	})

	// kube's status strategies keep the spec and let the metadata change,
	// except what each kind guards: a Deployment's labels (above), a pod's
	// owner references.
	t.Run("metadata changes through status", func(t *testing.T) {
		createNamespace(t, env, "meta")
		got := patch[corev1.Namespace](t, env, "/api/v1/namespaces/meta/status", mergePatch,
			`{"metadata":{"annotations":{"owner":"team-a"},"labels":{"tier":"gold"}},"spec":{"finalizers":[]},"status":{"conditions":[{"type":"NamespaceDeletionDiscoveryFailure","status":"False"}]}}`)
		if got.Annotations["owner"] != "team-a" || got.Labels["tier"] != "gold" || len(got.Status.Conditions) != 1 {
			t.Errorf("namespace: annotations %v labels %v conditions %v", got.Annotations, got.Labels, got.Status.Conditions)
		}
		if len(got.Spec.Finalizers) != 1 {
			t.Errorf("namespace finalizers %v: a status write changed the spec", got.Spec.Finalizers)
		}

		owned := pod("owned", "node-1", nil)
		owned.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "u-1"}}
		create[corev1.Pod](t, env, podPath("default", ""), owned)
		p := patch[corev1.Pod](t, env, podPath("default", "owned")+"/status", mergePatch,
			`{"metadata":{"labels":{"ready":"yes"},"ownerReferences":null},"status":{"phase":"Running"}}`)
		if p.Labels["ready"] != "yes" || p.Status.Phase != corev1.PodRunning {
			t.Errorf("pod: labels %v phase %q", p.Labels, p.Status.Phase)
		}
		if len(p.OwnerReferences) != 1 || p.OwnerReferences[0].UID != "u-1" {
			t.Errorf("pod owner references %v: a status write may not change them", p.OwnerReferences)
		}
		if p.Status.QOSClass != corev1.PodQOSBestEffort {
			t.Errorf("pod QoS class %q", p.Status.QOSClass)
		}

		// A ValidatingAdmissionPolicy's status strategy keeps all of its
		// metadata, unlike the ones above.
		do(t, env, http.MethodPost, policiesPath, jsonType, `{"apiVersion":"admissionregistration.k8s.io/v1","kind":"ValidatingAdmissionPolicy",
			"metadata":{"name":"meta.example.com","labels":{"tier":"bronze"}},
			"spec":{"matchConstraints":{"resourceRules":[{"apiGroups":["apps"],"apiVersions":["v1"],"operations":["CREATE"],"resources":["deployments"]}]},
			"validations":[{"expression":"object.spec.replicas <= 5"}]}}`).want(t, http.StatusCreated)
		vap := patch[admissionregistrationv1.ValidatingAdmissionPolicy](t, env, policiesPath+"/meta.example.com/status", mergePatch,
			`{"metadata":{"annotations":{"owner":"team-a"},"labels":{"tier":"gold"},"finalizers":["example.com/hold"]},"status":{"observedGeneration":1}}`)
		if vap.Status.ObservedGeneration != 1 {
			t.Errorf("policy status %+v", vap.Status)
		}
		if vap.Labels["tier"] != "bronze" || vap.Annotations["owner"] != "" || len(vap.Finalizers) != 0 || vap.Generation != 1 {
			t.Errorf("policy: labels %v annotations %v finalizers %v generation %d: a status write changed the metadata",
				vap.Labels, vap.Annotations, vap.Finalizers, vap.Generation)
		}
	})
}

func ptr[T any](v T) *T { return &v }

func TestScaleSubresource(t *testing.T) {
	env := testenv.Start(t)
	create[appsv1.Deployment](t, env, deployPath("default", ""), deployment("web", 2))
	create[appsv1.ReplicaSet](t, env, "/apis/apps/v1/namespaces/default/replicasets", replicaSet("web-rs", 2))

	for _, tc := range []struct {
		resource string
		replicas func(t *testing.T) (int32, int64) // the object's spec.replicas and generation
	}{
		{"deployments", func(t *testing.T) (int32, int64) {
			d := get[appsv1.Deployment](t, env, deployPath("default", "web"))
			return *d.Spec.Replicas, d.Generation
		}},
		{"replicasets", func(t *testing.T) (int32, int64) {
			rs := get[appsv1.ReplicaSet](t, env, "/apis/apps/v1/namespaces/default/replicasets/web-rs")
			return *rs.Spec.Replicas, rs.Generation
		}},
	} {
		t.Run(tc.resource, func(t *testing.T) {
			name := map[string]string{"deployments": "web", "replicasets": "web-rs"}[tc.resource]
			path := fmt.Sprintf("/apis/apps/v1/namespaces/default/%s/%s/scale", tc.resource, name)
			check := func(t *testing.T, sc *autoscalingv1.Scale, want int32, wantGen int64) {
				t.Helper()
				if sc.Kind != "Scale" || sc.APIVersion != "autoscaling/v1" || sc.Name != name || sc.Namespace != "default" {
					t.Errorf("scale is %s %s %s/%s", sc.APIVersion, sc.Kind, sc.Namespace, sc.Name)
				}
				if sc.Spec.Replicas != want {
					t.Errorf("scale spec.replicas %d, want %d", sc.Spec.Replicas, want)
				}
				if sc.Status.Selector != "app="+name {
					t.Errorf("scale status.selector %q, want app=%s", sc.Status.Selector, name)
				}
				if got, gen := tc.replicas(t); got != want || gen != wantGen {
					t.Errorf("object spec.replicas %d generation %d, want %d and %d", got, gen, want, wantGen)
				}
			}

			sc := get[autoscalingv1.Scale](t, env, path)
			check(t, sc, 2, 1)
			rv(t, sc.ResourceVersion)

			sc.Spec.Replicas = 5
			sc = update[autoscalingv1.Scale](t, env, path, sc)
			check(t, sc, 5, 2)

			sc = patch[autoscalingv1.Scale](t, env, path, mergePatch, `{"spec":{"replicas":7}}`)
			check(t, sc, 7, 3)

			stale := sc.DeepCopy()
			stale.ResourceVersion = "1"
			stale.Spec.Replicas = 1
			do(t, env, http.MethodPut, path, jsonType, stale).wantStatus(t, http.StatusConflict, metav1.StatusReasonConflict)
			check(t, get[autoscalingv1.Scale](t, env, path), 7, 3)

			do(t, env, http.MethodPatch, path, mergePatch, `{"spec":{"replicas":-1}}`).
				wantStatus(t, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid)
		})
	}

	t.Run("a missing object", func(t *testing.T) {
		do(t, env, http.MethodGet, deployPath("default", "nope")+"/scale", "", nil).wantStatus(t, http.StatusNotFound, metav1.StatusReasonNotFound)
	})

	// A Scale has no Table: kubectl, which offers JSON after it, gets the
	// Scale; a client that asks for a Table only gets 406, as from kube.
	t.Run("Accept", func(t *testing.T) {
		path := deployPath("default", "web") + "/scale"
		var sc autoscalingv1.Scale
		getAccept(t, env, path, kubectlAccept).want(t, http.StatusOK).into(t, &sc)
		if sc.Kind != "Scale" {
			t.Errorf("kubectl's Accept: got a %q, want the Scale", sc.Kind)
		}
		st := getAccept(t, env, path, "application/json;as=Table;v=v1;g=meta.k8s.io").status(t)
		if st.Code != http.StatusNotAcceptable || st.Reason != metav1.StatusReasonNotAcceptable {
			t.Errorf("a Table only: %d %s, want 406 NotAcceptable", st.Code, st.Reason)
		}
		if r := getAccept(t, env, path, "application/yaml").want(t, http.StatusOK); !strings.Contains(string(r.body), "kind: Scale") {
			t.Errorf("YAML: %s", r.body)
		}
	})
}

func TestBinding(t *testing.T) {
	env := testenv.Start(t)
	create[corev1.Pod](t, env, podPath("default", ""), pod("p", "", nil))
	binding := func(node string) *corev1.Binding {
		return &corev1.Binding{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Binding"},
			Target:   corev1.ObjectReference{Kind: "Node", Name: node},
		}
	}

	r := do(t, env, http.MethodPost, podPath("default", "p")+"/binding", jsonType, binding("node-1")).want(t, http.StatusCreated)
	if st := r.status(t); st.Status != metav1.StatusSuccess {
		t.Errorf("binding answered %+v", st)
	}
	got := get[corev1.Pod](t, env, podPath("default", "p"))
	if got.Spec.NodeName != "node-1" {
		t.Errorf("spec.nodeName %q, want node-1", got.Spec.NodeName)
	}
	i := slices.IndexFunc(got.Status.Conditions, func(c corev1.PodCondition) bool { return c.Type == corev1.PodScheduled })
	if i < 0 || got.Status.Conditions[i].Status != corev1.ConditionTrue {
		t.Errorf("conditions %+v: want PodScheduled True", got.Status.Conditions)
	}

	before := revision(t, env)
	do(t, env, http.MethodPost, podPath("default", "p")+"/binding", jsonType, binding("node-2")).
		wantStatus(t, http.StatusConflict, metav1.StatusReasonConflict)
	if after := revision(t, env); after != before {
		t.Errorf("etcd revision moved from %d to %d", before, after)
	}
	if got := get[corev1.Pod](t, env, podPath("default", "p")); got.Spec.NodeName != "node-1" {
		t.Errorf("spec.nodeName %q after a second binding", got.Spec.NodeName)
	}

	do(t, env, http.MethodPost, podPath("default", "nope")+"/binding", jsonType, binding("node-1")).
		wantStatus(t, http.StatusNotFound, metav1.StatusReasonNotFound)
}

func TestNamespaceFinalize(t *testing.T) {
	env := testenv.Start(t)
	ns := create[corev1.Namespace](t, env, "/api/v1/namespaces", namespace("fin"))
	if !slices.Equal(ns.Spec.Finalizers, []corev1.FinalizerName{corev1.FinalizerKubernetes}) {
		t.Fatalf("new namespace spec.finalizers %v, want [kubernetes]", ns.Spec.Finalizers)
	}
	got := call[corev1.Namespace](t, env, http.MethodDelete, "/api/v1/namespaces/fin", "", nil, http.StatusOK)
	if got.Status.Phase != corev1.NamespaceTerminating {
		t.Fatalf("phase %q after delete", got.Status.Phase)
	}

	// What the namespace controller does once the namespace is empty.
	cur := get[corev1.Namespace](t, env, "/api/v1/namespaces/fin")
	cur.Spec.Finalizers = nil
	do(t, env, http.MethodPut, "/api/v1/namespaces/fin/finalize", jsonType, cur).want(t, http.StatusOK)
	do(t, env, http.MethodGet, "/api/v1/namespaces/fin", "", nil).wantStatus(t, http.StatusNotFound, metav1.StatusReasonNotFound)
}
