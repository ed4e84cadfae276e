package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/minictl/minictl/api"
)

// DefaultMaxRequestBodyBytes is the largest body the server reads, as in
// kube-apiserver (3 MiB); larger bodies get 413 and change nothing.
const DefaultMaxRequestBodyBytes = 3 << 20

var objectMediaTypes = []string{"application/json", "application/yaml", mimeProtobuf}

// presizeBodyBytes bounds what a request's Content-Length alone makes
// readBody reserve: enough for an ordinary object in one buffer, while a
// client that announces megabytes and sends nothing holds little.
const presizeBodyBytes = 64 << 10

// readBody reads at most limit bytes of the request body; a longer body is a
// 413 RequestEntityTooLarge, refused before reading when its Content-Length
// says so. Beyond presizeBodyBytes the buffer grows with what arrives, never
// with what the client announces.
func readBody(r *http.Request, limit int64) ([]byte, error) {
	tooLarge := func() error {
		return apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("limit is %d bytes", limit))
	}
	if r.ContentLength > limit {
		return nil, tooLarge()
	}
	// Read into a buffer of the announced size, one byte more to see the
	// end without growing it; a larger body, or one of unknown size, grows
	// as it comes.
	size := int64(512)
	if r.ContentLength >= 0 {
		size = min(r.ContentLength+1, presizeBodyBytes)
	}
	body := make([]byte, 0, size)
	in := io.LimitReader(r.Body, limit+1)
	for {
		if len(body) == cap(body) {
			body = slices.Grow(body, len(body))
		}
		n, err := in.Read(body[len(body):cap(body)])
		body = body[:len(body)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("read request body: %v", err))
		}
	}
	if int64(len(body)) > limit {
		return nil, tooLarge()
	}
	return body, nil
}

// mediaType returns the request's Content-Type without parameters. A
// body without one is refused (415), as kube-apiserver refuses it: what a
// web page may send across sites without asking (a form, text/plain, no
// type at all) is never decoded as an object.
func mediaType(r *http.Request) string {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return ""
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return ct
	}
	return mt
}

// toJSON turns a JSON, YAML or protobuf body into JSON no deeper than
// MaxNestingDepth. The YAML decoder refuses a document that is mostly
// expanded aliases; what it accepts may still expand, so its JSON is held to
// the body size limit too.
func (s *Server) toJSON(mt string, body []byte) ([]byte, error) {
	switch mt {
	case "application/json":
		if err := checkNesting("the body", body); err != nil {
			return nil, err
		}
		return body, nil
	case mimeProtobuf:
		return protobufToJSON(body)
	case "application/yaml", "application/x-yaml", "text/yaml":
		if err := checkYAMLSize(body); err != nil {
			return nil, err
		}
		j, err := yaml.YAMLToJSON(body)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("the body is not valid YAML: %v", err))
		}
		if int64(len(j)) > s.maxBody {
			return nil, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf(
				"the YAML body expands to %d bytes of JSON; the limit is %d bytes", len(j), s.maxBody))
		}
		if err := checkNesting("the body", j); err != nil {
			return nil, err
		}
		return j, nil
	}
	return nil, newUnsupportedMediaType(mt, objectMediaTypes)
}

// decodeObject reads an object of res from the request body (JSON or YAML).
// The body's kind and apiVersion, when given, must be res's; unknown fields
// are treated as ?fieldValidation= says (fieldvalidation.go).
func (s *Server) decodeObject(r *http.Request, res *api.Resource) (api.Object, error) {
	fv, err := writeOptions(r)
	if err != nil {
		return nil, err
	}
	body, err := readBody(r, s.maxBody)
	if err != nil {
		return nil, err
	}
	mt := mediaType(r)
	if mt == mimeProtobuf {
		return decodeProtobuf(res, body)
	}
	data, err := s.toJSON(mt, body)
	if err != nil {
		return nil, err
	}
	return decodeInto(r.Context(), res, data, fv)
}

func decodeInto(ctx context.Context, res *api.Resource, data []byte, fv fieldValidation) (api.Object, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, apierrors.NewBadRequest("the request body is empty; send a " + res.Kind + " object")
	}
	obj := res.New()
	if !decodeExactly(data, obj) {
		var err error
		if obj, err = decodeAsKubernetes(ctx, res, data, fv); err != nil {
			return nil, err
		}
	}
	gvk := obj.GetObjectKind().GroupVersionKind()
	if gvk.Kind != "" && gvk.Kind != res.Kind {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the body is a %s, but this URL serves %s (kind %s)", gvk.Kind, res.Plural, res.Kind))
	}
	if av := obj.GetObjectKind().GroupVersionKind().GroupVersion().String(); gvk.Version != "" && av != res.APIVersion() {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the body has apiVersion %q, but this URL serves %q", av, res.APIVersion()))
	}
	setTypeMeta(res, obj)
	if err := prune(ctx, res, obj, fv); err != nil {
		return nil, err
	}
	return obj, nil
}

// prune drops the fields a custom resource's schema does not know, as
// kube-apiserver does as it decodes one, and treats them as fv says, as
// unknown fields of a built-in kind.
func prune(ctx context.Context, res *api.Resource, obj api.Object, fv fieldValidation) error {
	if res.Schema == nil {
		return nil
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil
	}
	unknown := res.Schema.Prune(u.Object)
	if len(unknown) == 0 || fv == fieldIgnore {
		return nil
	}
	msgs := make([]string, len(unknown))
	for i, f := range unknown {
		msgs[i] = fmt.Sprintf("unknown field %q", f)
	}
	if fv == fieldStrict {
		return apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: strict decoding error: %s",
			res.Kind, res.Version, res.Kind, strings.Join(msgs, ", ")))
	}
	for _, m := range msgs {
		addWarning(ctx, m)
	}
	return nil
}

// decodeAsKubernetes decodes what decodeExactly refused: strictly, with
// fv applied to unknown and duplicate fields, and with encoding/json's
// description of a body that does not decode at all.
func decodeAsKubernetes(ctx context.Context, res *api.Resource, data []byte, fv fieldValidation) (api.Object, error) {
	obj := res.New()
	ok, err := decodeStrictly(ctx, res, data, obj, fv)
	if err != nil || ok {
		return obj, err
	}
	obj = res.New()
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(obj); err != nil {
		return nil, apierrors.NewBadRequest(describeJSONError(res, err))
	}
	if dec.More() {
		return nil, apierrors.NewBadRequest("the request body holds more than one JSON value")
	}
	return obj, nil
}

// decodeExactly decodes data into obj, a new object, with the standard
// library's encoding/json/v2 (github.com/go-json-experiment/json is its
// mirror for Go releases before 1.27), which decodes a pod about twice as
// fast as encoding/json with a third of the allocations. It reports false,
// leaving obj half-filled, for anything but the plain case: a single JSON
// object whose every name is one of the kind's fields, spelled exactly,
// once, in valid UTF-8. What it accepts it decodes as Kubernetes' strict
// decoder does (TestDecodeExactlyAgrees); the rest takes that decoder's
// path, which words warnings and errors as Kubernetes does.
//
// A kind with a field json/v2 reads otherwise than the strict decoder (a
// number into an interface{}, a float, a duration) never takes it: see
// exactTypes.
func decodeExactly(data []byte, obj api.Object) bool {
	if !exactType(reflect.TypeOf(obj)) {
		return false
	}
	return jsonv2.Unmarshal(data, obj, jsonv2.RejectUnknownMembers(true)) == nil
}

// exactTypes caches exactType's answer by type.
var exactTypes sync.Map // reflect.Type → bool

// exactType reports whether json/v2 decodes every field of typ as
// Kubernetes' strict decoder does: typ has no interface{}, float or
// time.Duration field, short of a type that decodes itself
// (json.Unmarshaler, as unstructured objects do).
func exactType(typ reflect.Type) bool {
	if ok, found := exactTypes.Load(typ); found {
		return ok.(bool)
	}
	ok := exactFields(typ, map[reflect.Type]bool{}, true)
	exactTypes.Store(typ, ok)
	return ok
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

func exactFields(typ reflect.Type, seen map[reflect.Type]bool, top bool) bool {
	if seen[typ] {
		return true
	}
	seen[typ] = true
	if top && (typ.Implements(unmarshalerType) || reflect.PointerTo(typ).Implements(unmarshalerType)) {
		return true
	}
	switch typ.Kind() {
	case reflect.Interface, reflect.Float32, reflect.Float64:
		return false
	case reflect.Int64:
		return typ != reflect.TypeFor[time.Duration]()
	case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Map:
		return exactFields(typ.Elem(), seen, typ.Kind() == reflect.Pointer && top)
	case reflect.Struct:
		for f := range typ.Fields() {
			if f.IsExported() && !exactFields(f.Type, seen, false) {
				return false
			}
		}
	}
	return true
}

func describeJSONError(res *api.Resource, err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Sprintf("the body is not valid JSON: %v (at byte %d)", syn, syn.Offset)
	case errors.As(err, &typ):
		return fmt.Sprintf("%s in version %q cannot be handled as a %s: field %s: cannot use a JSON %s as %s",
			res.Kind, res.Version, res.Kind, typ.Field, typ.Value, typ.Type)
	}
	return fmt.Sprintf("%s in version %q cannot be handled as a %s: %v", res.Kind, res.Version, res.Kind, err)
}

func setTypeMeta(res *api.Resource, obj api.Object) {
	obj.GetObjectKind().SetGroupVersionKind(res.GroupVersion().WithKind(res.Kind))
}

// encodeForStorage is the value written to etcd, without a
// resourceVersion, which is etcd's mod revision and is set on the way out:
// a built-in kind's object in Kubernetes' protobuf encoding (the
// "k8s\x00" envelope naming its apiVersion and kind), a custom object as
// JSON (see storesProtobuf). obj is already in the form res is stored in
// (see resourceStore.encode).
func encodeForStorage(res *api.Resource, obj api.Object) ([]byte, error) {
	rv := obj.GetResourceVersion()
	obj.SetResourceVersion("")
	defer obj.SetResourceVersion(rv)
	if storesProtobuf(res) {
		return protobufOf(res, obj)
	}
	return marshalObject(obj)
}

// protobufStored remembers storesProtobuf's answer for each built-in
// resource: a fixed set, unlike custom resources, whose entries are made
// again whenever their definition changes.
var protobufStored sync.Map // *api.Resource → bool

// storesProtobuf reports whether res's objects are stored as protobuf,
// as kube-apiserver stores them: those of the kinds it serves itself,
// whose k8s.io/api types have generated protobuf code. Custom objects have
// none and are stored as JSON, and so are CustomResourceDefinitions,
// which kube-apiserver's apiextensions server stores with its JSON codec.
func storesProtobuf(res *api.Resource) bool {
	if res.Group == apiextensionsv1.GroupName {
		return false
	}
	if ok, found := protobufStored.Load(res); found {
		return ok.(bool)
	}
	obj := res.New()
	if _, custom := obj.(*unstructured.Unstructured); custom {
		return false
	}
	ok := api.HasProtobuf(obj)
	protobufStored.Store(res, ok)
	return ok
}

// storedProtobuf reports whether data, a value read from etcd, is an
// object in protobuf rather than JSON. A data dir written before
// built-in kinds were stored as protobuf holds JSON; both are read.
func storedProtobuf(data []byte) bool { return api.IsProtobufObject(data) }

// marshalObject is json.Marshal(obj), the same bytes. An unstructured
// object's MarshalJSON encodes its map with encoding/json and json.Marshal
// then checks and compacts what it returned, a second pass over every
// byte; marshalling the map itself skips that pass.
func marshalObject(obj api.Object) ([]byte, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return json.Marshal(u.Object)
	}
	return json.Marshal(obj)
}

// decodeFromStorage decodes a stored value of res, the resource as it is
// stored, and stamps the revision it was stored at as its
// resourceVersion. A custom object keeps the version it was stored in,
// which is not always the definition's storage version today:
// fromStored (conversion.go) takes it the rest of the way.
func decodeFromStorage(res *api.Resource, data []byte, rev int64) (api.Object, error) {
	obj := res.New()
	switch {
	case storedProtobuf(data):
		apiVersion, kind, msg, err := api.ProtobufObject(data)
		if err == nil && (apiVersion != res.APIVersion() || kind != res.Kind) {
			err = fmt.Errorf("the value is a %s %s", apiVersion, kind)
		}
		if err == nil {
			err = api.UnmarshalProtobuf(msg, obj)
		}
		if err != nil {
			return nil, fmt.Errorf("decode stored %s: %w", res.Kind, err)
		}
	case !decodeExactly(data, obj):
		obj = res.New()
		if err := json.Unmarshal(data, obj); err != nil {
			return nil, fmt.Errorf("decode stored %s: %w", res.Kind, err)
		}
	}
	if res.Schema == nil || obj.GetObjectKind().GroupVersionKind().Version == "" {
		setTypeMeta(res, obj)
	}
	obj.SetResourceVersion(strconv.FormatInt(rev, 10))
	return obj, nil
}
