package apiserver

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/store"
)

// listOptions are a list or watch request's query parameters.
type listOptions struct {
	filter            filter
	resourceVersion   string
	rvMatch           metav1.ResourceVersionMatch
	limit             int64
	continueToken     string
	timeout           time.Duration
	bookmarks         bool
	sendInitialEvents *bool
}

func (s *Server) parseListOptions(r *http.Request, ri *requestInfo) (*listOptions, error) {
	q := r.URL.Query()
	o := &listOptions{
		filter:          filter{namespace: ri.namespace},
		resourceVersion: q.Get("resourceVersion"),
		rvMatch:         metav1.ResourceVersionMatch(q.Get("resourceVersionMatch")),
		continueToken:   q.Get("continue"),
		bookmarks:       isTrue(q.Get("allowWatchBookmarks")),
	}
	sel, err := labels.Parse(q.Get("labelSelector"))
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("unable to parse requirement: %v", err))
	}
	o.filter.label = sel
	if o.filter.field, err = parseFieldSelector(ri.res, q.Get("fieldSelector")); err != nil {
		return nil, err
	}
	if v := q.Get("limit"); v != "" {
		if o.limit, err = strconv.ParseInt(v, 10, 64); err != nil || o.limit < 0 {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("limit must be a non-negative integer, not %q", v))
		}
	}
	if v := q.Get("timeoutSeconds"); v != "" {
		secs, err := strconv.ParseInt(v, 10, 64)
		if err != nil || secs < 0 {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("timeoutSeconds must be a non-negative integer, not %q", v))
		}
		o.timeout = time.Duration(secs) * time.Second
	}
	if v := q.Get("sendInitialEvents"); v != "" {
		b := isTrue(v)
		o.sendInitialEvents = &b
	}
	if o.resourceVersion != "" {
		if _, err := parseResourceVersion(o.resourceVersion); err != nil {
			return nil, err
		}
	}
	validate := o.validateList
	if ri.verb == "watch" {
		validate = o.validateWatch
	}
	if errs := validate(); len(errs) > 0 {
		return nil, apierrors.NewInvalid(schemaGroupKindOf(metav1.GroupName, "ListOptions"), "", errs)
	}
	if o.continueToken != "" && o.resourceVersion != "" && o.resourceVersion != "0" {
		return nil, invalidListOption("resourceVersion", o.resourceVersion, "specifying resource version is not allowed when using continue")
	}
	return o, nil
}

// validateList checks the options of a list as kube-apiserver's
// ValidateListOptions does: resourceVersionMatch needs a resourceVersion,
// no continue token, one of its two values, and not Exact with "0";
// sendInitialEvents is for watches.
func (o *listOptions) validateList() field.ErrorList {
	var errs field.ErrorList
	match := field.NewPath("resourceVersionMatch")
	if o.rvMatch != "" {
		if o.resourceVersion == "" {
			errs = append(errs, field.Forbidden(match, "resourceVersionMatch is forbidden unless resourceVersion is provided"))
		}
		if o.continueToken != "" {
			errs = append(errs, field.Forbidden(match, "resourceVersionMatch is forbidden when continue is provided"))
		}
		if o.rvMatch != metav1.ResourceVersionMatchExact && o.rvMatch != metav1.ResourceVersionMatchNotOlderThan {
			errs = append(errs, field.NotSupported(match, o.rvMatch, []string{string(metav1.ResourceVersionMatchExact), string(metav1.ResourceVersionMatchNotOlderThan), ""}))
		}
		if o.rvMatch == metav1.ResourceVersionMatchExact && o.resourceVersion == "0" {
			errs = append(errs, field.Forbidden(match, `resourceVersionMatch "exact" is forbidden for resourceVersion "0"`))
		}
	}
	if o.sendInitialEvents != nil {
		errs = append(errs, field.Forbidden(field.NewPath("sendInitialEvents"), "sendInitialEvents is forbidden for list"))
	}
	return errs
}

// validateWatch checks the options of a watch as kube-apiserver's
// ValidateListOptions does. A watch may ask for the initial state with
// sendInitialEvents, and then must say resourceVersionMatch=NotOlderThan
// (with no resourceVersion, the most recent state: client-go's
// watch-list); resourceVersionMatch means nothing to a watch without it.
func (o *listOptions) validateWatch() field.ErrorList {
	var errs field.ErrorList
	match := field.NewPath("resourceVersionMatch")
	if o.sendInitialEvents != nil && o.rvMatch != metav1.ResourceVersionMatchNotOlderThan {
		errs = append(errs, field.Forbidden(match, fmt.Sprintf("sendInitialEvents requires setting resourceVersionMatch to %s", metav1.ResourceVersionMatchNotOlderThan)))
	}
	if o.rvMatch != "" {
		if o.sendInitialEvents == nil {
			errs = append(errs, field.Forbidden(match, "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"))
		}
		if o.rvMatch != metav1.ResourceVersionMatchNotOlderThan {
			errs = append(errs, field.NotSupported(match, o.rvMatch, []string{string(metav1.ResourceVersionMatchNotOlderThan)}))
		}
		if o.continueToken != "" {
			errs = append(errs, field.Forbidden(match, "resourceVersionMatch is forbidden when continue is provided"))
		}
	}
	return errs
}

func invalidListOption(field, value, msg string) error {
	return apierrors.NewBadRequest(fmt.Sprintf("%s: Invalid value: %q: %s", field, value, msg))
}

// parseFieldSelector parses a fieldSelector and refuses fields the resource
// cannot be selected by, with the message Kubernetes gives.
func parseFieldSelector(res *api.Resource, s string) (fields.Selector, error) {
	sel, err := fields.ParseSelector(s)
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid field selector %q: %v", s, err))
	}
	for _, req := range sel.Requirements() {
		if !api.FieldLabelSupported(res, req.Field) {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("field label not supported: %s", req.Field))
		}
		if req.Operator != selection.Equals && req.Operator != selection.DoubleEquals && req.Operator != selection.NotEquals {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid field selector %q: only =, == and != are supported", s))
		}
	}
	return sel, nil
}

// serveGet answers a get with Kubernetes' resourceVersion semantics: none
// is a consistent read from etcd; "0" is any state, served from the watch
// cache; N is a state not older than N, served from the watch cache once
// it has seen N (a 504 if it does not within freshTimeout). Until the
// cache is filled, every get reads etcd, as kube-apiserver's does.
func (s *Server) serveGet(w http.ResponseWriter, r *http.Request, ri *requestInfo) error {
	out, err := negotiateOutput(r, "get", ri.res)
	if err != nil {
		return err
	}
	rs := ri.store
	ctx := r.Context()
	param := r.URL.Query().Get("resourceVersion")
	if param == "" {
		obj, err := rs.get(ctx, ri.namespace, ri.name)
		if err != nil {
			return err
		}
		return out.writeObjectAs(w, ri.res, obj, nil)
	}
	rv, err := parseResourceVersion(param)
	if err != nil {
		return err
	}
	cache := ri.cache
	key := rs.key(ri.namespace, ri.name)
	if _, ready := cache.get(key); !ready {
		if rv > 0 {
			cur, err := s.store.Revision(ctx)
			if err != nil {
				return rs.storageError(err, ri.name)
			}
			if rv > cur {
				return errTooLargeResourceVersion(rv, cur)
			}
		}
		obj, err := rs.get(ctx, ri.namespace, ri.name)
		if err != nil {
			return err
		}
		return out.writeObjectAs(w, ri.res, obj, nil)
	}
	if err := cache.waitFresh(ctx, rv); err != nil {
		return err
	}
	o, _ := cache.get(key)
	if o == nil {
		return apierrors.NewNotFound(ri.res.GroupResource(), ri.name)
	}
	if err := conversionError(o); err != nil {
		return err
	}
	if out.kind == asObject {
		// The forms the cache holds, without decoding the object.
		if out.protobuf {
			env, err := o.protobuf(ri.res)
			return writeProtobufData(w, env, err)
		}
		raw, err := o.servedJSON()
		if err != nil {
			return apierrors.NewInternalError(err)
		}
		return out.write(w, raw)
	}
	return out.writeObjectAs(w, ri.res, o.view(), o.raw)
}

// parseResourceVersion reads a resourceVersion query parameter, which is
// an etcd revision. Any unsigned number is one, as in Kubernetes; past the
// largest revision etcd can reach it stands for that one, which is
// equally far in the future.
func parseResourceVersion(s string) (int64, error) {
	rv, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, apierrors.NewBadRequest(fmt.Sprintf("invalid resourceVersion %q: must be a decimal number", s))
	}
	return int64(min(rv, math.MaxInt64)), nil
}

// continueToken is what a paginated list hands back: the revision the first
// page was read at, and the key the next page starts from.
type continueToken struct {
	APIVersion string `json:"v"`
	RV         int64  `json:"rv"`
	Start      string `json:"start"`
}

// continueLatest is the revision of a continue token that carries on at
// etcd's latest revision, as kube-apiserver's do (-1, so that a token
// without one is still refused).
const continueLatest = -1

// errContinueExpired answers a continue token whose revision etcd has
// compacted: 410 Gone, as kube-apiserver answers, with a token in the
// Status's metadata.continue that carries on from start at the latest
// revision, for a client that accepts an inconsistent list.
func errContinueExpired(start string) error {
	se := apierrors.NewResourceExpired("The provided continue parameter is too old to display a consistent list result. " +
		"You can start a new list without the continue parameter, or use the continue token in this response to retrieve " +
		"the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that " +
		"were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.")
	se.ErrStatus.ListMeta.Continue = encodeContinue(continueLatest, start)
	return se
}

func encodeContinue(rv int64, start string) string {
	data, _ := json.Marshal(continueToken{APIVersion: "meta.k8s.io/v1", RV: rv, Start: start})
	return base64.RawURLEncoding.EncodeToString(data)
}

func decodeContinue(s string) (continueToken, error) {
	var t continueToken
	data, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		err = json.Unmarshal(data, &t)
	}
	if err != nil || t.APIVersion != "meta.k8s.io/v1" || (t.RV <= 0 && t.RV != continueLatest) || strings.Contains(t.Start, "/..") {
		return t, apierrors.NewBadRequest(fmt.Sprintf("continue key is not valid: %q", s))
	}
	return t, nil
}

// serveList answers a list. Where it is served from follows Kubernetes:
// resourceVersion "0" (any) and a resourceVersion with NotOlderThan are
// served from the watch cache; no resourceVersion (the most recent),
// Exact, pages and continue tokens are read from etcd, and so is every
// list of a resource without a watch cache (watchcache_uncached.go).
func (s *Server) serveList(w http.ResponseWriter, r *http.Request, ri *requestInfo) error {
	o, err := s.parseListOptions(r, ri)
	if err != nil {
		return err
	}
	out, err := negotiateOutput(r, "list", ri.res)
	if err != nil {
		return err
	}
	cache := ri.cache
	fromCache := !cache.uncached && o.continueToken == "" && (o.resourceVersion == "0" ||
		(o.resourceVersion != "" && o.rvMatch != metav1.ResourceVersionMatchExact && o.limit == 0))
	if fromCache {
		if o.resourceVersion != "0" {
			rv, _ := parseResourceVersion(o.resourceVersion)
			if err := cache.waitFresh(r.Context(), rv); err != nil {
				return err
			}
		}
		items, rv := cache.list(&o.filter)
		for _, it := range items {
			if err := conversionError(it); err != nil {
				return err
			}
		}
		lm := metav1.ListMeta{ResourceVersion: strconv.FormatInt(rv, 10)}
		if out.kind == asTable && !out.yaml {
			// Each object is decoded as its row is written, not all
			// before the first row leaves.
			return out.streamTable(w, ri.res, lm, len(items), func(i int) (api.Object, []byte) { return items[i].view(), items[i].raw })
		}
		objs, raws := make([]api.Object, len(items)), make([][]byte, len(items))
		for i, it := range items {
			switch {
			case out.kind != asObject: // a table or metadata: from the object
				objs[i], raws[i] = it.view(), it.raw
			case !out.protobuf:
				var err error
				if raws[i], err = it.servedJSON(); err != nil {
					return apierrors.NewInternalError(err)
				}
			}
		}
		// The protobuf a cached object keeps for watchers holds its own
		// bytes: a list reuses them instead of encoding each object again.
		msg := func(i int) ([]byte, error) {
			env, err := items[i].protobuf(ri.res)
			if err != nil {
				return nil, err
			}
			_, _, m, err := api.ProtobufObject(env)
			return m, err
		}
		return out.writeListAs(w, ri.res, lm, objs, raws, msg)
	}
	return s.listFromStore(w, r.Context(), ri, o, out)
}

// listFromStore reads one page from etcd. With selectors it keeps reading
// until the page is full or the keys run out, as Kubernetes does, so a
// page never comes back short while more matches exist.
func (s *Server) listFromStore(w http.ResponseWriter, ctx context.Context, ri *requestInfo, o *listOptions, out *output) error {
	rs := ri.store
	prefix := rs.listPrefix(ri.namespace)
	opts := store.ListOptions{Limit: o.limit}
	if o.continueToken != "" {
		t, err := decodeContinue(o.continueToken)
		if err != nil {
			return err
		}
		opts.Revision, opts.StartKey = max(t.RV, 0), prefix+t.Start // 0: the latest
		if !strings.HasPrefix(opts.StartKey, rs.prefix) {
			return apierrors.NewBadRequest("continue key is not valid for this resource")
		}
	}
	// A resourceVersion without Exact (a page of a list not older than
	// it) is read at etcd's latest revision, which must have reached it.
	var notOlderThan int64
	if o.continueToken == "" && o.resourceVersion != "" && o.resourceVersion != "0" {
		rv, _ := parseResourceVersion(o.resourceVersion)
		if o.rvMatch == metav1.ResourceVersionMatchExact {
			opts.Revision = rv
		} else {
			notOlderThan = rv
		}
	}
	var objs []api.Object
	var raws [][]byte
	var meta metav1.ListMeta
	filtered := !o.filter.label.Empty() || !o.filter.field.Empty()
	for {
		page, err := rs.store.List(ctx, prefix, opts)
		if err != nil {
			if errors.Is(err, store.ErrFutureRevision) {
				return rs.futureRevision(ctx, opts.Revision)
			}
			if o.continueToken != "" && errors.Is(err, store.ErrCompacted) {
				return errContinueExpired(strings.TrimPrefix(opts.StartKey, prefix))
			}
			return rs.storageError(err, "")
		}
		if page.Revision < notOlderThan {
			return errTooLargeResourceVersion(notOlderThan, page.Revision)
		}
		opts.Revision = page.Revision
		for _, kv := range page.Items {
			obj, err := rs.decode(ctx, kv.Value, kv.Revision)
			if err != nil {
				return err
			}
			if filtered && !o.filter.matches(&cachedObject{namespace: obj.GetNamespace(), labels: pack(obj.GetLabels()), fields: pack(ri.res.Fields(obj))}) {
				continue
			}
			raw, err := json.Marshal(obj)
			if err != nil {
				return apierrors.NewInternalError(err)
			}
			objs, raws = append(objs, obj), append(raws, raw)
		}
		meta = metav1.ListMeta{ResourceVersion: strconv.FormatInt(page.Revision, 10)}
		if !page.More || len(page.Items) == 0 {
			break
		}
		next := page.Items[len(page.Items)-1].Key + "\x00"
		if o.limit > 0 && int64(len(raws)) >= o.limit {
			meta.Continue = encodeContinue(page.Revision, strings.TrimPrefix(next, prefix))
			if !filtered {
				n := page.RemainingItemCount
				meta.RemainingItemCount = &n
			}
			break
		}
		opts.StartKey = next
		if o.limit > 0 {
			opts.Limit = o.limit - int64(len(raws))
		}
	}
	return out.writeListAs(w, ri.res, meta, objs, raws, nil)
}

// futureRevision answers a read at revision rv, which etcd has not
// written yet: a resourceVersion (or a continue token) from the future
// is a 504 that says so, never an etcd error.
func (rs *resourceStore) futureRevision(ctx context.Context, rv int64) error {
	cur, err := rs.store.Revision(ctx)
	if err != nil {
		return rs.storageError(err, "")
	}
	return errTooLargeResourceVersion(rv, cur)
}

// writeList writes a <Kind>List around items that are already JSON.
func writeList(w http.ResponseWriter, res *api.Resource, meta metav1.ListMeta, items [][]byte) error {
	body, err := listJSON(res, meta, items)
	if err != nil {
		return err
	}
	writeRaw(w, http.StatusOK, body)
	return nil
}

// listJSON is a <Kind>List around items that are already JSON.
func listJSON(res *api.Resource, meta metav1.ListMeta, items [][]byte) ([]byte, error) {
	metaJSON, err := json.Marshal(&meta)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	size := 128 + len(metaJSON)
	for _, it := range items {
		size += len(it) + 1
	}
	var b bytes.Buffer
	b.Grow(size)
	fmt.Fprintf(&b, `{"kind":%q,"apiVersion":%q,"metadata":`, res.ListKindName(), res.APIVersion())
	b.Write(metaJSON)
	b.WriteString(`,"items":[`)
	for i, it := range items {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(it)
	}
	b.WriteString("]}\n")
	return b.Bytes(), nil
}

// serveWatch streams events as newline-delimited JSON over a chunked
// response until the client goes, the timeout passes, the watcher falls
// behind, or the server stops.
func (s *Server) serveWatch(w http.ResponseWriter, r *http.Request, ri *requestInfo) error {
	o, err := s.parseListOptions(r, ri)
	if err != nil {
		return err
	}
	out, err := negotiateOutput(r, "watch", ri.res)
	if err != nil {
		return err
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		return apierrors.NewInternalError(fmt.Errorf("streaming is not supported by this connection"))
	}
	cache := ri.cache
	ctx := r.Context()
	// Without a resourceVersion (or with "0") a watch starts with the
	// current state as ADDED events; sendInitialEvents says so explicitly.
	initial := o.resourceVersion == "" || o.resourceVersion == "0"
	if o.sendInitialEvents != nil {
		initial = *o.sendInitialEvents
	}
	var from int64
	if o.resourceVersion != "" {
		from, _ = parseResourceVersion(o.resourceVersion)
	} else {
		// No resourceVersion means "from now": the initial events (if any)
		// must include every write that finished before this request, as
		// a list from etcd would, and a watch without them starts after
		// that write. Either way the cache must first reach etcd's current
		// revision.
		if from, err = s.store.Revision(ctx); err != nil {
			return ri.store.storageError(err, "")
		}
	}
	timeout := o.timeout
	if timeout == 0 {
		// Like kube-apiserver's --min-request-timeout: spread watch ends
		// between 30 and 60 minutes so reconnects do not come in a herd.
		timeout = 30*time.Minute + rand.N(30*time.Minute)
	}
	items, initialRV, cw, err := cache.watch(ctx, from, initial, o.filter, o.bookmarks, out.kind == asObject && !out.protobuf)

	if out.protobuf {
		w.Header().Set("Content-Type", api.ProtobufWatchMediaType)
	} else {
		w.Header().Set("Content-Type", "application/json")
	}
	w.Header().Set("Cache-Control", "no-cache, private")
	w.WriteHeader(http.StatusOK)
	enc := &eventEncoder{res: ri.res, out: out}
	if err != nil {
		// Like kube-apiserver, a watch that cannot start still answers 200
		// and says why in one ERROR event; clients relist on 410.
		_, _ = w.Write(enc.errorLine(toStatusError(err)))
		flusher.Flush()
		return nil
	}
	defer cache.stop(cw)
	dl := &writeDeadline{rc: http.NewResponseController(w)}
	// The server's WriteTimeout ran from the request's start; each write
	// moves the deadline instead, and so does the end of the stream.
	defer dl.arm()
	for _, it := range items {
		dl.arm()
		if err := enc.write(w, it); err != nil {
			return nil
		}
	}
	if initial && o.sendInitialEvents != nil && *o.sendInitialEvents {
		_, _ = w.Write(enc.initialEventsEnd(initialRV))
	}
	dl.arm()
	flusher.Flush()
	dl.idle()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		select {
		case it, ok := <-cw.ch:
			if !ok {
				if cw.err != nil {
					dl.arm()
					_, _ = w.Write(enc.errorLine(cw.err))
				}
				return nil
			}
			dl.arm()
			if err := enc.write(w, it); err != nil {
				return nil
			}
			// Write what is already queued before flushing once.
			for n := len(cw.ch); n > 0; n-- {
				it, ok := <-cw.ch
				if !ok {
					break
				}
				dl.arm()
				if err := enc.write(w, it); err != nil {
					return nil
				}
			}
			flusher.Flush()
			dl.idle()
		case <-timer.C:
			return nil
		case <-ctx.Done():
			return nil
		case <-s.done:
			return nil
		}
	}
}

// eventEncoder writes watch events as kube-apiserver does: one
// {"type":..,"object":..} JSON document per line, the object in the form
// the client negotiated (see table.go); or, in protobuf, one
// length-prefixed WatchEvent frame per event (api/protobuf.go).
type eventEncoder struct {
	res  *api.Resource
	out  *output
	sent bool   // an event has been written: later tables carry no columns
	head []byte // scratch for a protobuf frame's start
}

// errConversionEnded ends a watch whose next object could not be
// converted to the watch's version: its client was told why.
var errConversionEnded = errors.New("an object could not be converted; the watch ends")

// write writes the event it to w.
func (e *eventEncoder) write(w io.Writer, it watchItem) error {
	if err := conversionError(it.obj); err != nil {
		_, _ = w.Write(e.errorLine(toStatusError(err)))
		return errConversionEnded
	}
	if !e.out.protobuf || it.typ == watch.Bookmark {
		_, err := w.Write(e.line(it))
		return err
	}
	env, err := it.obj.protobuf(e.res)
	if err != nil {
		_, err = w.Write(e.errorLine(apierrors.NewInternalError(err)))
		return err
	}
	// The frame's start, then the object's bytes as the cache holds them
	// for every watcher.
	e.head = api.AppendProtobufWatchFrameHead(e.head[:0], string(it.typ), len(env))
	if _, err := w.Write(e.head); err != nil {
		return err
	}
	_, err = w.Write(env)
	return err
}

// line is the event it as a JSON line, or a bookmark in either encoding.
func (e *eventEncoder) line(it watchItem) []byte {
	if it.typ == watch.Bookmark {
		return e.bookmark(it.rv, nil)
	}
	if e.out.kind == asObject && it.line != nil {
		e.sent = true
		return it.line // rendered once by the cache for every watcher
	}
	var raw []byte
	var err error
	if e.out.kind != asObject {
		raw, err = e.out.eventObject(e.res, it, !e.sent, nil)
	} else {
		raw, err = it.obj.servedJSON()
	}
	if err != nil {
		return e.errorLine(apierrors.NewInternalError(err))
	}
	e.sent = true
	return jsonEventLine(it.typ, raw)
}

func (e *eventEncoder) bookmark(rv int64, annotations map[string]string) []byte {
	obj := e.res.NewObject()
	obj.SetResourceVersion(strconv.FormatInt(rv, 10))
	obj.SetAnnotations(annotations)
	var raw []byte
	if e.out.protobuf {
		env, _ := protobufOf(e.res, obj)
		return api.ProtobufWatchFrame(string(watch.Bookmark), env)
	}
	if e.out.kind != asObject {
		raw, _ = e.out.eventObject(e.res, watchItem{}, !e.sent, obj)
	} else {
		raw, _ = json.Marshal(obj)
	}
	e.sent = true
	return append(append([]byte(`{"type":"BOOKMARK","object":`), raw...), "}\n"...)
}

// initialEventsEnd is the bookmark that ends the initial events of a
// watch-list (sendInitialEvents=true).
func (e *eventEncoder) initialEventsEnd(rv int64) []byte {
	return e.bookmark(rv, map[string]string{metav1.InitialEventsAnnotationKey: "true"})
}

func (e *eventEncoder) errorLine(se *apierrors.StatusError) []byte {
	st := se.Status()
	st.Kind, st.APIVersion = "Status", "v1"
	if e.out.protobuf {
		env, _ := api.MarshalProtobuf(&st)
		return api.ProtobufWatchFrame(string(watch.Error), env)
	}
	raw, _ := json.Marshal(&st)
	return append(append([]byte(`{"type":"ERROR","object":`), raw...), "}\n"...)
}

// watchWriteTimeout bounds one write to a watcher. A client that stops
// reading fills its TCP buffers; without a deadline its handler would
// block for ever after the cache closed the watcher as too slow.
const watchWriteTimeout = 10 * time.Second

// writeDeadline gives every write at least watchWriteTimeout minus
// deadlineSlack before it times out: arm before each write. It moves the
// deadline at most once per deadlineSlack, instead of a timer update for
// every event of every watcher.
type writeDeadline struct {
	rc *http.ResponseController
	at time.Time // the deadline set last
}

const deadlineSlack = 100 * time.Millisecond

func (d *writeDeadline) arm() {
	now := time.Now()
	if d.at.Sub(now) > watchWriteTimeout-deadlineSlack {
		return
	}
	d.at = now.Add(watchWriteTimeout)
	_ = d.rc.SetWriteDeadline(d.at)
}

// idle lifts the deadline while the stream waits for something to write.
// Over HTTP/1.1 a deadline only bounds the writes made before it; over
// HTTP/2 it is a timer on the stream, which resets the stream when it
// fires, writing or not: an idle watch on the secure port would end
// after watchWriteTimeout without this.
func (d *writeDeadline) idle() {
	if d.at.IsZero() {
		return
	}
	d.at = time.Time{}
	_ = d.rc.SetWriteDeadline(d.at)
}
