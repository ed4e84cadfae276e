package apiserver

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/minictl/minictl/api"
)

// BenchmarkPatch3MiB applies patches of up to the body size limit, shaped
// to cost the most, to objects as large as etcd stores (1.5 MiB), the way
// a PATCH applies them: the object's JSON, the patch, and the decoding of
// the result. Strategic merge patches reach MaxStrategicMergeListPairs. No request of at most 3 MiB may take more than about a
// second of CPU; each of these takes well under one (go test -run '^$'
// -bench Patch3MiB -benchtime 1x ./apiserver/). A patch refused by a limit
// counts what it cost to refuse.
func BenchmarkPatch3MiB(b *testing.B) {
	const size = DefaultMaxRequestBodyBytes
	res, _ := api.Lookup("", "v1", "configmaps")
	small := benchConfigMap(res, 100, 10)
	wide := benchConfigMap(res, 50_000, 1) // 50,000 members in data
	long := benchConfigMap(res, 0, 0)      // 200,000 finalizers
	for i := range 200_000 {
		long.Finalizers = append(long.Finalizers, fmt.Sprintf("f%d", i))
	}

	pods, _ := api.Lookup("", "v1", "pods")
	wideSpec := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "bench", Namespace: "default", ResourceVersion: "5"}}
	const containers = 1414 // the order of this many is about MaxStrategicMergeListPairs pairs
	for i := range containers {
		wideSpec.Spec.Containers = append(wideSpec.Spec.Containers, corev1.Container{Name: fmt.Sprintf("c%d", i), Image: "i"})
	}
	setTypeMeta(pods, wideSpec)
	kv := func(i int) string { return fmt.Sprintf(`"%06d-k":"value-%06d"`, i, i) }
	finalizer := func(i int) string { return fmt.Sprintf(`"a/%06d"`, i) }
	v260 := strings.Repeat("v", 260)
	for _, bc := range []struct {
		name string
		res  *api.Resource
		cur  api.Object
		pt   types.PatchType
		body string
	}{
		{"merge/flat object", res, small, types.MergePatchType, `{"data":{` + join(size/27, kv) + `}}`},
		{"merge/flat object into a wide one", res, wide, types.MergePatchType, `{"data":{` + join(size/27, kv) + `}}`},
		{"merge/unknown fields", res, small, types.MergePatchType, `{` + join(size/27, kv) + `}`},
		{"merge/one string", res, small, types.MergePatchType, `{"data":{"k":"` + strings.Repeat("x", size-32) + `"}}`},
		{"merge/one array", res, small, types.MergePatchType, `{"x":[` + strings.Repeat("1,", size/2-16) + `1]}`},
		{"merge/nulls in a new array", res, small, types.MergePatchType, `{"x":[` + strings.Repeat(`{"a":null},`, size/11-16) + `{}]}`},
		{"merge/finalizers", res, small, types.MergePatchType, `{"metadata":{"finalizers":[` + join(size/12, finalizer) + `]}}`},
		{"JSON patch/adds", res, small, types.JSONPatchType, `[` + join(MaxJSONPatchOperations, func(i int) string {
			return fmt.Sprintf(`{"op":"add","path":"/data/k%d","value":"%s"}`, i, v260)
		}) + `]`},
		{"JSON patch/adds to a wide object", res, wide, types.JSONPatchType, `[` + join(MaxJSONPatchOperations, func(i int) string {
			return fmt.Sprintf(`{"op":"add","path":"/data/k%d","value":"v"}`, i)
		}) + `]`},
		{"JSON patch/moves in a wide object", res, wide, types.JSONPatchType, `[` + join(MaxJSONPatchOperations, func(i int) string {
			return fmt.Sprintf(`{"op":"move","from":"/data/%06d","path":"/data/m%d"}`, i, i)
		}) + `]`},
		{"JSON patch/tests of a wide object", res, wide, types.JSONPatchType, `[` + join(MaxJSONPatchOperations, func(i int) string {
			return fmt.Sprintf(`{"op":"test","path":"/data","value":{"k":"%d"}}`, i)
		}) + `]`},
		{"JSON patch/inserts at the front of a long array", res, long, types.JSONPatchType, `[` + join(MaxJSONPatchOperations, func(i int) string {
			return fmt.Sprintf(`{"op":"add","path":"/metadata/finalizers/0","value":"x%d"}`, i)
		}) + `]`},
		{"JSON patch/removes from the front of a long array", res, long, types.JSONPatchType, `[` + join(MaxJSONPatchOperations, func(int) string {
			return `{"op":"remove","path":"/metadata/finalizers/0"}`
		}) + `]`},
		{"JSON patch/copies", res, small, types.JSONPatchType, `[` + join(MaxJSONPatchOperations, func(int) string {
			return `{"op":"copy","from":"/data","path":"/metadata/annotations"}`
		}) + `]`},
		{"strategic merge patch/flat object", res, small, types.StrategicMergePatchType, `{"data":{` + join(size/27, kv) + `}}`},
		{"strategic merge patch/finalizers", res, small, types.StrategicMergePatchType, `{"metadata":{"finalizers":[` + join(size/12, finalizer) + `]}}`},
		{"strategic merge patch/finalizers into a long list", res, long, types.StrategicMergePatchType, `{"metadata":{"finalizers":[` + join(size/12, finalizer) + `]}}`},
		{"strategic merge patch/the order of many containers", pods, wideSpec, types.StrategicMergePatchType, `{"spec":{"$setElementOrder/containers":[` +
			join(containers, func(i int) string { return fmt.Sprintf(`{"name":"c%d"}`, containers-1-i) }) + `]}}`},
		{"strategic merge patch/many containers", pods, wideSpec, types.StrategicMergePatchType, `{"spec":{"containers":[` +
			join(containers, func(i int) string { return fmt.Sprintf(`{"name":"n%d","image":"j"}`, i) }) + `]}}`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				benchPatch(b, bc.res, bc.cur, bc.pt, bc.body)
			}
		})
	}
}

// benchPatch applies body to cur as a PATCH request does.
func benchPatch(b *testing.B, res *api.Resource, cur api.Object, pt types.PatchType, body string) {
	r := httptest.NewRequest(http.MethodPatch, "/api/v1/namespaces/default/configmaps/bench", bytes.NewReader([]byte(body)))
	r.Header.Set("Content-Type", string(pt))
	apply, err := fuzzServer().readPatch(r, res.New())
	if err != nil {
		b.Fatalf("read the patch: %v", err)
	}
	ctx, _ := withWarnings(r.Context())
	_, _ = patchObject(ctx, res, cur.DeepCopyObject().(api.Object), apply, fieldWarn)
}

// benchConfigMap is a ConfigMap of n data members of valueLen bytes.
func benchConfigMap(res *api.Resource, n, valueLen int) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "bench", Namespace: "default", ResourceVersion: "5"}, Data: map[string]string{}}
	for i := range n {
		cm.Data[fmt.Sprintf("%06d", i)] = strings.Repeat("v", valueLen)
	}
	setTypeMeta(res, cm)
	return cm
}

// join joins n members, elements or operations made by each from their
// index.
func join(n int, each func(i int) string) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(each(i))
	}
	return b.String()
}
