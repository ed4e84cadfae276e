package api

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestValidateObjectMeta(t *testing.T) {
	pod := func(mutate func(m *metav1.ObjectMeta)) Object {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "default"}}
		mutate(&p.ObjectMeta)
		return p
	}
	isTrue := true
	tests := []struct {
		name string
		r    *Resource
		obj  Object
		want []string
	}{
		{"valid pod", Pods, pod(func(m *metav1.ObjectMeta) {}), nil},
		{"dotted pod name is a subdomain", Pods, pod(func(m *metav1.ObjectMeta) { m.Name = "web.v1" }), nil},
		{"no name", Pods, pod(func(m *metav1.ObjectMeta) { m.Name = "" }), []string{"metadata.name: Required value"}},
		{"generateName instead of name", Pods, pod(func(m *metav1.ObjectMeta) { m.Name, m.GenerateName = "", "web-" }), nil},
		{"bad generateName", Pods, pod(func(m *metav1.ObjectMeta) { m.Name, m.GenerateName = "", "Web_" }),
			[]string{"metadata.generateName: Invalid value"}},
		{"bad name", Pods, pod(func(m *metav1.ObjectMeta) { m.Name = "Bad_Name" }), []string{"metadata.name: Invalid value"}},
		{"no namespace", Pods, pod(func(m *metav1.ObjectMeta) { m.Namespace = "" }), []string{"metadata.namespace: Required value"}},
		{"bad namespace", Pods, pod(func(m *metav1.ObjectMeta) { m.Namespace = "a.b" }), []string{"metadata.namespace: Invalid value"}},
		{"namespace on a cluster-scoped kind", Nodes,
			&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", Namespace: "default"}},
			[]string{"metadata.namespace: Forbidden"}},
		{"node named by IP", Nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "10.0.0.1"}}, nil},
		{"namespace name must be a label", Namespaces,
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team.a"}}, []string{"metadata.name: Invalid value"}},
		{"service name must be a label", Services,
			&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web.v1", Namespace: "default"}}, []string{"metadata.name: Invalid value"}},
		{"bad label key", Pods, pod(func(m *metav1.ObjectMeta) { m.Labels = map[string]string{"-app": "web"} }),
			[]string{"metadata.labels: Invalid value"}},
		{"bad label value", Pods, pod(func(m *metav1.ObjectMeta) { m.Labels = map[string]string{"app": "web app"} }),
			[]string{"metadata.labels: Invalid value"}},
		{"good labels and annotations", Pods, pod(func(m *metav1.ObjectMeta) {
			m.Labels = map[string]string{"app.kubernetes.io/name": "web", "tier": ""}
			m.Annotations = map[string]string{"example.com/Note": "any text at all"}
		}), nil},
		{"bad annotation key", Pods, pod(func(m *metav1.ObjectMeta) { m.Annotations = map[string]string{"a b": "x"} }),
			[]string{"metadata.annotations: Invalid value"}},
		{"annotations too large", Pods, pod(func(m *metav1.ObjectMeta) {
			m.Annotations = map[string]string{"big": strings.Repeat("x", 256*1024)}
		}), []string{"metadata.annotations: Too long"}},
		{"bad finalizer", Pods, pod(func(m *metav1.ObjectMeta) { m.Finalizers = []string{"example.com/ok", "not ok"} }),
			[]string{"metadata.finalizers: Invalid value"}},
		{"owner reference missing fields", Pods, pod(func(m *metav1.ObjectMeta) {
			m.OwnerReferences = []metav1.OwnerReference{{}}
		}), []string{
			"metadata.ownerReferences.apiVersion: Invalid value", "metadata.ownerReferences.kind: Invalid value",
			"metadata.ownerReferences.name: Invalid value", "metadata.ownerReferences.uid: Invalid value",
		}},
		{"two controllers", Pods, pod(func(m *metav1.ObjectMeta) {
			m.OwnerReferences = []metav1.OwnerReference{
				{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "a", UID: "1", Controller: &isTrue},
				{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "b", UID: "2", Controller: &isTrue},
			}
		}), []string{"metadata.ownerReferences: Invalid value"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkErrors(t, ValidateObjectMeta(tt.r, tt.obj), tt.want...)
		})
	}
}

func TestValidateObjectMetaUpdate(t *testing.T) {
	created := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	base := func() *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Name: "cfg", Namespace: "default", UID: "uid-1", ResourceVersion: "7", CreationTimestamp: created,
			Finalizers: []string{"example.com/keep"},
		}}
	}
	grace := int64(30)
	later := metav1.NewTime(created.Add(time.Minute))
	deleting := base()
	deleting.DeletionTimestamp = &created
	deleting.DeletionGracePeriodSeconds = &grace
	tests := []struct {
		name   string
		old    *corev1.ConfigMap
		mutate func(m *metav1.ObjectMeta)
		want   []string
	}{
		{"labels may change", base(), func(m *metav1.ObjectMeta) { m.Labels = map[string]string{"a": "b"} }, nil},
		{"name", base(), func(m *metav1.ObjectMeta) { m.Name = "other" }, []string{"metadata.name: Invalid value"}},
		{"namespace", base(), func(m *metav1.ObjectMeta) { m.Namespace = "kube-system" }, []string{"metadata.namespace: Invalid value"}},
		{"uid", base(), func(m *metav1.ObjectMeta) { m.UID = "uid-2" }, []string{"metadata.uid: Invalid value"}},
		{"creationTimestamp", base(), func(m *metav1.ObjectMeta) { m.CreationTimestamp = metav1.NewTime(created.Add(time.Hour)) },
			[]string{"metadata.creationTimestamp: Invalid value"}},
		{"deletionTimestamp set", base(), func(m *metav1.ObjectMeta) { m.DeletionTimestamp = &created },
			[]string{"metadata.deletionTimestamp: Invalid value"}},
		{"deletionGracePeriodSeconds set", base(), func(m *metav1.ObjectMeta) { m.DeletionGracePeriodSeconds = &grace },
			[]string{"metadata.deletionGracePeriodSeconds: Invalid value"}},
		{"deletionTimestamp moved", deleting, func(m *metav1.ObjectMeta) { m.DeletionTimestamp = &later },
			[]string{"metadata.deletionTimestamp: Invalid value"}},
		{"new finalizer while deleting", deleting, func(m *metav1.ObjectMeta) { m.Finalizers = append(m.Finalizers, "example.com/new") },
			[]string{"metadata.finalizers: Forbidden"}},
		{"two new finalizers while deleting: one error", deleting, func(m *metav1.ObjectMeta) { m.Finalizers = append(m.Finalizers, "example.com/a", "example.com/b") },
			[]string{"metadata.finalizers: Forbidden"}},
		{"finalizer removed while deleting", deleting, func(m *metav1.ObjectMeta) { m.Finalizers = nil }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := tt.old.DeepCopy()
			tt.mutate(&obj.ObjectMeta)
			checkErrors(t, ValidateObjectMetaUpdate(obj, tt.old), tt.want...)
		})
	}
}

func TestPrepareObjectMetaForUpdate(t *testing.T) {
	created := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	grace := int64(30)
	old := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name: "p", Namespace: "default", UID: "uid-1", Generation: 4, CreationTimestamp: created,
		DeletionTimestamp: &created, DeletionGracePeriodSeconds: &grace,
	}}
	// A client that PUTs back only name and namespace.
	obj := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", Generation: 1}}
	PrepareObjectMetaForUpdate(obj, old)
	if obj.UID != "uid-1" || !obj.CreationTimestamp.Equal(&created) || obj.DeletionTimestamp == nil ||
		obj.DeletionGracePeriodSeconds == nil || obj.Generation != 4 {
		t.Errorf("metadata not carried over: %+v", obj.ObjectMeta)
	}
	checkErrors(t, ValidateObjectMetaUpdate(obj, old))

	// A client that sends another creation time is ignored, as in
	// kube-apiserver; one that starts a deletion by update is refused.
	live := old.DeepCopy()
	live.DeletionTimestamp, live.DeletionGracePeriodSeconds = nil, nil
	obj = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name: "p", Namespace: "default", CreationTimestamp: metav1.NewTime(created.Add(time.Hour)),
		DeletionTimestamp: &created, DeletionGracePeriodSeconds: &grace,
	}}
	PrepareObjectMetaForUpdate(obj, live)
	if !obj.CreationTimestamp.Equal(&created) {
		t.Errorf("creationTimestamp %v, want %v carried over", obj.CreationTimestamp, created)
	}
	checkErrors(t, ValidateObjectMetaUpdate(obj, live),
		"metadata.deletionTimestamp: Invalid value", "metadata.deletionGracePeriodSeconds: Invalid value")
}

func TestPrepareObjectMetaForCreate(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 600_000_000, time.UTC)
	grace := int64(30)
	obj := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name: "p", Namespace: "default", UID: "client-uid", ResourceVersion: "7", Generation: 9,
		CreationTimestamp: metav1.NewTime(now.Add(-time.Hour)), DeletionTimestamp: &metav1.Time{Time: now},
		DeletionGracePeriodSeconds: &grace, Labels: map[string]string{"app": "web"},
	}}
	PrepareObjectMetaForCreate(obj, now)
	m := obj.ObjectMeta
	if m.UID == "" || m.UID == "client-uid" {
		t.Errorf("uid %q, want a new one", m.UID)
	}
	if want := now.Truncate(time.Second); !m.CreationTimestamp.Time.Equal(want) {
		t.Errorf("creationTimestamp %v, want %v", m.CreationTimestamp, want)
	}
	if m.ResourceVersion != "" || m.Generation != 0 || m.DeletionTimestamp != nil || m.DeletionGracePeriodSeconds != nil {
		t.Errorf("server-set metadata kept from the client: %+v", m)
	}
	if m.Name != "p" || m.Labels["app"] != "web" {
		t.Errorf("client metadata lost: %+v", m)
	}
	other := &corev1.Pod{}
	PrepareObjectMetaForCreate(other, now)
	if other.UID == m.UID {
		t.Errorf("two creates got the same uid %q", m.UID)
	}
}

func TestFieldLabels(t *testing.T) {
	// Every label a resource claims to support is one its Fields produce,
	// and the other way round.
	for _, r := range Resources() {
		t.Run(r.Plural, func(t *testing.T) {
			set := r.Fields(r.NewObject())
			var produced []string
			for k := range set {
				produced = append(produced, k)
				if !FieldLabelSupported(r, k) {
					t.Errorf("Fields produces %q, which FieldLabelSupported rejects", k)
				}
			}
			for _, l := range r.FieldLabels {
				if !slices.Contains(produced, l) {
					t.Errorf("FieldLabels lists %q, which Fields does not produce", l)
				}
			}
		})
	}

	tests := []struct {
		r     *Resource
		label string
		want  bool
	}{
		{Pods, "metadata.name", true},
		{Pods, "metadata.namespace", true},
		{Nodes, "metadata.namespace", false},
		{Pods, "spec.nodeName", true},
		{Pods, "status.phase", true},
		{Pods, "spec.containers", false},
		{Events, "involvedObject.uid", true},
		{Events, "reportingComponent", true},
		{Nodes, "spec.unschedulable", true},
		{Namespaces, "status.phase", true},
		{Secrets, "type", true},
		{ReplicaSets, "status.replicas", true},
		{ReplicationControllers, "status.replicas", true},
		{Deployments, "status.replicas", false},
		{ConfigMaps, "data", false},
	}
	for _, tt := range tests {
		t.Run(tt.r.Plural+"/"+tt.label, func(t *testing.T) {
			if got := FieldLabelSupported(tt.r, tt.label); got != tt.want {
				t.Errorf("FieldLabelSupported = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestSelectableFields(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"},
		Spec:       corev1.PodSpec{NodeName: "node-1", RestartPolicy: corev1.RestartPolicyAlways, SchedulerName: "default-scheduler", ServiceAccountName: "default"},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, PodIPs: []corev1.PodIP{{IP: "10.0.0.5"}}, NominatedNodeName: "node-2"},
	}
	ev := &corev1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: "e", Namespace: "ns"},
		InvolvedObject:      corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: "p", UID: "u", APIVersion: "v1", ResourceVersion: "3", FieldPath: "spec"},
		Reason:              "Scheduled",
		ReportingController: "default-scheduler",
		Type:                corev1.EventTypeNormal,
	}
	tests := []struct {
		name string
		r    *Resource
		obj  Object
		want map[string]string
	}{
		{"pod", Pods, pod, map[string]string{
			"metadata.name": "p", "metadata.namespace": "ns", "spec.nodeName": "node-1", "spec.restartPolicy": "Always",
			"spec.schedulerName": "default-scheduler", "spec.serviceAccountName": "default", "spec.hostNetwork": "false",
			"status.phase": "Running", "status.podIP": "10.0.0.5", "status.nominatedNodeName": "node-2",
		}},
		{"event source falls back to reportingController", Events, ev, map[string]string{
			"metadata.name": "e", "metadata.namespace": "ns", "involvedObject.kind": "Pod", "involvedObject.namespace": "ns",
			"involvedObject.name": "p", "involvedObject.uid": "u", "involvedObject.apiVersion": "v1",
			"involvedObject.resourceVersion": "3", "involvedObject.fieldPath": "spec", "reason": "Scheduled",
			"reportingComponent": "default-scheduler", "source": "default-scheduler", "type": "Normal",
		}},
		{"node", Nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Spec: corev1.NodeSpec{Unschedulable: true}},
			map[string]string{"metadata.name": "n", "spec.unschedulable": "true"}},
		{"namespace", Namespaces, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating}},
			map[string]string{"metadata.name": "ns", "status.phase": "Terminating"}},
		{"secret", Secrets, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns"}, Type: corev1.SecretTypeTLS},
			map[string]string{"metadata.name": "s", "metadata.namespace": "ns", "type": "kubernetes.io/tls"}},
		{"configmap has only metadata", ConfigMaps, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"}},
			map[string]string{"metadata.name": "c", "metadata.namespace": "ns"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.r.Fields(tt.obj)
			if len(got) != len(tt.want) {
				t.Errorf("Fields = %v, want %v", got, tt.want)
			}
			for k, v := range tt.want {
				if got[k] != v {
					t.Errorf("Fields[%q] = %q, want %q", k, got[k], v)
				}
			}
		})
	}
}

func TestRegistryWiring(t *testing.T) {
	for _, r := range Resources() {
		t.Run(r.Plural, func(t *testing.T) {
			if r.HasSubresource("status") && r.PrepareForUpdate == nil {
				t.Errorf("has a status subresource but no PrepareForUpdate to keep status on main-resource updates")
			}
			if (r.SelectableFields == nil) != (len(r.FieldLabels) == 0) {
				t.Errorf("SelectableFields and FieldLabels must come together")
			}
			// Every hook accepts the resource's own type.
			obj := r.NewObject()
			if r.Default != nil {
				r.Default(obj)
			}
			if r.PrepareForCreate != nil {
				r.PrepareForCreate(obj)
			}
			if r.PrepareForUpdate != nil {
				r.PrepareForUpdate(obj, r.NewObject())
			}
			if r.ValidateUpdate != nil {
				r.ValidateUpdate(obj, obj)
			}
			if r.Validate != nil {
				r.Validate(obj)
			}
		})
	}
}
