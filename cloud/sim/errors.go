package sim

import (
	"errors"
	"fmt"
	"net/http"
)

// Error is how the cloud says no, on the wire and in Go: the HTTP status
// code, a one-word reason and a message for people.
type Error struct {
	Code    int    `json:"code"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return fmt.Sprintf("cloud: %s (%d)", e.Message, e.Code) }

func newError(code int, format string, args ...any) *Error {
	return &Error{Code: code, Reason: reasonFor(code), Message: fmt.Sprintf(format, args...)}
}

func reasonFor(code int) string {
	switch code {
	case http.StatusBadRequest:
		return "BadRequest"
	case http.StatusNotFound:
		return "NotFound"
	case http.StatusMethodNotAllowed:
		return "MethodNotAllowed"
	case http.StatusConflict:
		return "Conflict"
	case http.StatusRequestEntityTooLarge:
		return "RequestEntityTooLarge"
	case http.StatusUnprocessableEntity:
		return "Invalid"
	case http.StatusServiceUnavailable:
		return "ServiceUnavailable"
	}
	return http.StatusText(code)
}

// IsNotFound reports whether err is the cloud's 404.
func IsNotFound(err error) bool { return hasCode(err, http.StatusNotFound) }

// IsConflict reports whether err is the cloud's 409.
func IsConflict(err error) bool { return hasCode(err, http.StatusConflict) }

// IsInvalid reports whether err is the cloud's 422.
func IsInvalid(err error) bool { return hasCode(err, http.StatusUnprocessableEntity) }

// IsUnavailable reports whether err is the cloud's 503.
func IsUnavailable(err error) bool { return hasCode(err, http.StatusServiceUnavailable) }

func hasCode(err error, code int) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}
