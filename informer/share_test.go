package informer

import (
	"bytes"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/minictl/minictl/apiserver"
	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/internal/testenv"
)

// templatePod is pod i of a cluster whose pods come from templates
// (ReplicaSets), as the API server sends it once the pod runs: the
// template's labels, owner, containers and tolerations, the service
// account volume admission adds (its name made up per pod), and what the
// scheduler and the kubelet wrote, with the managedFields of the two
// writers. What is the pod's own: its name, uid, node (one of 150),
// addresses, container IDs and times.
func templatePod(i, templates int) *corev1.Pod {
	k := i % templates
	yes, grace, expiry, mode, prio := true, int64(30), int64(3607), int32(420), int32(0)
	preempt := corev1.PreemptLowerPriority
	rs := fmt.Sprintf("web-%02d-7d9f8c6b5", k)
	name := fmt.Sprintf("%s-%05x", rs, i)
	uid := types.UID(fmt.Sprintf("%08x-1f2e-4d3c-9b8a-%012x", i, i))
	volume := fmt.Sprintf("kube-api-access-%05x", i*7919%0xfffff)
	node := i % 150
	created := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Second)
	at := func(d time.Duration) metav1.Time { return metav1.NewTime(created.Add(d)) }
	condition := func(typ corev1.PodConditionType, d time.Duration) corev1.PodCondition {
		return corev1.PodCondition{Type: typ, Status: corev1.ConditionTrue, LastTransitionTime: at(d)}
	}
	image := fmt.Sprintf("registry.example.com/team-%d/app:1.%d", k%7, k)
	managed := func(manager, subresource, fields string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{
			Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: new(at(0)),
			FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)}, Subresource: subresource,
		}
	}
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, GenerateName: rs + "-", Namespace: fmt.Sprintf("ns-%d", k%10), UID: uid,
			ResourceVersion: fmt.Sprint(1000 + 3*i), Generation: 1, CreationTimestamp: at(0),
			ManagedFields: []metav1.ManagedFieldsEntry{
				managed("kube-controller-manager", "", `{"f:metadata":{"f:generateName":{},"f:labels":{".":{},"f:app":{},"f:pod-template-hash":{},"f:tier":{}},`+
					`"f:ownerReferences":{".":{},"k:{\"uid\":\"`+string(uid)+`\"}":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{".":{},`+
					`"f:env":{".":{},"k:{\"name\":\"MODE\"}":{".":{},"f:name":{},"f:value":{}}},"f:image":{},"f:imagePullPolicy":{},"f:name":{},`+
					`"f:ports":{".":{},"k:{\"containerPort\":8080,\"protocol\":\"TCP\"}":{".":{},"f:containerPort":{},"f:name":{},"f:protocol":{}}},`+
					`"f:resources":{".":{},"f:limits":{".":{},"f:cpu":{},"f:memory":{}},"f:requests":{".":{},"f:cpu":{},"f:memory":{}}}}},`+
					`"f:dnsPolicy":{},"f:restartPolicy":{},"f:schedulerName":{},"f:securityContext":{},"f:terminationGracePeriodSeconds":{}}}`),
				managed("kubelet", "status", `{"f:status":{"f:conditions":{"k:{\"type\":\"ContainersReady\"}":{".":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}},`+
					`"k:{\"type\":\"Ready\"}":{".":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}}},"f:containerStatuses":{},"f:hostIP":{},`+
					`"f:hostIPs":{},"f:phase":{},"f:podIP":{},"f:podIPs":{".":{},"k:{\"ip\":\"10.244.0.2\"}":{".":{},"f:ip":{}}},"f:startTime":{}}}`),
			},
			Labels: map[string]string{"app": fmt.Sprintf("web-%02d", k), "pod-template-hash": "7d9f8c6b5", "tier": "web"},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs,
				UID: types.UID(fmt.Sprintf("%08x-aaaa-4d3c-9b8a-000000000000", k)), Controller: &yes, BlockOwnerDeletion: &yes,
			}},
		},
		Spec: corev1.PodSpec{
			Volumes: []corev1.Volume{{Name: volume, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{
					{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{ExpirationSeconds: &expiry, Path: "token"}},
					{ConfigMap: &corev1.ConfigMapProjection{
						LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
						Items:                []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}},
					}},
					{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{
						Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"},
					}}}},
				},
				DefaultMode: &mode,
			}}}},
			Containers: []corev1.Container{{
				Name: "app", Image: image,
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
				Env:   []corev1.EnvVar{{Name: "MODE", Value: "bench"}},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(fmt.Sprintf("%dm", 10+k)), corev1.ResourceMemory: resource.MustParse("16Mi")},
					Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
				},
				VolumeMounts:           []corev1.VolumeMount{{Name: volume, ReadOnly: true, MountPath: "/var/run/secrets/kubernetes.io/serviceaccount"}},
				TerminationMessagePath: corev1.TerminationMessagePathDefault, TerminationMessagePolicy: corev1.TerminationMessageReadFile,
				ImagePullPolicy: corev1.PullIfNotPresent,
			}},
			RestartPolicy: corev1.RestartPolicyAlways, TerminationGracePeriodSeconds: &grace, DNSPolicy: corev1.DNSClusterFirst,
			ServiceAccountName: "default", DeprecatedServiceAccount: "default", NodeName: fmt.Sprintf("node-%d", node),
			SecurityContext: &corev1.PodSecurityContext{}, SchedulerName: corev1.DefaultSchedulerName,
			Tolerations: []corev1.Toleration{
				{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: new(int64(300))},
				{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: new(int64(300))},
			},
			Priority: &prio, EnableServiceLinks: &yes, PreemptionPolicy: &preempt,
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{
				condition(corev1.PodScheduled, 0), condition(corev1.PodReadyToStartContainers, time.Second), condition(corev1.PodInitialized, time.Second),
				condition(corev1.ContainersReady, 2*time.Second), condition(corev1.PodReady, 2*time.Second),
			},
			HostIP: fmt.Sprintf("127.0.1.%d", node+1), HostIPs: []corev1.HostIP{{IP: fmt.Sprintf("127.0.1.%d", node+1)}},
			PodIP: fmt.Sprintf("10.244.%d.%d", i/250, i%250+2), PodIPs: []corev1.PodIP{{IP: fmt.Sprintf("10.244.%d.%d", i/250, i%250+2)}},
			StartTime: new(at(time.Second)),
			ContainerStatuses: []corev1.ContainerStatus{{
				Name: "app", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: at(2 * time.Second)}},
				Ready: true, Image: image, ImageID: "sim://" + image, ContainerID: fmt.Sprintf("sim://%s/app", uid), Started: &yes,
			}},
			QOSClass: corev1.PodQOSBurstable,
		},
	}
}

// lean is pod decoded and transformed by Lean, checked by leanChecked.
func lean(t testing.TB, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	got, err := leanChecked(pod)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// leanChecked is pod decoded and transformed by Lean, or an error if the
// result is not equal, encoding and all, to the pod decoded and stripped
// of managedFields.
func leanChecked(pod *corev1.Pod) (*corev1.Pod, error) {
	data, err := pod.Marshal()
	if err != nil {
		return nil, err
	}
	want, in := &corev1.Pod{}, &corev1.Pod{}
	if err := want.Unmarshal(data); err != nil {
		return nil, err
	}
	if err := in.Unmarshal(data); err != nil {
		return nil, err
	}
	want.ManagedFields = nil
	obj, err := Lean(in)
	if err != nil {
		return nil, err
	}
	got := obj.(*corev1.Pod)
	if !apiequality.Semantic.DeepEqual(got, want) {
		return nil, fmt.Errorf("%s: transformed pod differs from the decoded one:\n got %v\nwant %v", pod.Name, got, want)
	}
	gotBytes, err := got.Marshal()
	if err != nil {
		return nil, err
	}
	wantBytes, err := want.Marshal()
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(gotBytes, wantBytes) {
		return nil, fmt.Errorf("%s: transformed pod encodes differently from the decoded one", pod.Name)
	}
	return got, nil
}

// sameMap reports whether a and b are one map.
func sameMap[M ~map[K]V, K comparable, V any](a, b M) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// sameString reports whether a and b are one string in memory.
func sameString[S ~string](a, b S) bool {
	return unsafe.StringData(string(a)) == unsafe.StringData(string(b))
}

// withoutServiceAccount is pod without the service account volume and its
// mounts, as when automountServiceAccountToken is false.
func withoutServiceAccount(pod *corev1.Pod) *corev1.Pod {
	pod.Spec.Volumes = nil
	for i := range pod.Spec.Containers {
		pod.Spec.Containers[i].VolumeMounts = nil
	}
	return pod
}

func TestSharePodPartsSharesWhatSiblingsHaveInCommon(t *testing.T) {
	resetHeld()
	// Pods 0 and 2 come from template 0, pod 1 from template 1, which
	// asks for 11m of CPU instead of 10m and runs another image; the
	// three differ in name, node, addresses and times.
	a, b, other := lean(t, templatePod(0, 2)), lean(t, templatePod(2, 2)), lean(t, templatePod(1, 2))
	ac, bc, oc := &a.Spec.Containers[0], &b.Spec.Containers[0], &other.Spec.Containers[0]

	shared := []struct {
		what string
		same bool
	}{
		{"labels", sameMap(a.Labels, b.Labels)},
		{"owner references", &a.OwnerReferences[0] == &b.OwnerReferences[0]},
		{"namespace", sameString(a.Namespace, b.Namespace)},
		{"generateName", sameString(a.GenerateName, b.GenerateName)},
		{"requests", sameMap(ac.Resources.Requests, bc.Resources.Requests)},
		{"limits", sameMap(ac.Resources.Limits, bc.Resources.Limits)},
		{"ports", &ac.Ports[0] == &bc.Ports[0]},
		{"env", &ac.Env[0] == &bc.Env[0]},
		{"image", sameString(ac.Image, bc.Image)},
		{"mount path", sameString(ac.VolumeMounts[0].MountPath, bc.VolumeMounts[0].MountPath)},
		{"projected volume", a.Spec.Volumes[0].Projected == b.Spec.Volumes[0].Projected},
		{"tolerations", &a.Spec.Tolerations[0] == &b.Spec.Tolerations[0]},
		{"security context", a.Spec.SecurityContext == b.Spec.SecurityContext},
		{"scheduler name", sameString(a.Spec.SchedulerName, b.Spec.SchedulerName)},
		{"phase", sameString(a.Status.Phase, b.Status.Phase)},
		{"condition type", sameString(a.Status.Conditions[0].Type, b.Status.Conditions[0].Type)},
		{"container status image", sameString(a.Status.ContainerStatuses[0].ImageID, b.Status.ContainerStatuses[0].ImageID)},
		// Templates 0 and 1 have equal limits.
		{"limits of another template", sameMap(ac.Resources.Limits, oc.Resources.Limits)},
	}
	for _, s := range shared {
		if !s.same {
			t.Errorf("pods of one template do not share their %s", s.what)
		}
	}
	distinct := []struct {
		what string
		same bool
	}{
		// The containers mount the service account volume, whose name
		// differs from pod to pod: they cannot be shared whole.
		{"containers", ac == bc},
		{"volumes", &a.Spec.Volumes[0] == &b.Spec.Volumes[0]},
		{"conditions", &a.Status.Conditions[0] == &b.Status.Conditions[0]},
		{"requests of another template", sameMap(ac.Resources.Requests, oc.Resources.Requests)},
		{"labels of another template", sameMap(a.Labels, other.Labels)},
	}
	for _, d := range distinct {
		if d.same {
			t.Errorf("pods share their %s", d.what)
		}
	}
}

func TestSharePodPartsSharesEqualPartsOnly(t *testing.T) {
	resetHeld()
	// Without the service account volume, containers are shared whole.
	a := lean(t, withoutServiceAccount(templatePod(0, 2)))
	b := lean(t, withoutServiceAccount(templatePod(2, 2)))
	if &a.Spec.Containers[0] != &b.Spec.Containers[0] {
		t.Errorf("pods of one template without the service account volume do not share their containers")
	}

	// A pod whose container differs in one request shares neither the
	// containers nor the requests.
	moreMemory := withoutServiceAccount(templatePod(4, 2))
	moreMemory.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory] = resource.MustParse("17Mi")
	c := lean(t, moreMemory)
	if &c.Spec.Containers[0] == &a.Spec.Containers[0] {
		t.Errorf("a pod asking for 17Mi shares the containers of one asking for 16Mi")
	}
	if sameMap(c.Spec.Containers[0].Resources.Requests, a.Spec.Containers[0].Resources.Requests) {
		t.Errorf("a pod asking for 17Mi shares the requests of one asking for 16Mi")
	}

	// One field deep down: a toleration's seconds.
	longer := templatePod(6, 2)
	longer.Spec.Tolerations[1].TolerationSeconds = new(int64(301))
	d, e := lean(t, longer), lean(t, templatePod(8, 2))
	if &d.Spec.Tolerations[0] == &e.Spec.Tolerations[0] {
		t.Errorf("tolerations of 301s and 300s are shared")
	}

	// Conditions carry times: those of pods that started in the same
	// second are shared, others not.
	sameTimes := templatePod(10, 2)
	sameTimes.Status.Conditions = templatePod(8, 2).Status.Conditions
	if f := lean(t, sameTimes); &f.Status.Conditions[0] != &e.Status.Conditions[0] {
		t.Errorf("equal conditions are not shared")
	}
}

func TestSharePodPartsSharesAPodVersionWhole(t *testing.T) {
	resetHeld()
	// The same version, as it comes to the controller manager, the
	// scheduler and its kubelet: one object for the three.
	pod := templatePod(0, 1)
	first, second, third := lean(t, pod), lean(t, pod), lean(t, pod)
	if first != second || first != third {
		t.Errorf("three copies of one pod version are not one object")
	}
	// The next version is an object of its own that shares parts.
	pod.ResourceVersion = "next"
	next := lean(t, pod)
	if next == first {
		t.Fatal("a new version is the old one")
	}
	if next.ResourceVersion != "next" || &next.Spec.Tolerations[0] != &first.Spec.Tolerations[0] {
		t.Errorf("the new version: resourceVersion %q, shares tolerations: %v", next.ResourceVersion, &next.Spec.Tolerations[0] == &first.Spec.Tolerations[0])
	}
}

func TestSharePodPartsLeavesOtherObjectsAlone(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", Labels: map[string]string{"app": "web"}}, Data: map[string]string{"k": "v"}}
	want := cm.DeepCopy()
	got, err := SharePodParts(cm)
	if err != nil {
		t.Fatal(err)
	}
	if got != any(cm) || !reflect.DeepEqual(cm, want) {
		t.Errorf("SharePodParts changed a ConfigMap: %v", got)
	}
}

// TestSharedPartsStayBounded brings many times more distinct parts than
// the tables keep, as pods of templates long gone would, and checks that
// every table stays within its bound, and that parts still in use stay.
func TestSharedPartsStayBounded(t *testing.T) {
	resetHeld()
	const distinct = 6 * partsPerGeneration // each with its own template: ~3 new strings apiece, more than the strings table keeps too
	inUse := lean(t, templatePod(0, distinct))
	for i := 1; i < distinct; i++ {
		lean(t, templatePod(i, distinct))
		if i%64 == 0 {
			// A pod of template 0 still comes now and then.
			if p := lean(t, templatePod(i*distinct, distinct)); !sameMap(p.Labels, inUse.Labels) {
				t.Fatalf("after %d other templates, template 0's labels are no longer shared", i)
			}
		}
	}
	for _, tab := range held.tables() {
		if n, bound := tab.len(), tab.bound(); n > bound {
			t.Errorf("%T holds %d parts; its bound is %d", tab, n, bound)
		}
	}
	if n := held.stringMaps.len(); n < partsPerGeneration {
		t.Errorf("the labels table holds %d maps; want it near its bound %d", n, held.stringMaps.bound())
	}
}

// TestSharePodPartsConcurrently transforms copies of the same pods from
// many goroutines at once, as every kubelet's informer and the controller
// manager's and scheduler's do: under the race detector this checks the
// tables' locking, and every result is still its pod.
func TestSharePodPartsConcurrently(t *testing.T) {
	resetHeld()
	const pods, informers = 200, 8
	var wg sync.WaitGroup
	for range informers {
		wg.Go(func() {
			for i := range pods {
				if _, err := leanChecked(templatePod(i, 10)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestLeanKeepsPodCachesEqualToAFreshList runs three pod informers with
// Lean against a real API server, as the controller manager, the
// scheduler and a kubelet (its node's pods only) do in one process, and
// checks that each cache holds exactly what a fresh list says, field for
// field, through creates, status updates, a label change that sets one pod
// apart from its siblings, deletes and an API server restart.
func TestLeanKeepsPodCachesEqualToAFreshList(t *testing.T) {
	resetHeld()
	e := startIT(t, testenv.Options{Server: apiserver.Config{ServiceAccountAdmission: true}})
	ctx := testCtx(t)
	pods := client.For[*corev1.Pod](e.rc)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "default"}}
	if _, err := client.For[*corev1.ServiceAccount](e.rc).Create(ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}

	const templates = 3
	next := 0
	create := func(n int) {
		t.Helper()
		for range n {
			want := templatePod(next, templates)
			next++
			in := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
				Namespace: e.ns, Name: want.Name, GenerateName: want.GenerateName,
				Labels: want.Labels, OwnerReferences: want.OwnerReferences,
			}, Spec: *want.Spec.DeepCopy()}
			// What admission sets: the service account volume, the
			// priority.
			in.Spec.Volumes, in.Spec.Priority, in.Spec.PreemptionPolicy = nil, nil, nil
			in.Spec.Containers[0].VolumeMounts = nil
			in.Spec.NodeName = fmt.Sprintf("node-%d", next%2)
			out, err := pods.Create(ctx, in)
			if err != nil {
				t.Fatal(err)
			}
			out.Status = want.Status
			if _, err := pods.UpdateStatus(ctx, out); err != nil {
				t.Fatal(err)
			}
		}
	}
	// churn: a later condition for two pods, a label of one's own for
	// another, one pod deleted, and new ones.
	churn := func(round int) {
		t.Helper()
		list, err := pods.List(ctx, e.ns, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i, p := range list.Items[:2] {
			p.Status.Conditions[4].LastTransitionTime = metav1.NewTime(time.Date(2026, 4, round, 0, 0, i, 0, time.UTC))
			if _, err := pods.UpdateStatus(ctx, p); err != nil {
				t.Fatal(err)
			}
		}
		patch := fmt.Appendf(nil, `{"metadata":{"labels":{"round":"%d"}}}`, round)
		if _, err := pods.Patch(ctx, e.ns, list.Items[2].Name, types.MergePatchType, patch); err != nil {
			t.Fatal(err)
		}
		if err := pods.Delete(ctx, e.ns, list.Items[3].Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		create(3)
	}
	create(9)

	type component struct {
		inf  *SharedInformer
		node string // "" for every pod
	}
	var components []component
	for _, node := range []string{"", "", "node-1"} {
		var tweak func(*metav1.ListOptions)
		if node != "" {
			tweak = func(o *metav1.ListOptions) { o.FieldSelector = "spec.nodeName=" + node }
		}
		inf := NewSharedInformer(NewListWatch(pods, e.ns, tweak), SharedInformerOptions{
			Name: "pods", Logger: testLogger(t), Reflector: fastReflector(), Transform: Lean,
		})
		runInformer(t, ctx, inf)
		components = append(components, component{inf, node})
	}

	// converged waits until every cache equals a fresh list, encoded.
	converged := func() {
		t.Helper()
		var diff []string
		waitUntil(t, 60*time.Second, "caches == a fresh list", func() bool {
			list, err := pods.List(ctx, e.ns, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			diff = diff[:0]
			for i, c := range components {
				want := map[string]string{}
				for _, p := range list.Items {
					if c.node == "" || p.Spec.NodeName == c.node {
						p.ManagedFields = nil
						data, err := p.Marshal()
						if err != nil {
							t.Fatal(err)
						}
						want[p.Name] = string(data)
					}
				}
				got := map[string]string{}
				for _, obj := range c.inf.GetIndexer().List() {
					data, err := obj.(*corev1.Pod).Marshal()
					if err != nil {
						t.Fatal(err)
					}
					got[obj.(*corev1.Pod).Name] = string(data)
				}
				for name := range want {
					if got[name] != want[name] {
						diff = append(diff, fmt.Sprintf("informer %d: %s", i, name))
					}
				}
				for name := range got {
					if _, ok := want[name]; !ok {
						diff = append(diff, fmt.Sprintf("informer %d: %s is gone", i, name))
					}
				}
			}
			return len(diff) == 0
		}, func() string { return fmt.Sprint(diff) })
	}
	converged()
	churn(1)
	converged()
	e.env.RestartServer()
	churn(2)
	converged()

	// And the caches share: the informers' copies of one pod are one
	// object, and siblings share their template's parts.
	all, kubelet := components[0].inf.GetIndexer(), components[2].inf.GetIndexer()
	var onNode []*corev1.Pod
	for _, obj := range kubelet.List() {
		pod := obj.(*corev1.Pod)
		if other, _, _ := all.GetByKey(e.ns + "/" + pod.Name); other != any(pod) {
			t.Errorf("the kubelet's %s is not the controller manager's", pod.Name)
		}
		onNode = append(onNode, pod)
	}
	if len(onNode) < 2 || &onNode[0].Spec.Tolerations[0] != &onNode[1].Spec.Tolerations[0] {
		t.Errorf("pods on node-1 do not share their tolerations")
	}
	if onNode[0].Spec.Volumes[0].Projected != onNode[1].Spec.Volumes[0].Projected {
		t.Errorf("pods on node-1 do not share their service account volume's source")
	}
}

// BenchmarkCachedPodBytes is the heap the process's informers hold for
// each pod: 10,000 pods of 100 templates, decoded from protobuf as a
// Reflector decodes them, transformed, and kept in a map as an informer's
// cache keeps them; by one informer, and by three (the controller
// manager's, the scheduler's and the pod's node's kubelet's, each
// decoding its own copy as the pod comes to it). It reports bytes and
// heap objects per pod, over all the informers, the tables of shared
// parts included.
func BenchmarkCachedPodBytes(b *testing.B) {
	const n, templates = 10000, 100
	wire := templatePodsWire(b, n, templates)
	for _, informers := range []int{1, 3} {
		for _, tc := range []struct {
			name      string
			transform TransformFunc
		}{
			{"StripManagedFields", StripManagedFields},
			{"Lean", Lean},
		} {
			b.Run(fmt.Sprintf("informers=%d/%s", informers, tc.name), func(b *testing.B) {
				var bytes, objects float64
				for b.Loop() {
					resetHeld()
					bytes, objects = heapHeld(n, func() any {
						caches := make([]map[string]any, informers)
						for i := range caches {
							caches[i] = make(map[string]any, n)
						}
						for _, data := range wire {
							for _, cache := range caches {
								pod := &corev1.Pod{}
								if err := pod.Unmarshal(data); err != nil {
									b.Fatal(err)
								}
								obj, err := tc.transform(pod)
								if err != nil {
									b.Fatal(err)
								}
								cache[pod.Namespace+"/"+pod.Name] = obj
							}
						}
						return caches
					})
				}
				b.ReportMetric(bytes, "B/pod")
				b.ReportMetric(objects, "objects/pod")
			})
		}
	}
}

// resetHeld empties every table of shared parts.
func resetHeld() {
	for _, t := range held.tables() {
		t.reset()
	}
}

// BenchmarkPodTransform is what an informer spends on one pod version it
// receives: decoding it, then the transform. StripManagedFields is the
// decoding alone, near enough. Lean/first is a pod version no informer of
// the process has had (the parts of its template are held); Lean/again is
// one another informer has had, as the scheduler and the kubelet get each
// pod after the controller manager (or in any other order).
func BenchmarkPodTransform(b *testing.B) {
	const n, templates = 10000, 100
	wire := templatePodsWire(b, n, templates)
	run := func(b *testing.B, transform TransformFunc, pods int) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			pod := &corev1.Pod{}
			if err := pod.Unmarshal(wire[i%pods]); err != nil {
				b.Fatal(err)
			}
			if _, err := transform(pod); err != nil {
				b.Fatal(err)
			}
			i++
		}
	}
	b.Run("StripManagedFields", func(b *testing.B) { run(b, StripManagedFields, n) })
	b.Run("Lean/first", func(b *testing.B) {
		// Ten thousand versions, far more than the table of whole pods
		// keeps: each comes as new.
		resetHeld()
		run(b, Lean, n)
	})
	b.Run("Lean/again", func(b *testing.B) {
		// As many versions as the table of whole pods surely keeps.
		resetHeld()
		run(b, Lean, podsPerGeneration)
	})
}

// templatePodsWire is n pods of the given number of templates (see
// templatePod) as the API server sends them, in protobuf.
func templatePodsWire(b *testing.B, n, templates int) [][]byte {
	wire := make([][]byte, n)
	for i := range wire {
		var err error
		if wire[i], err = templatePod(i, templates).Marshal(); err != nil {
			b.Fatal(err)
		}
	}
	return wire
}
