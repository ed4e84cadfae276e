// Package e2e drives the built minictl binary the way a user does: start
// `minictl up`, talk HTTP to it, stop it, start it again.
package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/minictl/minictl/internal/minitest"
)

// cluster is one running `minictl up` process.
type cluster struct {
	*minitest.Process
	t   *testing.T
	URL string
}

// up starts `minictl up` with args and waits for /readyz; when the test
// ends it is stopped, and must exit cleanly.
func up(t *testing.T, addr, dataDir string, args ...string) *cluster {
	t.Helper()
	c := &cluster{Process: minitest.Up(t, false, addr, dataDir, args...), t: t, URL: "http://" + addr}
	t.Cleanup(c.stop)
	return c
}

// stop sends SIGTERM and waits for a clean exit.
func (c *cluster) stop() {
	if err := c.Stop(); err != nil {
		c.t.Errorf("minictl up did not exit cleanly: %v\nstderr:\n%s", err, c.Stderr)
	}
}

// do sends one request and decodes the JSON answer into a map.
func (c *cluster) do(method, path, contentType, body string) (int, map[string]any) {
	c.t.Helper()
	req, err := http.NewRequest(method, c.URL+path, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	var out map[string]any
	data, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(data, &out); err != nil {
		c.t.Fatalf("%s %s: answer is not JSON: %v\n%s", method, path, err, data)
	}
	return resp.StatusCode, out
}

func field(obj map[string]any, path ...string) any {
	var cur any = obj
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[p]
	}
	return cur
}

const podJSON = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web","labels":{"app":"web"}},
  "spec":{"containers":[{"name":"nginx","image":"nginx:1.27"}]}}`

const podYAML = `apiVersion: v1
kind: Pod
metadata:
  name: api
  labels:
    app: api
spec:
  containers:
  - name: app
    image: example/api:1.0
`

// TestReadmeWalkthrough does what the README's curl walkthrough does, then
// restarts the cluster on the same data dir and finds everything still
// there.
func TestReadmeWalkthrough(t *testing.T) {
	addr, dataDir := minitest.FreeAddr(t), t.TempDir()
	c := up(t, addr, dataDir)
	if !strings.Contains(c.Stdout.String(), c.URL) {
		t.Errorf("minictl up did not print the API URL %s:\n%s", c.URL, c.Stdout)
	}

	code, pod := c.do("POST", "/api/v1/namespaces/default/pods", "application/json", podJSON)
	if code != http.StatusCreated {
		t.Fatalf("create pod from JSON: %d %v", code, pod)
	}
	code, apiPod := c.do("POST", "/api/v1/namespaces/default/pods", "application/yaml", podYAML)
	if code != http.StatusCreated {
		t.Fatalf("create pod from YAML: %d %v", code, apiPod)
	}
	code, list := c.do("GET", "/api/v1/namespaces/default/pods", "", "")
	if code != http.StatusOK || len(list["items"].([]any)) != 2 {
		t.Fatalf("list pods: %d %v", code, list)
	}

	// A watch in a "second terminal" sees the patch and the delete.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rv := field(apiPod, "metadata", "resourceVersion").(string)
	req, _ := http.NewRequestWithContext(ctx, "GET", c.URL+"/api/v1/namespaces/default/pods?watch=true&resourceVersion="+rv, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	events := make(chan map[string]any, 16)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var ev map[string]any
			if json.Unmarshal(sc.Bytes(), &ev) == nil {
				events <- ev
			}
		}
	}()

	code, patched := c.do("PATCH", "/api/v1/namespaces/default/pods/web", "application/merge-patch+json", `{"metadata":{"labels":{"tier":"frontend"}}}`)
	if code != http.StatusOK || field(patched, "metadata", "labels", "tier") != "frontend" {
		t.Fatalf("patch: %d %v", code, patched)
	}
	// A stale resourceVersion is a 409 Conflict.
	stale := strings.Replace(podJSON, `"name":"web"`, `"name":"web","resourceVersion":"`+field(pod, "metadata", "resourceVersion").(string)+`"`, 1)
	code, st := c.do("PUT", "/api/v1/namespaces/default/pods/web", "application/json", stale)
	if code != http.StatusConflict || st["reason"] != "Conflict" {
		t.Errorf("stale update: got %d %v, want 409 Conflict", code, st["reason"])
	}
	// An invalid object is a 422 that names the field.
	code, st = c.do("POST", "/api/v1/namespaces/default/pods", "application/json",
		`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"Not_Valid"},"spec":{"containers":[{"name":"c","image":"x"}]}}`)
	if code != http.StatusUnprocessableEntity || !strings.Contains(fmt.Sprint(st["details"]), "metadata.name") {
		t.Errorf("invalid pod: got %d %v, want 422 naming metadata.name", code, st)
	}
	code, _ = c.do("DELETE", "/api/v1/namespaces/default/pods/web", "", "")
	if code != http.StatusOK {
		t.Fatalf("delete: %d", code)
	}

	// The scheduler and the kubelet change the pods too (binding, status):
	// web's own story ends with our patch (and theirs) and the deletion.
	var got []string
	sawPatch := false
	for len(got) == 0 || got[len(got)-1] != "DELETED" {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatalf("watch ended early; web's events so far: %v", got)
			}
			if field(ev, "object", "metadata", "name") == "web" {
				got = append(got, fmt.Sprint(ev["type"]))
				if ev["type"] == "MODIFIED" && field(ev, "object", "metadata", "labels", "tier") == "frontend" {
					sawPatch = true
				}
			}
		case <-ctx.Done():
			t.Fatalf("no DELETED event for web on the watch; saw %v", got)
		}
	}
	if !sawPatch {
		t.Errorf("web's events: %v, none a MODIFIED with our label tier=frontend", got)
	}
	cancel()

	// Restart on the same data dir: the YAML pod is still there and new
	// writes get higher resourceVersions.
	_, before := c.do("GET", "/api/v1/namespaces/default/pods/api", "", "")
	c.stop()
	c = up(t, addr, dataDir)
	code, after := c.do("GET", "/api/v1/namespaces/default/pods/api", "", "")
	if code != http.StatusOK || field(after, "metadata", "uid") != field(before, "metadata", "uid") {
		t.Fatalf("after restart: %d %v", code, after)
	}
	code, cm := c.do("POST", "/api/v1/namespaces/default/configmaps", "application/json", `{"metadata":{"name":"after"},"data":{"k":"v"}}`)
	if code != http.StatusCreated {
		t.Fatalf("create after restart: %d %v", code, cm)
	}
	if !rvGreater(field(cm, "metadata", "resourceVersion"), field(after, "metadata", "resourceVersion")) {
		t.Errorf("resourceVersion went backwards after restart: %v then %v", field(after, "metadata", "resourceVersion"), field(cm, "metadata", "resourceVersion"))
	}
}

func rvGreater(a, b any) bool {
	var x, y int64
	fmt.Sscan(fmt.Sprint(a), &x)
	fmt.Sscan(fmt.Sprint(b), &y)
	return x > y
}

// TestAPIServerAlone runs `minictl apiserver` against the etcd of a
// running `minictl up`.
func TestAPIServerAlone(t *testing.T) {
	c := up(t, minitest.FreeAddr(t), t.TempDir())
	var etcdURL string
	for _, line := range strings.Split(c.Stdout.String(), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "etcd:" {
			etcdURL = f[1]
		}
	}
	if etcdURL == "" {
		t.Fatalf("minictl up did not print the etcd URL:\n%s", c.Stdout)
	}
	addr := minitest.FreeAddr(t)
	apiserver := minitest.Start(t, false, "apiserver", "--listen", addr, "--etcd-endpoints", etcdURL)
	second := &cluster{t: t, URL: "http://" + addr}
	apiserver.WaitReady(t, second.URL, 30*time.Second)
	code, _ := c.do("POST", "/api/v1/namespaces/default/configmaps", "application/json", `{"metadata":{"name":"shared"}}`)
	if code != http.StatusCreated {
		t.Fatalf("create: %d", code)
	}
	code, _ = second.do("GET", "/api/v1/namespaces/default/configmaps/shared", "", "")
	if code != http.StatusOK {
		t.Fatalf("the second API server does not see the object: %d", code)
	}
}
