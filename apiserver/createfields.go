package apiserver

import (
	"encoding/json"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/typed"

	"github.com/minictl/minictl/api"
)

// A create's managedFields, built directly. The field manager records a
// create as an Update from an empty object: it converts both objects to
// typed values, compares them, strips the metadata the server owns, and
// encodes one entry. Nothing about a create needs the general machinery
// (no live managedFields to decode, no other managers to take fields
// from, no version to convert), so createFields does the same steps
// alone, with the empty object typed once per resource:
//
//   - the entry is the writer's Update of every field the comparison of
//     the empty object with the new one finds added or modified, less the
//     reset fields (status, when the kind has a status subresource) and
//     apiVersion, kind and the server-set metadata, exactly as the field
//     manager records it (createfields_test.go compares the two for
//     every built-in kind);
//   - an object that arrives with managedFields, or that the type
//     converter rejects, takes the field manager's path, which decides
//     what those mean.

// createFields builds one resource's create entries.
type createFields struct {
	res        *api.Resource
	tc         managedfields.TypeConverter
	apiVersion string
	reset      fieldpath.Filter // nil when nothing is reset
	empty      func() (*typed.TypedValue, error)
}

// stripOnCreate are the fields the field manager never records: the
// type and what the server sets in metadata.
var stripOnCreate = fieldpath.NewSet(
	fieldpath.MakePathOrDie("apiVersion"),
	fieldpath.MakePathOrDie("kind"),
	fieldpath.MakePathOrDie("metadata"),
	fieldpath.MakePathOrDie("metadata", "name"),
	fieldpath.MakePathOrDie("metadata", "namespace"),
	fieldpath.MakePathOrDie("metadata", "creationTimestamp"),
	fieldpath.MakePathOrDie("metadata", "selfLink"),
	fieldpath.MakePathOrDie("metadata", "uid"),
	fieldpath.MakePathOrDie("metadata", "clusterName"),
	fieldpath.MakePathOrDie("metadata", "generation"),
	fieldpath.MakePathOrDie("metadata", "managedFields"),
	fieldpath.MakePathOrDie("metadata", "resourceVersion"),
)

func newCreateFields(res *api.Resource, tc managedfields.TypeConverter, reset fieldpath.Filter) *createFields {
	return &createFields{
		res: res, tc: tc, apiVersion: res.APIVersion(), reset: reset,
		empty: sync.OnceValues(func() (*typed.TypedValue, error) {
			empty := res.NewObject()
			setTypeMeta(res, empty)
			return tc.ObjectToTyped(empty, typed.AllowDuplicates)
		}),
	}
}

// record sets obj's managedFields to manager's Update entry of every
// field obj sets. ok is false when obj must take the field manager's
// path instead; obj is then unchanged.
func (c *createFields) record(obj api.Object, manager string, now time.Time) (ok bool) {
	if obj.GetManagedFields() != nil {
		return false
	}
	empty, err := c.empty()
	if err != nil {
		return false
	}
	setTypeMeta(c.res, obj)
	tv, err := c.tc.ObjectToTyped(obj, typed.AllowDuplicates)
	if err != nil {
		return false
	}
	cmp, err := empty.Compare(tv)
	if err != nil {
		return false
	}
	set := cmp.Modified.Union(cmp.Added)
	if c.reset != nil {
		set = c.reset.Filter(set)
	}
	set = set.Difference(stripOnCreate)
	if set.Empty() {
		return true
	}
	fields, err := set.ToJSON()
	if err != nil {
		return false
	}
	if manager == "" {
		manager = "unknown"
	}
	entry := metav1.ManagedFieldsEntry{
		Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: c.apiVersion,
		Time: &metav1.Time{Time: now.UTC()}, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: fields},
	}
	if u, ok := obj.(*unstructured.Unstructured); !ok || !setUnstructuredEntry(u, entry) {
		obj.SetManagedFields([]metav1.ManagedFieldsEntry{entry})
	}
	return true
}

// setUnstructuredEntry sets u's managedFields to the one entry e, as
// Unstructured.SetManagedFields does, directly: that converts the entry
// by reflection (its fieldsV1 through JSON and back) and then copies
// what it made. It reports false, changing nothing, where u has no
// metadata to set it in.
func setUnstructuredEntry(u *unstructured.Unstructured, e metav1.ManagedFieldsEntry) bool {
	meta, ok := u.Object["metadata"].(map[string]any)
	if !ok {
		return false
	}
	var fields map[string]any
	if err := json.Unmarshal(e.FieldsV1.Raw, &fields); err != nil {
		return false
	}
	meta["managedFields"] = []any{map[string]any{
		"manager": e.Manager, "operation": string(e.Operation), "apiVersion": e.APIVersion,
		"time": e.Time.ToUnstructured(), "fieldsType": e.FieldsType, "fieldsV1": fields,
	}}
	return true
}
