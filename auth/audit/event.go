package audit

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/auth/user"
)

// Event is one audit.k8s.io/v1 Event: what one request asked and, from
// its stage on, how it was answered. The JSON is kube-apiserver's, field
// for field, so that tools that read its audit log read ours.
type Event struct {
	Kind       string                    `json:"kind"`
	APIVersion string                    `json:"apiVersion"`
	Level      Level                     `json:"level"`
	AuditID    string                    `json:"auditID"`
	Stage      Stage                     `json:"stage"`
	RequestURI string                    `json:"requestURI"`
	Verb       string                    `json:"verb"`
	User       authenticationv1.UserInfo `json:"user"`
	// ImpersonatedUser is who the user acted as (Impersonate-User).
	ImpersonatedUser *authenticationv1.UserInfo `json:"impersonatedUser,omitempty"`
	SourceIPs        []string                   `json:"sourceIPs,omitempty"`
	UserAgent        string                     `json:"userAgent,omitempty"`
	ObjectRef        *ObjectReference           `json:"objectRef,omitempty"`
	// ResponseStatus is the answer's code, and for a Status answer (an
	// error) its status, message and reason.
	ResponseStatus *metav1.Status `json:"responseStatus,omitempty"`
	// RequestObject (LevelRequest and above) and ResponseObject
	// (LevelRequestResponse) are the bodies, as JSON.
	RequestObject            json.RawMessage   `json:"requestObject,omitempty"`
	ResponseObject           json.RawMessage   `json:"responseObject,omitempty"`
	RequestReceivedTimestamp metav1.MicroTime  `json:"requestReceivedTimestamp"`
	StageTimestamp           metav1.MicroTime  `json:"stageTimestamp"`
	Annotations              map[string]string `json:"annotations,omitempty"`
}

// ObjectReference is what a resource request is about.
type ObjectReference struct {
	Resource        string `json:"resource,omitempty"`
	Namespace       string `json:"namespace,omitempty"`
	Name            string `json:"name,omitempty"`
	UID             string `json:"uid,omitempty"`
	APIGroup        string `json:"apiGroup,omitempty"`
	APIVersion      string `json:"apiVersion,omitempty"`
	ResourceVersion string `json:"resourceVersion,omitempty"`
	Subresource     string `json:"subresource,omitempty"`
}

// The annotations the authorization filter adds to every event.
const (
	DecisionAnnotation = "authorization.k8s.io/decision"
	ReasonAnnotation   = "authorization.k8s.io/reason"
	DecisionAllow      = "allow"
	DecisionForbid     = "forbid"
)

// UserInfo is u as an event records it.
func UserInfo(u *user.Info) authenticationv1.UserInfo {
	if u == nil {
		return authenticationv1.UserInfo{}
	}
	info := authenticationv1.UserInfo{Username: u.Name, UID: u.UID, Groups: u.Groups}
	if len(u.Extra) > 0 {
		info.Extra = make(map[string]authenticationv1.ExtraValue, len(u.Extra))
		for k, v := range u.Extra {
			info.Extra[k] = v
		}
	}
	return info
}

// Record is the event of one request in flight: the filters after the
// audit filter add to it through the request's context (the decision of
// authorization, the impersonated user).
type Record struct {
	mu    sync.Mutex
	event Event
}

// NewRecord starts the record of a request with ev.
func NewRecord(ev Event) *Record { return &Record{event: ev} }

// Update changes the event under the record's lock.
func (r *Record) Update(f func(ev *Event)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f(&r.event)
}

// Snapshot is a copy of the event as it is now, for writing.
func (r *Record) Snapshot() Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	ev := r.event
	if ev.Annotations != nil {
		ev.Annotations = make(map[string]string, len(r.event.Annotations))
		for k, v := range r.event.Annotations {
			ev.Annotations[k] = v
		}
	}
	return ev
}

type recordKey struct{}

// WithRecord returns ctx carrying the record of its request.
func WithRecord(ctx context.Context, r *Record) context.Context {
	return context.WithValue(ctx, recordKey{}, r)
}

// RecordFrom is the record ctx carries, or nil when the request is not
// audited.
func RecordFrom(ctx context.Context) *Record {
	r, _ := ctx.Value(recordKey{}).(*Record)
	return r
}

// AddAnnotations adds key, value pairs to the event of ctx's request, if
// it is audited.
func AddAnnotations(ctx context.Context, kv ...string) {
	r := RecordFrom(ctx)
	if r == nil {
		return
	}
	r.Update(func(ev *Event) {
		if ev.Annotations == nil {
			ev.Annotations = map[string]string{}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			ev.Annotations[kv[i]] = kv[i+1]
		}
	})
}

// LogImpersonatedUser records who the request's user acts as.
func LogImpersonatedUser(ctx context.Context, u *user.Info) {
	r := RecordFrom(ctx)
	if r == nil {
		return
	}
	info := UserInfo(u)
	r.Update(func(ev *Event) { ev.ImpersonatedUser = &info })
}

// Writer writes events as JSON lines, one event a line, as
// kube-apiserver's log backend does. It is safe for concurrent use.
type Writer struct {
	mu sync.Mutex
	w  io.Writer
}

// NewWriter writes events to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// OpenLog opens the audit log at path for appending, creating it if need
// be (readable by its owner only: it names who did what); "-" is standard
// output, as for --audit-log-path, which closing leaves open.
func OpenLog(path string) (io.WriteCloser, error) {
	if path == "-" {
		return nopCloser{os.Stdout}, nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	return f, nil
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// Write writes ev as one line.
func (w *Writer) Write(ev *Event) error {
	ev.Kind, ev.APIVersion = "Event", "audit.k8s.io/v1"
	b, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	w.mu.Lock()
	defer w.mu.Unlock()
	_, err = w.w.Write(b)
	return err
}
