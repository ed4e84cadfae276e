package apiserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
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
// bytes, written a row at a time (encodeTable).
func (o *output) marshalTable(res *api.Resource, lm metav1.ListMeta, objs []api.Object, raws [][]byte, headers bool) ([]byte, error) {
	var buf bytes.Buffer
	if err := o.encodeTable(&buf, res, lm, len(objs), sliceItems(objs, raws), headers); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// sliceItems gives the i-th of objs and its JSON, if raws has it.
func sliceItems(objs []api.Object, raws [][]byte) func(i int) (api.Object, []byte) {
	return func(i int) (api.Object, []byte) {
		if raws == nil {
			return objs[i], nil
		}
		return objs[i], raws[i]
	}
}

// streamTable answers a list with the JSON Table of n objects, getting
// each (and its JSON, if at hand) from item only when its row is built:
// the first rows leave before the last objects are even decoded.
func (o *output) streamTable(w http.ResponseWriter, res *api.Resource, lm metav1.ListMeta, n int, item func(i int) (api.Object, []byte)) error {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	cw := &checkedWriter{w: w}
	if err := o.encodeTable(cw, res, lm, n, item, true); err != nil && cw.err == nil {
		// A row that cannot be encoded, with the answer under way: the
		// client can be told only by a connection that breaks before the
		// answer ends. (A write that failed had lost the client already.)
		panic(http.ErrAbortHandler)
	}
	return nil
}

// tableChunk is how much of a Table is built before it is written: the
// first rows of a list of thousands leave while the rest are built.
const tableChunk = 64 << 10

// encodeTable writes to w json.Marshal of the Table that table builds, the
// same bytes, a row at a time as each is built. Marshalling the Table
// whole has encoding/json check and compact every row's object a second
// time, after the object's own marshalling, and writes nothing until the
// last row is made.
func (o *output) encodeTable(w io.Writer, res *api.Resource, lm metav1.ListMeta, n int, item func(i int) (api.Object, []byte), headers bool) error {
	var cols []metav1.TableColumnDefinition
	if headers {
		cols = res.TableColumns()
	}
	head, err := json.Marshal(&metav1.Table{
		TypeMeta: metav1.TypeMeta{Kind: "Table", APIVersion: o.apiVersion()},
		ListMeta: lm, ColumnDefinitions: cols,
	})
	if err != nil {
		return err
	}
	// head ends in "rows":null}: the rows go in place of the null.
	const null = `null}`
	if !bytes.HasSuffix(head, []byte(null)) {
		return fmt.Errorf("table head %q does not end in rows", head)
	}
	b := make([]byte, 0, min(len(head)+n*2048, 2*tableChunk))
	b = append(b, head[:len(head)-len(null)]...)
	b = append(b, '[')
	for i := range n {
		if i > 0 {
			b = append(b, ',')
		}
		obj, raw := item(i)
		if b, err = o.appendRow(b, res, obj, raw); err != nil {
			return err
		}
		if len(b) >= tableChunk {
			if _, err := w.Write(b); err != nil {
				return err
			}
			b = b[:0]
		}
	}
	_, err = w.Write(append(b, ']', '}'))
	return err
}

// checkedWriter keeps the error of its first failed write.
type checkedWriter struct {
	w   io.Writer
	err error
}

func (c *checkedWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(p)
	c.err = err
	return n, err
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
	b = append(b, cells[:len(cells)-1]...) // without its closing brace
	b = append(b, `,"object":`...)
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
		b = append(b, raw...)
	case metav1.IncludeMetadata:
		b, err = appendPartial(b, o.partial(obj))
	default:
		b = append(b, "null"...)
	}
	if err != nil {
		return nil, err
	}
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
		if o.yaml {
			t, err := o.marshalTable(res, lm, objs, raws, true)
			if err != nil {
				return apierrors.NewInternalError(err)
			}
			return o.write(w, t)
		}
		return o.streamTable(w, res, lm, len(objs), sliceItems(objs, raws))
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

// appendPartial appends p as json.Marshal writes it, the same bytes. Most
// of a PartialObjectMetadata's bytes are its managedFields' fieldsV1,
// which encoding/json would check and compact once more (it does so with
// whatever a json.Marshaler returns): here each fieldsV1 that is compact
// already, with nothing to escape, is copied as it is.
func appendPartial(b []byte, p *metav1.PartialObjectMetadata) ([]byte, error) {
	managed := p.ManagedFields
	rest := *p
	rest.ManagedFields = nil
	head, err := json.Marshal(&rest)
	if err != nil || len(managed) == 0 {
		return append(b, head...), err
	}
	// managedFields is the metadata's last field: it goes before the
	// metadata's closing brace and the object's.
	b = append(b, head[:len(head)-2]...)
	if head[len(head)-3] != '{' {
		b = append(b, ',')
	}
	b = append(b, `"managedFields":[`...)
	for i := range managed {
		if i > 0 {
			b = append(b, ',')
		}
		if b, err = appendManagedFields(b, &managed[i]); err != nil {
			return nil, err
		}
	}
	return append(b, "]}}"...), nil
}

// appendManagedFields appends e as json.Marshal writes a
// ManagedFieldsEntry: its fields in order, the empty ones left out.
func appendManagedFields(b []byte, e *metav1.ManagedFieldsEntry) ([]byte, error) {
	b = append(b, '{')
	sep := false
	str := func(name, v string) {
		if v == "" {
			return
		}
		if sep {
			b = append(b, ',')
		}
		sep = true
		b = append(b, name...)
		b = appendJSONString(b, v)
	}
	str(`"manager":`, e.Manager)
	str(`"operation":`, string(e.Operation))
	str(`"apiVersion":`, e.APIVersion)
	if e.Time != nil {
		if sep {
			b = append(b, ',')
		}
		sep = true
		b = append(b, `"time":`...)
		if e.Time.IsZero() {
			b = append(b, "null"...)
		} else {
			b = append(b, '"')
			b = e.Time.UTC().AppendFormat(b, time.RFC3339)
			b = append(b, '"')
		}
	}
	str(`"fieldsType":`, e.FieldsType)
	if e.FieldsV1 != nil {
		if sep {
			b = append(b, ',')
		}
		sep = true
		b = append(b, `"fieldsV1":`...)
		if raw := e.FieldsV1.GetRawBytes(); compactFields(raw) {
			b = append(b, raw...)
		} else {
			f, err := json.Marshal(e.FieldsV1)
			if err != nil {
				return nil, err
			}
			b = append(b, f...)
		}
	}
	str(`"subresource":`, e.Subresource)
	return append(b, '}'), nil
}

// appendJSONString appends s quoted as encoding/json writes it: printable
// ASCII but the quote, the backslash and the HTML characters as it is,
// anything else through encoding/json itself.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always marshals
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// compactFields reports whether raw is a fieldsV1 that json.Marshal would
// copy unchanged: an object whose values are objects, keyed by strings,
// without whitespace, and with nothing encoding/json escapes (<, >, &
// and, to keep this simple, anything not ASCII). What it refuses goes
// through encoding/json.
func compactFields(raw []byte) bool {
	end, ok := scanFieldsObject(raw, 0)
	return ok && end == len(raw)
}

// scanFieldsObject reads the object of objects at b[i:] and returns where
// it ends.
func scanFieldsObject(b []byte, i int) (int, bool) {
	if i >= len(b) || b[i] != '{' {
		return i, false
	}
	i++
	if i < len(b) && b[i] == '}' {
		return i + 1, true
	}
	for {
		var ok bool
		if i, ok = scanFieldsKey(b, i); !ok || i >= len(b) || b[i] != ':' {
			return i, false
		}
		if i, ok = scanFieldsObject(b, i+1); !ok || i >= len(b) {
			return i, false
		}
		switch b[i] {
		case ',':
			i++
		case '}':
			return i + 1, true
		default:
			return i, false
		}
	}
}

// scanFieldsKey reads the string at b[i:] and returns where it ends.
func scanFieldsKey(b []byte, i int) (int, bool) {
	if i >= len(b) || b[i] != '"' {
		return i, false
	}
	for i++; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return i + 1, true
		case c == '\\':
			if i+1 >= len(b) {
				return i, false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				if i+5 >= len(b) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) || !isHex(b[i+5]) {
					return i, false
				}
				i += 5
			default:
				return i, false
			}
		case c < 0x20 || c >= 0x80 || c == '<' || c == '>' || c == '&':
			return i, false
		}
	}
	return i, false
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}
