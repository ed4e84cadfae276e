package apiserver

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/mergepatch"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

// A strategic merge patch is applied by k8s.io/apimachinery's
// strategicpatch, as kube-apiserver applies it. Merging a list of the
// patch into the object's list of the same field (by merge key, a list of
// primitives with the merge strategy, or $setElementOrder) compares every
// item of one with every item of the other: a patch of 8,000 containers
// against a pod of 8,000 took half a minute. Before merging, minictl adds
// up these products over the patch's lists and refuses a patch whose sum
// passes MaxStrategicMergeListPairs; lists replaced whole cost nothing.

// strategicMergePatch applies patch to the object orig, whose Go type is
// that of dataStruct, as strategicpatch.StrategicMergePatch does, once its
// lists are found cheap enough to merge.
func strategicMergePatch(orig, patch []byte, dataStruct any) ([]byte, error) {
	schema, err := strategicpatch.NewPatchMetaFromStruct(dataStruct)
	if err != nil {
		return nil, err
	}
	var origMap, patchMap map[string]any
	if json.Unmarshal(orig, &origMap) != nil || json.Unmarshal(patch, &patchMap) != nil {
		return nil, mergepatch.ErrBadJSONDoc
	}
	lengths := map[string]int{}
	listLengths(origMap, "", lengths)
	if pairs := listPairs(patchMap, schema, "", lengths); pairs > MaxStrategicMergeListPairs {
		return nil, &apierrors.StatusError{ErrStatus: metav1.Status{
			Status: metav1.StatusFailure,
			Code:   http.StatusUnprocessableEntity,
			Reason: metav1.StatusReasonInvalid,
			Message: fmt.Sprintf("the strategic merge patch merges lists that would compare %d pairs of items; "+
				"the most minictl compares for one patch is %d (send a merge patch to replace a long list)", pairs, MaxStrategicMergeListPairs),
		}}
	}
	merged, err := strategicpatch.StrategicMergeMapPatchUsingLookupPatchMeta(origMap, patchMap, schema)
	if err != nil {
		return nil, err
	}
	return json.Marshal(merged)
}

// listLengths records, for each list in v (the object, at path), the
// length of the longest list at that path; a list's items are at its path
// plus "[]".
func listLengths(v any, path string, into map[string]int) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			listLengths(e, path+"/"+k, into)
		}
	case []any:
		into[path] = max(into[path], len(v))
		for _, e := range v {
			if m, ok := e.(map[string]any); ok {
				listLengths(m, path+"[]", into)
			}
		}
	}
}

// listPairs is how many pairs of items merging the lists of patch (at
// path, of the type schema describes) into the object may compare: for
// each list merged item by item, its length times that of the object's
// longest list at the same path (plus, for a $setElementOrder list, the
// patch's own list it orders).
func listPairs(patch map[string]any, schema strategicpatch.LookupPatchMeta, path string, lengths map[string]int) int {
	pairs := 0
	for k, v := range patch {
		name, directive := k, ""
		for _, d := range []string{"$setElementOrder/", "$deleteFromPrimitiveList/"} {
			if n, ok := strings.CutPrefix(k, d); ok {
				name, directive = n, d
			}
		}
		if directive == "" && strings.HasPrefix(k, "$") {
			continue // $patch, $retainKeys: no list to merge
		}
		switch v := v.(type) {
		case map[string]any:
			if sub, _, err := schema.LookupPatchMetadataForStruct(name); err == nil {
				pairs += listPairs(v, sub, path+"/"+name, lengths)
			}
		case []any:
			sub, meta, err := schema.LookupPatchMetadataForSlice(name)
			if err != nil {
				continue
			}
			if directive != "" || slices.Contains(meta.GetPatchStrategies(), "merge") {
				pairs += len(v) * lengths[path+"/"+name]
			}
			if list, ok := patch[name].([]any); ok && directive == "$setElementOrder/" {
				pairs += len(v) * len(list)
			}
			for _, e := range v {
				if m, ok := e.(map[string]any); ok {
					pairs += listPairs(m, sub, path+"/"+name+"[]", lengths)
				}
			}
		}
	}
	return pairs
}
