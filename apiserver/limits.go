package apiserver

import (
	"errors"
	"fmt"
	"net/http"

	jsonpatch "github.com/evanphx/json-patch/v5"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The limits below, with the body size limit (DefaultMaxRequestBodyBytes),
// keep what one request costs proportional to its size: a body of a few
// kilobytes cannot make the server allocate gigabytes or spend seconds.
const (
	// MaxNestingDepth is the deepest nesting of objects and arrays a JSON or
	// YAML body, or a merge, strategic merge or JSON patch, may have. The
	// deepest Kubernetes object minictl serves nests about 20 levels (a
	// CronJob's pod affinity terms); merging a patch costs time and memory
	// that grow faster than its depth, so the limit is far below the 10,000
	// levels of encoding/json.
	MaxNestingDepth = 100

	// MaxJSONPatchOperations is the most operations a JSON patch may hold,
	// as in kube-apiserver.
	MaxJSONPatchOperations = 10000
)

// checkNesting answers 400 BadRequest, naming the limit, when the JSON
// document data nests objects and arrays deeper than MaxNestingDepth. It
// reads data once and allocates nothing; data need not be valid JSON (a
// decoder reports that), so it runs before any decoder sees the body.
func checkNesting(what string, data []byte) error {
	depth := 0
	inString, escaped := false, false
	for _, c := range data {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
			if depth > MaxNestingDepth {
				return apierrors.NewBadRequest(fmt.Sprintf("%s nests objects and arrays deeper than %d levels, the most minictl accepts", what, MaxNestingDepth))
			}
		case c == '}' || c == ']':
			depth--
		}
	}
	return nil
}

// decodeJSONPatch reads a JSON patch of at most MaxJSONPatchOperations
// operations, as kube-apiserver does: more is a 413 RequestEntityTooLarge.
// A patch the library would fail on with a panic is a 400 BadRequest.
func decodeJSONPatch(body []byte) (jsonpatch.Patch, error) {
	p, err := jsonpatch.DecodePatch(body)
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the JSON patch is not valid: %v", err))
	}
	if len(p) > MaxJSONPatchOperations {
		return nil, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf(
			"The allowed maximum operations in a JSON patch is %d, got %d", MaxJSONPatchOperations, len(p)))
	}
	// RFC 6902 requires a test operation's value; the library dereferences
	// it without looking.
	for i, op := range p {
		if _, ok := op["value"]; op.Kind() == "test" && !ok {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("the JSON patch is not valid: operation %d (test) has no value", i))
		}
	}
	return p, nil
}

// applyJSONPatch applies p to the JSON object orig. What the copy
// operations of one patch add to the object is bounded, in total, by the
// body size limit, as in kube-apiserver: a few operations that copy an array
// into itself would otherwise double it each time. Going past it is a 422
// Invalid naming the limit.
func applyJSONPatch(p jsonpatch.Patch, orig []byte, maxBody int64) ([]byte, error) {
	o := jsonpatch.NewApplyOptions()
	o.AccumulatedCopySizeLimit = maxBody
	out, err := p.ApplyWithOptions(orig, o)
	var tooMuch *jsonpatch.AccumulatedCopySizeError
	if errors.As(err, &tooMuch) {
		return nil, &apierrors.StatusError{ErrStatus: metav1.Status{
			Status: metav1.StatusFailure,
			Code:   http.StatusUnprocessableEntity,
			Reason: metav1.StatusReasonInvalid,
			Message: fmt.Sprintf("the JSON patch's copy operations add more than %d bytes, the request size limit: %v",
				maxBody, err),
		}}
	}
	return out, patchFailed(err)
}
