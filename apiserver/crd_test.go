package apiserver_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/apiserver"
	"github.com/minictl/minictl/internal/testenv"
	"github.com/minictl/minictl/store"
)

const crdsPath = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"

// widgetCRD is a definition as kubectl sends it: widgets.example.com,
// namespaced, served at v1 (stored) and v2, with status and scale
// subresources, printer columns and a selectable field.
func widgetCRD() map[string]any {
	schema := map[string]any{"openAPIV3Schema": map[string]any{
		"type": "object",
		"properties": map[string]any{
			"spec": map[string]any{"type": "object", "properties": map[string]any{
				"replicas": map[string]any{"type": "integer"},
				"color":    map[string]any{"type": "string"},
				"selector": map[string]any{"type": "string"},
			}},
			"status": map[string]any{"type": "object", "properties": map[string]any{
				"replicas": map[string]any{"type": "integer"},
				"phase":    map[string]any{"type": "string"},
			}},
		},
	}}
	version := func(name string, storage bool) map[string]any {
		return map[string]any{
			"name": name, "served": true, "storage": storage, "schema": schema,
			"subresources": map[string]any{
				"status": map[string]any{},
				"scale":  map[string]any{"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas", "labelSelectorPath": ".spec.selector"},
			},
			"additionalPrinterColumns": []any{
				map[string]any{"name": "Color", "type": "string", "jsonPath": ".spec.color"},
				map[string]any{"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
				map[string]any{"name": "Phase", "type": "string", "jsonPath": ".status.phase", "priority": 1},
				map[string]any{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
			},
			"selectableFields": []any{map[string]any{"jsonPath": ".spec.color"}},
		}
	}
	return map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "widgets.example.com"},
		"spec": map[string]any{
			"group": "example.com", "scope": "Namespaced",
			"names": map[string]any{
				"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList",
				"shortNames": []any{"wd"}, "categories": []any{"all"},
			},
			"versions": []any{version("v1", true), version("v2", false)},
		},
	}
}

// createCRD creates a definition and waits until it is Established.
func createCRD(t testing.TB, env *testenv.Env, crd map[string]any) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	created := create[apiextensionsv1.CustomResourceDefinition](t, env, crdsPath, crd)
	return waitCRD(t, env, created.Name, apiextensionsv1.Established, apiextensionsv1.ConditionTrue)
}

// waitCRD waits until the definition's condition has status.
func waitCRD(t testing.TB, env *testenv.Env, name string, typ apiextensionsv1.CustomResourceDefinitionConditionType, status apiextensionsv1.ConditionStatus) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	var crd apiextensionsv1.CustomResourceDefinition
	eventually(t, fmt.Sprintf("%s %s=%s", name, typ, status), func() (bool, string) {
		do(t, env, http.MethodGet, crdsPath+"/"+name, "", nil).want(t, http.StatusOK).into(t, &crd)
		c := condition(&crd, typ)
		return c != nil && c.Status == status, fmt.Sprintf("%+v", crd.Status)
	})
	return &crd
}

func condition(crd *apiextensionsv1.CustomResourceDefinition, typ apiextensionsv1.CustomResourceDefinitionConditionType) *apiextensionsv1.CustomResourceDefinitionCondition {
	for i := range crd.Status.Conditions {
		if crd.Status.Conditions[i].Type == typ {
			return &crd.Status.Conditions[i]
		}
	}
	return nil
}

func widget(name string, replicas int64, color string, labels map[string]any) map[string]any {
	meta := map[string]any{"name": name}
	if labels != nil {
		meta["labels"] = labels
	}
	return map[string]any{
		"apiVersion": "example.com/v1", "kind": "Widget", "metadata": meta,
		"spec": map[string]any{"replicas": replicas, "color": color, "selector": "app=" + name},
	}
}

const widgetsV1 = "/apis/example.com/v1/namespaces/default/widgets"

// A definition is named, established and served: its objects at every
// served version, stored once in the storage version.
func TestCustomResourceDefinitionIsEstablishedAndServed(t *testing.T) {
	env := testenv.Start(t)
	do(t, env, http.MethodGet, widgetsV1, "", nil).wantStatus(t, http.StatusNotFound, metav1.StatusReasonNotFound)

	crd := createCRD(t, env, widgetCRD())
	if c := condition(crd, apiextensionsv1.NamesAccepted); c == nil || c.Status != apiextensionsv1.ConditionTrue || c.Reason != "NoConflicts" {
		t.Errorf("NamesAccepted = %+v, want True NoConflicts", c)
	}
	if c := condition(crd, apiextensionsv1.Established); c.Reason != "InitialNamesAccepted" {
		t.Errorf("Established reason = %q, want InitialNamesAccepted", c.Reason)
	}
	if n := crd.Status.AcceptedNames; n.Plural != "widgets" || n.Kind != "Widget" || n.ListKind != "WidgetList" || !slices.Equal(n.ShortNames, []string{"wd"}) {
		t.Errorf("acceptedNames = %+v", n)
	}
	if !slices.Equal(crd.Status.StoredVersions, []string{"v1"}) {
		t.Errorf("storedVersions = %v, want [v1]", crd.Status.StoredVersions)
	}
	// The cleanup finalizer comes with the delete, as in kube-apiserver.
	if slices.Contains(crd.Finalizers, api.CustomResourceCleanupFinalizer) || crd.Generation != 1 {
		t.Errorf("finalizers %v generation %d, want none and 1", crd.Finalizers, crd.Generation)
	}

	created := create[unstructured.Unstructured](t, env, widgetsV1, widget("w1", 2, "red", nil))
	if created.GetGeneration() != 1 || created.GetUID() == "" {
		t.Errorf("created generation %d uid %q", created.GetGeneration(), created.GetUID())
	}
	v2 := get[unstructured.Unstructured](t, env, "/apis/example.com/v2/namespaces/default/widgets/w1")
	if v2.GetAPIVersion() != "example.com/v2" || v2.GetResourceVersion() != created.GetResourceVersion() {
		t.Errorf("read at v2: apiVersion %q rv %q, want example.com/v2 at %s", v2.GetAPIVersion(), v2.GetResourceVersion(), created.GetResourceVersion())
	}
	// Written at v2, stored at v1.
	do(t, env, http.MethodPost, "/apis/example.com/v2/namespaces/default/widgets", jsonType,
		strings.Replace(mustJSON(t, widget("w2", 1, "blue", nil)), `"example.com/v1"`, `"example.com/v2"`, 1)).want(t, http.StatusCreated)
	kv, err := env.Store.Get(t.Context(), "/registry/example.com/widgets/default/w2")
	if err != nil {
		t.Fatalf("etcd get: %v", err)
	}
	if !strings.Contains(string(kv.Value), `"apiVersion":"example.com/v1"`) {
		t.Errorf("etcd holds %s, want apiVersion example.com/v1", kv.Value)
	}

	var list metav1.APIResourceList
	do(t, env, http.MethodGet, "/apis/example.com/v1", "", nil).want(t, http.StatusOK).into(t, &list)
	var got []string
	for _, r := range list.APIResources {
		got = append(got, r.Name)
	}
	if !slices.Equal(got, []string{"widgets", "widgets/status", "widgets/scale"}) {
		t.Errorf("discovery of example.com/v1 = %v", got)
	}
	var groups metav1.APIGroupList
	do(t, env, http.MethodGet, "/apis", "", nil).want(t, http.StatusOK).into(t, &groups)
	if last := groups.Groups[len(groups.Groups)-1]; last.Name != "example.com" || len(last.Versions) != 2 || last.PreferredVersion.Version != "v2" {
		t.Errorf("the last group of /apis = %+v, want example.com with two versions, v2 preferred", last)
	}
}

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Custom objects go through every generic path built-ins do.
func TestCustomObjectsGenericPaths(t *testing.T) {
	env := testenv.Start(t)
	createCRD(t, env, widgetCRD())

	w := watch(t, env, widgetsV1+"?watch=true&allowWatchBookmarks=true")
	for i, color := range []string{"red", "red", "blue"} {
		create[unstructured.Unstructured](t, env, widgetsV1, widget(fmt.Sprintf("w%d", i), 1, color, map[string]any{"tier": color}))
	}
	w.expect(t, "ADDED w0", "ADDED w1", "ADDED w2")

	var l unstructured.UnstructuredList
	do(t, env, http.MethodGet, widgetsV1+"?labelSelector=tier%3Dred", "", nil).want(t, http.StatusOK).into(t, &l)
	if len(l.Items) != 2 || l.GetKind() != "WidgetList" {
		t.Errorf("labelSelector tier=red: %d items, kind %q", len(l.Items), l.GetKind())
	}
	do(t, env, http.MethodGet, widgetsV1+"?fieldSelector=spec.color%3Dblue", "", nil).want(t, http.StatusOK).into(t, &l)
	if len(l.Items) != 1 || l.Items[0].GetName() != "w2" {
		t.Errorf("fieldSelector spec.color=blue: %v", l.Items)
	}
	do(t, env, http.MethodGet, widgetsV1+"?fieldSelector=spec.size%3D1", "", nil).wantStatus(t, http.StatusBadRequest, metav1.StatusReasonBadRequest)

	do(t, env, http.MethodGet, widgetsV1+"?limit=2", "", nil).want(t, http.StatusOK).into(t, &l)
	if len(l.Items) != 2 || l.GetContinue() == "" {
		t.Fatalf("limit=2: %d items, continue %q", len(l.Items), l.GetContinue())
	}
	do(t, env, http.MethodGet, widgetsV1+"?limit=2&continue="+l.GetContinue(), "", nil).want(t, http.StatusOK).into(t, &l)
	if len(l.Items) != 1 || l.GetContinue() != "" {
		t.Errorf("second page: %d items, continue %q", len(l.Items), l.GetContinue())
	}

	do(t, env, http.MethodPost, widgetsV1+"?dryRun=All", jsonType, widget("dry", 1, "red", nil)).want(t, http.StatusCreated)
	do(t, env, http.MethodGet, widgetsV1+"/dry", "", nil).wantStatus(t, http.StatusNotFound, metav1.StatusReasonNotFound)

	// A finalizer holds an object being deleted; removing it lets it go.
	held := widget("held", 1, "green", nil)
	held["metadata"].(map[string]any)["finalizers"] = []any{"example.com/hold"}
	create[unstructured.Unstructured](t, env, widgetsV1, held)
	w.expect(t, "ADDED held")
	do(t, env, http.MethodDelete, widgetsV1+"/held", "", nil).want(t, http.StatusOK)
	if got := get[unstructured.Unstructured](t, env, widgetsV1+"/held"); got.GetDeletionTimestamp() == nil {
		t.Errorf("held has no deletionTimestamp")
	}
	patch[unstructured.Unstructured](t, env, widgetsV1+"/held", mergePatch, `{"metadata":{"finalizers":null}}`)
	do(t, env, http.MethodGet, widgetsV1+"/held", "", nil).wantStatus(t, http.StatusNotFound, metav1.StatusReasonNotFound)
	w.expect(t, "MODIFIED held", "MODIFIED held", "DELETED held")

	// Resume a watch from an old resourceVersion.
	first := get[unstructured.Unstructured](t, env, widgetsV1+"/w0")
	do(t, env, http.MethodDelete, widgetsV1+"?labelSelector=tier%3Dred", "", nil).want(t, http.StatusOK)
	deletedReds(t, w)
	resumed := watch(t, env, widgetsV1+"?watch=true&resourceVersion="+first.GetResourceVersion())
	resumed.expect(t, "ADDED w1", "ADDED w2", "ADDED held", "MODIFIED held", "MODIFIED held", "DELETED held")
	deletedReds(t, resumed)
	do(t, env, http.MethodGet, widgetsV1, "", nil).want(t, http.StatusOK).into(t, &l)
	if len(l.Items) != 1 {
		t.Errorf("after deletecollection: %d items, want 1", len(l.Items))
	}
}

// deletedReds reads the two deletions of a deletecollection, in either
// order.
func deletedReds(t *testing.T, w *stream) { expectAnyOrder(t, w, "DELETED w0", "DELETED w1") }

// expectAnyOrder reads len(want) events (bookmarks skipped), each
// "TYPE name", in any order.
func expectAnyOrder(t *testing.T, w *stream, want ...string) {
	t.Helper()
	var got []string
	for range want {
		ev := w.nextNonBookmark(t)
		got = append(got, ev.Type+" "+ev.meta.Name)
	}
	slices.Sort(got)
	want = slices.Sorted(slices.Values(want))
	if !slices.Equal(got, want) {
		t.Errorf("events = %v, want %v in any order", got, want)
	}
}

// With a status subresource, the main resource cannot write status, the
// status subresource writes only status, and the generation moves only on
// spec changes; the scale subresource reads and writes the definition's
// paths.
func TestCustomObjectStatusAndScale(t *testing.T) {
	env := testenv.Start(t)
	createCRD(t, env, widgetCRD())
	obj := widget("w", 2, "red", nil)
	obj["status"] = map[string]any{"phase": "Set by the client"}
	created := create[unstructured.Unstructured](t, env, widgetsV1, obj)
	if _, ok := created.Object["status"]; ok {
		t.Errorf("create kept status: %v", created.Object["status"])
	}
	st := patch[unstructured.Unstructured](t, env, widgetsV1+"/w/status", mergePatch,
		`{"status":{"phase":"Running","replicas":2},"spec":{"color":"blue"},"metadata":{"labels":{"by":"status"},"annotations":{"by":"status"}}}`)
	if phase, _, _ := unstructured.NestedString(st.Object, "status", "phase"); phase != "Running" {
		t.Errorf("status phase = %q", phase)
	}
	if color, _, _ := unstructured.NestedString(st.Object, "spec", "color"); color != "red" {
		t.Errorf("a status write changed spec.color to %q", color)
	}
	// Unlike most built-ins', a custom object's status write changes no
	// metadata, as kube-apiserver's custom resource status strategy has it;
	// only its managedFields entry is its own.
	stored := get[unstructured.Unstructured](t, env, widgetsV1+"/w")
	if stored.GetLabels()["by"] != "" || stored.GetAnnotations()["by"] != "" {
		t.Errorf("a status write changed the metadata: labels %v annotations %v", stored.GetLabels(), stored.GetAnnotations())
	}
	statusEntry := false
	for _, m := range stored.GetManagedFields() {
		statusEntry = statusEntry || m.Subresource == "status"
	}
	if !statusEntry {
		t.Errorf("managedFields %+v have no entry for the status write", stored.GetManagedFields())
	}
	if st.GetGeneration() != 1 {
		t.Errorf("generation after a status write = %d, want 1", st.GetGeneration())
	}
	main := patch[unstructured.Unstructured](t, env, widgetsV1+"/w", mergePatch, `{"status":{"phase":"Lost"},"metadata":{"labels":{"a":"b"}}}`)
	if phase, _, _ := unstructured.NestedString(main.Object, "status", "phase"); phase != "Running" || main.GetGeneration() != 1 {
		t.Errorf("main write: status.phase %q generation %d, want Running and 1", phase, main.GetGeneration())
	}
	main = patch[unstructured.Unstructured](t, env, widgetsV1+"/w", mergePatch, `{"spec":{"color":"green"}}`)
	if main.GetGeneration() != 2 {
		t.Errorf("generation after a spec change = %d, want 2", main.GetGeneration())
	}

	var sc struct {
		Kind string `json:"kind"`
		Spec struct {
			Replicas int32 `json:"replicas"`
		} `json:"spec"`
		Status struct {
			Replicas int32  `json:"replicas"`
			Selector string `json:"selector"`
		} `json:"status"`
	}
	do(t, env, http.MethodGet, widgetsV1+"/w/scale", "", nil).want(t, http.StatusOK).into(t, &sc)
	if sc.Kind != "Scale" || sc.Spec.Replicas != 2 || sc.Status.Replicas != 2 || sc.Status.Selector != "app=w" {
		t.Errorf("scale = %+v", sc)
	}
	do(t, env, http.MethodPatch, widgetsV1+"/w/scale", mergePatch, `{"spec":{"replicas":5}}`).want(t, http.StatusOK).into(t, &sc)
	got := get[unstructured.Unstructured](t, env, widgetsV1+"/w")
	if n, _, _ := unstructured.NestedInt64(got.Object, "spec", "replicas"); n != 5 || sc.Spec.Replicas != 5 || got.GetGeneration() != 3 {
		t.Errorf("after scaling to 5: spec.replicas %d, scale %d, generation %d", n, sc.Spec.Replicas, got.GetGeneration())
	}

	// An object without spec replicas has no Scale to read, as in
	// kube-apiserver, but a patch of its Scale may set them (kubectl scale).
	bare := widget("bare", 1, "red", nil)
	delete(bare["spec"].(map[string]any), "replicas")
	create[unstructured.Unstructured](t, env, widgetsV1, bare)
	if st := do(t, env, http.MethodGet, widgetsV1+"/bare/scale", "", nil).wantStatus(t, http.StatusInternalServerError, metav1.StatusReasonInternalError); !strings.Contains(st.Message, `the spec replicas field ".spec.replicas" does not exist`) {
		t.Errorf("GET scale without spec replicas: %q", st.Message)
	}
	if st := do(t, env, http.MethodPatch, widgetsV1+"/bare/scale", mergePatch, `{"metadata":{}}`).wantStatus(t, http.StatusBadRequest, metav1.StatusReasonBadRequest); st.Message != `the spec replicas field ".spec.replicas" cannot be empty` {
		t.Errorf("a scale patch that sets no replicas: %q", st.Message)
	}
	do(t, env, http.MethodPatch, widgetsV1+"/bare/scale", mergePatch, `{"spec":{"replicas":3}}`).want(t, http.StatusOK).into(t, &sc)
	got = get[unstructured.Unstructured](t, env, widgetsV1+"/bare")
	if n, _, _ := unstructured.NestedInt64(got.Object, "spec", "replicas"); n != 3 || sc.Spec.Replicas != 3 {
		t.Errorf("after scaling bare to 3: spec.replicas %d, scale %d", n, sc.Spec.Replicas)
	}
}

// A Table of custom objects has the definition's printer columns.
func TestCustomObjectPrinterColumns(t *testing.T) {
	env := testenv.Start(t)
	createCRD(t, env, widgetCRD())
	create[unstructured.Unstructured](t, env, widgetsV1, widget("w", 3, "red", nil))
	req, _ := http.NewRequest(http.MethodGet, env.URL+widgetsV1, nil)
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	resp, err := env.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var table metav1.Table
	if err := json.NewDecoder(resp.Body).Decode(&table); err != nil {
		t.Fatal(err)
	}
	var cols []string
	for _, c := range table.ColumnDefinitions {
		cols = append(cols, fmt.Sprintf("%s/%d", c.Name, c.Priority))
	}
	if !slices.Equal(cols, []string{"Name/0", "Color/0", "Replicas/0", "Phase/1", "Age/0"}) {
		t.Errorf("columns = %v", cols)
	}
	if len(table.Rows) != 1 {
		t.Fatalf("rows = %v", table.Rows)
	}
	cells := table.Rows[0].Cells
	if cells[0] != "w" || cells[1] != "red" || cells[2] != float64(3) || cells[3] != nil || cells[4] == nil {
		t.Errorf("cells = %#v", cells)
	}
}

// A definition whose names another holds is not accepted, and nothing is
// served for it.
func TestCustomResourceDefinitionNameClash(t *testing.T) {
	env := testenv.Start(t)
	createCRD(t, env, widgetCRD())
	clash := widgetCRD()
	clash["metadata"] = map[string]any{"name": "gadgets.example.com"}
	names := clash["spec"].(map[string]any)["names"].(map[string]any)
	names["plural"], names["singular"], names["shortNames"], names["listKind"] = "gadgets", "gadget", []any{"gd"}, "GadgetList"
	for _, v := range clash["spec"].(map[string]any)["versions"].([]any) {
		v.(map[string]any)["name"] = "v" + v.(map[string]any)["name"].(string)[1:] + "beta1"
	}
	create[apiextensionsv1.CustomResourceDefinition](t, env, crdsPath, clash)
	crd := waitCRD(t, env, "gadgets.example.com", apiextensionsv1.NamesAccepted, apiextensionsv1.ConditionFalse)
	c := condition(crd, apiextensionsv1.NamesAccepted)
	if c.Reason != "KindConflict" || c.Message != `"Widget" is already in use` {
		t.Errorf("NamesAccepted = %+v, want KindConflict", c)
	}
	if e := condition(crd, apiextensionsv1.Established); e == nil || e.Status != apiextensionsv1.ConditionFalse || e.Reason != "NotAccepted" {
		t.Errorf("Established = %+v, want False NotAccepted", e)
	}
	do(t, env, http.MethodGet, "/apis/example.com/v1beta1/namespaces/default/gadgets", "", nil).wantStatus(t, http.StatusNotFound, metav1.StatusReasonNotFound)

	// A built-in's names are taken too.
	builtin := widgetCRD()
	builtin["metadata"] = map[string]any{
		"name":        "leases.coordination.k8s.io",
		"annotations": map[string]any{"api-approved.kubernetes.io": "unapproved, a clash on purpose"},
	}
	spec := builtin["spec"].(map[string]any)
	spec["group"] = "coordination.k8s.io"
	spec["names"] = map[string]any{"plural": "leases", "singular": "lease", "kind": "Lease", "listKind": "LeaseList"}
	create[apiextensionsv1.CustomResourceDefinition](t, env, crdsPath, builtin)
	crd = waitCRD(t, env, "leases.coordination.k8s.io", apiextensionsv1.NamesAccepted, apiextensionsv1.ConditionFalse)
	if c := condition(crd, apiextensionsv1.NamesAccepted); c.Reason != "ListKindConflict" {
		t.Errorf("NamesAccepted for leases.coordination.k8s.io = %+v", c)
	}
}

// Deleting a definition deletes its objects, then it goes and its
// resources are no longer served: their watchers end.
func TestCustomResourceDefinitionDeletion(t *testing.T) {
	env := testenv.Start(t)
	createCRD(t, env, widgetCRD())
	for _, n := range []string{"a", "b"} {
		create[unstructured.Unstructured](t, env, widgetsV1, widget(n, 1, "red", nil))
	}
	w := watch(t, env, widgetsV1+"?watch=true")
	w.expect(t, "ADDED a", "ADDED b")

	held := widget("held", 1, "red", nil)
	held["metadata"].(map[string]any)["finalizers"] = []any{"example.com/hold"}
	create[unstructured.Unstructured](t, env, widgetsV1, held)
	w.expect(t, "ADDED held")

	do(t, env, http.MethodDelete, crdsPath+"/widgets.example.com", "", nil).want(t, http.StatusOK)
	expectAnyOrder(t, w, "DELETED a", "DELETED b", "MODIFIED held")
	// The definition waits for the object that has a finalizer, and takes
	// no new objects meanwhile.
	crd := waitCRD(t, env, "widgets.example.com", apiextensionsv1.Terminating, apiextensionsv1.ConditionTrue)
	if c := condition(crd, apiextensionsv1.Terminating); c.Reason != "InstanceDeletionInProgress" {
		t.Errorf("Terminating = %+v", c)
	}
	st := do(t, env, http.MethodPost, widgetsV1, jsonType, widget("late", 1, "red", nil)).wantStatus(t, http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed)
	if st.Message != "create not allowed while custom resource definition is terminating" {
		t.Errorf("create while terminating: %q", st.Message)
	}
	patch[unstructured.Unstructured](t, env, widgetsV1+"/held", mergePatch, `{"metadata":{"finalizers":null}}`)
	w.expect(t, "MODIFIED held", "DELETED held")
	w.ended(t, waitTimeout)
	eventually(t, "the definition is gone", func() (bool, string) {
		r := do(t, env, http.MethodGet, crdsPath+"/widgets.example.com", "", nil)
		return r.code == http.StatusNotFound, string(r.body)
	})
	do(t, env, http.MethodGet, widgetsV1, "", nil).wantStatus(t, http.StatusNotFound, metav1.StatusReasonNotFound)
	do(t, env, http.MethodGet, "/apis/example.com/v1", "", nil).wantStatus(t, http.StatusNotFound, metav1.StatusReasonNotFound)
	res, err := env.Store.List(t.Context(), "/registry/example.com/", store.ListOptions{})
	if err != nil || len(res.Items) != 0 {
		t.Errorf("etcd still holds %d custom objects (err %v)", len(res.Items), err)
	}

	// The same definition again is served afresh.
	createCRD(t, env, widgetCRD())
	create[unstructured.Unstructured](t, env, widgetsV1, widget("a", 1, "red", nil))
}

// A definition is established, and its first object can be created, soon
// after its create returns.
func TestCustomResourceDefinitionEstablishedFast(t *testing.T) {
	env := testenv.Start(t)
	create[apiextensionsv1.CustomResourceDefinition](t, env, crdsPath, widgetCRD())
	start := time.Now()
	for {
		r := do(t, env, http.MethodPost, widgetsV1, jsonType, widget("first", 1, "red", nil))
		if r.code == http.StatusCreated {
			break
		}
		if time.Since(start) > waitTimeout {
			t.Fatalf("no object created within %v: %d %s", waitTimeout, r.code, r.body)
		}
	}
	t.Logf("first object created %v after the definition", time.Since(start))
}

// Definitions the API server refuses: a schema that is not structural or
// a CEL rule that does not compile is a 422 naming the field; a schema 100
// levels deep nests its body past what any request may (MaxNestingDepth),
// a 400 that says so. Nothing is stored or served.
func TestCustomResourceDefinitionBadInput(t *testing.T) {
	env := testenv.Start(t)
	const sp = "spec.versions[0].schema.openAPIV3Schema"
	deep := map[string]any{"type": "string"}
	for range 100 {
		deep = map[string]any{"type": "object", "properties": map[string]any{"a": deep}}
	}
	for _, tc := range []struct {
		name   string
		schema map[string]any
		code   int
		want   string
	}{
		{"not structural", map[string]any{"type": "object", "properties": map[string]any{"spec": map[string]any{"properties": map[string]any{}}}},
			422, `is invalid: ` + sp + ".properties[spec].type: Required value: must not be empty for specified object fields"},
		{"a CEL rule that does not compile", map[string]any{"type": "object", "properties": map[string]any{"spec": map[string]any{
			"type": "object", "x-kubernetes-validations": []any{map[string]any{"rule": "self.size >"}},
			"properties": map[string]any{"size": map[string]any{"type": "integer"}}}}},
			422, `is invalid: ` + sp + `.properties[spec].x-kubernetes-validations[0].rule: Invalid value: {"rule":"self.size \u003e"}: compilation failed: ERROR: <input>:1:12: Syntax error`},
		{"100 levels of nesting", deep, 400, fmt.Sprintf("the body nests objects and arrays deeper than %d levels", apiserver.MaxNestingDepth)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			crd := widgetCRD()
			spec := crd["spec"].(map[string]any)
			spec["versions"] = []any{map[string]any{"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": tc.schema}}}
			reason := metav1.StatusReasonInvalid
			if tc.code == http.StatusBadRequest {
				reason = metav1.StatusReasonBadRequest
			}
			st := do(t, env, http.MethodPost, crdsPath, jsonType, crd).wantStatus(t, tc.code, reason)
			if !strings.Contains(st.Message, tc.want) {
				t.Errorf("message %q, want it to say %q", st.Message, tc.want)
			}
			do(t, env, http.MethodGet, crdsPath+"/widgets.example.com", "", nil).wantStatus(t, http.StatusNotFound, metav1.StatusReasonNotFound)
			do(t, env, http.MethodGet, widgetsV1, "", nil).wantStatus(t, http.StatusNotFound, metav1.StatusReasonNotFound)
		})
	}
	healthy(t, env)
}

// Hostile custom objects: too large is 413 and nothing is stored; no JSON
// shape makes the server fail.
func TestCustomObjectBadInput(t *testing.T) {
	env := testenv.Start(t)
	createCRD(t, env, widgetCRD())
	big := widget("big", 1, strings.Repeat("x", 3<<20), nil)
	do(t, env, http.MethodPost, widgetsV1, jsonType, big).wantStatus(t, http.StatusRequestEntityTooLarge, metav1.StatusReasonRequestEntityTooLarge)
	do(t, env, http.MethodGet, widgetsV1+"/big", "", nil).wantStatus(t, http.StatusNotFound, metav1.StatusReasonNotFound)

	create[unstructured.Unstructured](t, env, widgetsV1, widget("ok", 1, "red", nil))
	for _, body := range []string{
		`[]`, `"x"`, `null`, `1`, `{}`, `{"metadata":"x"}`, `{"metadata":{"name":5}}`, `{"metadata":{"name":"n","labels":"x"}}`,
		`{"metadata":{"name":"n","labels":{"a":1}}}`, `{"metadata":{"name":"n","finalizers":{}}}`,
		`{"metadata":{"name":"n","ownerReferences":[1]}}`, `{"kind":5,"metadata":{"name":"n"}}`,
		`{"apiVersion":[],"metadata":{"name":"n"}}`, `{"metadata":{"name":"n","creationTimestamp":"yesterday"}}`,
		`{"metadata":{"name":"n"},"spec":[]}`, `{"metadata":{"name":"n"},"status":7}`,
	} {
		for _, target := range []struct{ method, path, ct string }{
			{http.MethodPost, widgetsV1, jsonType},
			{http.MethodPut, widgetsV1 + "/ok", jsonType},
			{http.MethodPatch, widgetsV1 + "/ok", mergePatch},
			{http.MethodPut, widgetsV1 + "/ok/status", jsonType},
			{http.MethodPatch, widgetsV1 + "/ok/scale", mergePatch},
		} {
			r := do(t, env, target.method, target.path, target.ct, body)
			if r.code >= 500 {
				t.Errorf("%s %s %s: HTTP %d: %s", target.method, target.path, body, r.code, r.body)
			}
		}
	}
	healthy(t, env)
}

// OpenAPI v2 and v3 describe a custom resource from its schema while it is
// served, and no longer once it is gone.
func TestCustomResourceOpenAPIIsLive(t *testing.T) {
	env := testenv.Start(t)
	var disco struct {
		Paths map[string]struct {
			ServerRelativeURL string `json:"serverRelativeURL"`
		} `json:"paths"`
	}
	do(t, env, http.MethodGet, "/openapi/v3", "", nil).want(t, http.StatusOK).into(t, &disco)
	if _, ok := disco.Paths["apis/example.com/v1"]; ok {
		t.Fatalf("openapi v3 lists example.com/v1 before its definition exists")
	}
	crdHash := disco.Paths["apis/apiextensions.k8s.io/v1"].ServerRelativeURL
	if crdHash == "" {
		t.Fatalf("openapi v3 has no apiextensions.k8s.io/v1: %v", disco.Paths)
	}

	createCRD(t, env, widgetCRD())
	disco.Paths = nil
	do(t, env, http.MethodGet, "/openapi/v3", "", nil).want(t, http.StatusOK).into(t, &disco)
	entry, ok := disco.Paths["apis/example.com/v1"]
	if !ok {
		t.Fatalf("openapi v3 does not list example.com/v1: %v", disco.Paths)
	}
	var doc struct {
		Components struct {
			Schemas map[string]map[string]any `json:"schemas"`
		} `json:"components"`
	}
	do(t, env, http.MethodGet, entry.ServerRelativeURL, "", nil).want(t, http.StatusOK).into(t, &doc)
	w := doc.Components.Schemas["com.example.v1.Widget"]
	props, _ := w["properties"].(map[string]any)
	spec, _ := props["spec"].(map[string]any)
	specProps, _ := spec["properties"].(map[string]any)
	meta, _ := props["metadata"].(map[string]any)
	if specProps["replicas"] == nil || meta["$ref"] != "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta" ||
		w["x-kubernetes-group-version-kind"] == nil {
		t.Errorf("com.example.v1.Widget = %v", w)
	}

	var v2 struct {
		Definitions map[string]map[string]any `json:"definitions"`
	}
	do(t, env, http.MethodGet, "/openapi/v2", "", nil).want(t, http.StatusOK).into(t, &v2)
	if v2.Definitions["com.example.v2.Widget"] == nil {
		t.Errorf("openapi v2 has no com.example.v2.Widget")
	}

	do(t, env, http.MethodDelete, crdsPath+"/widgets.example.com", "", nil).want(t, http.StatusOK)
	eventually(t, "example.com/v1 leaves openapi v3", func() (bool, string) {
		disco.Paths = nil
		do(t, env, http.MethodGet, "/openapi/v3", "", nil).want(t, http.StatusOK).into(t, &disco)
		_, ok := disco.Paths["apis/example.com/v1"]
		return !ok, fmt.Sprint(len(disco.Paths))
	})
	v2.Definitions = nil
	do(t, env, http.MethodGet, "/openapi/v2", "", nil).want(t, http.StatusOK).into(t, &v2)
	if v2.Definitions["com.example.v2.Widget"] != nil {
		t.Errorf("openapi v2 still has com.example.v2.Widget")
	}
}

// fieldValidation works for custom objects as for built-ins: the
// schema's unknown fields are refused by Strict, pruned with a warning by
// Warn (the default) and pruned silently by Ignore.
func TestCustomObjectFieldValidation(t *testing.T) {
	env := testenv.Start(t)
	createCRD(t, env, widgetCRD())
	body := func(name string) map[string]any {
		w := widget(name, 1, "red", nil)
		w["spec"].(map[string]any)["bogus"] = true
		return w
	}
	st := do(t, env, http.MethodPost, widgetsV1+"?fieldValidation=Strict", jsonType, body("strict")).
		wantStatus(t, http.StatusBadRequest, metav1.StatusReasonBadRequest)
	if want := `Widget in version "v1" cannot be handled as a Widget: strict decoding error: unknown field "spec.bogus"`; st.Message != want {
		t.Errorf("Strict: %q, want %q", st.Message, want)
	}
	do(t, env, http.MethodGet, widgetsV1+"/strict", "", nil).wantStatus(t, http.StatusNotFound, metav1.StatusReasonNotFound)

	for _, tc := range []struct{ query, name, warning string }{
		{"", "default", `299 - "unknown field \"spec.bogus\""`},
		{"?fieldValidation=Warn", "warn", `299 - "unknown field \"spec.bogus\""`},
		{"?fieldValidation=Ignore", "ignore", ""},
	} {
		r := do(t, env, http.MethodPost, widgetsV1+tc.query, jsonType, body(tc.name)).want(t, http.StatusCreated)
		if w := r.header.Get("Warning"); w != tc.warning {
			t.Errorf("%q: Warning %q, want %q", tc.query, w, tc.warning)
		}
		got := get[unstructured.Unstructured](t, env, widgetsV1+"/"+tc.name)
		if _, found, _ := unstructured.NestedFieldNoCopy(got.Object, "spec", "bogus"); found {
			t.Errorf("%q: stored spec %v, want bogus pruned", tc.query, got.Object["spec"])
		}
	}
}
