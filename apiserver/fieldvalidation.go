package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	sigsjson "sigs.k8s.io/json"

	"github.com/minictl/minictl/api"
)

// Writes (create, update, patch) take kube-apiserver's write options:
//
//   - fieldValidation says what a body with fields the kind does not have
//     (or the same field twice) gets: Strict refuses it with 400 BadRequest,
//     Warn (the default) accepts it and says so in a Warning header, which
//     kubectl prints, Ignore accepts it silently. Unknown fields are never
//     stored.
//   - fieldManager names the writer; it is checked as Kubernetes checks it
//     and recorded in managedFields (fieldmanager.go).

// fieldValidation is the ?fieldValidation= directive of a write.
type fieldValidation string

const (
	fieldIgnore fieldValidation = metav1.FieldValidationIgnore
	fieldWarn   fieldValidation = metav1.FieldValidationWarn
	fieldStrict fieldValidation = metav1.FieldValidationStrict
)

// writeOptions reads and checks a write's fieldValidation and
// fieldManager.
func writeOptions(r *http.Request) (fieldValidation, error) {
	q := r.URL.Query()
	if m := q.Get("fieldManager"); m != "" {
		if len(m) > 128 {
			return "", invalidListOption("fieldManager", m, "must be at most 128 bytes long")
		}
		if strings.ContainsFunc(m, func(r rune) bool { return !unicode.IsPrint(r) }) {
			return "", invalidListOption("fieldManager", m, "must only contain printable characters")
		}
	}
	switch fv := fieldValidation(q.Get("fieldValidation")); fv {
	case "":
		return fieldWarn, nil
	case fieldIgnore, fieldWarn, fieldStrict:
		return fv, nil
	default:
		return "", apierrors.NewBadRequest(fmt.Sprintf("invalid fieldValidation directive %q: must be one of Ignore, Warn or Strict", fv))
	}
}

// decodeStrictly decodes data into obj, case-sensitively as Kubernetes
// does, and applies fv to the unknown and duplicate fields it finds. It
// reports false when data does not decode at all; the caller describes
// that error.
func decodeStrictly(ctx context.Context, res *api.Resource, data []byte, obj api.Object, fv fieldValidation) (bool, error) {
	strictErrs, err := sigsjson.UnmarshalStrict(data, obj, sigsjson.DisallowDuplicateFields, sigsjson.DisallowUnknownFields)
	if err != nil {
		return false, nil
	}
	if len(strictErrs) == 0 || fv == fieldIgnore {
		return true, nil
	}
	msgs := make([]string, len(strictErrs))
	for i, e := range strictErrs {
		msgs[i] = e.Error()
	}
	if fv == fieldStrict {
		return true, apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: strict decoding error: %s",
			res.Kind, res.Version, res.Kind, strings.Join(msgs, ", ")))
	}
	for _, m := range msgs {
		addWarning(ctx, m)
	}
	return true, nil
}

// Warnings travel from a handler to the response in the request's
// context, as kube-apiserver's do; they are written as
// `Warning: 299 - "message"` headers when the response starts.
type warningsKey struct{}

// warningSink collects a request's warnings; admission webhooks called
// in parallel add to it at once.
type warningSink struct {
	mu   sync.Mutex
	msgs []string // guarded by mu
}

// withWarnings returns ctx carrying a new sink for a request's warnings.
func withWarnings(ctx context.Context) (context.Context, *warningSink) {
	ws := &warningSink{}
	return context.WithValue(ctx, warningsKey{}, ws), ws
}

// addWarning adds a warning to the response of ctx's request, once.
func addWarning(ctx context.Context, msg string) {
	ws, ok := ctx.Value(warningsKey{}).(*warningSink)
	if !ok {
		return
	}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if !slices.Contains(ws.msgs, msg) {
		ws.msgs = append(ws.msgs, msg)
	}
}

// writeHeaders sets the Warning headers.
func (ws *warningSink) writeHeaders(h http.Header) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for _, m := range ws.msgs {
		h.Add("Warning", "299 - "+strconv.Quote(m))
	}
	ws.msgs = nil
}
