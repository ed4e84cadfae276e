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
// with a status and a scale subresource and a printer column, and the
// bounds, defaults and CEL rule its validation and defaulting sections add.
const crontabCRD = `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
 "metadata":{"name":"crontabs.stable.example.com"},
 "spec":{"group":"stable.example.com","scope":"Namespaced",
  "names":{"plural":"crontabs","singular":"crontab","kind":"CronTab","listKind":"CronTabList","shortNames":["ct"]},
  "versions":[{"name":"v1","served":true,"storage":true,
   "schema":{"openAPIV3Schema":{"type":"object","properties":{
    "spec":{"type":"object",
     "x-kubernetes-validations":[{"rule":"!has(self.minReplicas) || self.minReplicas <= self.replicas","message":"replicas should be greater than or equal to minReplicas."}],
     "properties":{"cronSpec":{"type":"string","default":"5 0 * * *"},"image":{"type":"string"},
      "replicas":{"type":"integer","minimum":1,"maximum":10,"default":1},"minReplicas":{"type":"integer"}}},
    "status":{"type":"object","properties":{"replicas":{"type":"integer"}}}}}},
   "subresources":{"status":{},"scale":{"specReplicasPath":".spec.replicas","statusReplicasPath":".status.replicas"}},
   "additionalPrinterColumns":[{"name":"Spec","type":"string","jsonPath":".spec.cronSpec"}]}]}}`

const crontabs = "/apis/stable.example.com/v1/namespaces/default/crontabs"

// The life of a CustomResourceDefinition against the real binary: created,
// Established, its objects pruned, defaulted and validated (bounds and a
// CEL rule), created, read, listed, watched, scaled and given a status;
// then deleted, and its objects with it.
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

	// The schema prunes unknown fields and fills in defaults (seen in a
	// dry run, which stores nothing), and refuses what breaks its bounds
	// or its rule, with kube's messages.
	code, obj := c.do("POST", crontabs+"?dryRun=All", "application/json",
		`{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"dry"},"spec":{"image":"my-cron","bogus":true}}`)
	if code != http.StatusCreated || field(obj, "spec", "cronSpec") != "5 0 * * *" || field(obj, "spec", "replicas") != float64(1) ||
		field(obj, "spec", "bogus") != nil {
		t.Fatalf("dry-run create: %d %v, want the defaults and no bogus field", code, obj)
	}
	for spec, want := range map[string]string{
		`{"replicas":11}`:                `CronTab.stable.example.com "bad" is invalid: spec.replicas: Invalid value: 11: spec.replicas in body should be less than or equal to 10`,
		`{"replicas":2,"minReplicas":3}`: `CronTab.stable.example.com "bad" is invalid: spec: Invalid value: replicas should be greater than or equal to minReplicas.`,
	} {
		code, st := c.do("POST", crontabs, "application/json", `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"bad"},"spec":`+spec+`}`)
		if code != http.StatusUnprocessableEntity || st["message"] != want {
			t.Errorf("create with spec %s: %d %q, want 422 %q", spec, code, st["message"], want)
		}
	}

	code, obj = c.do("POST", crontabs, "application/json",
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

	// The status changes through /status alone, and a status write leaves
	// the spec, and the generation, as they were.
	code, got := c.do("PATCH", crontabs+"/nightly/status", "application/merge-patch+json", `{"status":{"replicas":3},"spec":{"image":"other"}}`)
	if code != http.StatusOK || field(got, "status", "replicas") != float64(3) || field(got, "spec", "image") != "my-cron" ||
		field(got, "metadata", "generation") != float64(2) {
		t.Fatalf("status write: %d %v, want status.replicas 3, the image and generation 2 kept", code, got)
	}
	if ev := next(); ev["type"] != "MODIFIED" || field(ev, "object", "status", "replicas") != float64(3) {
		t.Fatalf("watch after the status write: %v", ev)
	}
	code, got = c.do("PATCH", crontabs+"/nightly", "application/merge-patch+json", `{"status":{"replicas":9}}`)
	if code != http.StatusOK || field(got, "status", "replicas") != float64(3) {
		t.Fatalf("a main-resource patch of the status: %d %v, want status.replicas kept at 3", code, got)
	}
	// That patch changed nothing, so nothing was written: the next event
	// is the deletion's.

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
