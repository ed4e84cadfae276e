package apiserver_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/apiserver"
	"github.com/minictl/minictl/internal/hostile"
	"github.com/minictl/minictl/internal/testenv"
)

// TestRequestLimits sends bodies built to cost far more to decode or apply
// than their size, and checks that each is refused with a Status naming the
// limit, that nothing is written, that the server's allocations stay within
// a generous bound, and that it still answers afterwards.
func TestRequestLimits(t *testing.T) {
	env := testenv.Start(t)
	cm := cmPath("default", "target")
	create[corev1.ConfigMap](t, env, cmPath("default", ""), configMap("target", nil, map[string]string{"k": "v"}))
	before := get[corev1.ConfigMap](t, env, cm)

	tooManyOps := "[" + strings.Repeat(`{"op":"test","path":"/metadata/name","value":"target"},`, apiserver.MaxJSONPatchOperations) +
		`{"op":"test","path":"/metadata/name","value":"target"}]`
	deep := apiserver.MaxNestingDepth + 1
	for _, tc := range []struct {
		name        string
		method      string
		path        string
		contentType string
		body        string
		code        int
		reason      metav1.StatusReason
		names       string // the message must contain this, naming the limit
	}{
		{"JSON patch copying an array into itself", http.MethodPatch, cm, jsonPatch, hostile.JSONPatchCopyBomb(18), 422, metav1.StatusReasonInvalid, fmt.Sprint(apiserver.DefaultMaxRequestBodyBytes)},
		{"JSON patch of too many operations", http.MethodPatch, cm, jsonPatch, tooManyOps, 413, metav1.StatusReasonRequestEntityTooLarge, fmt.Sprint(apiserver.MaxJSONPatchOperations)},
		{"JSON patch adding a deep value", http.MethodPatch, cm, jsonPatch, `[{"op":"add","path":"/deep","value":` + hostile.Nested(deep) + `}]`, 400, metav1.StatusReasonBadRequest, fmt.Sprint(apiserver.MaxNestingDepth)},
		{"merge patch 9,990 levels deep", http.MethodPatch, cm, mergePatch, `{"metadata":{"annotations":` + hostile.Nested(9990) + `}}`, 400, metav1.StatusReasonBadRequest, fmt.Sprint(apiserver.MaxNestingDepth)},
		{"merge patch one level too deep", http.MethodPatch, cm, mergePatch, `{"x":` + hostile.Nested(deep-1) + `}`, 400, metav1.StatusReasonBadRequest, fmt.Sprint(apiserver.MaxNestingDepth)},
		{"strategic merge patch too deep", http.MethodPatch, cm, strategicPtch, `{"metadata":{"annotations":` + hostile.Nested(deep) + `}}`, 400, metav1.StatusReasonBadRequest, fmt.Sprint(apiserver.MaxNestingDepth)},
		{"JSON body too deep", http.MethodPut, cm, jsonType, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"target"},"x":` + hostile.Nested(9990) + `}`, 400, metav1.StatusReasonBadRequest, fmt.Sprint(apiserver.MaxNestingDepth)},
		{"YAML body too deep", http.MethodPost, cmPath("default", ""), yamlType, "metadata:\n  name: deep\nx: " + strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + "\n", 400, metav1.StatusReasonBadRequest, fmt.Sprint(apiserver.MaxNestingDepth)},
		{"JSON patch test with no value, which panics the library", http.MethodPatch, cm, jsonPatch, `[{"op":"test","path":""}]`, 400, metav1.StatusReasonBadRequest, "no value"},
		{"YAML alias bomb", http.MethodPost, cmPath("default", ""), yamlType, hostile.YAMLAliasBomb("bomb"), 400, metav1.StatusReasonBadRequest, "aliasing"},
		{"YAML list of a million items", http.MethodPost, cmPath("default", ""), yamlType, hostile.YAMLLongList(3<<20 - 1024), 413, metav1.StatusReasonRequestEntityTooLarge, fmt.Sprint(apiserver.MaxYAMLSeparators)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rev := revision(t, env)
			runtime.GC()
			var m0, m1 runtime.MemStats
			runtime.ReadMemStats(&m0)
			st := do(t, env, tc.method, tc.path, tc.contentType, tc.body).wantStatus(t, tc.code, tc.reason)
			runtime.ReadMemStats(&m1)
			said := st.Message
			if st.Details != nil {
				for _, c := range st.Details.Causes {
					said += "; " + c.Message
				}
			}
			if !strings.Contains(said, tc.names) {
				t.Errorf("the Status %q does not name the limit (%s)", said, tc.names)
			}
			// The copies a JSON patch may make are bounded by the body
			// size limit; everything else by a small multiple of the body.
			// Before these limits, the patch bomb allocated gigabytes and
			// the deep merge patch close to one.
			if grew, bound := m1.TotalAlloc-m0.TotalAlloc, uint64(64<<20); grew > bound {
				t.Errorf("the server allocated %d MiB for a %d-byte request; want at most %d MiB", grew>>20, len(tc.body), bound>>20)
			}
			if got := revision(t, env); got != rev {
				t.Errorf("etcd revision moved from %d to %d: the refused request wrote", rev, got)
			}
			after := get[corev1.ConfigMap](t, env, cm)
			if after.ResourceVersion != before.ResourceVersion {
				t.Errorf("the object changed: resourceVersion %s, was %s", after.ResourceVersion, before.ResourceVersion)
			}
			healthy(t, env)
		})
	}
}

// TestRequestLimitsLeaveOrdinaryRequests checks the limits' edges from the
// other side: a JSON patch of MaxJSONPatchOperations operations, copies
// within the size limit and a body exactly MaxNestingDepth deep are served.
func TestRequestLimitsLeaveOrdinaryRequests(t *testing.T) {
	env := testenv.Start(t)
	cm := cmPath("default", "target")
	create[corev1.ConfigMap](t, env, cmPath("default", ""), configMap("target", nil, map[string]string{"k": "v"}))

	ops := "[" + strings.Repeat(`{"op":"test","path":"/metadata/name","value":"target"},`, apiserver.MaxJSONPatchOperations-1) +
		`{"op":"add","path":"/data/ops","value":"many"}]`
	if got := patch[corev1.ConfigMap](t, env, cm, jsonPatch, ops); got.Data["ops"] != "many" {
		t.Errorf("patch of %d operations: data %v", apiserver.MaxJSONPatchOperations, got.Data)
	}
	copies := `[{"op":"copy","from":"/data/k","path":"/data/k2"},{"op":"copy","from":"/data","path":"/metadata/annotations"}]`
	if got := patch[corev1.ConfigMap](t, env, cm, jsonPatch, copies); got.Data["k2"] != "v" || got.Annotations["k2"] != "v" {
		t.Errorf("patch of copies: data %v, annotations %v", got.Data, got.Annotations)
	}
	// Depth counts the body's own object: the merge patch is one level,
	// "x" holds the rest.
	atLimit := `{"x":` + hostile.Nested(apiserver.MaxNestingDepth-1) + `}`
	patch[corev1.ConfigMap](t, env, cm, mergePatch, atLimit)
	inString := `{"data":{"s":"\\\"` + strings.Repeat("[{", 500) + `"}}`
	if got := patch[corev1.ConfigMap](t, env, cm, mergePatch, inString); len(got.Data["s"]) != 1002 {
		t.Errorf("brackets inside a string count as nesting: data %v", got.Data)
	}
}

// TestStrategicMergeListLimit merges a list of the patch into a long list
// of the object. Merging compares every item of one with every item of
// the other, so a patch whose lists would compare more than
// MaxStrategicMergeListPairs pairs is refused with a 422 naming the limit,
// and one just under it is merged.
func TestStrategicMergeListLimit(t *testing.T) {
	env := testenv.Start(t)
	finalizers := func(prefix string, n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("example.com/%s%d", prefix, i)
		}
		return out
	}
	cm := configMap("long", nil, nil)
	cm.Finalizers = finalizers("f", 2000)
	create[corev1.ConfigMap](t, env, cmPath("default", ""), cm)
	before := revision(t, env)

	body := func(n int) string {
		data, _ := json.Marshal(map[string]any{"metadata": map[string]any{"finalizers": finalizers("g", n)}})
		return string(data)
	}
	over := apiserver.MaxStrategicMergeListPairs/2000 + 1
	st := do(t, env, http.MethodPatch, cmPath("default", "long"), strategicPtch, body(over)).
		wantStatus(t, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid)
	if !strings.Contains(st.Message, fmt.Sprint(apiserver.MaxStrategicMergeListPairs)) {
		t.Errorf("message %q does not name the limit %d", st.Message, apiserver.MaxStrategicMergeListPairs)
	}
	if after := revision(t, env); after != before {
		t.Errorf("etcd revision moved from %d to %d: the refused patch wrote", before, after)
	}
	got := patch[corev1.ConfigMap](t, env, cmPath("default", "long"), strategicPtch, body(over-1))
	if len(got.Finalizers) != 2000+over-1 {
		t.Errorf("%d finalizers after merging %d into 2000", len(got.Finalizers), over-1)
	}
}
