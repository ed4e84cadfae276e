package apiserver

import (
	"bytes"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

	// MaxJSONPatchArrayMoves is the most array elements the adds and
	// removes of one JSON patch may move in all: each moves the elements
	// after it. It is far more than any patch of a real object moves, and
	// a second of this machine's time.
	MaxJSONPatchArrayMoves = 100_000_000

	// MaxStrategicMergeListPairs is the most pairs of list items a strategic
	// merge patch may make the server compare (see strategicmerge.go): two
	// lists of 1,000 items are a million pairs; the lists of real objects
	// are far shorter.
	MaxStrategicMergeListPairs = 2_000_000

	// MaxYAMLSeparators is the most line breaks and commas a YAML body may
	// hold in all. Parsing YAML costs a microsecond or more per node, and a
	// 3 MiB body of one-character items has a million and a half of them,
	// seconds of work. Nodes are separated by line breaks and commas, at
	// most a key and its value between two of them (nesting is bounded
	// apart), so counting those bounds the parse (a fraction of a second)
	// without parsing. A body that needs more, a long text in a block
	// scalar, can be sent as JSON, which has no such limit.
	MaxYAMLSeparators = 200_000
)

// checkYAMLSize answers 413 RequestEntityTooLarge, naming the limit, when
// the YAML body holds more than MaxYAMLSeparators line breaks and commas.
func checkYAMLSize(body []byte) error {
	n := bytes.Count(body, []byte{'\n'}) + bytes.Count(body, []byte{','})
	if n <= MaxYAMLSeparators {
		return nil
	}
	return apierrors.NewRequestEntityTooLargeError(fmt.Sprintf(
		"the YAML body has %d line breaks and commas; the limit is %d, as YAML this large takes seconds to parse: send it as JSON", n, MaxYAMLSeparators))
}

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
