package apiserver_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/apiserver"
	"github.com/minictl/minictl/internal/testenv"
)

// kubectlAccept is the Accept header `kubectl get` sends.
const kubectlAccept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"

// getAccept sends a GET with an Accept header.
func getAccept(t testing.TB, env *testenv.Env, path, accept string) *reply {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, env.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", accept)
	resp, err := env.Client().Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return &reply{code: resp.StatusCode, header: resp.Header, body: body}
}

func columnNames(tb *metav1.Table) []string {
	var out []string
	for _, c := range tb.ColumnDefinitions {
		out = append(out, c.Name)
	}
	return out
}

// rowMeta decodes the object a row carries.
func rowMeta(t testing.TB, row metav1.TableRow) metav1.PartialObjectMetadata {
	t.Helper()
	var m metav1.PartialObjectMetadata
	if err := json.Unmarshal(row.Object.Raw, &m); err != nil {
		t.Fatalf("decode row object %s: %v", row.Object.Raw, err)
	}
	return m
}

func TestTableList(t *testing.T) {
	env := testenv.Start(t)
	createNamespace(t, env, "tb")
	for _, name := range []string{"a", "b", "c"} {
		create[corev1.Pod](t, env, podPath("tb", ""), pod(name, "", map[string]string{"app": "web"}))
	}

	var tb metav1.Table
	getAccept(t, env, podPath("tb", ""), kubectlAccept).want(t, http.StatusOK).into(t, &tb)
	if tb.Kind != "Table" || tb.APIVersion != "meta.k8s.io/v1" {
		t.Fatalf("got %s %s, want meta.k8s.io/v1 Table", tb.APIVersion, tb.Kind)
	}
	if got, want := strings.Join(columnNames(&tb), ","), "Name,Ready,Status,Restarts,Age,IP,Node,Nominated Node,Readiness Gates"; got != want {
		t.Errorf("columns %s, want %s", got, want)
	}
	if tb.ColumnDefinitions[5].Priority != 1 || tb.ColumnDefinitions[0].Format != "name" {
		t.Errorf("column definitions %+v: IP is priority 1, Name has format name", tb.ColumnDefinitions)
	}
	if tb.ResourceVersion == "" {
		t.Error("a table of a list keeps the list's resourceVersion")
	}
	if len(tb.Rows) != 3 {
		t.Fatalf("%d rows, want 3", len(tb.Rows))
	}
	for i, name := range []string{"a", "b", "c"} {
		row := tb.Rows[i]
		if row.Cells[0] != name || row.Cells[1] != "0/1" || row.Cells[2] != "Pending" || row.Cells[3] != "0" || row.Cells[6] != "<none>" {
			t.Errorf("row %d: %v", i, row.Cells)
		}
		m := rowMeta(t, row)
		if m.Kind != "PartialObjectMetadata" || m.APIVersion != "meta.k8s.io/v1" || m.Name != name || m.Namespace != "tb" ||
			m.Labels["app"] != "web" || m.ResourceVersion == "" || m.UID == "" {
			t.Errorf("row %d object: %+v", i, m)
		}
	}

	// Pages keep their continue token; includeObject=None leaves rows bare.
	var page metav1.Table
	getAccept(t, env, podPath("tb", "")+"?limit=2&includeObject=None", kubectlAccept).want(t, http.StatusOK).into(t, &page)
	if len(page.Rows) != 2 || page.Continue == "" || page.Rows[0].Object.Raw != nil {
		t.Errorf("page: %d rows, continue %q, object %s", len(page.Rows), page.Continue, page.Rows[0].Object.Raw)
	}
	var rest metav1.Table
	getAccept(t, env, podPath("tb", "")+"?limit=2&continue="+page.Continue, kubectlAccept).want(t, http.StatusOK).into(t, &rest)
	if len(rest.Rows) != 1 || rest.Rows[0].Cells[0] != "c" || rest.Continue != "" {
		t.Errorf("second page: %v, continue %q", rest.Rows, rest.Continue)
	}

	// Served from the watch cache (a resourceVersion without Exact), across
	// namespaces.
	var all metav1.Table
	getAccept(t, env, "/api/v1/pods?includeObject=Object&resourceVersion="+tb.ResourceVersion, kubectlAccept).want(t, http.StatusOK).into(t, &all)
	if len(all.Rows) != 3 {
		t.Fatalf("%d rows, want 3", len(all.Rows))
	}
	var p corev1.Pod
	if err := json.Unmarshal(all.Rows[0].Object.Raw, &p); err != nil || p.Kind != "Pod" || p.Spec.Containers[0].Image != "nginx:1.27" {
		t.Errorf("includeObject=Object: %v %s", err, all.Rows[0].Object.Raw)
	}
}

func TestTableGetAndVersions(t *testing.T) {
	env := testenv.Start(t)
	created := create[corev1.ConfigMap](t, env, cmPath("default", ""), configMap("cfg", nil, map[string]string{"a": "1", "b": "2"}))

	var tb metav1.Table
	getAccept(t, env, cmPath("default", "cfg"), "application/json;as=Table;v=v1beta1;g=meta.k8s.io, application/json").
		want(t, http.StatusOK).into(t, &tb)
	if tb.APIVersion != "meta.k8s.io/v1beta1" || tb.ResourceVersion != created.ResourceVersion {
		t.Errorf("got %s rv %q, want meta.k8s.io/v1beta1 rv %s", tb.APIVersion, tb.ResourceVersion, created.ResourceVersion)
	}
	if len(tb.Rows) != 1 || tb.Rows[0].Cells[0] != "cfg" || tb.Rows[0].Cells[1] != float64(2) {
		t.Errorf("rows %v, want cfg with DATA 2", tb.Rows)
	}
	if got := strings.Join(columnNames(&tb), ","); got != "Name,Data,Age" {
		t.Errorf("columns %s", got)
	}

	// Plain JSON still comes back when asked for, or when no Accept header
	// or one whose first choices minictl does not serve asks for it.
	for _, accept := range []string{"application/json", "", "application/cbor, */*", "application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io, application/json"} {
		var cm corev1.ConfigMap
		getAccept(t, env, cmPath("default", "cfg"), accept).want(t, http.StatusOK).into(t, &cm)
		if cm.Kind != "ConfigMap" || cm.Data["a"] != "1" {
			t.Errorf("Accept %q: got %s", accept, cm.Kind)
		}
	}

	getAccept(t, env, cmPath("default", "")+"?includeObject=Everything", kubectlAccept).
		wantStatus(t, http.StatusBadRequest, metav1.StatusReasonBadRequest)
}

func TestPartialObjectMetadata(t *testing.T) {
	env := testenv.Start(t)
	create[corev1.ConfigMap](t, env, cmPath("default", ""), configMap("cfg", map[string]string{"k": "v"}, map[string]string{"secret": "s3cr3t-value"}))

	var list metav1.PartialObjectMetadataList
	r := getAccept(t, env, cmPath("default", ""), "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io,application/json").want(t, http.StatusOK)
	r.into(t, &list)
	if list.Kind != "PartialObjectMetadataList" || len(list.Items) != 1 || list.Items[0].Labels["k"] != "v" || list.ResourceVersion == "" {
		t.Fatalf("got %s", r.body)
	}
	// (managedFields name the data's keys, as in Kubernetes; never its values.)
	if strings.Contains(string(r.body), "s3cr3t-value") || strings.Contains(string(r.body), `"data":{`) {
		t.Errorf("metadata-only answer carries data: %s", r.body)
	}
	var one metav1.PartialObjectMetadata
	getAccept(t, env, cmPath("default", "cfg"), "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io").want(t, http.StatusOK).into(t, &one)
	if one.Kind != "PartialObjectMetadata" || one.Name != "cfg" {
		t.Errorf("got %+v", one)
	}
}

// tableEvent is one event of a watch that asked for tables.
type tableEvent struct {
	Type   string       `json:"type"`
	Object metav1.Table `json:"object"`
}

func TestTableWatch(t *testing.T) {
	env := testenv.Start(t)
	createNamespace(t, env, "tw")
	from := listRV(t, env, "tw")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, env.URL+cmPath("tw", "")+"?watch=true&resourceVersion="+from, nil)
	req.Header.Set("Accept", kubectlAccept)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	events := make(chan tableEvent)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			var ev tableEvent
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				t.Errorf("decode %s: %v", sc.Bytes(), err)
				return
			}
			select {
			case events <- ev:
			case <-ctx.Done():
				return
			}
		}
	}()

	create[corev1.ConfigMap](t, env, cmPath("tw", ""), configMap("a", nil, nil))
	patch[corev1.ConfigMap](t, env, cmPath("tw", "a"), mergePatch, `{"data":{"x":"1"}}`)
	deleteCM(t, env, "tw", "a")

	for i, want := range []string{"ADDED", "MODIFIED", "DELETED"} {
		ev, ok := <-events
		if !ok {
			t.Fatalf("stream ended before event %d", i)
		}
		if ev.Type != want || ev.Object.Kind != "Table" || len(ev.Object.Rows) != 1 || ev.Object.Rows[0].Cells[0] != "a" {
			t.Fatalf("event %d: %s %+v, want %s with one row for a", i, ev.Type, ev.Object, want)
		}
		if (i == 0) != (len(ev.Object.ColumnDefinitions) > 0) {
			t.Errorf("event %d has %d column definitions; only the first event carries them", i, len(ev.Object.ColumnDefinitions))
		}
		if i == 1 && ev.Object.Rows[0].Cells[1] != float64(1) {
			t.Errorf("MODIFIED row %v, want DATA 1", ev.Object.Rows[0].Cells)
		}
		if m := rowMeta(t, ev.Object.Rows[0]); m.Name != "a" || m.ResourceVersion != ev.Object.ResourceVersion {
			t.Errorf("event %d row object %+v, table rv %s", i, m, ev.Object.ResourceVersion)
		}
	}
}

// TestNotAcceptable sends Accept headers that name nothing a read is served
// in. As in Kubernetes, each is a 406 NotAcceptable listing what is, for
// objects, lists, tables and watches alike.
func TestNotAcceptable(t *testing.T) {
	env := testenv.StartWith(t, testenv.Options{Server: apiserver.Config{Resources: api.Resources().With(testenv.Widgets())}})
	create[corev1.ConfigMap](t, env, cmPath("default", ""), configMap("cfg", nil, nil))
	const objects = "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf"
	const widgets = "only the following media types are accepted: application/json, application/yaml"
	const streams = "only the following media types are accepted: application/json;stream=watch, application/vnd.kubernetes.protobuf;stream=watch"
	for _, tc := range []struct{ name, path, accept, message string }{
		{"get", cmPath("default", "cfg"), "application/bogus", objects},
		{"list", cmPath("default", ""), "application/bogus", objects},
		{"watch", cmPath("default", "") + "?watch=true", "application/bogus", objects},
		{"status", podPath("default", "p") + "/status", "application/bogus", objects},
		{"a browser's page", cmPath("default", "cfg"), "text/html,application/xhtml+xml", objects},
		{"CBOR", cmPath("default", ""), "application/cbor", objects},
		{"a table of an unknown version", cmPath("default", ""), "application/json;as=Table;v=v2;g=meta.k8s.io", objects},
		{"a table in protobuf", cmPath("default", ""), "application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io", objects},
		{"metadata of one object for a list", cmPath("default", ""), "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io", objects},
		{"a kind without protobuf", "/apis/example.com/v1/namespaces/default/widgets", "application/bogus", widgets},
		{"a watch in YAML", cmPath("default", "") + "?watch=true", "application/yaml", streams},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := getAccept(t, env, tc.path, tc.accept).wantStatus(t, http.StatusNotAcceptable, metav1.StatusReasonNotAcceptable)
			if st.Message != tc.message {
				t.Errorf("message %q, want %q", st.Message, tc.message)
			}
		})
	}
}

// TestYAMLAnswers checks that a read asking for YAML gets it, as from
// kube-apiserver: the object, the list and the table.
func TestYAMLAnswers(t *testing.T) {
	env := testenv.Start(t)
	create[corev1.ConfigMap](t, env, cmPath("default", ""), configMap("cfg", nil, map[string]string{"k": "v"}))
	for _, tc := range []struct{ name, path, accept, want string }{
		{"get", cmPath("default", "cfg"), "application/yaml", "kind: ConfigMap\n"},
		{"list", cmPath("default", ""), "application/yaml, application/json", "kind: ConfigMapList\n"},
		{"table", cmPath("default", ""), "application/yaml;as=Table;v=v1;g=meta.k8s.io", "kind: Table\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := getAccept(t, env, tc.path, tc.accept).want(t, http.StatusOK)
			if ct := r.header.Get("Content-Type"); ct != "application/yaml" {
				t.Errorf("Content-Type %q, want application/yaml", ct)
			}
			if !strings.Contains(string(r.body), tc.want) || !strings.Contains(string(r.body), "k: v") && tc.name != "table" {
				t.Errorf("body does not hold %q:\n%s", tc.want, r.body)
			}
		})
	}
}

// TestTableListFromCache: a Table list answered from the watch cache
// (resourceVersion=0), written as its rows are built, says what the one
// read from etcd says, row for row, each row's metadata byte for byte
// with its managed fields, over more rows than one piece of the answer
// holds.
func TestTableListFromCache(t *testing.T) {
	env := testenv.Start(t)
	createNamespace(t, env, "bench")
	const pods = 60
	for i := range pods {
		if r := do(t, env, http.MethodPost, "/api/v1/namespaces/bench/pods", "application/json", benchPodBody(int64(i))); r.code != http.StatusCreated {
			t.Fatalf("create pod %d: %d %s", i, r.code, truncate(r.body))
		}
	}
	const accept = "application/json;as=Table;v=v1;g=meta.k8s.io"
	var store metav1.Table
	if r := getAccept(t, env, "/api/v1/namespaces/bench/pods", accept); r.code != http.StatusOK || json.Unmarshal(r.body, &store) != nil {
		t.Fatalf("list from etcd: %d %s", r.code, truncate(r.body))
	}
	var cached *reply
	var tb metav1.Table
	eventually(t, "the watch cache to have every pod", func() (bool, string) {
		cached = getAccept(t, env, "/api/v1/namespaces/bench/pods?resourceVersion=0", accept)
		tb = metav1.Table{}
		err := json.Unmarshal(cached.body, &tb)
		return cached.code == http.StatusOK && err == nil && len(tb.Rows) == pods, fmt.Sprintf("%d, %d rows, %v", cached.code, len(tb.Rows), err)
	})
	if ct := cached.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	if len(cached.body) < 64<<10 {
		t.Fatalf("the answer is %d bytes: too few to be written in pieces", len(cached.body))
	}
	if !slices.Equal(columnNames(&tb), columnNames(&store)) {
		t.Errorf("columns %v, from etcd %v", columnNames(&tb), columnNames(&store))
	}
	age := slices.Index(columnNames(&tb), "Age")
	for i, row := range tb.Rows {
		want := store.Rows[i]
		if m := rowMeta(t, row); len(m.ManagedFields) == 0 || m.ManagedFields[0].FieldsV1 == nil {
			t.Errorf("row %d's metadata has no managed fields: %s", i, row.Object.Raw)
		}
		if string(row.Object.Raw) != string(want.Object.Raw) {
			t.Errorf("row %d's object:\n got %s\nwant %s", i, row.Object.Raw, want.Object.Raw)
		}
		// Age is measured when each answer is written.
		got, exp := slices.Clone(row.Cells), slices.Clone(want.Cells)
		got[age], exp[age] = nil, nil
		if fmt.Sprint(got) != fmt.Sprint(exp) || len(row.Conditions) != len(want.Conditions) {
			t.Errorf("row %d: cells %v conditions %v, from etcd %v %v", i, row.Cells, row.Conditions, want.Cells, want.Conditions)
		}
	}
}
