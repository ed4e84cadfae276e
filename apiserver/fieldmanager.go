package apiserver

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/minictl/minictl/api"
)

// Every write records who set which fields in metadata.managedFields, as
// kube-apiserver does, with apimachinery's field manager (the one
// kube-apiserver runs):
//
//   - create, update and every patch but apply record an Update entry for
//     the writer (?fieldManager=, else the User-Agent up to its first
//     "/"), of the fields it changed; a server-side apply records an Apply
//     entry of the fields its configuration names, and may take them from
//     others only with force (merge.go's conflicts, a 409 otherwise);
//   - writes to status and scale record entries with that subresource;
//   - managedFields a client sends replace the object's (an empty list
//     resets them); an Apply may not send any.
//
// Each resource has one field manager per subresource, built once, on the
// resource's type converter (typeconverter.go).

// fieldManagers are one resource's field managers, by subresource.
type fieldManagers struct {
	main, status, scale *managedfields.FieldManager
	// create records creates as main would, directly (createfields.go).
	create *createFields
	// noops are the applies the field managers found nothing to change in.
	noops applyNoops
}

// Unchanged applies, remembered. A controller or a GitOps loop applies
// the same configuration to the same object again and again, and almost
// always finds nothing to change; the field manager's merge, which decides
// that, was most of such an apply's work. FieldManager.Apply is a function
// of the live object, the configuration, the manager and force, with one
// exception: when its merge changes the object, it stamps the manager's
// entry with the time. When the merge changes nothing, it returns the live
// object as it was, its managedFields re-encoded, and the time plays no
// part. So an Apply whose result equals the live object (semantically;
// a stamp of the time, to the nanosecond, is not what the live object
// holds) returns the same for the same inputs, and applyNoops remembers
// those inputs: the object's uid and resourceVersion (which name its
// content: any write moves the resourceVersion), the subresource, the
// manager, force and the configuration's bytes (by their SHA-256, so that
// what is remembered stays small). An apply that matches
// skips the merge and goes on with the live object; admission, validation
// and the comparison with what etcd holds run as they always do.
type applyNoops struct {
	mu   sync.Mutex
	last map[noopKey]noopEntry
}

// appliedCall is what an apply hands the field manager besides the live
// object.
type appliedCall struct {
	sub, manager string
	force        bool
	config       [sha256.Size]byte // the SHA-256 of the configuration, as sent
}

type noopKey struct{ namespace, name, sub string }

type noopEntry struct {
	uid  types.UID
	rv   string
	call appliedCall
}

// noopsKept bounds how many objects' last unchanged apply is remembered.
const noopsKept = 1024

// has reports whether applying call to obj was found to change nothing.
func (n *applyNoops) has(obj api.Object, call appliedCall) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	e, ok := n.last[noopKey{obj.GetNamespace(), obj.GetName(), call.sub}]
	return ok && e.uid == obj.GetUID() && e.rv == obj.GetResourceVersion() && e.rv != "" && e.call == call
}

// add remembers that applying call to obj changed nothing.
func (n *applyNoops) add(obj api.Object, call appliedCall) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.last == nil {
		n.last = map[noopKey]noopEntry{}
	}
	key := noopKey{obj.GetNamespace(), obj.GetName(), call.sub}
	if _, ok := n.last[key]; !ok && len(n.last) >= noopsKept {
		for k := range n.last { // any one goes
			delete(n.last, k)
			break
		}
	}
	n.last[key] = noopEntry{uid: obj.GetUID(), rv: obj.GetResourceVersion(), call: call}
}

// forSubresource returns the field manager of writes to sub ("",
// "status" or "scale").
func (f *fieldManagers) forSubresource(sub string) *managedfields.FieldManager {
	switch sub {
	case "status":
		return f.status
	case "scale":
		return f.scale
	}
	return f.main
}

// newFieldManagers builds res's field managers. Main-resource writes do
// not own status when the kind has a status subresource, and status
// writes do not own spec (kube's reset fields).
func newFieldManagers(res *api.Resource) (*fieldManagers, error) {
	tc, err := typeConverterFor(res)
	if err != nil {
		return nil, err
	}
	gvk := res.GroupVersion().WithKind(res.Kind)
	c := objectConvertor{res: res}
	build := func(sub string, reset *fieldpath.Set) (*managedfields.FieldManager, error) {
		var resetFields map[fieldpath.APIVersion]fieldpath.Filter
		if reset != nil {
			resetFields = map[fieldpath.APIVersion]fieldpath.Filter{
				fieldpath.APIVersion(res.APIVersion()): fieldpath.NewExcludeSetFilter(reset),
			}
		}
		if res.Unstructured() {
			return managedfields.NewDefaultCRDFieldManager(tc, c, c, c, gvk, gvk.GroupVersion(), sub, resetFields)
		}
		return managedfields.NewDefaultFieldManager(tc, c, c, c, gvk, gvk.GroupVersion(), sub, resetFields)
	}
	var mainReset, statusReset *fieldpath.Set
	if res.HasSubresource("status") {
		mainReset = fieldpath.NewSet(fieldpath.MakePathOrDie("status"))
		statusReset = fieldpath.NewSet(fieldpath.MakePathOrDie("spec"))
	}
	f := &fieldManagers{}
	if mainReset != nil {
		f.create = newCreateFields(res, tc, fieldpath.NewExcludeSetFilter(mainReset))
	} else {
		f.create = newCreateFields(res, tc, nil)
	}
	if f.main, err = build("", mainReset); err != nil {
		return nil, err
	}
	if f.status, err = build("status", statusReset); err != nil {
		return nil, err
	}
	if f.scale, err = build("scale", nil); err != nil {
		return nil, err
	}
	return f, nil
}

// objectConvertor is what the field manager needs to move res's objects
// between their Go type and the unstructured maps structured-merge-diff
// returns, and to default and create them. minictl serves one version of
// each kind, so no conversion changes a version.
type objectConvertor struct{ res *api.Resource }

func (c objectConvertor) ConvertToVersion(in runtime.Object, _ runtime.GroupVersioner) (runtime.Object, error) {
	u, ok := in.(*unstructured.Unstructured)
	if !ok || c.res.Unstructured() {
		return in, nil
	}
	out := c.res.NewObject()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
		return nil, fmt.Errorf("convert to %s: %w", c.res.Kind, err)
	}
	setTypeMeta(c.res, out)
	return out, nil
}

func (c objectConvertor) Convert(in, out, _ any) error {
	u, ok := in.(*unstructured.Unstructured)
	if !ok {
		return fmt.Errorf("convert %T: only unstructured objects convert", in)
	}
	return runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out)
}

func (c objectConvertor) ConvertFieldLabel(_ schema.GroupVersionKind, label, value string) (string, string, error) {
	return label, value, nil
}

func (c objectConvertor) Default(obj runtime.Object) {
	if o, ok := obj.(api.Object); ok && c.res.Default != nil {
		c.res.Default(o)
	}
}

func (c objectConvertor) New(schema.GroupVersionKind) (runtime.Object, error) {
	return c.res.NewObject(), nil
}

// managerOrUserAgent is the field manager a write is recorded for: the
// ?fieldManager= it names, else its User-Agent's product (what precedes
// the first "/"), printable characters only, at most 128 bytes.
func managerOrUserAgent(r *http.Request) string {
	if m := r.URL.Query().Get("fieldManager"); m != "" {
		return m
	}
	product, _, _ := strings.Cut(r.UserAgent(), "/")
	var buf bytes.Buffer
	for _, c := range product {
		if !unicode.IsPrint(c) {
			continue
		}
		if buf.Len()+utf8.RuneLen(c) > metav1validation.FieldManagerMaxLength {
			break
		}
		buf.WriteRune(c)
	}
	return buf.String()
}

// recordCreate sets the managedFields of obj, about to be created, for
// manager: directly when it can, else through the field manager.
func recordCreate(fm *fieldManagers, res *api.Resource, obj api.Object, manager string) api.Object {
	if fm.create.record(obj, manager, time.Now()) {
		return obj
	}
	return recordUpdate(fm.main, res, nil, obj, manager)
}

// recordUpdate sets obj's managedFields for a write other than an apply,
// from old (the live object; nil on create) to obj, by manager.
func recordUpdate(fm *managedfields.FieldManager, res *api.Resource, old, obj api.Object, manager string) api.Object {
	if old == nil {
		old = res.NewObject()
	}
	setTypeMeta(res, old)
	setTypeMeta(res, obj)
	out, ok := fm.UpdateNoErrors(old, obj, manager).(api.Object)
	if !ok {
		return obj
	}
	return out
}
