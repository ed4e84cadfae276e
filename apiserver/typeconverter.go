package apiserver

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sync"

	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/minictl/minictl/api"
)

// Server-side apply merges and tracks fields with structured-merge-diff,
// which needs to know each kind's shape: which lists are sets, which are
// maps keyed by some of their items' fields, and which structs and maps
// change only as a whole. For built-in kinds, that shape is the OpenAPI
// schema minictl builds by reflection (openapi_schema.go), read as
// kube-apiserver reads its own: lists without markers are atomic, and a
// patchStrategy "merge" list is a map keyed by its patchMergeKey, or a set
// without one. Where Kubernetes' +listType, +listMapKey, +structType,
// +mapType and (for list keys) +default markers, which are not in the Go
// tags, say otherwise, the smd tables below say what they say. A custom resource's converter comes
// with its api.Resource (TypeConverter); without one, its fields are
// deduced from the object: every list and every value atomic.

// listShape is what a +listType marker says of one field.
type listShape struct {
	listType string   // "atomic", "set" or "map"
	keys     []string // the map keys of a "map" list
}

// smdListOverrides are the list fields whose Kubernetes list type differs
// from what their patch tags say, by definition name and field.
var smdListOverrides = map[string]map[string]listShape{
	"io.k8s.api.core.v1.Container":                {"ports": {"map", []string{"containerPort", "protocol"}}},
	"io.k8s.api.core.v1.EphemeralContainerCommon": {"ports": {"map", []string{"containerPort", "protocol"}}},
	"io.k8s.api.core.v1.EphemeralContainer":       {"ports": {"map", []string{"containerPort", "protocol"}}},
	"io.k8s.api.core.v1.ServiceSpec":              {"ports": {"map", []string{"port", "protocol"}}},
	"io.k8s.api.core.v1.PodSpec": {
		"topologySpreadConstraints": {"map", []string{"topologyKey", "whenUnsatisfiable"}},
	},
	"io.k8s.api.core.v1.PodStatus":                                             {"hostIPs": {"atomic", nil}},
	"io.k8s.api.core.v1.ResourceRequirements":                                  {"claims": {"map", []string{"name"}}},
	"io.k8s.api.core.v1.ResourceStatus":                                        {"resources": {"map", []string{"resourceID"}}},
	"io.k8s.api.core.v1.ContainerRestartRuleOnExitCodes":                       {"values": {"set", nil}},
	"io.k8s.api.admissionregistration.v1.ValidatingAdmissionPolicyBindingSpec": {"validationActions": {"set", nil}},
}

// smdAtomicStructs are the structs Kubernetes marks +structType=atomic:
// an applier owns them whole.
var smdAtomicStructs = []string{
	"io.k8s.api.core.v1.SecretReference", "io.k8s.api.core.v1.FileKeySelector",
	"io.k8s.api.core.v1.ObjectFieldSelector", "io.k8s.api.core.v1.ResourceFieldSelector",
	"io.k8s.api.core.v1.ConfigMapKeySelector", "io.k8s.api.core.v1.SecretKeySelector",
	"io.k8s.api.core.v1.NodeSelector", "io.k8s.api.core.v1.NodeSelectorTerm",
	"io.k8s.api.core.v1.TopologySelectorTerm", "io.k8s.api.core.v1.EndpointAddress",
	"io.k8s.api.core.v1.EndpointPort", "io.k8s.api.core.v1.ObjectReference",
	"io.k8s.api.core.v1.LocalObjectReference", "io.k8s.api.core.v1.TypedLocalObjectReference",
	"io.k8s.api.core.v1.ScopeSelector", "io.k8s.apimachinery.pkg.apis.meta.v1.OwnerReference",
	"io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector",
}

// smdAtomicMaps are the map fields Kubernetes marks +mapType=atomic.
var smdAtomicMaps = map[string][]string{
	"io.k8s.api.core.v1.PodSpec":                   {"nodeSelector"},
	"io.k8s.api.core.v1.ReplicationControllerSpec": {"selector"},
	"io.k8s.api.core.v1.ServiceSpec":               {"selector"},
}

// smdKeyDefaults are the defaults (+default markers) of list map keys: an
// applied port without a protocol is the TCP port of that number.
var smdKeyDefaults = map[string]map[string]any{
	"io.k8s.api.core.v1.ContainerPort": {"protocol": "TCP"},
	"io.k8s.api.core.v1.ServicePort":   {"protocol": "TCP"},
}

// builtinTypeConverter types every built-in kind of the catalogue. Built
// once, never changed.
var builtinTypeConverter = sync.OnceValues(func() (managedfields.TypeConverter, error) {
	return newTypeConverter(api.Resources())
})

// newTypeConverter builds the converter of the catalogue's kinds that have
// Go types.
func newTypeConverter(served api.Catalogue) (managedfields.TypeConverter, error) {
	b := newSchemaBuilder(false)
	for _, res := range served {
		if res.Unstructured() {
			continue
		}
		name := b.define(reflect.TypeOf(res.New()))
		b.defs[name]["x-kubernetes-group-version-kind"] = []any{map[string]any{"group": res.Group, "version": res.Version, "kind": res.Kind}}
	}
	for def, fields := range smdListOverrides {
		props, _ := b.defs[def]["properties"].(map[string]any)
		for f, shape := range fields {
			p, ok := props[f].(map[string]any)
			if !ok {
				continue
			}
			p["x-kubernetes-list-type"] = shape.listType
			if shape.keys != nil {
				p["x-kubernetes-list-map-keys"] = shape.keys
			}
		}
	}
	for _, def := range smdAtomicStructs {
		if d, ok := b.defs[def]; ok {
			d["x-kubernetes-map-type"] = "atomic"
		}
	}
	for def, fields := range smdAtomicMaps {
		props, _ := b.defs[def]["properties"].(map[string]any)
		for _, f := range fields {
			if p, ok := props[f].(map[string]any); ok {
				p["x-kubernetes-map-type"] = "atomic"
			}
		}
	}
	for def, fields := range smdKeyDefaults {
		props, _ := b.defs[def]["properties"].(map[string]any)
		for f, v := range fields {
			if p, ok := props[f].(map[string]any); ok {
				p["default"] = v
			}
		}
	}
	data, err := json.Marshal(b.defs)
	if err != nil {
		return nil, fmt.Errorf("type converter: %w", err)
	}
	var models map[string]*spec.Schema
	if err := json.Unmarshal(data, &models); err != nil {
		return nil, fmt.Errorf("type converter: %w", err)
	}
	tc, err := managedfields.NewTypeConverter(models, false)
	if err != nil {
		return nil, fmt.Errorf("type converter: %w", err)
	}
	return tc, nil
}

// typeConverterFor returns the converter of res's objects: its own, the
// built-in kinds' one, or one deduced from each object.
func typeConverterFor(res *api.Resource) (managedfields.TypeConverter, error) {
	switch {
	case res.TypeConverter != nil:
		return res.TypeConverter, nil
	case res.Unstructured():
		return managedfields.NewDeducedTypeConverter(), nil
	}
	tc, err := builtinTypeConverter()
	if err != nil {
		return nil, err
	}
	if _, err := tc.ObjectToTyped(res.NewObject()); err == nil {
		return tc, nil
	}
	return newTypeConverter(api.Catalogue{res}) // a kind outside the catalogue
}
