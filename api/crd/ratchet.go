package crd

import (
	"reflect"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ratchet drops, on an update, the schema errors of values the update does
// not change, as kube-apiserver's validation ratcheting does: an object
// stored under an older, looser schema can still be updated as long as the
// update leaves its now-invalid values alone.
func ratchet(errs field.ErrorList, obj, old map[string]any) field.ErrorList {
	if old == nil || len(errs) == 0 {
		return errs
	}
	kept := errs[:0]
	for _, e := range errs {
		nv, nok := lookup(obj, e.Field)
		ov, ook := lookup(old, e.Field)
		if nok == ook && reflect.DeepEqual(nv, ov) {
			continue // unchanged by this update
		}
		kept = append(kept, e)
	}
	return kept
}

// lookup finds the value at a field path as kube-openapi's validator names
// it ("spec.list[0].name"); found is false when any step is missing.
func lookup(obj map[string]any, path string) (v any, found bool) {
	v = obj
	for path != "" {
		var step string
		if strings.HasPrefix(path, "[") {
			end := strings.IndexByte(path, ']')
			if end < 0 {
				return nil, false
			}
			i, err := strconv.Atoi(path[1:end])
			list, ok := v.([]any)
			if err != nil || !ok || i < 0 || i >= len(list) {
				return nil, false
			}
			v, path = list[i], strings.TrimPrefix(path[end+1:], ".")
			continue
		}
		if end := strings.IndexAny(path, ".["); end >= 0 {
			step, path = path[:end], strings.TrimPrefix(path[end:], ".")
		} else {
			step, path = path, ""
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[step]; !ok {
			return nil, false
		}
	}
	return v, true
}
