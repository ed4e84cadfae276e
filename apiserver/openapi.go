package apiserver

import (
	"crypto/sha512"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"unicode"

	openapi_v2 "github.com/google/gnostic-models/openapiv2"
	"google.golang.org/protobuf/proto"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/minictl/minictl/api"
)

// The OpenAPI documents describe the API to clients that read it, as
// kube-apiserver's do: kubectl validates with it (it sees from the PATCH
// operations that the server checks fields itself, ?fieldValidation=), finds
// in it how to compute a strategic merge patch for apply and edit
// (x-kubernetes-patch-strategy, x-kubernetes-patch-merge-key), and explain
// prints its descriptions.
//
//   - /openapi/v2: one Swagger 2.0 document for every group, as JSON or, for
//     Accept: application/com.github.proto-openapi.spec.v2@v1.0+protobuf
//     (what kubectl and client-go ask for), as gnostic's protobuf;
//   - /openapi/v3: the list of group versions, each with its own OpenAPI 3.0
//     document at /openapi/v3/api/v1, /openapi/v3/apis/apps/v1, ...
//
// The schemas come from the catalogue and the k8s.io/api types by
// reflection (openapi_schema.go); a custom resource's from its
// definition's schema. Each document is built once for each snapshot of
// what is served (served.go), the first time it is asked for: a definition
// that comes or goes makes new documents, with new hashes.

// The protobuf media type, in the form Go's mime package parses, and the
// older "@" form clients still send; the answer always names the first, as
// kube-apiserver's does.
const (
	mimeOpenAPIV2Proto       = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
	mimeOpenAPIV2ProtoAtForm = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
)

// openAPIDocs builds and keeps the documents.
type openAPIDocs struct {
	v2Once  sync.Once
	v2JSON  []byte
	v2Proto []byte
	v2Err   error

	v3Once sync.Once
	v3     map[string][]byte // "api/v1", "apis/apps/v1" → document
	v3Hash map[string]string
	v3Err  error
}

func (s *Server) openAPIV2(w http.ResponseWriter, r *http.Request) {
	live := s.serving()
	d := live.openapi
	d.v2Once.Do(func() { d.v2JSON, d.v2Proto, d.v2Err = buildOpenAPIV2(live.resources) })
	if d.v2Err != nil {
		writeStatus(w, d.v2Err)
		return
	}
	accept := r.Header.Get("Accept")
	if strings.Contains(accept, mimeOpenAPIV2Proto) || strings.Contains(accept, mimeOpenAPIV2ProtoAtForm) {
		w.Header().Set("Content-Type", mimeOpenAPIV2Proto)
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(d.v2Proto)
		return
	}
	writeRaw(w, http.StatusOK, d.v2JSON)
}

// buildV3 returns the OpenAPI v3 documents of what is served now, built
// the first time they are asked for.
func (s *Server) buildV3() *openAPIDocs {
	live := s.serving()
	d := live.openapi
	d.v3Once.Do(func() {
		d.v3, d.v3Err = buildOpenAPIV3(live.resources)
		d.v3Hash = map[string]string{}
		for gv, doc := range d.v3 {
			sum := sha512.Sum512(doc)
			d.v3Hash[gv] = fmt.Sprintf("%X", sum[:])
		}
	})
	return d
}

// openAPIV3Discovery lists the group versions and where their documents are.
func (s *Server) openAPIV3Discovery(w http.ResponseWriter, r *http.Request) {
	d := s.buildV3()
	if d.v3Err != nil {
		writeStatus(w, d.v3Err)
		return
	}
	type gvEntry struct {
		ServerRelativeURL string `json:"serverRelativeURL"`
	}
	paths := map[string]gvEntry{}
	for gv, hash := range d.v3Hash {
		paths[gv] = gvEntry{ServerRelativeURL: "/openapi/v3/" + gv + "?hash=" + hash}
	}
	writeJSON(w, http.StatusOK, map[string]any{"paths": paths})
}

// openAPIV3 answers one group version's document.
func (s *Server) openAPIV3(w http.ResponseWriter, r *http.Request) {
	d := s.buildV3()
	if d.v3Err != nil {
		writeStatus(w, d.v3Err)
		return
	}
	doc, ok := d.v3[strings.TrimPrefix(r.URL.Path, "/openapi/v3/")]
	if !ok {
		writeStatus(w, newNotFoundPath(r.URL.Path))
		return
	}
	writeRaw(w, http.StatusOK, doc)
}

// kindDefinitions adds, for each served resource of gv ("" for all), the
// definitions of its kind and its list kind, tagged with their
// x-kubernetes-group-version-kind, and returns the definition names by
// resource.
func kindDefinitions(b *schemaBuilder, sc *runtime.Scheme, served api.Catalogue, gv *schema.GroupVersion) (map[*api.Resource]string, error) {
	names := map[*api.Resource]string{}
	tag := func(t reflect.Type, gvk schema.GroupVersionKind) string {
		name := b.define(t)
		b.defs[name]["x-kubernetes-group-version-kind"] = []any{map[string]any{"group": gvk.Group, "version": gvk.Version, "kind": gvk.Kind}}
		return name
	}
	for _, res := range served {
		if gv != nil && res.GroupVersion() != *gv {
			continue
		}
		if res.Unstructured() {
			names[res] = b.defineUnstructured(res)
			continue
		}
		names[res] = tag(reflect.TypeOf(res.New()), res.GroupVersion().WithKind(res.Kind))
		if res.CreateOnly {
			continue // a review has no list
		}
		listGVK := res.GroupVersion().WithKind(res.ListKindName())
		list, err := sc.New(listGVK)
		if err != nil {
			return nil, fmt.Errorf("openapi: %s: %w", listGVK, err)
		}
		tag(reflect.TypeOf(list), listGVK)
		if res.HasSubresource("scale") {
			tag(reflect.TypeOf(&autoscalingv1.Scale{}), autoscalingv1.SchemeGroupVersion.WithKind("Scale"))
		}
	}
	b.define(reflect.TypeOf(&metav1.Status{}))
	b.define(reflect.TypeOf(&metav1.DeleteOptions{}))
	b.defs["io.k8s.apimachinery.pkg.apis.meta.v1.Patch"] = map[string]any{
		"type":        "object",
		"description": "Patch is provided to give a concrete name and type to the Kubernetes PATCH request body.",
	}
	return names, nil
}

// operation is one verb on one path, in a version-neutral form that v2
// and v3 documents spell their own way.
type operation struct {
	method    string // get, put, patch, post, delete
	action    string // x-kubernetes-action: get, list, watch, put, patch, post, delete, deletecollection
	id        string
	gvk       schema.GroupVersionKind
	body      string   // definition name of the request body; "" for none
	consumes  []string // request media types
	response  string   // definition name of the 200/201 answer
	query     []string // query parameters
	namespace bool     // the path has {namespace}
	name      bool     // the path has {name}
}

var (
	writeParams  = []string{"dryRun", "fieldManager", "fieldValidation", "pretty"}
	readParams   = []string{"pretty"}
	listParams   = []string{"allowWatchBookmarks", "continue", "fieldSelector", "labelSelector", "limit", "pretty", "resourceVersion", "resourceVersionMatch", "sendInitialEvents", "timeoutSeconds", "watch"}
	deleteParams = []string{"dryRun", "gracePeriodSeconds", "orphanDependents", "pretty", "propagationPolicy"}
)

// patchTypes are the media types a PATCH of res takes, as kube-apiserver
// documents them: a custom resource has no strategic merge patch.
func patchTypes(res *api.Resource) []string {
	return append(slices.Clone(patchMediaTypesOf(res)), string(types.ApplyYAMLPatchType))
}

// resourcePaths lists the paths and operations of one resource, with its
// status and scale subresources, as kube-apiserver documents them.
func resourcePaths(res *api.Resource, def string) map[string][]operation {
	prefix := "/api/" + res.Version
	if res.Group != "" {
		prefix = "/apis/" + res.Group + "/" + res.Version
	}
	collection := prefix + "/" + res.Plural
	if res.Namespaced {
		collection = prefix + "/namespaces/{namespace}/" + res.Plural
	}
	item := collection + "/{name}"
	gvk := res.GroupVersion().WithKind(res.Kind)
	kind := res.Kind
	scope := ""
	if res.Namespaced {
		scope = "Namespaced"
	}
	id := func(verb, suffix string) string { return verb + groupVersionID(res) + scope + kind + suffix }
	ns, named := res.Namespaced, true
	if res.CreateOnly {
		// A review is only ever created: one POST, which answers 201.
		return map[string][]operation{collection: {
			{method: "post", action: "post", id: id("create", ""), gvk: gvk, body: def, consumes: objectMediaTypes, response: def, query: writeParams, namespace: ns},
		}}
	}
	if res.ReadOnly {
		// The resource metrics are only read: list and get.
		return map[string][]operation{
			collection: {{method: "get", action: "list", id: id("list", ""), gvk: gvk, response: def + "List", query: listParams, namespace: ns}},
			item:       {{method: "get", action: "get", id: id("read", ""), gvk: gvk, response: def, query: readParams, namespace: ns, name: named}},
		}
	}
	paths := map[string][]operation{
		collection: {
			{method: "get", action: "list", id: id("list", ""), gvk: gvk, response: def + "List", query: listParams, namespace: ns},
			{method: "post", action: "post", id: id("create", ""), gvk: gvk, body: def, consumes: objectMediaTypes, response: def, query: writeParams, namespace: ns},
			{method: "delete", action: "deletecollection", id: id("deleteCollection", ""), gvk: gvk, body: "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions", consumes: objectMediaTypes, response: "io.k8s.apimachinery.pkg.apis.meta.v1.Status", query: append(slices.Clone(deleteParams), "labelSelector", "fieldSelector"), namespace: ns},
		},
		item: {
			{method: "get", action: "get", id: id("read", ""), gvk: gvk, response: def, query: readParams, namespace: ns, name: named},
			{method: "put", action: "put", id: id("replace", ""), gvk: gvk, body: def, consumes: objectMediaTypes, response: def, query: writeParams, namespace: ns, name: named},
			{method: "patch", action: "patch", id: id("patch", ""), gvk: gvk, body: "io.k8s.apimachinery.pkg.apis.meta.v1.Patch", consumes: patchTypes(res), response: def, query: append(slices.Clone(writeParams), "force"), namespace: ns, name: named},
			{method: "delete", action: "delete", id: id("delete", ""), gvk: gvk, body: "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions", consumes: objectMediaTypes, response: def, query: deleteParams, namespace: ns, name: named},
		},
	}
	if res.Namespaced {
		paths[prefix+"/"+res.Plural] = []operation{
			{method: "get", action: "list", id: id("list", "ForAllNamespaces"), gvk: gvk, response: def + "List", query: listParams},
		}
	}
	for _, sub := range res.Subresources {
		subDef, subGVK := def, gvk
		switch sub {
		case "status":
		case "scale":
			subDef, subGVK = "io.k8s.api.autoscaling.v1.Scale", autoscalingv1.SchemeGroupVersion.WithKind("Scale")
		default:
			continue
		}
		suffix := strings.ToUpper(sub[:1]) + sub[1:]
		paths[item+"/"+sub] = []operation{
			{method: "get", action: "get", id: id("read", suffix), gvk: subGVK, response: subDef, query: readParams, namespace: ns, name: named},
			{method: "put", action: "put", id: id("replace", suffix), gvk: subGVK, body: subDef, consumes: objectMediaTypes, response: subDef, query: writeParams, namespace: ns, name: named},
			{method: "patch", action: "patch", id: id("patch", suffix), gvk: subGVK, body: "io.k8s.apimachinery.pkg.apis.meta.v1.Patch", consumes: patchTypes(res), response: subDef, query: append(slices.Clone(writeParams), "force"), namespace: ns, name: named},
		}
	}
	return paths
}

// groupVersionID is the part of an operation id that names the group
// version: CoreV1, AppsV1, CoordinationV1.
func groupVersionID(res *api.Resource) string {
	g := "core"
	if res.Group != "" {
		g = strings.Split(res.Group, ".")[0]
	}
	return upperFirst(g) + upperFirst(res.Version)
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	r := []rune(s)
	r[0] = unicode.ToUpper(r[0])
	return string(r)
}

func tagFor(op operation) string {
	g := "core"
	if op.gvk.Group != "" {
		g = strings.ReplaceAll(op.gvk.Group, ".", "_")
	}
	return g + "_" + op.gvk.Version
}

func gvkExtension(gvk schema.GroupVersionKind) map[string]any {
	return map[string]any{"group": gvk.Group, "version": gvk.Version, "kind": gvk.Kind}
}

var paramDocs = map[string]struct{ typ, doc string }{
	"allowWatchBookmarks":  {"boolean", "allowWatchBookmarks requests watch events with type \"BOOKMARK\"."},
	"continue":             {"string", "The continue option should be set when retrieving more results from the server."},
	"dryRun":               {"string", "When present, indicates that modifications should not be persisted. Valid values are: All."},
	"fieldManager":         {"string", "fieldManager is a name associated with the actor or entity that is making these changes."},
	"fieldSelector":        {"string", "A selector to restrict the list of returned objects by their fields. Defaults to everything."},
	"fieldValidation":      {"string", "fieldValidation instructs the server on how to handle objects in the request containing unknown or duplicate fields. Valid values are: Ignore, Warn (the default) and Strict."},
	"force":                {"boolean", "Force is going to \"force\" Apply requests. It must be unset for non-apply patch requests."},
	"gracePeriodSeconds":   {"integer", "The duration in seconds before the object should be deleted."},
	"labelSelector":        {"string", "A selector to restrict the list of returned objects by their labels. Defaults to everything."},
	"limit":                {"integer", "limit is a maximum number of responses to return for a list call."},
	"orphanDependents":     {"boolean", "Deprecated: please use the PropagationPolicy."},
	"pretty":               {"string", "If 'true', then the output is pretty printed."},
	"propagationPolicy":    {"string", "Whether and how garbage collection will be performed: Orphan, Background or Foreground."},
	"resourceVersion":      {"string", "resourceVersion sets a constraint on what resource versions a request may be served from."},
	"resourceVersionMatch": {"string", "resourceVersionMatch determines how resourceVersion is applied to list calls."},
	"sendInitialEvents":    {"boolean", "`sendInitialEvents=true` may be set together with `watch=true`."},
	"timeoutSeconds":       {"integer", "Timeout for the list/watch call."},
	"watch":                {"boolean", "Watch for changes to the described resources and return them as a stream of add, update, and remove notifications."},
}

// buildOpenAPIV2 builds the Swagger 2.0 document, as JSON and as gnostic's
// protobuf.
func buildOpenAPIV2(served api.Catalogue) (jsonDoc, protoDoc []byte, err error) {
	sc, err := servedScheme()
	if err != nil {
		return nil, nil, err
	}
	b := newSchemaBuilder(false)
	defs, err := kindDefinitions(b, sc, served, nil)
	if err != nil {
		return nil, nil, err
	}
	paths := map[string]any{}
	for _, res := range served {
		for path, ops := range resourcePaths(res, defs[res]) {
			item := map[string]any{}
			for _, op := range ops {
				item[op.method] = v2Operation(op)
			}
			item["parameters"] = v2PathParams(ops[0])
			paths[path] = item
		}
	}
	doc := map[string]any{
		"swagger":     "2.0",
		"info":        map[string]any{"title": "Kubernetes", "version": KubernetesVersion},
		"paths":       paths,
		"definitions": b.defs,
	}
	jsonDoc, err = json.Marshal(doc)
	if err != nil {
		return nil, nil, fmt.Errorf("openapi v2: %w", err)
	}
	parsed, err := openapi_v2.ParseDocument(jsonDoc)
	if err != nil {
		return nil, nil, fmt.Errorf("openapi v2: %w", err)
	}
	protoDoc, err = proto.Marshal(parsed)
	if err != nil {
		return nil, nil, fmt.Errorf("openapi v2: %w", err)
	}
	return jsonDoc, protoDoc, nil
}

func v2PathParams(op operation) []any {
	var params []any
	if op.name {
		params = append(params, map[string]any{"name": "name", "in": "path", "required": true, "type": "string", "uniqueItems": true, "description": "name of the " + op.gvk.Kind})
	}
	if op.namespace {
		params = append(params, map[string]any{"name": "namespace", "in": "path", "required": true, "type": "string", "uniqueItems": true, "description": "object name and auth scope, such as for teams and projects"})
	}
	return params
}

func v2Operation(op operation) map[string]any {
	params := []any{}
	if op.body != "" {
		params = append(params, map[string]any{"name": "body", "in": "body", "required": op.method != "delete", "schema": map[string]any{"$ref": "#/definitions/" + op.body}})
	}
	for _, q := range op.query {
		p := paramDocs[q]
		params = append(params, map[string]any{"name": q, "in": "query", "type": p.typ, "uniqueItems": true, "description": p.doc})
	}
	code := "200"
	if op.method == "post" {
		code = "201"
	}
	out := map[string]any{
		"operationId": op.id,
		"tags":        []string{tagFor(op)},
		"schemes":     []string{"https"},
		"produces":    []string{"application/json", "application/yaml"},
		"parameters":  params,
		"responses": map[string]any{
			code:  map[string]any{"description": "OK", "schema": map[string]any{"$ref": "#/definitions/" + op.response}},
			"401": map[string]any{"description": "Unauthorized"},
		},
		"x-kubernetes-action":             op.action,
		"x-kubernetes-group-version-kind": gvkExtension(op.gvk),
	}
	if len(op.consumes) > 0 {
		out["consumes"] = op.consumes
	} else {
		out["consumes"] = []string{"*/*"}
	}
	return out
}

// buildOpenAPIV3 builds one OpenAPI 3.0 document per group version, keyed
// as /openapi/v3 lists them: "api/v1", "apis/apps/v1".
func buildOpenAPIV3(served api.Catalogue) (map[string][]byte, error) {
	sc, err := servedScheme()
	if err != nil {
		return nil, err
	}
	var gvs []schema.GroupVersion
	seen := map[schema.GroupVersion]bool{}
	for _, res := range served {
		if gv := res.GroupVersion(); !seen[gv] {
			seen[gv] = true
			gvs = append(gvs, gv)
		}
	}
	docs := map[string][]byte{}
	for _, gv := range gvs {
		b := newSchemaBuilder(true)
		defs, err := kindDefinitions(b, sc, served, &gv)
		if err != nil {
			return nil, err
		}
		paths := map[string]any{}
		var resources []*api.Resource
		for res := range defs {
			resources = append(resources, res)
		}
		sort.Slice(resources, func(i, j int) bool { return resources[i].Plural < resources[j].Plural })
		for _, res := range resources {
			for path, ops := range resourcePaths(res, defs[res]) {
				item := map[string]any{"parameters": v3PathParams(ops[0])}
				for _, op := range ops {
					item[op.method] = v3Operation(op)
				}
				paths[path] = item
			}
		}
		doc, err := json.Marshal(map[string]any{
			"openapi":    "3.0.0",
			"info":       map[string]any{"title": "Kubernetes", "version": KubernetesVersion},
			"paths":      paths,
			"components": map[string]any{"schemas": b.defs},
		})
		if err != nil {
			return nil, fmt.Errorf("openapi v3 %s: %w", gv, err)
		}
		key := "api/" + gv.Version
		if gv.Group != "" {
			key = "apis/" + gv.Group + "/" + gv.Version
		}
		docs[key] = doc
	}
	return docs, nil
}

func v3PathParams(op operation) []any {
	var params []any
	if op.name {
		params = append(params, map[string]any{"name": "name", "in": "path", "required": true, "schema": map[string]any{"type": "string", "uniqueItems": true}, "description": "name of the " + op.gvk.Kind})
	}
	if op.namespace {
		params = append(params, map[string]any{"name": "namespace", "in": "path", "required": true, "schema": map[string]any{"type": "string", "uniqueItems": true}, "description": "object name and auth scope, such as for teams and projects"})
	}
	return params
}

func v3Operation(op operation) map[string]any {
	ref := func(def string) map[string]any {
		return map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/" + def}}
	}
	params := []any{}
	for _, q := range op.query {
		p := paramDocs[q]
		params = append(params, map[string]any{"name": q, "in": "query", "schema": map[string]any{"type": p.typ, "uniqueItems": true}, "description": p.doc})
	}
	code := "200"
	if op.method == "post" {
		code = "201"
	}
	out := map[string]any{
		"operationId": op.id,
		"tags":        []string{tagFor(op)},
		"parameters":  params,
		"responses": map[string]any{
			code:  map[string]any{"description": "OK", "content": map[string]any{"application/json": ref(op.response), "application/yaml": ref(op.response)}},
			"401": map[string]any{"description": "Unauthorized"},
		},
		"x-kubernetes-action":             op.action,
		"x-kubernetes-group-version-kind": gvkExtension(op.gvk),
	}
	if op.body != "" {
		content := map[string]any{}
		for _, mt := range op.consumes {
			content[mt] = ref(op.body)
		}
		out["requestBody"] = map[string]any{"content": content, "required": op.method != "delete"}
	}
	return out
}
