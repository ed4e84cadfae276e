package crd

import (
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateLists checks the invariants of x-kubernetes-list-type: the items
// of a set are unique, and so are the keys of a map's items.
func validateLists(pth *field.Path, s *structural, x any) field.ErrorList {
	if s == nil || s.noListsBelow {
		return nil
	}
	var errs field.ErrorList
	switch x := x.(type) {
	case map[string]any:
		for k, v := range x {
			if prop, ok := s.Properties[k]; ok {
				errs = append(errs, validateLists(pth.Child(k), prop, v)...)
			} else if s.AdditionalProperties != nil {
				errs = append(errs, validateLists(pth.Key(k), s.AdditionalProperties, v)...)
			}
		}
	case []any:
		switch s.ListType {
		case "set":
			for _, i := range duplicates(x) {
				errs = append(errs, field.Duplicate(pth.Index(i), x[i]))
			}
		case "map":
			errs = append(errs, validateListMap(pth, s, x)...)
		}
		for i, v := range x {
			errs = append(errs, validateLists(pth.Index(i), s.Items, v)...)
		}
	}
	return errs
}

// duplicates returns the index of the second occurrence of every value
// that occurs more than once in list.
func duplicates(list []any) []int {
	if len(list) <= 1 {
		return nil
	}
	seen := make(map[any]int, len(list))
	var dups []int
	for i, x := range list {
		var key any = x
		switch x.(type) {
		case map[string]any, []any:
			b, err := utiljson.Marshal(x)
			if err != nil {
				continue
			}
			key = struct{ json string }{string(b)}
		}
		seen[key]++
		if seen[key] == 2 {
			dups = append(dups, i)
		}
	}
	return dups
}

func validateListMap(pth *field.Path, s *structural, list []any) field.ErrorList {
	for i, x := range list {
		if _, ok := x.(map[string]any); x != nil && !ok {
			return field.ErrorList{field.Invalid(pth.Index(i), x, "must be an object for an array of list-type map")}
		}
	}
	if len(list) <= 1 {
		return nil
	}
	keys := make([]any, len(list))
	for i, x := range list {
		key := map[string]any{}
		if m, ok := x.(map[string]any); ok {
			for _, k := range s.ListMapKeys {
				if v, ok := m[k]; ok {
					key[k] = v
				}
			}
		}
		keys[i] = key
	}
	var errs field.ErrorList
	for _, i := range duplicates(keys) {
		errs = append(errs, field.Duplicate(pth.Index(i), keys[i]))
	}
	return errs
}
