package apiserver_test

import (
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"strings"
	"testing"

	openapi_v2 "github.com/google/gnostic-models/openapiv2"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/kube-openapi/pkg/spec3"
	openapiproto "k8s.io/kube-openapi/pkg/util/proto"

	"github.com/minictl/minictl/internal/testenv"
)

// protoV2 is what kubectl asks for; the answer is named in the form Go's
// mime package parses (kubectl parses it), as kube-apiserver names it.
const (
	protoV2       = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
	protoV2Answer = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
)

// Three versions of a deployment, as `kubectl apply` sees them: what was
// last applied, what the user applies now (a new image), what the server
// has (a container added by someone else). The strategic merge patch must
// merge the containers list by name, not replace it.
const (
	applyOriginal = `{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"nginx:1.27"}]}}}}`
	applyModified = `{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"nginx:1.28"}]}}}}`
	applyCurrent  = `{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"nginx:1.27"},{"name":"sidecar","image":"envoy"}]}}}}`
	applyWant     = `{"spec":{"template":{"spec":{"$setElementOrder/containers":[{"name":"web"}],"containers":[{"image":"nginx:1.28","name":"web"}]}}}}`
)

func TestOpenAPIV2(t *testing.T) {
	env := testenv.Start(t)

	// JSON, for people.
	var doc struct {
		Swagger     string                    `json:"swagger"`
		Definitions map[string]map[string]any `json:"definitions"`
		Paths       map[string]map[string]any `json:"paths"`
	}
	do(t, env, http.MethodGet, "/openapi/v2", "", nil).want(t, http.StatusOK).into(t, &doc)
	if doc.Swagger != "2.0" {
		t.Fatalf("swagger %q", doc.Swagger)
	}
	pod := doc.Definitions["io.k8s.api.core.v1.Pod"]
	if gvk, _ := json.Marshal(pod["x-kubernetes-group-version-kind"]); string(gvk) != `[{"group":"","kind":"Pod","version":"v1"}]` {
		t.Errorf("Pod x-kubernetes-group-version-kind %s", gvk)
	}
	containers := doc.Definitions["io.k8s.api.core.v1.PodSpec"]["properties"].(map[string]any)["containers"].(map[string]any)
	if containers["x-kubernetes-patch-merge-key"] != "name" || containers["x-kubernetes-patch-strategy"] != "merge" {
		t.Errorf("PodSpec.containers: %v", containers)
	}
	for name, want := range map[string]string{
		"io.k8s.apimachinery.pkg.util.intstr.IntOrString": `{"format":"int-or-string","type":"string"}`,
		"io.k8s.apimachinery.pkg.api.resource.Quantity":   `{"type":"string"}`,
		"io.k8s.apimachinery.pkg.apis.meta.v1.Time":       `{"format":"date-time","type":"string"}`,
	} {
		d := doc.Definitions[name]
		delete(d, "description")
		if got, _ := json.Marshal(d); string(got) != want {
			t.Errorf("%s: %s, want %s", name, got, want)
		}
	}
	if _, ok := doc.Paths["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"]; !ok {
		t.Error("no PATCH operation for deployments")
	}

	// Protobuf, for kubectl: it must parse into the models kubectl builds
	// (every $ref resolves) and give apply its strategic merge patch.
	req, _ := http.NewRequest(http.MethodGet, env.URL+"/openapi/v2", nil)
	req.Header.Set("Accept", protoV2+", application/json")
	resp, err := env.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	ct := resp.Header.Get("Content-Type")
	if ct != protoV2Answer {
		t.Fatalf("Content-Type %q, want %q", ct, protoV2Answer)
	}
	if _, _, err := mime.ParseMediaType(ct); err != nil {
		t.Fatalf("Content-Type %q: %v", ct, err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var pb openapi_v2.Document
	if err := proto.Unmarshal(body, &pb); err != nil {
		t.Fatalf("decode protobuf: %v", err)
	}
	models, err := openapiproto.NewOpenAPIData(&pb)
	if err != nil {
		t.Fatalf("kube-openapi models: %v", err)
	}
	deploy := models.LookupModel("io.k8s.api.apps.v1.Deployment")
	if deploy == nil {
		t.Fatal("no Deployment model")
	}
	patch, err := strategicpatch.CreateThreeWayMergePatch([]byte(applyOriginal), []byte(applyModified), []byte(applyCurrent),
		strategicpatch.NewPatchMetaFromOpenAPI(deploy), false)
	if err != nil {
		t.Fatalf("three-way merge patch from the v2 schema: %v", err)
	}
	if string(patch) != applyWant {
		t.Errorf("patch %s, want %s", patch, applyWant)
	}

	// Lists, namespaces, quantities: the fields kubectl validates.
	found := false
	for _, p := range pb.GetPaths().GetPath() {
		if p.Name != "/api/v1/namespaces/{namespace}/pods/{name}" {
			continue
		}
		for _, param := range p.GetValue().GetPatch().GetParameters() {
			if param.GetParameter().GetNonBodyParameter().GetQueryParameterSubSchema().GetName() == "fieldValidation" {
				found = true
			}
		}
	}
	if !found {
		t.Error("PATCH pods does not document fieldValidation: kubectl would validate on the client")
	}
}

func TestOpenAPIV3(t *testing.T) {
	env := testenv.Start(t)
	var disco struct {
		Paths map[string]struct {
			ServerRelativeURL string `json:"serverRelativeURL"`
		} `json:"paths"`
	}
	do(t, env, http.MethodGet, "/openapi/v3", "", nil).want(t, http.StatusOK).into(t, &disco)
	for _, gv := range []string{"api/v1", "apis/apps/v1", "apis/coordination.k8s.io/v1"} {
		if !strings.HasPrefix(disco.Paths[gv].ServerRelativeURL, "/openapi/v3/"+gv+"?hash=") {
			t.Errorf("%s: %q", gv, disco.Paths[gv].ServerRelativeURL)
		}
	}

	var apps spec3.OpenAPI
	do(t, env, http.MethodGet, disco.Paths["apis/apps/v1"].ServerRelativeURL, "", nil).want(t, http.StatusOK).into(t, &apps)
	item := apps.Paths.Paths["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]
	if item == nil || item.Patch == nil {
		t.Fatal("no PATCH operation for deployments")
	}
	if _, ok := item.Patch.RequestBody.Content["application/strategic-merge-patch+json"]; !ok {
		t.Errorf("PATCH deployments does not take strategic merge patches: %v", item.Patch.RequestBody.Content)
	}
	hasParam := false
	for _, p := range item.Patch.Parameters {
		hasParam = hasParam || (p.Name == "fieldValidation" && p.In == "query")
	}
	if !hasParam {
		t.Error("PATCH deployments does not document fieldValidation")
	}
	deploy := apps.Components.Schemas["io.k8s.api.apps.v1.Deployment"]
	if deploy == nil {
		t.Fatal("no Deployment schema")
	}
	patch, err := strategicpatch.CreateThreeWayMergePatch([]byte(applyOriginal), []byte(applyModified), []byte(applyCurrent),
		strategicpatch.PatchMetaFromOpenAPIV3{Schema: deploy, SchemaList: apps.Components.Schemas}, false)
	if err != nil {
		t.Fatalf("three-way merge patch from the v3 schema: %v", err)
	}
	if string(patch) != applyWant {
		t.Errorf("patch %s, want %s", patch, applyWant)
	}

	do(t, env, http.MethodGet, "/openapi/v3/apis/widgets.example.com/v1", "", nil).wantStatus(t, http.StatusNotFound, "NotFound")
}
