package crd

import (
	"sort"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	kjson "sigs.k8s.io/json"
)

// metaFields belong to every resource, embedded ones included, whatever
// their schema says.
var metaFields = map[string]bool{"apiVersion": true, "kind": true, "metadata": true}

// pruner walks an object beside its schema, dropping what the schema does
// not know and recording the dropped paths in kube's notation
// ("spec.foo", "spec.list[0].bar").
type pruner struct {
	unknown []string
}

func (p *pruner) record(path string) { p.unknown = append(p.unknown, path) }

func joinKey(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func joinIndex(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

// prune drops the fields of x that s does not specify; below
// x-kubernetes-preserve-unknown-fields it keeps unknown fields but still
// prunes inside the known ones.
func (p *pruner) prune(path string, x any, s *structural) {
	if s != nil && s.PreserveUnknownFields {
		p.skipPrune(path, x, s)
		return
	}
	switch x := x.(type) {
	case map[string]any:
		if s == nil {
			for k := range x {
				p.record(joinKey(path, k))
				delete(x, k)
			}
			return
		}
		for k, v := range x {
			if s.EmbeddedResource && metaFields[k] {
				if k == "metadata" {
					p.coerceMetadata(path, x)
				}
				continue
			}
			if prop, ok := s.Properties[k]; ok {
				p.prune(joinKey(path, k), v, prop)
			} else if s.AdditionalProperties != nil || s.AdditionalAny {
				p.prune(joinKey(path, k), v, s.AdditionalProperties)
			} else {
				if !metaFields[k] || path != "" {
					p.record(joinKey(path, k))
				}
				delete(x, k)
			}
		}
	case []any:
		var items *structural
		if s != nil {
			items = s.Items
		}
		for i, v := range x {
			p.prune(joinIndex(path, i), v, items)
		}
	}
}

func (p *pruner) skipPrune(path string, x any, s *structural) {
	if s == nil {
		return
	}
	switch x := x.(type) {
	case map[string]any:
		for k, v := range x {
			if s.EmbeddedResource && metaFields[k] {
				if k == "metadata" {
					p.coerceMetadata(path, x)
				}
				continue
			}
			if prop, ok := s.Properties[k]; ok {
				p.prune(joinKey(path, k), v, prop)
			} else if s.AdditionalProperties != nil {
				p.prune(joinKey(path, k), v, s.AdditionalProperties)
			}
		}
	case []any:
		for i, v := range x {
			p.skipPrune(joinIndex(path, i), v, s.Items)
		}
	}
}

// coerceMetadata keeps only ObjectMeta's fields in obj's metadata, as
// kube-apiserver does by decoding it into ObjectMeta and back. Metadata
// that does not decode is left alone for Validate to report.
func (p *pruner) coerceMetadata(path string, obj map[string]any) {
	raw, err := utiljson.Marshal(obj["metadata"])
	if err != nil {
		return
	}
	meta := &metav1.ObjectMeta{}
	strictErrs, err := kjson.UnmarshalStrict(raw, meta)
	if err != nil {
		return
	}
	if len(strictErrs) == 0 {
		return // nothing unknown: keep the map as it came
	}
	prefix := joinKey(path, "metadata")
	for _, e := range strictErrs {
		if fe, ok := e.(kjson.FieldError); ok {
			p.record(prefix + "." + fe.FieldPath())
		}
	}
	u, err := metaToMap(meta)
	if err != nil {
		return
	}
	obj["metadata"] = u
}

// metaToMap encodes meta as unstructured JSON, without the zero
// creationTimestamp that ObjectMeta's encoding would add.
func metaToMap(meta *metav1.ObjectMeta) (map[string]any, error) {
	raw, err := utiljson.Marshal(meta)
	if err != nil {
		return nil, err
	}
	var u map[string]any
	if err := utiljson.Unmarshal(raw, &u); err != nil {
		return nil, err
	}
	if meta.CreationTimestamp.IsZero() {
		delete(u, "creationTimestamp")
	}
	return u, nil
}

// Prune drops from obj (a whole custom object) every field the schema does
// not know, as kube-apiserver does when it decodes one, and returns the
// paths it dropped, sorted, in kube's notation ("spec.foo",
// "spec.items[0].bar", "metadata.foo"): the API server reports each as
// `unknown field "spec.foo"` for fieldValidation=Strict and Warn. The
// object's metadata keeps only ObjectMeta's fields, and so does the
// metadata of every embedded resource.
func (s *Schema) Prune(obj map[string]any) (unknown []string) {
	p := &pruner{}
	p.prune("", obj, s.root.withEmbedded())
	sort.Strings(p.unknown)
	return p.unknown
}
