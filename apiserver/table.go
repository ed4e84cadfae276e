package apiserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/minictl/minictl/api"
)

// A read answers in the form the client's Accept header asks for, as
// kube-apiserver does:
//
//   - application/json: the objects themselves;
//   - application/yaml: the same in YAML (not for a watch, which streams
//     JSON or protobuf only);
//   - application/json;as=Table;v=v1;g=meta.k8s.io (or v1beta1): a
//     meta.k8s.io Table, one row per object, with the columns of the kind's
//     api.Table. This is what `kubectl get` asks for and prints. Each row
//     carries the object as ?includeObject= says: its metadata as a
//     PartialObjectMetadata (Metadata, the default), the whole object
//     (Object) or nothing (None);
//   - application/json;as=PartialObjectMetadata[List];v=v1;g=meta.k8s.io:
//     the objects' metadata only, as client-go's metadata informers ask;
//   - application/vnd.kubernetes.protobuf: the objects themselves in
//     Kubernetes' protobuf encoding (api/protobuf.go), as client-go's typed
//     clients and minictl's own components ask.
//
// Accept lists alternatives in order of preference; the first one served
// wins. No Accept header is JSON; one that names nothing served is 406
// NotAcceptable, listing what is.

// outputKind is what a read answers with.
type outputKind int

const (
	asObject   outputKind = iota // the objects themselves
	asTable                      // a meta.k8s.io Table
	asMetadata                   // PartialObjectMetadata, or its List
)

// output is the negotiated form of a read's answer.
type output struct {
	kind     outputKind
	protobuf bool                       // asObject, in protobuf
	yaml     bool                       // in YAML instead of JSON
	version  string                     // meta.k8s.io version for asTable and asMetadata
	include  metav1.IncludeObjectPolicy // what each table row carries
	now      func() time.Time           // AGE columns are measured from now(), row by row: a watch lasts
}

// negotiateOutput reads the Accept header (and includeObject) of a get,
// list or watch of res. Protobuf is served only for kinds that have it:
// for the others it is passed over for the next alternative, as
// kube-apiserver does for custom resources.
func negotiateOutput(r *http.Request, verb string, res *api.Resource) (*output, error) {
	header := r.Header.Get("Accept")
	if strings.TrimSpace(header) == "" {
		return &output{kind: asObject, now: time.Now}, nil
	}
	yamlWatch := false // a watch asked for YAML, which is not streamed
	for _, accept := range strings.Split(header, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(accept))
		if err != nil {
			continue
		}
		out := &output{kind: asObject, now: time.Now}
		switch mt {
		case "application/json", "application/*", "*/*":
		case "application/yaml":
			if verb == "watch" {
				yamlWatch = true
				continue
			}
			out.yaml = true
		case mimeProtobuf:
			if params["as"] != "" || !api.HasProtobuf(res.New()) {
				continue // tables, metadata and kinds without protobuf only in JSON
			}
			out.protobuf = true
			return out, nil
		default:
			continue // CBOR and the rest: not served; try the next
		}
		if ok, err := out.transform(r, verb, params); err != nil || ok {
			return out, err
		}
	}
	if yamlWatch {
		return nil, errNotAcceptable("application/json;stream=watch", mimeProtobuf+";stream=watch")
	}
	if api.HasProtobuf(res.New()) {
		return nil, errNotAcceptable("application/json", "application/yaml", mimeProtobuf)
	}
	return nil, errNotAcceptable("application/json", "application/yaml")
}

// negotiateValue reads the Accept header of a read that answers one value
// with no Table or metadata form: the scale subresource's autoscaling/v1
// Scale (kube-apiserver's scale storage has no table convertor). JSON or
// YAML; anything else, a request for a Table only among them, is 406.
func negotiateValue(r *http.Request) (*output, error) {
	header := r.Header.Get("Accept")
	if strings.TrimSpace(header) == "" {
		return &output{kind: asObject, now: time.Now}, nil
	}
	for _, accept := range strings.Split(header, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(accept))
		if err != nil || params["as"] != "" {
			continue
		}
		switch mt {
		case "application/json", "application/*", "*/*":
			return &output{kind: asObject, now: time.Now}, nil
		case "application/yaml":
			return &output{kind: asObject, yaml: true, now: time.Now}, nil
		}
	}
	return nil, errNotAcceptable("application/json", "application/yaml")
}

// negotiateLog reads the Accept header of a pods/log request as
// kube-apiserver does, before anything else: the log is sent as text, but
// what a client may ask for are the pod's serializers' media types, and a
// log has no Table or metadata form (LogREST has no table convertor). An
// Accept that names none of them, text/plain alone included, is 406.
func negotiateLog(r *http.Request) error {
	header := r.Header.Get("Accept")
	if strings.TrimSpace(header) == "" {
		return nil
	}
	for _, accept := range strings.Split(header, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(accept))
		if err != nil || params["as"] != "" {
			continue
		}
		switch mt {
		case "application/json", "application/yaml", mimeProtobuf, "application/*", "*/*":
			return nil
		}
	}
	return errNotAcceptable("application/json", "application/yaml", mimeProtobuf)
}

// transform reads the as, g and v parameters of an accepted JSON or YAML
// media type: the objects themselves, a Table or PartialObjectMetadata. It
// reports false when it cannot serve what they ask for.
func (o *output) transform(r *http.Request, verb string, params map[string]string) (bool, error) {
	as := params["as"]
	if as == "" {
		return true, nil
	}
	if params["g"] != metav1.GroupName || (params["v"] != "v1" && params["v"] != "v1beta1") {
		return false, nil
	}
	o.version = params["v"]
	switch {
	case as == "Table":
		o.kind = asTable
	case as == "PartialObjectMetadata" && verb != "list",
		as == "PartialObjectMetadataList" && verb == "list":
		o.kind = asMetadata
		return true, nil
	default:
		return false, nil
	}
	switch p := metav1.IncludeObjectPolicy(r.URL.Query().Get("includeObject")); p {
	case "":
		o.include = metav1.IncludeMetadata
	case metav1.IncludeNone, metav1.IncludeMetadata, metav1.IncludeObject:
		o.include = p
	default:
		return false, apierrors.NewBadRequest(fmt.Sprintf("Unable to convert to Table as requested: includeObject: Unsupported value: %q: supported values: \"Metadata\", \"None\", \"Object\"", p))
	}
	return true, nil
}

// errNotAcceptable answers a read whose Accept header names no media type
// it is served in, as kube-apiserver does: 406 NotAcceptable, listing them.
func errNotAcceptable(served ...string) *apierrors.StatusError {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusNotAcceptable,
		Reason:  metav1.StatusReasonNotAcceptable,
		Message: "only the following media types are accepted: " + strings.Join(served, ", "),
	}}
}

func (o *output) apiVersion() string { return metav1.GroupName + "/" + o.version }

// partial is obj's metadata as a PartialObjectMetadata.
func (o *output) partial(obj api.Object) *metav1.PartialObjectMetadata {
	p := meta.AsPartialObjectMetadata(obj)
	p.APIVersion, p.Kind = o.apiVersion(), "PartialObjectMetadata"
	return p
}

// row is obj's table row, carrying the object as includeObject says. raw
// is obj's JSON, when the caller has it.
func (o *output) row(res *api.Resource, obj api.Object, raw []byte) (metav1.TableRow, error) {
	row := res.TableRow(obj, o.now())
	switch o.include {
	case metav1.IncludeObject:
		if raw == nil {
			var err error
			if raw, err = json.Marshal(obj); err != nil {
				return row, err
			}
		}
		row.Object = runtime.RawExtension{Raw: raw}
	case metav1.IncludeMetadata:
		row.Object = runtime.RawExtension{Object: o.partial(obj)}
	}
	return row, nil
}

// table builds a Table of objs; columns are left out when headers is
// false (every watch event after the first).
func (o *output) table(res *api.Resource, lm metav1.ListMeta, objs []api.Object, raws [][]byte, headers bool) (*metav1.Table, error) {
	t := &metav1.Table{
		TypeMeta: metav1.TypeMeta{Kind: "Table", APIVersion: o.apiVersion()},
		ListMeta: lm,
		Rows:     make([]metav1.TableRow, 0, len(objs)),
	}
	if headers {
		t.ColumnDefinitions = res.TableColumns()
	}
	for i, obj := range objs {
		var raw []byte
		if raws != nil {
			raw = raws[i]
		}
		row, err := o.row(res, obj, raw)
		if err != nil {
			return nil, err
		}
		t.Rows = append(t.Rows, row)
	}
	return t, nil
}

// marshalTable is json.Marshal of the Table that table builds, the same
// bytes, written a row at a time. Marshalling the Table whole has
// encoding/json check and compact every row's object a second time, after
// the object's own marshalling: for a list of thousands of pods, half the
// time of the answer.
func (o *output) marshalTable(res *api.Resource, lm metav1.ListMeta, objs []api.Object, raws [][]byte, headers bool) ([]byte, error) {
	var cols []metav1.TableColumnDefinition
	if headers {
		cols = res.TableColumns()
	}
	head, err := json.Marshal(&metav1.Table{
		TypeMeta: metav1.TypeMeta{Kind: "Table", APIVersion: o.apiVersion()},
		ListMeta: lm, ColumnDefinitions: cols,
	})
	if err != nil {
		return nil, err
	}
	// head ends in "rows":null}: the rows go in place of the null.
	const null = `null}`
	if !bytes.HasSuffix(head, []byte(null)) {
		return nil, fmt.Errorf("table head %q does not end in rows", head)
	}
	b := make([]byte, 0, len(head)+len(objs)*2048)
	b = append(b, head[:len(head)-len(null)]...)
	b = append(b, '[')
	for i, obj := range objs {
		if i > 0 {
			b = append(b, ',')
		}
		var raw []byte
		if raws != nil {
			raw = raws[i]
		}
		if b, err = o.appendRow(b, res, obj, raw); err != nil {
			return nil, err
		}
	}
	return append(b, ']', '}'), nil
}

// appendRow appends obj's row, as json.Marshal writes a TableRow: its
// cells and conditions, then its object as includeObject says.
func (o *output) appendRow(b []byte, res *api.Resource, obj api.Object, raw []byte) ([]byte, error) {
	row := res.TableRow(obj, o.now())
	cells, err := json.Marshal(&struct {
		Cells      []any                      `json:"cells"`
		Conditions []metav1.TableRowCondition `json:"conditions,omitempty"`
	}{row.Cells, row.Conditions})
	if err != nil {
		return nil, err
	}
	var object []byte
	switch o.include {
	case metav1.IncludeObject:
		if raw == nil {
			raw, err = json.Marshal(obj)
		} else {
			// A stored object's JSON is compact already; json.Marshal
			// compacts a RawExtension's bytes, and so must this.
			var c bytes.Buffer
			err = json.Compact(&c, raw)
			raw = c.Bytes()
		}
		object = raw
	case metav1.IncludeMetadata:
		object, err = json.Marshal(o.partial(obj))
	default:
		object = []byte("null")
	}
	if err != nil {
		return nil, err
	}
	b = append(b, cells[:len(cells)-1]...) // without its closing brace
	b = append(b, `,"object":`...)
	b = append(b, object...)
	return append(b, '}'), nil
}

// writeObjectAs answers a get with obj (whose JSON is raw, if not nil) in
// the negotiated form.
func (o *output) writeObjectAs(w http.ResponseWriter, res *api.Resource, obj api.Object, raw []byte) error {
	switch o.kind {
	case asTable:
		t, err := o.marshalTable(res, metav1.ListMeta{ResourceVersion: obj.GetResourceVersion()}, []api.Object{obj}, [][]byte{raw}, true)
		if err != nil {
			return apierrors.NewInternalError(err)
		}
		return o.write(w, t)
	case asMetadata:
		return o.writeValue(w, o.partial(obj))
	}
	if o.protobuf {
		return writeProtobuf(w, res, obj)
	}
	if raw == nil {
		return o.writeValue(w, obj)
	}
	return o.write(w, raw)
}

// writeListAs answers a list in the negotiated form. raws are the objects'
// JSON, in the same order as objs; msg, if not nil, gives the i-th
// object's protobuf bytes when they are at hand already (else they are
// encoded from objs).
func (o *output) writeListAs(w http.ResponseWriter, res *api.Resource, lm metav1.ListMeta, objs []api.Object, raws [][]byte, msg func(i int) ([]byte, error)) error {
	switch o.kind {
	case asTable:
		t, err := o.marshalTable(res, lm, objs, raws, true)
		if err != nil {
			return apierrors.NewInternalError(err)
		}
		return o.write(w, t)
	case asMetadata:
		list := &metav1.PartialObjectMetadataList{
			TypeMeta: metav1.TypeMeta{Kind: "PartialObjectMetadataList", APIVersion: o.apiVersion()},
			ListMeta: lm,
			Items:    make([]metav1.PartialObjectMetadata, len(objs)),
		}
		for i, obj := range objs {
			list.Items[i] = *o.partial(obj)
		}
		return o.writeValue(w, list)
	}
	if o.protobuf {
		if msg == nil {
			msg = func(i int) ([]byte, error) { return api.ProtobufMessage(objs[i]) }
		}
		return writeProtobufList(w, res, lm, len(objs), msg)
	}
	body, err := listJSON(res, lm, raws)
	if err != nil {
		return err
	}
	return o.write(w, body)
}

// writeValue answers 200 with v in JSON, or YAML if so negotiated.
func (o *output) writeValue(w http.ResponseWriter, v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	return o.write(w, body)
}

// write answers 200 with body, which is JSON, or with its YAML if so
// negotiated.
func (o *output) write(w http.ResponseWriter, body []byte) error {
	if !o.yaml {
		writeRaw(w, http.StatusOK, body)
		return nil
	}
	y, err := yaml.JSONToYAML(body)
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	w.Header().Set("Content-Type", "application/yaml")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(y)
	return nil
}

// eventObject is a watch event's object in the negotiated form: a Table of
// one row (with the columns only in the stream's first event, as
// kube-apiserver sends them) or a PartialObjectMetadata. A bookmark is a
// Table without rows, or a PartialObjectMetadata with only the
// resourceVersion and annotations.
func (o *output) eventObject(res *api.Resource, it watchItem, first bool, bookmark api.Object) ([]byte, error) {
	if bookmark != nil {
		if o.kind == asTable {
			return json.Marshal(&metav1.Table{
				TypeMeta:          metav1.TypeMeta{Kind: "Table", APIVersion: o.apiVersion()},
				ListMeta:          metav1.ListMeta{ResourceVersion: bookmark.GetResourceVersion()},
				ColumnDefinitions: columnsIf(res, first),
				Rows:              []metav1.TableRow{},
			})
		}
		return json.Marshal(o.partial(bookmark))
	}
	if o.kind == asTable {
		return o.marshalTable(res, metav1.ListMeta{ResourceVersion: strconv.FormatInt(it.obj.rv, 10)},
			[]api.Object{it.obj.view()}, [][]byte{it.obj.raw}, first)
	}
	return json.Marshal(o.partial(it.obj.view()))
}

func columnsIf(res *api.Resource, headers bool) []metav1.TableColumnDefinition {
	if headers {
		return res.TableColumns()
	}
	return nil
}
