package apiserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// toStatusError turns any error into the Kubernetes Status a client sees.
// Errors that are already Statuses pass through; anything else is an
// internal error, which is a bug in minictl or an unreachable etcd.
func toStatusError(err error) *apierrors.StatusError {
	var se *apierrors.StatusError
	if errors.As(err, &se) {
		return se
	}
	return apierrors.NewInternalError(err)
}

// writeStatus answers with err as a Status object and its code.
func writeStatus(w http.ResponseWriter, err error) {
	se := toStatusError(err)
	status := se.Status()
	status.Kind = "Status"
	status.APIVersion = "v1"
	if status.Code == 0 {
		status.Code = http.StatusInternalServerError
	}
	// A Status that says when to retry says it in the header too, as
	// kube-apiserver's does (an eviction a budget refuses, for one).
	if d := status.Details; d != nil && d.RetryAfterSeconds > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(d.RetryAfterSeconds)))
	}
	writeJSON(w, int(status.Code), &status)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		http.Error(w, fmt.Sprintf("encode response: %v", err), http.StatusInternalServerError)
		return
	}
	writeRaw(w, code, body)
}

func writeRaw(w http.ResponseWriter, code int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(body)
}

// successStatus is the Status a delete answers with when the object is gone
// and no object is returned.
func successStatus(details *metav1.StatusDetails) *metav1.Status {
	return &metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusSuccess,
		Details:  details,
	}
}

func newMethodNotAllowed(method, path string) *apierrors.StatusError {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusMethodNotAllowed,
		Reason:  metav1.StatusReasonMethodNotAllowed,
		Message: fmt.Sprintf("the server does not allow the method %s on %s", method, path),
	}}
}

func newNotFoundPath(path string) *apierrors.StatusError {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusNotFound,
		Reason:  metav1.StatusReasonNotFound,
		Message: fmt.Sprintf("the server could not find the requested resource (path %s)", path),
		Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: metav1.CauseTypeUnexpectedServerResponse, Message: "404 page not found"}}},
	}}
}

func newUnsupportedMediaType(contentType string, supported []string) *apierrors.StatusError {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusUnsupportedMediaType,
		Reason:  metav1.StatusReasonUnsupportedMediaType,
		Message: fmt.Sprintf("the body of the request was in an unknown format %q; accepted media types are %v", contentType, supported),
	}}
}

// newRequestTimeout is kube-apiserver's answer to a request that ran out of
// time (its --request-timeout), err being why: 504 Timeout.
func newRequestTimeout(err error) *apierrors.StatusError {
	cause := context.DeadlineExceeded
	if errors.Is(err, context.Canceled) {
		cause = context.Canceled
	}
	return apierrors.NewTimeoutError(fmt.Sprintf("request did not complete within requested timeout - %v", cause), 0)
}

// newStorageUnavailable answers a request that etcd cannot serve now: 503
// ServiceUnavailable, which tells the client to try again.
func newStorageUnavailable() *apierrors.StatusError {
	return apierrors.NewServiceUnavailable("the server is currently unable to handle the request: etcd is unavailable")
}

// errTooLargeResourceVersion answers a read at a resourceVersion the
// server has not reached yet (current is where it is): 504 Timeout with
// the cause ResourceVersionTooLarge, and a second to wait before trying
// again, as kube-apiserver's watch cache answers it.
func errTooLargeResourceVersion(rv, current int64) *apierrors.StatusError {
	se := apierrors.NewTimeoutError(fmt.Sprintf("Too large resource version: %d, current: %d", rv, current), 1)
	se.ErrStatus.Details.Causes = []metav1.StatusCause{{
		Type:    metav1.CauseTypeResourceVersionTooLarge,
		Message: "Too large resource version",
	}}
	return se
}
