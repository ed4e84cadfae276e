package controllertest

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/minictl/minictl/client"
)

// ServerWatches is the number of watches of resource (a plural) the API
// server behind rc has open, from its apiserver_registered_watchers metric:
// how a test sees an informer start or stop from outside.
func ServerWatches(t testing.TB, rc *client.RESTClient, resource string) int {
	t.Helper()
	resp, err := http.Get(rc.Server() + "/metrics")
	if err != nil {
		t.Fatalf("metrics: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("metrics: %v", err)
	}
	prefix := `apiserver_registered_watchers{resource="` + resource + `"} `
	for line := range strings.Lines(string(body)) {
		if rest, ok := strings.CutPrefix(line, prefix); ok {
			n, err := strconv.Atoi(strings.TrimSpace(rest))
			if err != nil {
				t.Fatalf("metrics: %q: %v", line, err)
			}
			return n
		}
	}
	return 0
}
