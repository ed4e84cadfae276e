package apiserver_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/apiserver"
	"github.com/minictl/minictl/internal/testenv"
)

const applyType = "application/apply-patch+yaml"

// entries returns an object's managedFields as "manager/operation/subresource"
// strings, in order, and each entry's fields as JSON by that key.
func entries(t testing.TB, mf []metav1.ManagedFieldsEntry) ([]string, map[string]string) {
	t.Helper()
	var keys []string
	fields := map[string]string{}
	for _, e := range mf {
		k := e.Manager + "/" + string(e.Operation) + "/" + e.Subresource
		keys = append(keys, k)
		if e.FieldsType != "FieldsV1" || e.FieldsV1 == nil || e.Time == nil || e.APIVersion == "" {
			t.Errorf("entry %s: fieldsType %q, time %v, apiVersion %q: not kube's shape", k, e.FieldsType, e.Time, e.APIVersion)
		}
		if e.FieldsV1 != nil {
			fields[k] = string(e.FieldsV1.Raw)
		}
	}
	return keys, fields
}

// Create, update and every patch type record an Update entry for the
// writer named by ?fieldManager=, else by its User-Agent; what each owns
// is what it changed.
func TestWritesRecordManagedFields(t *testing.T) {
	env := testenv.Start(t)
	cm := create[corev1.ConfigMap](t, env, cmPath("default", "")+"?fieldManager=creator",
		configMap("cm", map[string]string{"a": "1"}, map[string]string{"k": "v"}))
	keys, fields := entries(t, cm.ManagedFields)
	if !slices.Equal(keys, []string{"creator/Update/"}) {
		t.Fatalf("after create: entries %v", keys)
	}
	if f := fields["creator/Update/"]; !strings.Contains(f, `"f:data":{".":{},"f:k":{}}`) || !strings.Contains(f, `"f:labels":{".":{},"f:a":{}}`) {
		t.Errorf("creator owns %s", f)
	}

	cm.Data["k2"] = "v2"
	cm = update[corev1.ConfigMap](t, env, cmPath("default", "cm")+"?fieldManager=updater", cm)
	cm = patch[corev1.ConfigMap](t, env, cmPath("default", "cm")+"?fieldManager=merger", mergePatch, `{"data":{"k3":"v3"}}`)
	cm = patch[corev1.ConfigMap](t, env, cmPath("default", "cm")+"?fieldManager=jsonpatcher", jsonPatch, `[{"op":"add","path":"/data/k4","value":"v4"}]`)
	cm = patch[corev1.ConfigMap](t, env, cmPath("default", "cm"), strategicPtch, `{"data":{"k5":"v5"}}`)
	keys, fields = entries(t, cm.ManagedFields)
	// Sorted as kube-apiserver sorts them: by time, then manager.
	want := []string{"Go-http-client/Update/", "creator/Update/", "jsonpatcher/Update/", "merger/Update/", "updater/Update/"}
	if slices.Sort(keys); !slices.Equal(keys, want) {
		t.Fatalf("entries %v, want %v", keys, want)
	}
	for k, f := range map[string]string{"updater/Update/": "k2", "merger/Update/": "k3", "jsonpatcher/Update/": "k4", "Go-http-client/Update/": "k5"} {
		if fields[k] != `{"f:data":{"f:`+f+`":{}}}` {
			t.Errorf("%s owns %s, want data.%s", k, fields[k], f)
		}
	}

	// GET serves them; an update that sends an empty list resets them.
	got := get[corev1.ConfigMap](t, env, cmPath("default", "cm"))
	if len(got.ManagedFields) != len(want) {
		t.Errorf("GET shows %d entries, want %d", len(got.ManagedFields), len(want))
	}
	got.ManagedFields = nil
	body, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	body = []byte(strings.Replace(string(body), `"metadata":{`, `"metadata":{"managedFields":[],`, 1))
	got = call[corev1.ConfigMap](t, env, http.MethodPut, cmPath("default", "cm")+"?fieldManager=resetter", jsonType, body, http.StatusOK)
	if keys, _ := entries(t, got.ManagedFields); len(keys) != 0 {
		t.Errorf("after a reset: entries %v, want none", keys)
	}

	// A status write is recorded with its subresource.
	p := create[corev1.Pod](t, env, podPath("default", "")+"?fieldManager=creator", pod("p", "", nil))
	p.Status.Message = "hello"
	p = call[corev1.Pod](t, env, http.MethodPut, podPath("default", "p")+"/status?fieldManager=kubelet", jsonType, p, http.StatusOK)
	keys, fields = entries(t, p.ManagedFields)
	if !slices.Equal(keys, []string{"creator/Update/", "kubelet/Update/status"}) || !strings.Contains(fields["kubelet/Update/status"], `"f:message"`) {
		t.Errorf("after a status write: entries %v, kubelet owns %s", keys, fields["kubelet/Update/status"])
	}

	// A scale write owns spec.replicas, under the scale subresource.
	create[appsv1.Deployment](t, env, deployPath("default", "")+"?fieldManager=creator", deployment("web", 1))
	patch[map[string]any](t, env, deployPath("default", "web")+"/scale?fieldManager=hpa", mergePatch, `{"spec":{"replicas":3}}`)
	d := get[appsv1.Deployment](t, env, deployPath("default", "web"))
	keys, fields = entries(t, d.ManagedFields)
	if !slices.Equal(keys, []string{"creator/Update/", "hpa/Update/scale"}) || fields["hpa/Update/scale"] != `{"f:spec":{"f:replicas":{}}}` {
		t.Errorf("after a scale write: entries %v, hpa owns %s", keys, fields["hpa/Update/scale"])
	}
}

const webApplied = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {tier: front}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: app
        image: nginx:1.27
`

// Server-side apply creates, changes nothing when applied again, conflicts
// with another manager's fields unless forced, and removes what the
// applier stops naming.
func TestServerSideApply(t *testing.T) {
	env := testenv.Start(t)
	path := deployPath("default", "web")

	var d appsv1.Deployment
	do(t, env, http.MethodPatch, path+"?fieldManager=ops", applyType, webApplied).want(t, http.StatusCreated).into(t, &d)
	keys, _ := entries(t, d.ManagedFields)
	if !slices.Equal(keys, []string{"ops/Apply/"}) || *d.Spec.Replicas != 2 || d.Spec.Template.Spec.Containers[0].Image != "nginx:1.27" {
		t.Fatalf("created: entries %v, replicas %d", keys, *d.Spec.Replicas)
	}

	again := patch[appsv1.Deployment](t, env, path+"?fieldManager=ops", applyType, webApplied)
	if again.ResourceVersion != d.ResourceVersion {
		t.Errorf("an unchanged apply wrote: resourceVersion %s → %s", d.ResourceVersion, again.ResourceVersion)
	}

	// Another writer changes replicas; applying the old value conflicts.
	patch[appsv1.Deployment](t, env, path+"?fieldManager=kubectl-client-side-apply", mergePatch, `{"spec":{"replicas":5}}`)
	st := do(t, env, http.MethodPatch, path+"?fieldManager=ops", applyType, webApplied).wantStatus(t, http.StatusConflict, metav1.StatusReasonConflict)
	wantMsg := `Apply failed with 1 conflict: conflict with "kubectl-client-side-apply" using apps/v1: .spec.replicas`
	if st.Message != wantMsg {
		t.Errorf("conflict message\n%s\nwant\n%s", st.Message, wantMsg)
	}
	if st.Details == nil || len(st.Details.Causes) != 1 || st.Details.Causes[0].Field != ".spec.replicas" ||
		st.Details.Causes[0].Message != `conflict with "kubectl-client-side-apply" using apps/v1` || st.Details.Causes[0].Type != metav1.CauseTypeFieldManagerConflict {
		t.Errorf("conflict details %+v", st.Details)
	}

	// Force takes the field over.
	forced := patch[appsv1.Deployment](t, env, path+"?fieldManager=ops&force=true", applyType, webApplied)
	_, fields := entries(t, forced.ManagedFields)
	if *forced.Spec.Replicas != 2 || !strings.Contains(fields["ops/Apply/"], `"f:replicas"`) ||
		strings.Contains(fields["kubectl-client-side-apply/Update/"], `"f:replicas"`) {
		t.Errorf("forced: replicas %d, fields %v", *forced.Spec.Replicas, fields)
	}

	// The applier stops naming the label: it is removed. A label another
	// manager also set stays.
	patch[appsv1.Deployment](t, env, path+"?fieldManager=labeler", mergePatch, `{"metadata":{"labels":{"owner":"team"}}}`)
	withOwner := strings.Replace(webApplied, "labels: {tier: front}", "labels: {owner: team}", 1)
	shrunk := patch[appsv1.Deployment](t, env, path+"?fieldManager=ops", applyType, withOwner)
	if _, ok := shrunk.Labels["tier"]; ok || shrunk.Labels["owner"] != "team" {
		t.Errorf("labels after the applier dropped tier: %v", shrunk.Labels)
	}
	noLabels := strings.Replace(webApplied, "  labels: {tier: front}\n", "", 1)
	shrunk = patch[appsv1.Deployment](t, env, path+"?fieldManager=ops", applyType, noLabels)
	if shrunk.Labels["owner"] != "team" {
		t.Errorf("a label the labeler also owns went with the applier's: %v", shrunk.Labels)
	}
}

// The options and the dry run of an apply behave as kube-apiserver's.
func TestServerSideApplyOptions(t *testing.T) {
	env := testenv.Start(t)
	path := deployPath("default", "web")

	st := do(t, env, http.MethodPatch, path, applyType, webApplied).wantStatus(t, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid)
	if want := `PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch`; st.Message != want {
		t.Errorf("no fieldManager: %s\nwant %s", st.Message, want)
	}
	create[corev1.ConfigMap](t, env, cmPath("default", ""), configMap("cm", nil, nil))
	st = do(t, env, http.MethodPatch, cmPath("default", "cm")+"?force=true", mergePatch, `{}`).wantStatus(t, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid)
	if want := `PatchOptions.meta.k8s.io "" is invalid: force: Forbidden: may not be specified for non-apply patch`; st.Message != want {
		t.Errorf("force on a merge patch: %s\nwant %s", st.Message, want)
	}

	before := revision(t, env)
	var d appsv1.Deployment
	do(t, env, http.MethodPatch, path+"?fieldManager=ops&dryRun=All", applyType, webApplied).want(t, http.StatusCreated).into(t, &d)
	if d.Name != "web" || len(d.ManagedFields) != 1 {
		t.Errorf("dry-run apply answered %+v", d.ObjectMeta)
	}
	if after := revision(t, env); after != before {
		t.Errorf("a dry-run apply wrote: revision %d → %d", before, after)
	}
	do(t, env, http.MethodGet, path, "", nil).wantStatus(t, http.StatusNotFound, metav1.StatusReasonNotFound)

	// An apply through the status subresource owns status, recorded so.
	do(t, env, http.MethodPatch, path+"?fieldManager=ops", applyType, webApplied).want(t, http.StatusCreated)
	status := "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nstatus: {observedGeneration: 1}\n"
	d = *patch[appsv1.Deployment](t, env, path+"/status?fieldManager=controller", applyType, status)
	keys, fields := entries(t, d.ManagedFields)
	if slices.Sort(keys); !slices.Equal(keys, []string{"controller/Apply/status", "ops/Apply/"}) || !strings.Contains(fields["controller/Apply/status"], "f:observedGeneration") ||
		d.Status.ObservedGeneration != 1 {
		t.Errorf("status apply: entries %v, controller owns %s", keys, fields["controller/Apply/status"])
	}
}

// Container ports are keyed by number and protocol, as in Kubernetes: two
// ports of the same number with different protocols are two items, each
// owned on its own.
func TestApplyPortsKeyedByNumberAndProtocol(t *testing.T) {
	env := testenv.Start(t)
	dns := `apiVersion: v1
kind: Pod
metadata: {name: dns}
spec:
  containers:
  - name: dns
    image: coredns:1.11
    ports:
    - {containerPort: 53, protocol: TCP, name: dns-tcp}
    - {containerPort: 53, protocol: UDP, name: dns}
`
	do(t, env, http.MethodPatch, podPath("default", "dns")+"?fieldManager=ops", applyType, dns).want(t, http.StatusCreated)
	p := get[corev1.Pod](t, env, podPath("default", "dns"))
	if n := len(p.Spec.Containers[0].Ports); n != 2 {
		t.Fatalf("ports %+v, want 2", p.Spec.Containers[0].Ports)
	}
	_, fields := entries(t, p.ManagedFields)
	for _, key := range []string{`"k:{\"containerPort\":53,\"protocol\":\"TCP\"}"`, `"k:{\"containerPort\":53,\"protocol\":\"UDP\"}"`} {
		if !strings.Contains(fields["ops/Apply/"], key) {
			t.Errorf("ops owns %s; want the item %s", fields["ops/Apply/"], key)
		}
	}
	// In a Deployment's template, dropping the UDP port removes only it.
	dep := strings.ReplaceAll(webApplied, "        image: nginx:1.27\n", "        image: nginx:1.27\n"+
		"        ports:\n        - {containerPort: 53, protocol: TCP}\n        - {containerPort: 53, protocol: UDP}\n")
	do(t, env, http.MethodPatch, deployPath("default", "web")+"?fieldManager=ops", applyType, dep).want(t, http.StatusCreated)
	tcpOnly := strings.Replace(dep, "        - {containerPort: 53, protocol: UDP}\n", "", 1)
	d := patch[appsv1.Deployment](t, env, deployPath("default", "web")+"?fieldManager=ops", applyType, tcpOnly)
	if ports := d.Spec.Template.Spec.Containers[0].Ports; len(ports) != 1 || ports[0].Protocol != corev1.ProtocolTCP {
		t.Errorf("ports after dropping UDP: %+v", ports)
	}

	// A port applied without its protocol is the TCP one (the key's
	// default), whatever another writer did to the object.
	svc := "apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec:\n  selector: {app: web}\n  ports:\n  - {port: 80, targetPort: 80}\n"
	do(t, env, http.MethodPatch, "/api/v1/namespaces/default/services/web?fieldManager=ops", applyType, svc).want(t, http.StatusCreated)
	patch[corev1.Service](t, env, "/api/v1/namespaces/default/services/web?fieldManager=labeler", mergePatch, `{"metadata":{"labels":{"a":"b"}}}`)
	s := patch[corev1.Service](t, env, "/api/v1/namespaces/default/services/web?fieldManager=ops", applyType, svc)
	if len(s.Spec.Ports) != 1 || s.Spec.Ports[0].Protocol != corev1.ProtocolTCP {
		t.Errorf("service ports after applying again: %+v", s.Spec.Ports)
	}
}

// A custom kind with no Go type and no converter is applied with a
// deduced type: every field owned, lists whole.
func TestApplyToUnstructuredKind(t *testing.T) {
	env := testenv.StartWith(t, testenv.Options{Server: apiserver.Config{Resources: api.Resources().With(testenv.Widgets())}})
	path := "/apis/example.com/v1/namespaces/default/widgets/w1"
	w := "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w1}\nspec: {size: 3, colours: [red]}\n"
	var got unstructured.Unstructured
	do(t, env, http.MethodPatch, path+"?fieldManager=ops", applyType, w).want(t, http.StatusCreated).into(t, &got)
	keys, fields := entries(t, got.GetManagedFields())
	if !slices.Equal(keys, []string{"ops/Apply/"}) || !strings.Contains(fields["ops/Apply/"], `"f:size"`) {
		t.Fatalf("entries %v, fields %v", keys, fields)
	}
	patch[map[string]any](t, env, path+"?fieldManager=other", mergePatch, `{"spec":{"size":4}}`)
	st := do(t, env, http.MethodPatch, path+"?fieldManager=ops", applyType, w).wantStatus(t, http.StatusConflict, metav1.StatusReasonConflict)
	if want := `Apply failed with 1 conflict: conflict with "other" using example.com/v1: .spec.size`; st.Message != want {
		t.Errorf("conflict: %s\nwant %s", st.Message, want)
	}
	out := patch[map[string]any](t, env, path+"?fieldManager=ops&force=true", applyType, w)
	data, _ := json.Marshal((*out)["spec"])
	if string(data) != `{"colours":["red"],"size":3}` {
		t.Errorf("after force: spec %s", data)
	}
}

// An object client-side kubectl apply wrote moves to server-side apply as
// in Kubernetes: kubectl's server-side apply does not conflict with the
// fields its last-applied-configuration annotation names, and keeps that
// annotation in step with what it applies.
func TestServerSideApplyKeepsLastApplied(t *testing.T) {
	env := testenv.Start(t)
	const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"
	cm := configMap("cm", nil, map[string]string{"k": "old"})
	cm.Annotations = map[string]string{lastApplied: `{"apiVersion":"v1","data":{"k":"old"},"kind":"ConfigMap","metadata":{"name":"cm","namespace":"default"}}`}
	create[corev1.ConfigMap](t, env, cmPath("default", "")+"?fieldManager=kubectl-client-side-apply", cm)

	applied := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm, namespace: default}\ndata: {k: new}\n"
	got := patch[corev1.ConfigMap](t, env, cmPath("default", "cm")+"?fieldManager=kubectl", applyType, applied)
	if got.Data["k"] != "new" || !strings.Contains(got.Annotations[lastApplied], `"k":"new"`) {
		t.Errorf("after kubectl's server-side apply: data %v, last applied %s", got.Data, got.Annotations[lastApplied])
	}
}
