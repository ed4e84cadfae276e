package quota

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/api"
)

func TestObjectCountNames(t *testing.T) {
	want := map[string]corev1.ResourceName{
		"pods":                       "count/pods",
		"services":                   "count/services",
		"configmaps":                 "count/configmaps",
		"secrets":                    "count/secrets",
		"resourcequotas":             "count/resourcequotas",
		"deployments.apps":           "count/deployments.apps",
		"replicasets.apps":           "count/replicasets.apps",
		"replicationcontrollers":     "count/replicationcontrollers",
		"cronjobs.batch":             "count/cronjobs.batch",
		"jobs.batch":                 "count/jobs.batch",
		"leases.coordination.k8s.io": "count/leases.coordination.k8s.io",
	}
	for _, res := range api.Resources() {
		name, ok := want[res.GroupResource().String()]
		if !ok {
			continue
		}
		if got := ObjectCountName(res); got != name {
			t.Errorf("ObjectCountName(%s) = %s, want %s", res.GroupResource(), got, name)
		}
	}
}

func TestQuotableKinds(t *testing.T) {
	for _, res := range api.Resources() {
		want := res.Namespaced && !res.CreateOnly && !res.ReadOnly && res.Plural != "events"
		if got := Quotable(res); got != want {
			t.Errorf("Quotable(%s) = %v, want %v", res.GroupResource(), got, want)
		}
	}
	if got := ObjectUsage(api.Nodes, &corev1.Node{}); len(got) != 0 {
		t.Errorf("a node is charged for %s, want nothing", Format(got))
	}
}

func TestObjectUsage(t *testing.T) {
	meta := metav1.ObjectMeta{Name: "x", Namespace: "team-a"}
	svc := func(typ corev1.ServiceType, ports int, allocate *bool) *corev1.Service {
		s := &corev1.Service{ObjectMeta: meta, Spec: corev1.ServiceSpec{Type: typ, AllocateLoadBalancerNodePorts: allocate}}
		for i := range ports {
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Port: int32(80 + i)})
		}
		return s
	}
	no := false
	lbNoNodePorts := svc(corev1.ServiceTypeLoadBalancer, 3, &no)
	lbNoNodePorts.Spec.Ports[1].NodePort = 30080

	for _, tc := range []struct {
		name string
		res  *api.Resource
		obj  api.Object
		want corev1.ResourceList
	}{
		{"configmap", api.ConfigMaps, &corev1.ConfigMap{ObjectMeta: meta}, list("count/configmaps", "1", "configmaps", "1")},
		{"secret", api.Secrets, &corev1.Secret{ObjectMeta: meta}, list("count/secrets", "1", "secrets", "1")},
		{"resourcequota", api.ResourceQuotas, &corev1.ResourceQuota{ObjectMeta: meta}, list("count/resourcequotas", "1", "resourcequotas", "1")},
		{"serviceaccount: no legacy name", api.ServiceAccounts, &corev1.ServiceAccount{ObjectMeta: meta}, list("count/serviceaccounts", "1")},
		{"replicationcontroller: the legacy name too", api.ReplicationControllers, &corev1.ReplicationController{ObjectMeta: meta},
			list("count/replicationcontrollers", "1", "replicationcontrollers", "1")},
		{"deployment", api.Deployments, &appsv1.Deployment{ObjectMeta: meta}, list("count/deployments.apps", "1")},
		{"cronjob", api.CronJobs, &batchv1.CronJob{ObjectMeta: meta}, list("count/cronjobs.batch", "1")},
		{"pod", api.Pods, podWith([]corev1.Container{container("app", list("cpu", "1"), nil)}),
			list("count/pods", "1", "pods", "1", "cpu", "1", "requests.cpu", "1")},
		{"ClusterIP service", api.Services, svc(corev1.ServiceTypeClusterIP, 2, nil),
			list("count/services", "1", "services", "1", "services.loadbalancers", "0", "services.nodeports", "0")},
		{"NodePort service: one node port per port", api.Services, svc(corev1.ServiceTypeNodePort, 2, nil),
			list("count/services", "1", "services", "1", "services.loadbalancers", "0", "services.nodeports", "2")},
		{"LoadBalancer service", api.Services, svc(corev1.ServiceTypeLoadBalancer, 2, nil),
			list("count/services", "1", "services", "1", "services.loadbalancers", "1", "services.nodeports", "2")},
		{"LoadBalancer without node ports: only those asked for", api.Services, lbNoNodePorts,
			list("count/services", "1", "services", "1", "services.loadbalancers", "1", "services.nodeports", "1")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ObjectUsageAt(tc.res, tc.obj, now); !Equals(got, tc.want) {
				t.Errorf("ObjectUsage = %s, want %s", Format(got), Format(tc.want))
			}
		})
	}
}

func TestMatchingResources(t *testing.T) {
	hard := []corev1.ResourceName{
		"pods", "count/pods", "requests.cpu", "limits.memory", "cpu",
		"requests.hugepages-2Mi", "requests.example.com/gpu",
		"services", "services.nodeports", "count/services",
		"configmaps", "count/configmaps", "secrets",
		"count/deployments.apps", "requests.storage", "count/widgets.example.com",
	}
	for _, tc := range []struct {
		res  *api.Resource
		want []corev1.ResourceName
	}{
		{api.Pods, []corev1.ResourceName{"pods", "count/pods", "requests.cpu", "limits.memory", "cpu", "requests.hugepages-2Mi", "requests.example.com/gpu"}},
		{api.Services, []corev1.ResourceName{"services", "services.nodeports", "count/services"}},
		{api.ConfigMaps, []corev1.ResourceName{"configmaps", "count/configmaps"}},
		{api.Secrets, []corev1.ResourceName{"secrets"}},
		{api.Deployments, []corev1.ResourceName{"count/deployments.apps"}},
		{api.ReplicaSets, nil},
		{api.Events, nil},
		{api.Nodes, nil},
	} {
		if got := MatchingResources(tc.res, hard); !slices.Equal(got, tc.want) {
			t.Errorf("MatchingResources(%s) = %v, want %v", tc.res.GroupResource(), got, tc.want)
		}
	}
}

func TestCoveredResources(t *testing.T) {
	hard := list("pods", "10", "requests.cpu", "4", "count/deployments.apps", "2", "configmaps", "5",
		"requests.storage", "10Gi", "count/widgets.example.com", "1", "count/events", "100", "count/leases.coordination.k8s.io", "3")
	got := CoveredResources(api.Resources(), hard)
	want := []corev1.ResourceName{"configmaps", "count/deployments.apps", "count/leases.coordination.k8s.io", "pods", "requests.cpu", "requests.storage"}
	if !slices.Equal(got, want) {
		t.Errorf("CoveredResources = %v, want %v", got, want)
	}
	// A catalogue with the kind covers its count.
	widgets := &api.Resource{Group: "example.com", Version: "v1", Kind: "Widget", Plural: "widgets", Namespaced: true, New: api.NewUnstructured}
	got = CoveredResources(api.Resources().With(widgets), hard)
	want = []corev1.ResourceName{"configmaps", "count/deployments.apps", "count/leases.coordination.k8s.io", "count/widgets.example.com", "pods", "requests.cpu", "requests.storage"}
	if !slices.Equal(got, want) {
		t.Errorf("CoveredResources with widgets = %v, want %v", got, want)
	}
}

func TestMatches(t *testing.T) {
	quota := func(hard corev1.ResourceList, scopes ...corev1.ResourceQuotaScope) *corev1.ResourceQuota {
		return &corev1.ResourceQuota{
			ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: "team-a"},
			Spec:       corev1.ResourceQuotaSpec{Hard: hard, Scopes: scopes},
			Status:     corev1.ResourceQuotaStatus{Hard: hard},
		}
	}
	pod := podWith([]corev1.Container{container("app", nil, nil)}) // BestEffort
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "team-a"}}
	for _, tc := range []struct {
		name string
		q    *corev1.ResourceQuota
		res  *api.Resource
		obj  api.Object
		want bool
	}{
		{"pod, quota on pods", quota(list("pods", "1")), api.Pods, pod, true},
		{"pod, quota on configmaps only", quota(list("configmaps", "1")), api.Pods, pod, false},
		{"pod in the quota's scope", quota(list("pods", "1"), corev1.ResourceQuotaScopeBestEffort), api.Pods, pod, true},
		{"pod out of the quota's scope", quota(list("pods", "1"), corev1.ResourceQuotaScopeNotBestEffort), api.Pods, pod, false},
		{"configmap, quota on count/configmaps", quota(list("count/configmaps", "1")), api.ConfigMaps, cm, true},
		{"configmap, scoped quota: never", quota(list("configmaps", "1"), corev1.ResourceQuotaScopeBestEffort), api.ConfigMaps, cm, false},
		{"status.hard not observed yet", &corev1.ResourceQuota{Spec: corev1.ResourceQuotaSpec{Hard: list("pods", "1")}}, api.Pods, pod, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Matches(tc.q, tc.res, tc.obj)
			if err != nil || got != tc.want {
				t.Errorf("Matches = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestClaimUsage(t *testing.T) {
	class := "fast"
	pvc := &corev1.PersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{
		StorageClassName: &class,
		Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("5Gi")}},
	}}
	got := ObjectUsage(api.PersistentVolumeClaims, pvc)
	want := corev1.ResourceList{
		"count/persistentvolumeclaims": resource.MustParse("1"), "persistentvolumeclaims": resource.MustParse("1"),
		"requests.storage": resource.MustParse("5Gi"),
		"fast.storageclass.storage.k8s.io/requests.storage":       resource.MustParse("5Gi"),
		"fast.storageclass.storage.k8s.io/persistentvolumeclaims": resource.MustParse("1"),
	}
	if !Equals(got, want) {
		t.Errorf("usage = %v, want %v", got, want)
	}
	names := []corev1.ResourceName{"requests.storage", "pods", "fast.storageclass.storage.k8s.io/requests.storage", "persistentvolumeclaims", "fast.storageclass.storage.k8s.io/pods"}
	if m := MatchingResources(api.PersistentVolumeClaims, names); !slices.Equal(m, []corev1.ResourceName{names[0], names[2], names[3]}) {
		t.Errorf("MatchingResources = %v", m)
	}
}
