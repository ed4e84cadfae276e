package api

import (
	"slices"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The resources minictl serves, in the order discovery lists them. The
// functions each entry names live in the file of its kind group: pod.go,
// podtemplate.go, replicationcontroller.go, service.go, core.go (namespaces, nodes, endpoints, events), config.go
// (configmaps, secrets), quota.go (resourcequotas, limitranges),
// coordination.go, endpointslice.go, apps.go, daemonset.go, statefulset.go, job.go, cronjob.go, autoscaling.go, policy.go,
// admissionregistration.go, apiextensions.go, rbac.go, certificates.go, review.go, metrics.go, networking.go (ingresses,
// ingress classes, network policies), servicecidr.go (service CIDRs, IP addresses) and storage.go
// (persistentvolumes, persistentvolumeclaims, storageclasses); their Table columns live in table.go
// (networking_table.go for ingresses and network policies, storage_table.go for the storage kinds).
var (
	Namespaces = &Resource{
		Version: "v1", Kind: "Namespace", Plural: "namespaces", Singular: "namespace",
		ShortNames: []string{"ns"}, Subresources: []string{"status", "finalize"},
		New:          func() Object { return &corev1.Namespace{} },
		ValidateName: nameIsDNSLabel,
		Default:      defaulter(defaultNamespace), Validate: validator(validateNamespace),
		PrepareForCreate: defaulter(prepareNamespaceForCreate), PrepareForUpdate: updatePreparer(prepareNamespaceForUpdate),
		SelectableFields: selectable(namespaceFields), FieldLabels: namespaceFieldLabels,
		Table: namespaceTable,
	}
	Pods = &Resource{
		Version: "v1", Kind: "Pod", Plural: "pods", Singular: "pod", Namespaced: true,
		ShortNames: []string{"po"}, Categories: []string{"all"},
		Subresources: []string{"status", "binding", "eviction", "attach", "exec", "log", "portforward", "proxy"},
		New:          func() Object { return &corev1.Pod{} },
		Default:      defaulter(defaultPod), Validate: validator(validatePod), ValidateUpdate: updateValidator(validatePodUpdate),
		PrepareForCreate: defaulter(preparePodForCreate), PrepareForUpdate: updatePreparer(preparePodForUpdate),
		PrepareForStatusUpdate: updatePreparer(preparePodForStatusUpdate),
		SelectableFields:       selectable(podFields), FieldLabels: podFieldLabels,
		Table: podTable,
	}
	PodTemplates = &Resource{
		Version: "v1", Kind: "PodTemplate", Plural: "podtemplates", Singular: "podtemplate", Namespaced: true,
		New:     func() Object { return &corev1.PodTemplate{} },
		Default: defaulter(defaultPodTemplate), Validate: validator(validatePodTemplate),
		PrepareForCreate: defaulter(preparePodTemplateForCreate), PrepareForUpdate: updatePreparer(preparePodTemplateForUpdate),
		Table: podTemplateTable,
	}
	ReplicationControllers = &Resource{
		Version: "v1", Kind: "ReplicationController", Plural: "replicationcontrollers", Singular: "replicationcontroller", Namespaced: true,
		ShortNames: []string{"rc"}, Categories: []string{"all"}, Subresources: []string{"status", "scale"},
		New:     func() Object { return &corev1.ReplicationController{} },
		Default: defaulter(defaultReplicationController), Validate: validator(validateReplicationController),
		PrepareForCreate: defaulter(prepareReplicationControllerForCreate), PrepareForUpdate: updatePreparer(prepareReplicationControllerForUpdate),
		SelectableFields: selectable(replicationControllerFields), FieldLabels: replicationControllerFieldLabels,
		Scale: replicationControllerScale, OrphansByDefault: true,
		Table: replicationControllerTable,
	}
	Nodes = &Resource{
		Version: "v1", Kind: "Node", Plural: "nodes", Singular: "node",
		ShortNames: []string{"no"}, Subresources: []string{"status"},
		New:     func() Object { return &corev1.Node{} },
		Default: defaulter(defaultNode), Validate: validator(validateNode), ValidateUpdate: updateValidator(validateNodeUpdate),
		PrepareForUpdate: updatePreparer(prepareNodeForUpdate),
		SelectableFields: selectable(nodeFields), FieldLabels: nodeFieldLabels,
		Table: nodeTable,
	}
	Services = &Resource{
		Version: "v1", Kind: "Service", Plural: "services", Singular: "service", Namespaced: true,
		ShortNames: []string{"svc"}, Categories: []string{"all"}, Subresources: []string{"status"},
		New:          func() Object { return &corev1.Service{} },
		ValidateName: nameIsDNSLabel,
		Default:      defaulter(defaultService), Validate: validator(validateService), ValidateUpdate: updateValidator(validateServiceUpdate),
		PrepareForCreate: defaulter(prepareServiceForCreate), PrepareForUpdate: updatePreparer(prepareServiceForUpdate),
		SelectableFields: selectable(serviceFields), FieldLabels: serviceFieldLabels,
		Table: serviceTable,
	}
	Endpoints = &Resource{
		Version: "v1", Kind: "Endpoints", Plural: "endpoints", Singular: "endpoints", Namespaced: true,
		ShortNames: []string{"ep"},
		New:        func() Object { return &corev1.Endpoints{} },
		Default:    defaulter(defaultEndpoints), Validate: validator(validateEndpoints),
		Table: endpointsTable,
	}
	EndpointSlices = &Resource{
		Group: "discovery.k8s.io", Version: "v1", Kind: "EndpointSlice", Plural: "endpointslices", Singular: "endpointslice", Namespaced: true,
		New:     func() Object { return &discoveryv1.EndpointSlice{} },
		Default: defaulter(defaultEndpointSlice), Validate: validator(validateEndpointSlice), ValidateUpdate: updateValidator(validateEndpointSliceUpdate),
		PrepareForCreate: defaulter(prepareEndpointSliceForCreate), PrepareForUpdate: updatePreparer(prepareEndpointSliceForUpdate),
		Table: endpointSliceTable,
	}
	ConfigMaps = &Resource{
		Version: "v1", Kind: "ConfigMap", Plural: "configmaps", Singular: "configmap", Namespaced: true,
		ShortNames: []string{"cm"},
		New:        func() Object { return &corev1.ConfigMap{} },
		Validate:   validator(validateConfigMap), ValidateUpdate: updateValidator(validateConfigMapUpdate),
		Table: configMapTable,
	}
	Secrets = &Resource{
		Version: "v1", Kind: "Secret", Plural: "secrets", Singular: "secret", Namespaced: true,
		New:     func() Object { return &corev1.Secret{} },
		Default: defaulter(defaultSecret), Validate: validator(validateSecret), ValidateUpdate: updateValidator(validateSecretUpdate),
		SelectableFields: selectable(secretFields), FieldLabels: secretFieldLabels,
		Table: secretTable,
	}
	ServiceAccounts = &Resource{
		Version: "v1", Kind: "ServiceAccount", Plural: "serviceaccounts", Singular: "serviceaccount", Namespaced: true,
		ShortNames: []string{"sa"}, Subresources: []string{"token"},
		New:   func() Object { return &corev1.ServiceAccount{} },
		Table: serviceAccountTable,
	}
	Events = &Resource{
		Version: "v1", Kind: "Event", Plural: "events", Singular: "event", Namespaced: true,
		ShortNames:       []string{"ev"},
		New:              func() Object { return &corev1.Event{} },
		Validate:         validator(validateEvent),
		SelectableFields: selectable(eventFields), FieldLabels: eventFieldLabels,
		Table: eventTable,
	}
	PersistentVolumes = &Resource{
		Version: "v1", Kind: "PersistentVolume", Plural: "persistentvolumes", Singular: "persistentvolume",
		ShortNames: []string{"pv"}, Subresources: []string{"status"},
		New:     func() Object { return &corev1.PersistentVolume{} },
		Default: defaulter(defaultPersistentVolume), Validate: validator(validatePersistentVolume), ValidateUpdate: updateValidator(validatePersistentVolumeUpdate),
		PrepareForCreate: defaulter(preparePersistentVolumeForCreate), PrepareForUpdate: updatePreparer(preparePersistentVolumeForUpdate),
		PrepareForStatusUpdate: updatePreparer(preparePersistentVolumeForStatusUpdate),
		Table:                  persistentVolumeTable,
	}
	PersistentVolumeClaims = &Resource{
		Version: "v1", Kind: "PersistentVolumeClaim", Plural: "persistentvolumeclaims", Singular: "persistentvolumeclaim", Namespaced: true,
		ShortNames: []string{"pvc"}, Subresources: []string{"status"},
		New:     func() Object { return &corev1.PersistentVolumeClaim{} },
		Default: defaulter(defaultPersistentVolumeClaim), Validate: validator(validatePersistentVolumeClaim), ValidateUpdate: updateValidator(validatePersistentVolumeClaimUpdate),
		PrepareForCreate: defaulter(preparePersistentVolumeClaimForCreate), PrepareForUpdate: updatePreparer(preparePersistentVolumeClaimForUpdate),
		Table: persistentVolumeClaimTable,
	}
	ResourceQuotas = &Resource{
		Version: "v1", Kind: "ResourceQuota", Plural: "resourcequotas", Singular: "resourcequota", Namespaced: true,
		ShortNames: []string{"quota"}, Subresources: []string{"status"},
		New:              func() Object { return &corev1.ResourceQuota{} },
		Validate:         validator(validateResourceQuota),
		PrepareForCreate: defaulter(prepareResourceQuotaForCreate), PrepareForUpdate: updatePreparer(prepareResourceQuotaForUpdate),
		Table: resourceQuotaTable,
	}
	LimitRanges = &Resource{
		Version: "v1", Kind: "LimitRange", Plural: "limitranges", Singular: "limitrange", Namespaced: true,
		ShortNames: []string{"limits"},
		New:        func() Object { return &corev1.LimitRange{} },
		Default:    defaulter(defaultLimitRange), Validate: validator(validateLimitRange),
	}
	Leases = &Resource{
		Group: "coordination.k8s.io", Version: "v1", Kind: "Lease", Plural: "leases", Singular: "lease", Namespaced: true,
		New:      func() Object { return &coordinationv1.Lease{} },
		Validate: validator(validateLease),
		Table:    leaseTable,
	}
	ReplicaSets = &Resource{
		Group: "apps", Version: "v1", Kind: "ReplicaSet", Plural: "replicasets", Singular: "replicaset", Namespaced: true,
		ShortNames: []string{"rs"}, Categories: []string{"all"}, Subresources: []string{"status", "scale"},
		New:     func() Object { return &appsv1.ReplicaSet{} },
		Default: defaulter(defaultReplicaSet), Validate: validator(validateReplicaSet), ValidateUpdate: updateValidator(validateReplicaSetUpdate),
		PrepareForCreate: defaulter(prepareReplicaSetForCreate), PrepareForUpdate: updatePreparer(prepareReplicaSetForUpdate),
		SelectableFields: selectable(replicaSetFields), FieldLabels: replicaSetFieldLabels,
		Scale: replicaSetScale,
		Table: replicaSetTable,
	}
	Deployments = &Resource{
		Group: "apps", Version: "v1", Kind: "Deployment", Plural: "deployments", Singular: "deployment", Namespaced: true,
		ShortNames: []string{"deploy"}, Categories: []string{"all"}, Subresources: []string{"status", "scale"},
		New:     func() Object { return &appsv1.Deployment{} },
		Default: defaulter(defaultDeployment), Validate: validator(validateDeployment), ValidateUpdate: updateValidator(validateDeploymentUpdate),
		PrepareForCreate: defaulter(prepareDeploymentForCreate), PrepareForUpdate: updatePreparer(prepareDeploymentForUpdate),
		PrepareForStatusUpdate: updatePreparer(prepareDeploymentForStatusUpdate),
		Scale:                  deploymentScale,
		Table:                  deploymentTable,
	}
	DaemonSets = &Resource{
		Group: "apps", Version: "v1", Kind: "DaemonSet", Plural: "daemonsets", Singular: "daemonset", Namespaced: true,
		ShortNames: []string{"ds"}, Categories: []string{"all"}, Subresources: []string{"status"},
		New:     func() Object { return &appsv1.DaemonSet{} },
		Default: defaulter(defaultDaemonSet), Validate: validator(validateDaemonSet), ValidateUpdate: updateValidator(validateDaemonSetUpdate),
		PrepareForCreate: defaulter(prepareDaemonSetForCreate), PrepareForUpdate: updatePreparer(prepareDaemonSetForUpdate),
		Table: daemonSetTable,
	}
	StatefulSets = &Resource{
		Group: "apps", Version: "v1", Kind: "StatefulSet", Plural: "statefulsets", Singular: "statefulset", Namespaced: true,
		ShortNames: []string{"sts"}, Categories: []string{"all"}, Subresources: []string{"status", "scale"},
		New:     func() Object { return &appsv1.StatefulSet{} },
		Default: defaulter(defaultStatefulSet), Validate: validator(validateStatefulSet), ValidateUpdate: updateValidator(validateStatefulSetUpdate),
		PrepareForCreate: defaulter(prepareStatefulSetForCreate), PrepareForUpdate: updatePreparer(prepareStatefulSetForUpdate),
		Scale: statefulSetScale,
		Table: statefulSetTable,
	}
	ControllerRevisions = &Resource{
		Group: "apps", Version: "v1", Kind: "ControllerRevision", Plural: "controllerrevisions", Singular: "controllerrevision", Namespaced: true,
		New:      func() Object { return &appsv1.ControllerRevision{} },
		Validate: validator(validateControllerRevision), ValidateUpdate: updateValidator(validateControllerRevisionUpdate),
		Table: controllerRevisionTable,
	}
	Jobs = &Resource{
		Group: "batch", Version: "v1", Kind: "Job", Plural: "jobs", Singular: "job", Namespaced: true,
		Categories: []string{"all"}, Subresources: []string{"status"},
		New:     func() Object { return &batchv1.Job{} },
		Default: defaulter(defaultJob), Validate: validator(validateJob), ValidateUpdate: updateValidator(validateJobUpdate),
		PrepareForCreate: defaulter(prepareJobForCreate), PrepareForUpdate: updatePreparer(prepareJobForUpdate),
		SelectableFields: selectable(jobFields), FieldLabels: jobFieldLabels,
		Table:            jobTable,
		OrphansByDefault: true, OrphanWarning: JobOrphanWarning,
	}
	CronJobs = &Resource{
		Group: "batch", Version: "v1", Kind: "CronJob", Plural: "cronjobs", Singular: "cronjob", Namespaced: true,
		ShortNames: []string{"cj"}, Categories: []string{"all"}, Subresources: []string{"status"},
		New:     func() Object { return &batchv1.CronJob{} },
		Default: defaulter(defaultCronJob), ValidateObject: validateCronJobObject,
		PrepareForCreate: defaulter(prepareCronJobForCreate), PrepareForUpdate: updatePreparer(prepareCronJobForUpdate),
		Table: cronJobTable,
	}
	// HorizontalPodAutoscalers are stored as autoscaling/v2 and served at
	// autoscaling/v1 too (autoscaling.go converts).
	HorizontalPodAutoscalers = &Resource{
		Group: "autoscaling", Version: "v2", Kind: "HorizontalPodAutoscaler", Plural: "horizontalpodautoscalers", Singular: "horizontalpodautoscaler", Namespaced: true,
		ShortNames: []string{"hpa"}, Categories: []string{"all"}, Subresources: []string{"status"},
		New:     func() Object { return &autoscalingv2.HorizontalPodAutoscaler{} },
		Default: defaulter(defaultHPA), Validate: validator(validateHPA),
		PrepareForCreate: defaulter(prepareHPAForCreate), PrepareForUpdate: updatePreparer(prepareHPAForUpdate),
		Convert: hpaConvert,
		Table:   hpaTable,
	}
	HorizontalPodAutoscalersV1 = &Resource{
		Group: "autoscaling", Version: "v1", Kind: "HorizontalPodAutoscaler", Plural: "horizontalpodautoscalers", Singular: "horizontalpodautoscaler", Namespaced: true,
		ShortNames: []string{"hpa"}, Categories: []string{"all"}, Subresources: []string{"status"},
		New:     func() Object { return &autoscalingv1.HorizontalPodAutoscaler{} },
		Default: defaulter(defaultHPAV1), Validate: validator(validateHPAV1),
		PrepareForCreate: defaulter(prepareHPAV1ForCreate), PrepareForUpdate: updatePreparer(prepareHPAV1ForUpdate),
		Storage: HorizontalPodAutoscalers, Convert: hpaConvert,
		Table: hpaV1Table,
	}
	PodDisruptionBudgets = &Resource{
		Group: "policy", Version: "v1", Kind: "PodDisruptionBudget", Plural: "poddisruptionbudgets", Singular: "poddisruptionbudget", Namespaced: true,
		ShortNames: []string{"pdb"}, Subresources: []string{"status"},
		New:              func() Object { return &policyv1.PodDisruptionBudget{} },
		Validate:         validator(validatePodDisruptionBudget),
		PrepareForCreate: defaulter(preparePodDisruptionBudgetForCreate), PrepareForUpdate: updatePreparer(preparePodDisruptionBudgetForUpdate),
		Table: podDisruptionBudgetTable,
	}
	Ingresses = &Resource{
		Group: "networking.k8s.io", Version: "v1", Kind: "Ingress", Plural: "ingresses", Singular: "ingress", Namespaced: true,
		ShortNames: []string{"ing"}, Subresources: []string{"status"},
		New:              func() Object { return &networkingv1.Ingress{} },
		ValidateObject:   objectValidator(validateIngressObject),
		PrepareForCreate: defaulter(prepareIngressForCreate), PrepareForUpdate: updatePreparer(prepareIngressForUpdate),
		Table: ingressTable,
	}
	IngressClasses = &Resource{
		Group: "networking.k8s.io", Version: "v1", Kind: "IngressClass", Plural: "ingressclasses", Singular: "ingressclass",
		New:     func() Object { return &networkingv1.IngressClass{} },
		Default: defaulter(defaultIngressClass), Validate: validator(validateIngressClass), ValidateUpdate: updateValidator(validateIngressClassUpdate),
		PrepareForCreate: defaulter(prepareIngressClassForCreate), PrepareForUpdate: updatePreparer(prepareIngressClassForUpdate),
		Table: ingressClassTable,
	}
	NetworkPolicies = &Resource{
		Group: "networking.k8s.io", Version: "v1", Kind: "NetworkPolicy", Plural: "networkpolicies", Singular: "networkpolicy", Namespaced: true,
		ShortNames: []string{"netpol"},
		New:        func() Object { return &networkingv1.NetworkPolicy{} },
		Default:    defaulter(defaultNetworkPolicy), ValidateObject: objectValidator(validateNetworkPolicyObject),
		PrepareForCreate: defaulter(prepareNetworkPolicyForCreate), PrepareForUpdate: updatePreparer(prepareNetworkPolicyForUpdate),
		Table: networkPolicyTable,
	}
	Roles = &Resource{
		Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "Role", Plural: "roles", Singular: "role", Namespaced: true,
		New: func() Object { return &rbacv1.Role{} }, ValidateName: nameIsPathSegment,
		Validate: validator(validateRole),
	}
	ClusterRoles = &Resource{
		Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole", Plural: "clusterroles", Singular: "clusterrole",
		New: func() Object { return &rbacv1.ClusterRole{} }, ValidateName: nameIsPathSegment,
		Validate: validator(validateClusterRole),
	}
	RoleBindings = &Resource{
		Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "RoleBinding", Plural: "rolebindings", Singular: "rolebinding", Namespaced: true,
		New: func() Object { return &rbacv1.RoleBinding{} }, ValidateName: nameIsPathSegment,
		Default: defaulter(defaultRoleBinding), Validate: validator(validateRoleBinding), ValidateUpdate: updateValidator(validateRoleBindingUpdate),
		Table: roleBindingTable,
	}
	ClusterRoleBindings = &Resource{
		Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRoleBinding", Plural: "clusterrolebindings", Singular: "clusterrolebinding",
		New: func() Object { return &rbacv1.ClusterRoleBinding{} }, ValidateName: nameIsPathSegment,
		Default: defaulter(defaultClusterRoleBinding), Validate: validator(validateClusterRoleBinding), ValidateUpdate: updateValidator(validateClusterRoleBindingUpdate),
		Table: clusterRoleBindingTable,
	}
	CertificateSigningRequests = &Resource{
		Group: "certificates.k8s.io", Version: "v1", Kind: "CertificateSigningRequest",
		Plural: "certificatesigningrequests", Singular: "certificatesigningrequest",
		ShortNames: []string{"csr"}, Subresources: []string{"status", "approval"},
		New:          func() Object { return &certificatesv1.CertificateSigningRequest{} },
		ValidateName: csrNameValid,
		Validate:     validator(validateCSR), ValidateUpdate: updateValidator(validateCSRUpdate),
		PrepareForCreate: defaulter(prepareCSRForCreate), PrepareForUpdate: updatePreparer(prepareCSRForUpdate),
		PrepareForStatusUpdate: updatePreparer(prepareCSRForStatusUpdate),
		Table:                  csrTable,
	}
	MutatingWebhookConfigurations = &Resource{
		Group: "admissionregistration.k8s.io", Version: "v1", Kind: "MutatingWebhookConfiguration",
		Plural: "mutatingwebhookconfigurations", Singular: "mutatingwebhookconfiguration",
		Categories: []string{"api-extensions"},
		New:        func() Object { return &admissionregistrationv1.MutatingWebhookConfiguration{} },
		Default:    defaulter(defaultMutatingWebhookConfiguration), Validate: validator(validateMutatingWebhookConfiguration),
		Table: mutatingWebhookConfigurationTable,
	}
	ValidatingWebhookConfigurations = &Resource{
		Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingWebhookConfiguration",
		Plural: "validatingwebhookconfigurations", Singular: "validatingwebhookconfiguration",
		Categories: []string{"api-extensions"},
		New:        func() Object { return &admissionregistrationv1.ValidatingWebhookConfiguration{} },
		Default:    defaulter(defaultValidatingWebhookConfiguration), Validate: validator(validateValidatingWebhookConfiguration),
		Table: validatingWebhookConfigurationTable,
	}
	ValidatingAdmissionPolicies = &Resource{
		Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingAdmissionPolicy",
		Plural: "validatingadmissionpolicies", Singular: "validatingadmissionpolicy",
		Categories: []string{"api-extensions"}, Subresources: []string{"status"},
		New:     func() Object { return &admissionregistrationv1.ValidatingAdmissionPolicy{} },
		Default: defaulter(defaultValidatingAdmissionPolicy), Validate: validator(validateValidatingAdmissionPolicy),
		PrepareForCreate: defaulter(prepareValidatingAdmissionPolicyForCreate), PrepareForUpdate: updatePreparer(prepareValidatingAdmissionPolicyForUpdate),
		PrepareForStatusUpdate: updatePreparer(prepareValidatingAdmissionPolicyForStatusUpdate),
		Table:                  validatingAdmissionPolicyTable,
	}
	StorageClasses = &Resource{
		Group: "storage.k8s.io", Version: "v1", Kind: "StorageClass", Plural: "storageclasses", Singular: "storageclass",
		ShortNames: []string{"sc"},
		New:        func() Object { return &storagev1.StorageClass{} },
		Default:    defaulter(defaultStorageClass), Validate: validator(validateStorageClass), ValidateUpdate: updateValidator(validateStorageClassUpdate),
		Table: storageClassTable,
	}
	ServiceCIDRs = &Resource{
		Group: "networking.k8s.io", Version: "v1", Kind: "ServiceCIDR", Plural: "servicecidrs", Singular: "servicecidr",
		Subresources: []string{"status"},
		New:          func() Object { return &networkingv1.ServiceCIDR{} },
		Validate:     validator(validateServiceCIDR), ValidateUpdate: updateValidator(validateServiceCIDRUpdate),
		PrepareForCreate: defaulter(prepareServiceCIDRForCreate), PrepareForUpdate: updatePreparer(prepareServiceCIDRForUpdate),
		PrepareForStatusUpdate: updatePreparer(prepareServiceCIDRForStatusUpdate),
		Table:                  serviceCIDRTable,
	}
	IPAddresses = &Resource{
		Group: "networking.k8s.io", Version: "v1", Kind: "IPAddress", Plural: "ipaddresses", Singular: "ipaddress",
		ShortNames: []string{"ip"},
		New:        func() Object { return &networkingv1.IPAddress{} }, ValidateName: ipAddressNameValid,
		Validate: validator(validateIPAddress), ValidateUpdate: updateValidator(validateIPAddressUpdate),
		Table: ipAddressTable,
	}
	ValidatingAdmissionPolicyBindings = &Resource{
		Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingAdmissionPolicyBinding",
		Plural: "validatingadmissionpolicybindings", Singular: "validatingadmissionpolicybinding",
		Categories: []string{"api-extensions"},
		New:        func() Object { return &admissionregistrationv1.ValidatingAdmissionPolicyBinding{} },
		Default:    defaulter(defaultValidatingAdmissionPolicyBinding), Validate: validator(validateValidatingAdmissionPolicyBinding),
		Table: validatingAdmissionPolicyBindingTable,
	}
)

var all = Catalogue{
	Namespaces, Pods, PodTemplates, ReplicationControllers, Nodes, Services, Endpoints, ConfigMaps, Secrets, ServiceAccounts,
	Events, PersistentVolumes, PersistentVolumeClaims, ResourceQuotas, LimitRanges, Leases, ReplicaSets, Deployments, DaemonSets, StatefulSets, ControllerRevisions,
	Jobs, CronJobs, HorizontalPodAutoscalers, HorizontalPodAutoscalersV1, PodDisruptionBudgets, EndpointSlices, Ingresses, IngressClasses, NetworkPolicies,
	TokenReviews, SelfSubjectReviews,
	LocalSubjectAccessReviews, SelfSubjectAccessReviews, SelfSubjectRulesReviews, SubjectAccessReviews,
	Roles, ClusterRoles, RoleBindings, ClusterRoleBindings, CertificateSigningRequests,
	MutatingWebhookConfigurations, ValidatingWebhookConfigurations,
	ValidatingAdmissionPolicies, ValidatingAdmissionPolicyBindings, CustomResourceDefinitions,
	ServiceCIDRs, IPAddresses, StorageClasses,
	NodeMetrics, PodMetrics,
}

// Resources returns the catalogue minictl serves, in discovery order.
// Callers must not modify the entries; Catalogue.With adds to a copy.
func Resources() Catalogue { return slices.Clip(all) }

// Lookup finds a served resource by group, version and plural.
func Lookup(group, version, plural string) (*Resource, bool) {
	return all.Lookup(group, version, plural)
}

// ForObject finds the served resource whose objects have obj's Go type. An
// unstructured object has no resource of its own: its kind says which.
func ForObject(obj Object) (*Resource, bool) {
	if _, ok := obj.(*unstructured.Unstructured); ok {
		return nil, false
	}
	for _, r := range all {
		if sameType(r.New(), obj) {
			return r, true
		}
	}
	return nil, false
}
