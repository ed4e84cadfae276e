package client

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// statusErr builds a *StatusError as decodeError would from a Status body.
func statusErr(code int, reason metav1.StatusReason) error {
	body := fmt.Sprintf(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"boom","reason":%q,"code":%d}`, reason, code)
	return decodeError(code, "GET", "/api/v1/pods", []byte(body))
}

func TestIsHelpers(t *testing.T) {
	helpers := map[string]func(error) bool{
		"IsNotFound":              IsNotFound,
		"IsAlreadyExists":         IsAlreadyExists,
		"IsConflict":              IsConflict,
		"IsInvalid":               IsInvalid,
		"IsGone":                  IsGone,
		"IsForbidden":             IsForbidden,
		"IsBadRequest":            IsBadRequest,
		"IsTooManyRequests":       IsTooManyRequests,
		"IsUnauthorized":          IsUnauthorized,
		"IsMethodNotSupported":    IsMethodNotSupported,
		"IsRequestEntityTooLarge": IsRequestEntityTooLarge,
		"IsUnsupportedMediaType":  IsUnsupportedMediaType,
		"IsServerTimeout":         IsServerTimeout,
		"IsTimeout":               IsTimeout,
		"IsInternalError":         IsInternalError,
		"IsServiceUnavailable":    IsServiceUnavailable,
	}
	tests := []struct {
		name string
		err  error
		want string // the one helper that must say yes; "" for none
	}{
		{"NotFound", statusErr(404, metav1.StatusReasonNotFound), "IsNotFound"},
		{"AlreadyExists is not a Conflict", statusErr(409, metav1.StatusReasonAlreadyExists), "IsAlreadyExists"},
		{"Conflict", statusErr(409, metav1.StatusReasonConflict), "IsConflict"},
		{"Invalid", statusErr(422, metav1.StatusReasonInvalid), "IsInvalid"},
		{"Gone", statusErr(410, metav1.StatusReasonGone), "IsGone"},
		{"Expired", statusErr(410, metav1.StatusReasonExpired), "IsGone"},
		{"ResourceExpired", statusErr(410, ReasonResourceExpired), "IsGone"},
		{"Forbidden", statusErr(403, metav1.StatusReasonForbidden), "IsForbidden"},
		{"BadRequest", statusErr(400, metav1.StatusReasonBadRequest), "IsBadRequest"},
		{"TooManyRequests", statusErr(429, metav1.StatusReasonTooManyRequests), "IsTooManyRequests"},
		{"Unauthorized", statusErr(401, metav1.StatusReasonUnauthorized), "IsUnauthorized"},
		{"MethodNotAllowed", statusErr(405, metav1.StatusReasonMethodNotAllowed), "IsMethodNotSupported"},
		{"RequestEntityTooLarge", statusErr(413, metav1.StatusReasonRequestEntityTooLarge), "IsRequestEntityTooLarge"},
		{"UnsupportedMediaType", statusErr(415, metav1.StatusReasonUnsupportedMediaType), "IsUnsupportedMediaType"},
		{"ServerTimeout", statusErr(500, metav1.StatusReasonServerTimeout), "IsServerTimeout"},
		{"Timeout", statusErr(504, metav1.StatusReasonTimeout), "IsTimeout"},
		{"InternalError", statusErr(500, metav1.StatusReasonInternalError), "IsInternalError"},
		{"ServiceUnavailable", statusErr(503, metav1.StatusReasonServiceUnavailable), "IsServiceUnavailable"},
		// A Status without a reason, or with one we do not know, falls back
		// on the code.
		{"404 without reason", statusErr(404, ""), "IsNotFound"},
		{"409 with an unknown reason", statusErr(409, "SomethingNew"), "IsConflict"},
		{"410 without reason", statusErr(410, ""), "IsGone"},
		{"429 without reason", statusErr(429, ""), "IsTooManyRequests"},
		// Bodies that are not a Status are synthesized from the code.
		{"plain 404", decodeError(404, "GET", "/x", []byte("404 page not found\n")), "IsNotFound"},
		{"plain 409", decodeError(409, "PUT", "/x", nil), "IsConflict"},
		{"plain 422", decodeError(422, "PUT", "/x", nil), "IsInvalid"},
		{"plain 410", decodeError(410, "GET", "/x", nil), "IsGone"},
		{"plain 403", decodeError(403, "GET", "/x", nil), "IsForbidden"},
		{"plain 401", decodeError(401, "GET", "/x", nil), "IsUnauthorized"},
		{"plain 400", decodeError(400, "GET", "/x", nil), "IsBadRequest"},
		{"plain 405", decodeError(405, "GET", "/x", nil), "IsMethodNotSupported"},
		{"plain 413", decodeError(413, "GET", "/x", nil), "IsRequestEntityTooLarge"},
		{"plain 415", decodeError(415, "GET", "/x", nil), "IsUnsupportedMediaType"},
		{"plain 429", decodeError(429, "GET", "/x", nil), "IsTooManyRequests"},
		{"plain 418", decodeError(418, "GET", "/x", nil), ""},
		// Wrapping is seen through; other errors are nothing.
		{"wrapped NotFound", fmt.Errorf("sync default/web: %w", statusErr(404, metav1.StatusReasonNotFound)), "IsNotFound"},
		{"not a StatusError", errors.New("connection refused"), ""},
		{"nil", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for name, is := range helpers {
				if got := is(tt.err); got != (name == tt.want) {
					t.Errorf("%s = %v", name, got)
				}
			}
		})
	}
}

func TestDecodeErrorStatusBody(t *testing.T) {
	body := `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
		"message":"pods \"web\" is invalid: spec.containers: Required value","reason":"Invalid",
		"details":{"name":"web","kind":"pods","causes":[{"reason":"FieldValueRequired","message":"Required value","field":"spec.containers"}]},
		"code":422}`
	err := error(decodeError(422, "POST", "/api/v1/namespaces/default/pods", []byte(body)))
	if got, want := err.Error(), `pods "web" is invalid: spec.containers: Required value`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if ReasonForError(err) != metav1.StatusReasonInvalid || StatusCode(err) != 422 {
		t.Errorf("reason %q code %d", ReasonForError(err), StatusCode(err))
	}
	var se *StatusError
	if !errors.As(err, &se) {
		t.Fatal("not a *StatusError")
	}
	d := se.ErrStatus.Details
	if d == nil || d.Name != "web" || len(d.Causes) != 1 || d.Causes[0].Field != "spec.containers" {
		t.Errorf("details = %+v", d)
	}
}

func TestDecodeErrorSynthesized(t *testing.T) {
	tests := []struct {
		code       int
		body       string
		wantReason metav1.StatusReason
		wantMsg    []string
	}{
		{404, "404 page not found\n", metav1.StatusReasonNotFound,
			[]string{"could not find the requested resource", "GET /x", "404 page not found"}},
		{503, "", metav1.StatusReasonServiceUnavailable, []string{"unable to handle the request"}},
		{502, "<html>bad gateway</html>", metav1.StatusReasonUnknown, []string{`"Bad Gateway"`, "<html>bad gateway</html>"}},
		{418, "", metav1.StatusReasonUnknown, []string{"status code 418"}},
		// JSON that is not a Status is not taken for one.
		{409, `{"kind":"Pod","apiVersion":"v1"}`, metav1.StatusReasonConflict, []string{"conflict", `{"kind":"Pod"`}},
		{500, strings.Repeat("x", 5000), metav1.StatusReasonInternalError, []string{"..."}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.code), func(t *testing.T) {
			err := decodeError(tt.code, "GET", "/x", []byte(tt.body))
			st := err.ErrStatus
			if st.Kind != "Status" || st.Status != metav1.StatusFailure || int(st.Code) != tt.code || st.Reason != tt.wantReason {
				t.Errorf("status = %+v", st)
			}
			for _, w := range tt.wantMsg {
				if !strings.Contains(st.Message, w) {
					t.Errorf("message %q does not contain %q", st.Message, w)
				}
			}
			if len(st.Message) > 2*maxBodyInMessage {
				t.Errorf("message is %d bytes long", len(st.Message))
			}
		})
	}
}

func TestDecodeErrorFillsCode(t *testing.T) {
	// A Status that leaves out code and status gets them from the response.
	err := decodeError(http.StatusConflict, "PUT", "/x", []byte(`{"kind":"Status","reason":"Conflict","message":"stale"}`))
	if err.ErrStatus.Code != 409 || err.ErrStatus.Status != metav1.StatusFailure || !IsConflict(err) {
		t.Errorf("status = %+v", err.ErrStatus)
	}
	if ReasonForError(errors.New("x")) != "" || StatusCode(errors.New("x")) != 0 {
		t.Error("a plain error has a reason or code")
	}
}

// TestListerErrorsAreRecognised: a lister's NotFound (apimachinery's
// StatusError) answers to the same helpers as the server's.
func TestListerErrorsAreRecognised(t *testing.T) {
	err := fmt.Errorf("get: %w", apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "web"))
	if !IsNotFound(err) || IsConflict(err) {
		t.Errorf("IsNotFound=%v IsConflict=%v for %v", IsNotFound(err), IsConflict(err), err)
	}
}
