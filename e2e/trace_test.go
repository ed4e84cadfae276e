package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/minictl/minictl/internal/minitest"
)

// TestTraceComponentAndJSONLog follows the endpoint controller by its
// kube-controller-manager name, `minictl trace --component endpoint`, while
// `minictl up --log-format json` writes the same decisions as data: one
// JSON object per line, each key once, the decision's numbers as numbers.
func TestTraceComponentAndJSONLog(t *testing.T) {
	c := up(t, minitest.FreeAddr(t), t.TempDir(), "--fast", "--log-format", "json")
	trace := minitest.Start(t, false, "trace", "--server", c.URL, "--component", "endpoint")
	eventually(t, "minictl trace to attach", func() (bool, string) {
		return strings.Contains(trace.Stderr.String(), "minictl trace: following"), trace.Stderr.String()
	})

	if code, out := c.do("POST", "/api/v1/namespaces/default/pods", "application/json", podJSON); code != 201 {
		t.Fatalf("create pod: %d %v", code, out)
	}
	if code, out := c.do("POST", "/api/v1/namespaces/default/services", "application/json", `{"apiVersion":"v1","kind":"Service",
	  "metadata":{"name":"web"},"spec":{"selector":{"app":"web"},"ports":[{"port":80}]}}`); code != 201 {
		t.Fatalf("create service: %d %v", code, out)
	}

	// The decision that puts the running pod behind the service, as the
	// timeline shows it.
	decision := regexp.MustCompile(`^\d\d:\d\d:\d\d\.\d{3}  endpoint +default/web +1 ready, 0 not ready → (create|update)$`)
	eventually(t, "minictl trace --component endpoint to show the endpoint controller's decision", func() (bool, string) {
		for line := range strings.Lines(trace.Stdout.String()) {
			if decision.MatchString(strings.TrimSuffix(line, "\n")) {
				return true, ""
			}
		}
		return false, trace.Stdout.String()
	})
	for line := range strings.Lines(trace.Stdout.String()) {
		if f := strings.Fields(line); len(f) < 2 || f[1] != "endpoint" {
			t.Errorf("minictl trace --component endpoint printed another component's line: %q", line)
		}
	}

	// The same decision in the JSON log, once the pod is ready: the
	// controller by name, the object, the counts.
	var logged map[string]any
	eventually(t, "the decision in the JSON log", func() (bool, string) {
		for line := range strings.Lines(c.Stderr.String()) {
			var m map[string]any
			if json.Unmarshal([]byte(line), &m) == nil && m["controller"] == "endpoint" &&
				m["object"] == "default/web" && m["ready"] == 1.0 {
				logged = m
				return true, ""
			}
		}
		return false, c.Stderr.String()
	})
	if logged["component"] != "controller-manager" || logged["notReady"] != 0.0 ||
		!regexp.MustCompile(`^1 ready, 0 not ready → (create|update)$`).MatchString(fmt.Sprint(logged["msg"])) {
		t.Errorf("the endpoint controller's decision in the JSON log: %v", logged)
	}

	// Every line is one JSON object, and no object carries a key twice.
	if key, err := duplicateKey([]byte(`{"a":{"b":1,"b":2}}`)); key != "b" || err != nil {
		t.Fatalf("duplicateKey misses a nested duplicate: %q, %v", key, err)
	}
	lines := 0
	for line := range strings.Lines(c.Stderr.String()) {
		lines++
		key, err := duplicateKey([]byte(line))
		switch {
		case err != nil:
			t.Errorf("not one JSON object (%v): %s", err, line)
		case key != "":
			t.Errorf("key %q twice: %s", key, line)
		}
	}
	if lines == 0 {
		t.Fatal("minictl up --log-format json wrote no log lines")
	}
}

// duplicateKey returns a key that an object in line (at any depth) carries
// twice, or "" if there is none; an error if line is not one JSON object.
func duplicateKey(line []byte) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(line))
	// value reads the rest of the value that starts with tok.
	var value func(tok json.Token) (string, error)
	value = func(tok json.Token) (string, error) {
		if tok != json.Delim('{') && tok != json.Delim('[') {
			return "", nil
		}
		seen := map[string]bool{}
		for dec.More() {
			if tok == json.Delim('{') {
				k, err := dec.Token()
				if err != nil {
					return "", err
				}
				if seen[k.(string)] {
					return k.(string), nil
				}
				seen[k.(string)] = true
			}
			next, err := dec.Token()
			if err != nil {
				return "", err
			}
			if dup, err := value(next); dup != "" || err != nil {
				return dup, err
			}
		}
		_, err := dec.Token() // the closing delimiter
		return "", err
	}
	tok, err := dec.Token()
	if err != nil {
		return "", err
	}
	if tok != json.Delim('{') {
		return "", fmt.Errorf("not a JSON object")
	}
	dup, err := value(tok)
	if err == nil && dup == "" && dec.More() {
		err = fmt.Errorf("more than one JSON value")
	}
	return dup, err
}
