// Package benchdata holds the objects minictl's benchmarks make, shared by
// the harness (bench/) and the in-process micro-benchmarks that mirror its
// scenarios, so that both measure the same thing.
package benchdata

import "strings"

// ApplyManifest is the Deployment the apply scenario applies: what a
// GitOps tool or `kubectl apply --server-side` sends for a small web
// service, labels, two containers with ports, env and resources.
const ApplyManifest = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {app: web, tier: front}
spec:
  replicas: 0
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web, tier: front}
    spec:
      containers:
      - name: web
        image: registry.example.com/bench/web:1.0
        ports:
        - {name: http, containerPort: 8080, protocol: TCP}
        - {name: dns, containerPort: 53, protocol: UDP}
        env:
        - {name: MODE, value: bench}
        resources:
          requests: {cpu: 10m, memory: 16Mi}
          limits: {cpu: 100m, memory: 64Mi}
      - name: sidecar
        image: registry.example.com/bench/sidecar:1.0
`

// Group is the API group of the custom resource scenarios' kinds.
const Group = "bench.minictl.io"

// CRD is a namespaced CustomResourceDefinition of kind in Group, plural
// plural, whose one version v1 has schema.
func CRD(plural, kind string, schema map[string]any) map[string]any {
	return map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": plural + "." + Group},
		"spec": map[string]any{
			"group": Group, "scope": "Namespaced",
			"names": map[string]any{
				"plural": plural, "singular": strings.ToLower(kind), "kind": kind, "listKind": kind + "List",
			},
			"versions": []any{map[string]any{
				"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": schema},
			}},
		},
	}
}

// SchemaOf is the structural schema of a JSON value: every object's
// properties, an array's items as its first element's, and the type of
// every scalar (integer for whole numbers).
func SchemaOf(v any) map[string]any {
	switch v := v.(type) {
	case map[string]any:
		props := map[string]any{}
		for k, x := range v {
			props[k] = SchemaOf(x)
		}
		return map[string]any{"type": "object", "properties": props}
	case []any:
		items := map[string]any{"type": "string"}
		if len(v) > 0 {
			items = SchemaOf(v[0])
		}
		return map[string]any{"type": "array", "items": items}
	case string:
		return map[string]any{"type": "string"}
	case bool:
		return map[string]any{"type": "boolean"}
	case float64:
		if v == float64(int64(v)) {
			return map[string]any{"type": "integer"}
		}
		return map[string]any{"type": "number"}
	}
	return map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}
}
