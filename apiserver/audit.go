package apiserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"

	"github.com/google/uuid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/auth/audit"
	"github.com/minictl/minictl/auth/authorizer"
	"github.com/minictl/minictl/auth/user"
)

// maxAuditedResponse bounds the answer an event keeps: a larger one (a
// big list) is recorded without its body.
const maxAuditedResponse = 4 << 20

// audit writes what each request asked and what it was answered as
// audit.k8s.io/v1 Events (kube-apiserver's --audit-log-path), at the
// level the policy gives the request's user, verb and resource: an event
// when the request is received, one when a long-running answer starts,
// one when the answer is complete, and one if handling it panicked. Every
// answer carries the request's Audit-ID header, audited or not.
func (s *Server) audit(next http.Handler) http.Handler {
	if s.auditLog == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("Audit-ID")
		if id == "" {
			id = uuid.NewString()
		}
		w.Header().Set("Audit-ID", id)
		u, _ := user.From(r.Context())
		a := authorizer.FromRequest(r, u)
		d := s.auditPolicy.Evaluate(a)
		if d.Level == audit.LevelNone {
			next.ServeHTTP(w, r)
			return
		}
		now := metav1.NowMicro()
		ev := audit.Event{
			Level: d.Level, AuditID: id, Stage: audit.StageRequestReceived,
			RequestURI: r.URL.RequestURI(), Verb: a.Verb, User: audit.UserInfo(u),
			SourceIPs: sourceIPs(r), UserAgent: r.UserAgent(),
			RequestReceivedTimestamp: now, StageTimestamp: now,
		}
		if a.ResourceRequest {
			ev.ObjectRef = &audit.ObjectReference{
				Resource: a.Resource, Subresource: a.Subresource, Namespace: a.Namespace, Name: a.Name,
				APIGroup: a.APIGroup, APIVersion: a.APIVersion,
			}
		}
		rec := audit.NewRecord(ev)
		s.writeAudit(rec, d, audit.StageRequestReceived, nil)
		if !d.Level.Less(audit.LevelRequest) {
			if body := s.auditedRequestBody(r, d); body != nil {
				rec.Update(func(ev *audit.Event) { ev.RequestObject = body })
			}
		}
		aw := &auditWriter{ResponseWriter: w, code: http.StatusOK, keep: d.Level == audit.LevelRequestResponse}
		if isLongRunning(a) {
			aw.started = func(code int) {
				s.writeAudit(rec, d, audit.StageResponseStarted, &metav1.Status{Code: int32(code)})
			}
		}
		defer func() {
			if p := recover(); p != nil {
				s.writeAudit(rec, d, audit.StagePanic, &metav1.Status{
					Status: metav1.StatusFailure, Code: http.StatusInternalServerError,
					Message: fmt.Sprintf("APIServer panic'd: %v", p),
				})
				panic(p)
			}
		}()
		next.ServeHTTP(aw, r.WithContext(audit.WithRecord(r.Context(), rec)))
		status := &metav1.Status{Code: int32(aw.code)}
		var answer json.RawMessage
		if aw.body.Len() > 0 && !aw.overflow {
			if st, ok := statusOf(aw.body.Bytes()); ok {
				status = st
			}
			if aw.keep && !aw.streamed && json.Valid(aw.body.Bytes()) {
				answer = omitManagedFields(aw.body.Bytes(), d.OmitManagedFields)
			}
		}
		rec.Update(func(ev *audit.Event) {
			ev.ResponseObject = answer
			if ev.Annotations[audit.DecisionAnnotation] == audit.DecisionForbid {
				// Refused before anything read it: the body was never
				// part of the request the server handled.
				ev.RequestObject = nil
			}
		})
		s.writeAudit(rec, d, audit.StageResponseComplete, status)
	})
}

// auditFailedAuthentication records a request whose credentials proved
// nothing, as kube-apiserver's failed-authentication audit does: one event
// at stage ResponseStarted, with no user, the 401 and the kinds of
// credential that were tried, never the credentials themselves. The audit
// filter comes after authentication, so without this a 401 would leave no
// trace in the audit log.
func (s *Server) auditFailedAuthentication(w http.ResponseWriter, r *http.Request) {
	if s.auditLog == nil {
		return
	}
	a := authorizer.FromRequest(r, nil)
	d := s.auditPolicy.Evaluate(a)
	if d.Level == audit.LevelNone {
		return
	}
	id := r.Header.Get("Audit-ID")
	if id == "" {
		id = uuid.NewString()
	}
	w.Header().Set("Audit-ID", id)
	now := metav1.NowMicro()
	ev := audit.Event{
		Level: d.Level, AuditID: id, RequestURI: r.URL.RequestURI(), Verb: a.Verb,
		SourceIPs: sourceIPs(r), UserAgent: r.UserAgent(),
		RequestReceivedTimestamp: now, StageTimestamp: now,
	}
	if a.ResourceRequest {
		ev.ObjectRef = &audit.ObjectReference{
			Resource: a.Resource, Subresource: a.Subresource, Namespace: a.Namespace, Name: a.Name,
			APIGroup: a.APIGroup, APIVersion: a.APIVersion,
		}
	}
	s.writeAudit(audit.NewRecord(ev), d, audit.StageResponseStarted, &metav1.Status{
		Code: http.StatusUnauthorized, Message: attemptedAuthentication(r),
	})
}

// attemptedAuthentication is kube's summary of a failed authentication:
// which kinds of credential the request carried, in kube's order.
func attemptedAuthentication(r *http.Request) string {
	var methods []string
	if _, _, ok := r.BasicAuth(); ok {
		methods = append(methods, "basic")
	}
	if scheme, _, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " "); ok && strings.EqualFold(scheme, "bearer") {
		methods = append(methods, "bearer")
	}
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		methods = append(methods, "x509")
	}
	if len(methods) == 0 {
		return "Authentication failed, no credentials provided"
	}
	return "Authentication failed, attempted: " + strings.Join(methods, ", ")
}

// writeAudit writes the record's event at stage, with the answer's
// status, unless the policy omits the stage.
func (s *Server) writeAudit(rec *audit.Record, d audit.Decision, stage audit.Stage, status *metav1.Status) {
	if d.Omits(stage) {
		return
	}
	ev := rec.Snapshot()
	ev.Stage, ev.StageTimestamp, ev.ResponseStatus = stage, metav1.NowMicro(), status
	if stage == audit.StageRequestReceived || stage == audit.StageResponseStarted {
		ev.RequestObject, ev.ResponseObject = nil, nil
	}
	if err := s.auditLog.Write(&ev); err != nil {
		s.log.Error("writing the audit log failed", "auditID", ev.AuditID, "err", err)
	}
}

// auditedRequestBody reads the body of a write for the event (and puts it
// back for the handler), as JSON; nil when there is none, it is too large
// (the handler refuses it), or it is not an object.
func (s *Server) auditedRequestBody(r *http.Request, d audit.Decision) json.RawMessage {
	if r.Body == nil || r.Body == http.NoBody {
		return nil
	}
	switch r.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
	default:
		return nil
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, s.maxBody+1))
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(body), r.Body), r.Body}
	if err != nil || int64(len(body)) > s.maxBody || len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	data := body
	// JSON and the JSON patches are recorded as sent; YAML and protobuf
	// as the JSON they decode to.
	if mt := mediaType(r); !strings.HasSuffix(mt, "json") {
		if data, err = s.toJSON(mt, body); err != nil {
			return nil
		}
	}
	if !json.Valid(data) {
		return nil
	}
	return omitManagedFields(data, d.OmitManagedFields)
}

// isLongRunning: a watch, a proxy, or a log or connection, whose answer
// starts long before it is complete (kube-apiserver's long-running
// verbs and subresources).
func isLongRunning(a authorizer.Attributes) bool {
	if a.Verb == "watch" || a.Verb == "proxy" {
		return true
	}
	switch a.Subresource {
	case "log", "attach", "exec", "portforward", "proxy":
		return true
	}
	return false
}

// statusOf reads a Status answer: its status, message, reason, details
// and code, the fields an event keeps.
func statusOf(body []byte) (*metav1.Status, bool) {
	var st metav1.Status
	if json.Unmarshal(body, &st) != nil || st.Kind != "Status" {
		return nil, false
	}
	return &metav1.Status{Status: st.Status, Message: st.Message, Reason: st.Reason, Details: st.Details, Code: st.Code}, true
}

// omitManagedFields drops metadata.managedFields from an object, or from
// each item of a list, when omit says so.
func omitManagedFields(data []byte, omit bool) json.RawMessage {
	if !omit || !bytes.Contains(data, []byte(`"managedFields"`)) {
		return data
	}
	var obj map[string]any
	if json.Unmarshal(data, &obj) != nil {
		return data
	}
	drop := func(o map[string]any) {
		if md, ok := o["metadata"].(map[string]any); ok {
			delete(md, "managedFields")
		}
	}
	drop(obj)
	if items, ok := obj["items"].([]any); ok {
		for _, it := range items {
			if o, ok := it.(map[string]any); ok {
				drop(o)
			}
		}
	}
	out, err := json.Marshal(obj)
	if err != nil {
		return data
	}
	return out
}

// sourceIPs are the addresses the request came from, the client's first:
// those X-Forwarded-For and X-Real-Ip name, then the connection's peer.
func sourceIPs(r *http.Request) []string {
	var ips []string
	add := func(s string) {
		if ip := net.ParseIP(strings.TrimSpace(s)); ip != nil && !slices.Contains(ips, ip.String()) {
			ips = append(ips, ip.String())
		}
	}
	for _, h := range r.Header.Values("X-Forwarded-For") {
		for _, s := range strings.Split(h, ",") {
			add(s)
		}
	}
	add(r.Header.Get("X-Real-Ip"))
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	add(host)
	return ips
}

// auditWriter watches an answer for the event: its code, when it starts
// (for a long-running request), and its body, kept when the level records
// it or when it is an error's Status.
type auditWriter struct {
	http.ResponseWriter
	code     int
	wrote    bool
	started  func(code int) // nil: not long-running
	keep     bool           // keep the whole body (LevelRequestResponse)
	streamed bool           // the answer was flushed as it went: a stream, not one object
	body     bytes.Buffer
	overflow bool
}

func (a *auditWriter) WriteHeader(code int) {
	if !a.wrote {
		a.wrote, a.code = true, code
		if a.started != nil {
			a.started(code)
		}
	}
	a.ResponseWriter.WriteHeader(code)
}

func (a *auditWriter) Write(b []byte) (int, error) {
	if !a.wrote {
		a.WriteHeader(http.StatusOK)
	}
	if (a.keep && a.started == nil || a.code >= 400) && !a.overflow {
		if a.body.Len()+len(b) > maxAuditedResponse {
			a.overflow = true
			a.body.Reset()
		} else {
			a.body.Write(b)
		}
	}
	return a.ResponseWriter.Write(b)
}

func (a *auditWriter) Flush() {
	a.streamed = true
	if f, ok := a.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (a *auditWriter) Unwrap() http.ResponseWriter { return a.ResponseWriter }
