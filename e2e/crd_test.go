package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/minictl/minictl/internal/minitest"
)

// crontabCRD is the CustomResourceDefinition of Kubernetes' own
// documentation, as `kubectl create -f` sends it: crontabs.stable.example.com,
// with a status and a scale subresource and a printer column.
const crontabCRD = `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
 "metadata":{"name":"crontabs.stable.example.com"},
 "spec":{"group":"stable.example.com","scope":"Namespaced",
  "names":{"plural":"crontabs","singular":"crontab","kind":"CronTab","listKind":"CronTabList","shortNames":["ct"]},
  "versions":[{"name":"v1","served":true,"storage":true,
   "schema":{"openAPIV3Schema":{"type":"object","properties":{
    "spec":{"type":"object","properties":{"cronSpec":{"type":"string"},"image":{"type":"string"},"replicas":{"type":"integer"}}},
    "status":{"type":"object","properties":{"replicas":{"type":"integer"}}}}}},
   "subresources":{"status":{},"scale":{"specReplicasPath":".spec.replicas","statusReplicasPath":".status.replicas"}},
   "additionalPrinterColumns":[{"name":"Spec","type":"string","jsonPath":".spec.cronSpec"}]}]}}`

const crontabs = "/apis/stable.example.com/v1/namespaces/default/crontabs"

// The life of a CustomResourceDefinition against the real binary: created,
// Established, its objects created, read, listed, watched and scaled; then
// deleted, and its objects with it.
func TestCustomResourceLifecycle(t *testing.T) {
	addr := minitest.FreeAddr(t)
	c := up(t, addr, filepath.Join(t.TempDir(), "data"))

	code, crd := c.do("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", "application/json", crontabCRD)
	if code != http.StatusCreated {
		t.Fatalf("create the definition: %d %v", code, crd)
	}
	c.waitFor("the definition is Established", func() bool {
		_, crd := c.do("GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/crontabs.stable.example.com", "", "")
		conds, _ := field(crd, "status", "conditions").([]any)
		for _, cond := range conds {
			m, _ := cond.(map[string]any)
			if m["type"] == "Established" && m["status"] == "True" {
				return true
			}
		}
		return false
	})

	code, obj := c.do("POST", crontabs, "application/json",
		`{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"nightly"},"spec":{"cronSpec":"* * * * */5","image":"my-cron","replicas":1}}`)
	if code != http.StatusCreated {
		t.Fatalf("create a CronTab: %d %v", code, obj)
	}
	rv := field(obj, "metadata", "resourceVersion").(string)
	if code, got := c.do("GET", crontabs+"/nightly", "", ""); code != http.StatusOK || field(got, "spec", "image") != "my-cron" {
		t.Fatalf("get: %d %v", code, got)
	}
	if code, list := c.do("GET", crontabs, "", ""); code != http.StatusOK || list["kind"] != "CronTabList" || len(list["items"].([]any)) != 1 {
		t.Fatalf("list: %d %v", code, list)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", c.URL+crontabs+"?watch=true&resourceVersion="+rv, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	events := make(chan map[string]any, 16)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			var ev map[string]any
			if json.Unmarshal(sc.Bytes(), &ev) == nil {
				events <- ev
			}
		}
	}()
	next := func() map[string]any {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatal("the watch ended early")
			}
			return ev
		case <-time.After(10 * time.Second):
			t.Fatal("no watch event in 10s")
		}
		return nil
	}

	code, scale := c.do("PATCH", crontabs+"/nightly/scale", "application/merge-patch+json", `{"spec":{"replicas":3}}`)
	if code != http.StatusOK || field(scale, "spec", "replicas") != float64(3) {
		t.Fatalf("scale to 3: %d %v", code, scale)
	}
	if ev := next(); ev["type"] != "MODIFIED" || field(ev, "object", "spec", "replicas") != float64(3) {
		t.Fatalf("watch after scaling: %v", ev)
	}

	code, _ = c.do("DELETE", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/crontabs.stable.example.com", "", "")
	if code != http.StatusOK {
		t.Fatalf("delete the definition: %d", code)
	}
	if ev := next(); ev["type"] != "DELETED" || field(ev, "object", "metadata", "name") != "nightly" {
		t.Fatalf("watch after deleting the definition: %v", ev)
	}
	c.waitFor("the definition and its resource are gone", func() bool {
		crdCode, _ := c.do("GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/crontabs.stable.example.com", "", "")
		listCode, _ := c.do("GET", crontabs, "", "")
		return crdCode == http.StatusNotFound && listCode == http.StatusNotFound
	})
}

// waitFor polls cond until it holds, failing the test after 10s.
func (c *cluster) waitFor(what string, cond func() bool) {
	c.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			c.t.Fatalf("%s: not within 10s", what)
		}
		time.Sleep(20 * time.Millisecond) // polling interval, not synchronisation
	}
}
