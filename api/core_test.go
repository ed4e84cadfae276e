package api

import (
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestNamespace(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}
	Namespaces.Default(ns)
	Namespaces.PrepareForCreate(ns)
	if ns.Status.Phase != corev1.NamespaceActive {
		t.Errorf("phase = %q, want Active", ns.Status.Phase)
	}
	if len(ns.Spec.Finalizers) != 1 || ns.Spec.Finalizers[0] != corev1.FinalizerKubernetes {
		t.Errorf("finalizers = %v, want [kubernetes]", ns.Spec.Finalizers)
	}
	if ns.Labels[corev1.LabelMetadataName] != "team-a" {
		t.Errorf("labels = %v, want kubernetes.io/metadata.name=team-a", ns.Labels)
	}
	checkErrors(t, ValidateObjectMeta(Namespaces, ns))
	checkErrors(t, Namespaces.Validate(ns))

	t.Run("update keeps finalizers and status", func(t *testing.T) {
		old := ns.DeepCopy()
		old.Status.Phase = corev1.NamespaceTerminating
		upd := ns.DeepCopy()
		upd.Spec.Finalizers = nil
		upd.Status.Phase = corev1.NamespaceActive
		Namespaces.Default(upd) // the finalizer is not a default: defaulting an update must not bring it back
		Namespaces.PrepareForUpdate(upd, old)
		if len(upd.Spec.Finalizers) != 1 || upd.Status.Phase != corev1.NamespaceTerminating {
			t.Errorf("spec %+v status %+v, want old finalizers and status", upd.Spec, upd.Status)
		}
	})
	t.Run("bad spec finalizer", func(t *testing.T) {
		bad := ns.DeepCopy()
		bad.Spec.Finalizers = append(bad.Spec.Finalizers, "custom")
		checkErrors(t, Namespaces.Validate(bad), "spec.finalizers[1]: Invalid value")
	})
}

func TestService(t *testing.T) {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "web"},
			Ports:    []corev1.ServicePort{{Port: 80}},
		},
	}
	Services.Default(svc)
	spec := svc.Spec
	checks := []struct {
		name      string
		got, want any
	}{
		{"type", spec.Type, corev1.ServiceTypeClusterIP},
		{"sessionAffinity", spec.SessionAffinity, corev1.ServiceAffinityNone},
		{"protocol", spec.Ports[0].Protocol, corev1.ProtocolTCP},
		{"targetPort", spec.Ports[0].TargetPort, intstr.FromInt32(80)},
		{"ipFamilyPolicy", *spec.IPFamilyPolicy, corev1.IPFamilyPolicySingleStack},
		{"ipFamilies", strings.Join([]string{string(spec.IPFamilies[0])}, ","), "IPv4"},
		{"internalTrafficPolicy", *spec.InternalTrafficPolicy, corev1.ServiceInternalTrafficPolicyCluster},
		{"no externalTrafficPolicy for ClusterIP", spec.ExternalTrafficPolicy, corev1.ServiceExternalTrafficPolicy("")},
		{"clusterIP left to the server", spec.ClusterIP, ""},
	}
	for _, ck := range checks {
		t.Run(ck.name, func(t *testing.T) {
			if ck.got != ck.want {
				t.Errorf("got %v, want %v", ck.got, ck.want)
			}
		})
	}
	checkErrors(t, Services.Validate(svc))

	t.Run("NodePort defaults", func(t *testing.T) {
		np := &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromString("http")}}}}
		Services.Default(np)
		if np.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyCluster || np.Spec.Ports[0].TargetPort.StrVal != "http" {
			t.Errorf("spec = %+v", np.Spec)
		}
	})

	tests := []struct {
		name   string
		mutate func(s *corev1.Service)
		want   []string
	}{
		{"no ports", func(s *corev1.Service) { s.Spec.Ports = nil }, []string{"spec.ports: Required value"}},
		{"headless without ports", func(s *corev1.Service) { s.Spec.Ports, s.Spec.ClusterIP = nil, "None" }, nil},
		{"ExternalName", func(s *corev1.Service) {
			s.Spec = corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "db.example.com"}
		}, nil},
		{"ExternalName without name", func(s *corev1.Service) { s.Spec = corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName} },
			[]string{"spec.externalName: Required value"}},
		{"bad type", func(s *corev1.Service) { s.Spec.Type = "Ingress" }, []string{"spec.type: Unsupported value"}},
		{"port zero", func(s *corev1.Service) { s.Spec.Ports[0].Port = 0 }, []string{"spec.ports[0].port: Invalid value"}},
		{"port too big", func(s *corev1.Service) { s.Spec.Ports[0].Port = 65536 }, []string{"spec.ports[0].port: Invalid value"}},
		{"bad protocol", func(s *corev1.Service) { s.Spec.Ports[0].Protocol = "ICMP" }, []string{"spec.ports[0].protocol: Unsupported value"}},
		{"second port needs names", func(s *corev1.Service) {
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Port: 443, Protocol: corev1.ProtocolTCP})
		}, []string{"spec.ports[0].name: Required value", "spec.ports[1].name: Required value"}},
		{"duplicate port names", func(s *corev1.Service) {
			s.Spec.Ports = []corev1.ServicePort{{Name: "http", Port: 80, Protocol: "TCP"}, {Name: "http", Port: 8080, Protocol: "TCP"}}
		}, []string{"spec.ports[1].name: Duplicate value"}},
		{"nodePort on ClusterIP", func(s *corev1.Service) { s.Spec.Ports[0].NodePort = 30080 }, []string{"spec.ports[0].nodePort: Forbidden"}},
		{"bad clusterIP", func(s *corev1.Service) { s.Spec.ClusterIP = "10.0.0" }, []string{"spec.clusterIP: Invalid value"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := svc.DeepCopy()
			tt.mutate(s)
			checkErrors(t, Services.Validate(s), tt.want...)
		})
	}

	t.Run("update keeps status and allocated clusterIP", func(t *testing.T) {
		old := svc.DeepCopy()
		old.Spec.ClusterIP, old.Spec.ClusterIPs = "10.96.0.10", []string{"10.96.0.10"}
		old.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "1.2.3.4"}}
		upd := svc.DeepCopy() // the client's original manifest, without clusterIP
		Services.PrepareForUpdate(upd, old)
		if upd.Spec.ClusterIP != "10.96.0.10" || len(upd.Status.LoadBalancer.Ingress) != 1 {
			t.Errorf("spec %+v status %+v", upd.Spec, upd.Status)
		}
		checkErrors(t, Services.ValidateUpdate(upd, old))
		upd.Spec.ClusterIP = "10.96.0.11"
		checkErrors(t, Services.ValidateUpdate(upd, old), "spec.clusterIP: Invalid value")
	})
	t.Run("create clears status", func(t *testing.T) {
		s := svc.DeepCopy()
		s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "1.2.3.4"}}
		Services.PrepareForCreate(s)
		if len(s.Status.LoadBalancer.Ingress) != 0 {
			t.Errorf("status = %+v, want empty", s.Status)
		}
	})
}

func TestNode(t *testing.T) {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-1"},
		Spec:       corev1.NodeSpec{PodCIDR: "10.244.1.0/24"},
		Status: corev1.NodeStatus{
			Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")},
			Phase:    corev1.NodeRunning,
		},
	}
	Nodes.Default(node)
	if cpu := node.Status.Allocatable[corev1.ResourceCPU]; cpu.String() != "4" {
		t.Errorf("allocatable = %v, want capacity", node.Status.Allocatable)
	}
	if len(node.Spec.PodCIDRs) != 1 || node.Spec.PodCIDRs[0] != "10.244.1.0/24" {
		t.Errorf("podCIDRs = %v", node.Spec.PodCIDRs)
	}
	if Nodes.PrepareForCreate != nil {
		t.Errorf("nodes are created with the status their kubelet sends; PrepareForCreate must not clear it")
	}
	checkErrors(t, Nodes.Validate(node))

	bad := node.DeepCopy()
	bad.Spec.PodCIDRs = []string{"10.244.1.0/33"}
	bad.Spec.PodCIDR = "10.244.1.0/33"
	bad.Spec.Taints = []corev1.Taint{{Key: "k", Effect: "Never"}, {Key: "", Effect: corev1.TaintEffectNoSchedule}}
	checkErrors(t, Nodes.Validate(bad), "spec.podCIDRs[0]: Invalid value", "spec.taints[0].effect: Unsupported value", "spec.taints[1].key: Required value")

	t.Run("update", func(t *testing.T) {
		unset := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}
		checkErrors(t, Nodes.ValidateUpdate(node, unset)) // set once
		moved := node.DeepCopy()
		moved.Spec.PodCIDR, moved.Spec.PodCIDRs = "10.244.2.0/24", []string{"10.244.2.0/24"}
		checkErrors(t, Nodes.ValidateUpdate(moved, node), "spec.podCIDRs: Forbidden")

		upd := node.DeepCopy()
		upd.Status = corev1.NodeStatus{}
		Nodes.PrepareForUpdate(upd, node)
		if upd.Status.Phase != corev1.NodeRunning {
			t.Errorf("update dropped status: %+v", upd.Status)
		}
	})
}

func TestEndpoints(t *testing.T) {
	ep := &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Subsets: []corev1.EndpointSubset{{
			Addresses: []corev1.EndpointAddress{{IP: "10.244.1.5"}},
			Ports:     []corev1.EndpointPort{{Port: 80}},
		}},
	}
	Endpoints.Default(ep)
	if ep.Subsets[0].Ports[0].Protocol != corev1.ProtocolTCP {
		t.Errorf("protocol = %q, want TCP", ep.Subsets[0].Ports[0].Protocol)
	}
	checkErrors(t, Endpoints.Validate(ep))
	bad := ep.DeepCopy()
	bad.Subsets[0].Addresses = append(bad.Subsets[0].Addresses, corev1.EndpointAddress{}, corev1.EndpointAddress{IP: "pod-1"})
	bad.Subsets[0].Ports[0].Port = 0
	checkErrors(t, Endpoints.Validate(bad),
		"subsets[0].addresses[1].ip: Required value", "subsets[0].addresses[2].ip: Invalid value", "subsets[0].ports[0].port: Invalid value")
}

func TestEvent(t *testing.T) {
	ev := func(ns, involvedNS, typ string) *corev1.Event {
		return &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: "web.1", Namespace: ns},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "web", Namespace: involvedNS},
			Type:           typ,
		}
	}
	tests := []struct {
		name string
		ev   *corev1.Event
		want []string
	}{
		{"same namespace", ev("default", "default", "Normal"), nil},
		{"cluster-scoped object", ev("default", "", "Warning"), nil},
		{"other namespace", ev("default", "kube-system", "Normal"), []string{"involvedObject.namespace: Invalid value"}},
		{"bad type", ev("default", "default", "Info"), []string{"type: Unsupported value"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkErrors(t, Events.Validate(tt.ev), tt.want...)
		})
	}
	if Events.Default != nil {
		t.Errorf("events have no defaults in Kubernetes")
	}
}

func TestConfigMapAndSecret(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg", Namespace: "default"}, Data: map[string]string{"app.yaml": "x: 1"}}
	checkErrors(t, ConfigMaps.Validate(cm))

	tests := []struct {
		name string
		r    *Resource
		obj  Object
		want []string
	}{
		{"bad configmap key", ConfigMaps, &corev1.ConfigMap{Data: map[string]string{"a/b": "x"}}, []string{"data[a/b]: Invalid value"}},
		{"key in data and binaryData", ConfigMaps, &corev1.ConfigMap{Data: map[string]string{"k": "x"}, BinaryData: map[string][]byte{"k": {1}}},
			[]string{"binaryData: Invalid value"}},
		{"configmap too large", ConfigMaps, &corev1.ConfigMap{Data: map[string]string{"big": strings.Repeat("x", corev1.MaxSecretSize+1)}},
			[]string{"data: Too long"}},
		{"bad secret key", Secrets, &corev1.Secret{Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"a b": nil}}, []string{"data[a b]: Invalid value"}},
		{"secret too large", Secrets, &corev1.Secret{Data: map[string][]byte{"a": make([]byte, corev1.MaxSecretSize), "b": {1}}}, []string{"data: Too long"}},
		{"tls secret without key", Secrets, &corev1.Secret{Type: corev1.SecretTypeTLS, Data: map[string][]byte{"tls.crt": {1}}}, []string{"data[tls.key]: Required value"}},
		{"token secret without service account", Secrets, &corev1.Secret{Type: corev1.SecretTypeServiceAccountToken},
			[]string{"metadata.annotations[kubernetes.io/service-account.name]: Required value"}},
		{"dockerconfigjson not JSON", Secrets, &corev1.Secret{Type: corev1.SecretTypeDockerConfigJson, Data: map[string][]byte{".dockerconfigjson": []byte("{")}},
			[]string{"data[.dockerconfigjson]: Invalid value"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkErrors(t, tt.r.Validate(tt.obj), tt.want...)
		})
	}

	t.Run("secret defaults", func(t *testing.T) {
		s := &corev1.Secret{Data: map[string][]byte{"a": []byte("1")}, StringData: map[string]string{"b": "2", "a": "3"}}
		Secrets.Default(s)
		if s.Type != corev1.SecretTypeOpaque || string(s.Data["a"]) != "3" || string(s.Data["b"]) != "2" || s.StringData != nil {
			t.Errorf("secret = type %q data %q stringData %v", s.Type, s.Data, s.StringData)
		}
	})
	t.Run("immutable", func(t *testing.T) {
		old := cm.DeepCopy()
		old.Immutable = ptrTo(true)
		upd := old.DeepCopy()
		upd.Data["app.yaml"] = "x: 2"
		checkErrors(t, ConfigMaps.ValidateUpdate(upd, old), "data: Forbidden")
		upd = old.DeepCopy()
		upd.Immutable = nil
		checkErrors(t, ConfigMaps.ValidateUpdate(upd, old), "immutable: Forbidden")
		mutable := cm.DeepCopy()
		mutable.Data["app.yaml"] = "x: 2"
		checkErrors(t, ConfigMaps.ValidateUpdate(mutable, cm))

		oldS := &corev1.Secret{Type: corev1.SecretTypeOpaque}
		s := &corev1.Secret{Type: corev1.SecretTypeTLS}
		checkErrors(t, Secrets.ValidateUpdate(s, oldS), "type: Invalid value")
	})
}

func TestResourceQuota(t *testing.T) {
	q := &corev1.ResourceQuota{Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{
		corev1.ResourcePods: resource.MustParse("10"), corev1.ResourceRequestsCPU: resource.MustParse("1500m"),
	}}}
	checkErrors(t, ResourceQuotas.Validate(q))
	bad := &corev1.ResourceQuota{Spec: corev1.ResourceQuotaSpec{
		Hard: corev1.ResourceList{
			corev1.ResourcePods: resource.MustParse("1500m"), corev1.ResourceRequestsMemory: resource.MustParse("-1Gi"),
		},
		Scopes: []corev1.ResourceQuotaScope{"Sometimes"},
	}}
	checkErrors(t, ResourceQuotas.Validate(bad), "spec.hard[pods]: Invalid value", "spec.hard[requests.memory]: Invalid value", "spec.scopes[0]: Unsupported value")

	q.Status.Used = corev1.ResourceList{corev1.ResourcePods: resource.MustParse("3")}
	ResourceQuotas.PrepareForCreate(q)
	if q.Status.Used != nil {
		t.Errorf("create kept status %+v", q.Status)
	}
	old := q.DeepCopy()
	old.Status.Used = corev1.ResourceList{corev1.ResourcePods: resource.MustParse("3")}
	ResourceQuotas.PrepareForUpdate(q, old)
	if _, ok := q.Status.Used[corev1.ResourcePods]; !ok {
		t.Errorf("update dropped status %+v", q.Status)
	}
}

func TestLimitRange(t *testing.T) {
	lr := &corev1.LimitRange{Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{
		Type: corev1.LimitTypeContainer,
		Max:  corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
		Min:  corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")},
	}}}}
	LimitRanges.Default(lr)
	item := lr.Spec.Limits[0]
	defCPU, defReqCPU, defReqMem := item.Default[corev1.ResourceCPU], item.DefaultRequest[corev1.ResourceCPU], item.DefaultRequest[corev1.ResourceMemory]
	if defCPU.String() != "2" || defReqCPU.String() != "2" || defReqMem.String() != "64Mi" {
		t.Errorf("defaults: default %v defaultRequest %v", item.Default, item.DefaultRequest)
	}
	checkErrors(t, LimitRanges.Validate(lr))

	q := resource.MustParse
	tests := []struct {
		name string
		item corev1.LimitRangeItem
		want []string
	}{
		{"no type", corev1.LimitRangeItem{}, []string{"spec.limits[0].type: Required value"}},
		{"bad type", corev1.LimitRangeItem{Type: "Node"}, []string{"spec.limits[0].type: Unsupported value"}},
		{"min above max", corev1.LimitRangeItem{Type: corev1.LimitTypePod,
			Min: corev1.ResourceList{corev1.ResourceCPU: q("2")}, Max: corev1.ResourceList{corev1.ResourceCPU: q("1")}},
			[]string{"spec.limits[0].min[cpu]: Invalid value"}},
		{"default above max", corev1.LimitRangeItem{Type: corev1.LimitTypeContainer,
			Default: corev1.ResourceList{corev1.ResourceCPU: q("3")}, DefaultRequest: corev1.ResourceList{corev1.ResourceCPU: q("1")},
			Max: corev1.ResourceList{corev1.ResourceCPU: q("2")}},
			[]string{"spec.limits[0].default[cpu]: Invalid value"}},
		{"default below min", corev1.LimitRangeItem{Type: corev1.LimitTypeContainer,
			Default: corev1.ResourceList{corev1.ResourceCPU: q("1")}, DefaultRequest: corev1.ResourceList{corev1.ResourceCPU: q("1")},
			Min: corev1.ResourceList{corev1.ResourceCPU: q("2")}},
			[]string{"spec.limits[0].default[cpu]: Invalid value", "spec.limits[0].defaultRequest[cpu]: Invalid value"}},
		{"default on Pod", corev1.LimitRangeItem{Type: corev1.LimitTypePod, Default: corev1.ResourceList{corev1.ResourceCPU: q("1")}},
			[]string{"spec.limits[0].default: Forbidden"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lr := &corev1.LimitRange{Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{tt.item}}}
			checkErrors(t, LimitRanges.Validate(lr), tt.want...)
		})
	}
}

func TestLease(t *testing.T) {
	l := &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{HolderIdentity: ptrTo("node-1"), LeaseDurationSeconds: ptrTo(int32(40))}}
	checkErrors(t, Leases.Validate(l))
	l.Spec.LeaseDurationSeconds = ptrTo(int32(0))
	l.Spec.LeaseTransitions = ptrTo(int32(-1))
	checkErrors(t, Leases.Validate(l), "spec.leaseDurationSeconds: Invalid value", "spec.leaseTransitions: Invalid value")
}
