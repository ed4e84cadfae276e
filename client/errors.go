package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// StatusError is a failure the API server reported: every non-2xx response
// becomes one, decoded from the Status body the server sent or, when the body
// is not a Status, synthesized from the HTTP code. Branch on it with the Is*
// helpers, which look through wrapped errors.
type StatusError struct {
	ErrStatus metav1.Status
}

// Error returns the Status message.
func (e *StatusError) Error() string { return e.ErrStatus.Message }

// Status returns the Status the error carries.
func (e *StatusError) Status() metav1.Status { return e.ErrStatus }

// ReasonResourceExpired is the reason some servers give, instead of Expired,
// for a resourceVersion or continue token too old to serve.
const ReasonResourceExpired metav1.StatusReason = "ResourceExpired"

// knownReasons are the reasons whose meaning does not depend on the code; a
// helper falls back on the code only when the reason is not one of these, so
// a 409 AlreadyExists is never a Conflict.
var knownReasons = map[metav1.StatusReason]bool{
	metav1.StatusReasonUnauthorized:          true,
	metav1.StatusReasonForbidden:             true,
	metav1.StatusReasonNotFound:              true,
	metav1.StatusReasonAlreadyExists:         true,
	metav1.StatusReasonConflict:              true,
	metav1.StatusReasonGone:                  true,
	metav1.StatusReasonInvalid:               true,
	metav1.StatusReasonServerTimeout:         true,
	metav1.StatusReasonStoreReadError:        true,
	metav1.StatusReasonTimeout:               true,
	metav1.StatusReasonTooManyRequests:       true,
	metav1.StatusReasonBadRequest:            true,
	metav1.StatusReasonMethodNotAllowed:      true,
	metav1.StatusReasonNotAcceptable:         true,
	metav1.StatusReasonRequestEntityTooLarge: true,
	metav1.StatusReasonUnsupportedMediaType:  true,
	metav1.StatusReasonInternalError:         true,
	metav1.StatusReasonExpired:               true,
	metav1.StatusReasonServiceUnavailable:    true,
	ReasonResourceExpired:                    true,
}

// reasonForCode is the reason a synthesized Status gets for an HTTP code.
var reasonForCode = map[int]metav1.StatusReason{
	http.StatusBadRequest:            metav1.StatusReasonBadRequest,
	http.StatusUnauthorized:          metav1.StatusReasonUnauthorized,
	http.StatusForbidden:             metav1.StatusReasonForbidden,
	http.StatusNotFound:              metav1.StatusReasonNotFound,
	http.StatusMethodNotAllowed:      metav1.StatusReasonMethodNotAllowed,
	http.StatusNotAcceptable:         metav1.StatusReasonNotAcceptable,
	http.StatusConflict:              metav1.StatusReasonConflict,
	http.StatusGone:                  metav1.StatusReasonGone,
	http.StatusRequestEntityTooLarge: metav1.StatusReasonRequestEntityTooLarge,
	http.StatusUnsupportedMediaType:  metav1.StatusReasonUnsupportedMediaType,
	http.StatusUnprocessableEntity:   metav1.StatusReasonInvalid,
	http.StatusTooManyRequests:       metav1.StatusReasonTooManyRequests,
	http.StatusInternalServerError:   metav1.StatusReasonInternalError,
	http.StatusServiceUnavailable:    metav1.StatusReasonServiceUnavailable,
	http.StatusGatewayTimeout:        metav1.StatusReasonTimeout,
}

// messageForCode is the message a synthesized Status gets, in the words
// client-go uses, so that what a learner reads matches kubectl.
var messageForCode = map[int]string{
	http.StatusBadRequest:            "the server rejected our request for an unknown reason",
	http.StatusUnauthorized:          "the server has asked for the client to provide credentials",
	http.StatusForbidden:             "the server does not allow access to the requested resource",
	http.StatusNotFound:              "the server could not find the requested resource",
	http.StatusMethodNotAllowed:      "the server does not allow this method on the requested resource",
	http.StatusNotAcceptable:         "the server was unable to respond with a content type that the client supports",
	http.StatusConflict:              "the server reported a conflict",
	http.StatusGone:                  "the requested resource is no longer available",
	http.StatusRequestEntityTooLarge: "the server has rejected the request because it is too large",
	http.StatusUnsupportedMediaType:  "the server was unable to handle the content type of the request",
	http.StatusUnprocessableEntity:   "the server rejected our request due to an error in our request",
	http.StatusTooManyRequests:       "the server has received too many requests and has asked us to try again later",
	http.StatusInternalServerError:   "an error on the server has prevented the request from succeeding",
	http.StatusServiceUnavailable:    "the server is currently unable to handle the request",
	http.StatusGatewayTimeout:        "the server was unable to return a response in the time allotted, but may still be processing the request",
}

// maxBodyInMessage bounds how much of a non-Status error body a synthesized
// message quotes.
const maxBodyInMessage = 1024

// decodeError turns a non-2xx response into a *StatusError. A body that is a
// Status is used as sent (its code filled in from the response when absent);
// anything else is replaced by a Status synthesized from the code, quoting a
// short plain-text body.
func decodeError(code int, method, path string, body []byte) *StatusError {
	var st metav1.Status
	if json.Unmarshal(body, &st) == nil && isStatus(&st) {
		if st.Code == 0 {
			st.Code = int32(code)
		}
		if st.Status == "" {
			st.Status = metav1.StatusFailure
		}
		if st.Message == "" {
			st.Message = synthesizedMessage(code, method, path, nil)
		}
		return &StatusError{ErrStatus: st}
	}
	reason, ok := reasonForCode[code]
	if !ok {
		reason = metav1.StatusReasonUnknown
	}
	return &StatusError{ErrStatus: metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure,
		Code:     int32(code),
		Reason:   reason,
		Message:  synthesizedMessage(code, method, path, body),
	}}
}

// isStatus reports whether a decoded body was a Status rather than some other
// JSON document.
func isStatus(st *metav1.Status) bool {
	if st.Kind == "Status" {
		return true
	}
	return st.Kind == "" && st.Status == metav1.StatusFailure && (st.Reason != "" || st.Code != 0)
}

func synthesizedMessage(code int, method, path string, body []byte) string {
	msg, ok := messageForCode[code]
	if !ok {
		msg = fmt.Sprintf("the server responded with the status code %d but did not return more information", code)
		if code >= 500 {
			msg = fmt.Sprintf("an error on the server (%q) has prevented the request from succeeding", http.StatusText(code))
		}
	}
	msg = fmt.Sprintf("%s (%s %s)", msg, method, path)
	if text := strings.TrimSpace(string(body)); text != "" {
		if len(text) > maxBodyInMessage {
			text = text[:maxBodyInMessage] + "..."
		}
		msg += ": " + text
	}
	return msg
}

// statusOf finds the Status in err's chain: ours, or any error that
// carries one (apimachinery's StatusError, which listers return).
func statusOf(err error) (metav1.Status, bool) {
	var se interface{ Status() metav1.Status }
	if errors.As(err, &se) {
		return se.Status(), true
	}
	return metav1.Status{}, false
}

// ReasonForError returns the reason of the Status in err's chain, or
// StatusReasonUnknown ("") when there is none.
func ReasonForError(err error) metav1.StatusReason {
	st, _ := statusOf(err)
	return st.Reason
}

// StatusCode returns the HTTP code of the Status in err's chain, or 0 when
// there is none.
func StatusCode(err error) int {
	st, _ := statusOf(err)
	return int(st.Code)
}

// is reports whether err carries one of reasons, or carries code with a
// reason that does not say otherwise.
func is(err error, code int, reasons ...metav1.StatusReason) bool {
	st, ok := statusOf(err)
	if !ok {
		return false
	}
	for _, r := range reasons {
		if st.Reason == r {
			return true
		}
	}
	return code != 0 && int(st.Code) == code && !knownReasons[st.Reason]
}

// IsNotFound: the object (or the path) does not exist.
func IsNotFound(err error) bool { return is(err, http.StatusNotFound, metav1.StatusReasonNotFound) }

// IsAlreadyExists: a create named an object that exists.
func IsAlreadyExists(err error) bool { return is(err, 0, metav1.StatusReasonAlreadyExists) }

// IsConflict: an update or delete named a resourceVersion or uid that is no
// longer current; read again and retry.
func IsConflict(err error) bool { return is(err, http.StatusConflict, metav1.StatusReasonConflict) }

// IsInvalid: the object failed validation; Details.Causes names the fields.
func IsInvalid(err error) bool {
	return is(err, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid)
}

// IsGone: a resourceVersion or continue token is too old to serve; relist.
func IsGone(err error) bool {
	return is(err, http.StatusGone, metav1.StatusReasonGone, metav1.StatusReasonExpired, ReasonResourceExpired)
}

// IsForbidden: the caller may not do this.
func IsForbidden(err error) bool { return is(err, http.StatusForbidden, metav1.StatusReasonForbidden) }

// IsBadRequest: the request itself was malformed.
func IsBadRequest(err error) bool {
	return is(err, http.StatusBadRequest, metav1.StatusReasonBadRequest)
}

// IsTooManyRequests: the server asks the client to slow down.
func IsTooManyRequests(err error) bool {
	return is(err, http.StatusTooManyRequests, metav1.StatusReasonTooManyRequests)
}

// IsUnauthorized: the request carried no valid credentials.
func IsUnauthorized(err error) bool {
	return is(err, http.StatusUnauthorized, metav1.StatusReasonUnauthorized)
}

// IsMethodNotSupported: the resource does not serve this verb.
func IsMethodNotSupported(err error) bool {
	return is(err, http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed)
}

// IsRequestEntityTooLarge: the request body was too large.
func IsRequestEntityTooLarge(err error) bool {
	return is(err, http.StatusRequestEntityTooLarge, metav1.StatusReasonRequestEntityTooLarge)
}

// IsUnsupportedMediaType: the server does not accept the body's content type
// (for example a patch type it does not implement).
func IsUnsupportedMediaType(err error) bool {
	return is(err, http.StatusUnsupportedMediaType, metav1.StatusReasonUnsupportedMediaType)
}

// IsServerTimeout: the server could not finish in time and asks for a retry.
// It has no code of its own (kube-apiserver sends it with 500 or 504), so
// only the reason counts.
func IsServerTimeout(err error) bool { return is(err, 0, metav1.StatusReasonServerTimeout) }

// IsTimeout: the request timed out on the server (504) and may still be in
// progress.
func IsTimeout(err error) bool { return is(err, http.StatusGatewayTimeout, metav1.StatusReasonTimeout) }

// IsInternalError: the server failed (500).
func IsInternalError(err error) bool {
	return is(err, http.StatusInternalServerError, metav1.StatusReasonInternalError)
}

// IsServiceUnavailable: the server is not ready to serve (503).
func IsServiceUnavailable(err error) bool {
	return is(err, http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable)
}
