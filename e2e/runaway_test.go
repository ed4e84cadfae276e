package e2e

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/minictl/minictl/internal/minitest"
)

// The README's "Protecting a cluster", word for word.
const (
	quotaJSON = `{
  "apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "pods"},
  "spec": {"hard": {"pods": "100", "count/replicasets.apps": "20"}}}`
	hugeReplicaSetJSON = `{
  "apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "huge"},
  "spec": {"replicas": 2147483647, "selector": {"matchLabels": {"app": "huge"}},
    "template": {"metadata": {"labels": {"app": "huge"}},
      "spec": {"containers": [{"name": "app", "image": "nginx"}]}}}}`
)

// TestRunawayReplicaSetHeldByAQuota does what the README's "Protecting a
// cluster" does: a quota of 100 pods, then a ReplicaSet of 2,147,483,647
// replicas. It gets its 100 pods, a FailedCreate event and a
// ReplicaFailure condition, and retries with a growing backoff, a couple
// of log lines a try, while the cluster stays ready.
func TestRunawayReplicaSetHeldByAQuota(t *testing.T) {
	c := up(t, minitest.FreeAddr(t), t.TempDir())
	if code, q := c.do("POST", "/api/v1/namespaces/default/resourcequotas", "application/json", quotaJSON); code != http.StatusCreated {
		t.Fatalf("create quota: %d %v", code, q)
	}
	eventually(t, "the quota measured", func() (bool, string) {
		_, q := c.do("GET", "/api/v1/namespaces/default/resourcequotas/pods", "", "")
		used := field(q, "status", "used", "pods")
		return used == "0", "used pods " + fmt.Sprint(used)
	})
	if code, rs := c.do("POST", "/apis/apps/v1/namespaces/default/replicasets", "application/json", hugeReplicaSetJSON); code != http.StatusCreated {
		t.Fatalf("create replica set: %d %v", code, rs)
	}

	countPods := func() int {
		_, list := c.do("GET", "/api/v1/namespaces/default/pods?labelSelector=app%3Dhuge", "", "")
		items, _ := list["items"].([]any)
		return len(items)
	}
	eventually(t, "100 pods", func() (bool, string) {
		n := countPods()
		return n == 100, fmt.Sprint(n) + " pods"
	})
	eventually(t, "a FailedCreate event", func() (bool, string) {
		_, list := c.do("GET", "/api/v1/namespaces/default/events?fieldSelector=reason%3DFailedCreate", "", "")
		items, _ := list["items"].([]any)
		for _, it := range items {
			if msg, _ := field(it.(map[string]any), "message").(string); strings.Contains(msg, "exceeded quota: pods") {
				return true, ""
			}
		}
		return false, fmt.Sprint(len(items)) + " FailedCreate events, none for the quota"
	})
	eventually(t, "the ReplicaFailure condition", func() (bool, string) {
		_, rs := c.do("GET", "/apis/apps/v1/namespaces/default/replicasets/huge", "", "")
		conds, _ := field(rs, "status", "conditions").([]any)
		for _, cond := range conds {
			m := cond.(map[string]any)
			if m["type"] == "ReplicaFailure" && m["status"] == "True" && m["reason"] == "FailedCreate" {
				return true, ""
			}
		}
		return false, fmt.Sprint(conds)
	})

	// Each try is a decision and its failure; the backoff doubles, so a
	// handful of tries take a second or so.
	huge := regexp.MustCompile(`replicaset +default/huge +`)
	failed := regexp.MustCompile(`replicaset +default/huge +sync failed, will retry`)
	eventually(t, "6 tries after the quota was reached", func() (bool, string) {
		n := len(failed.FindAllString(c.Stderr.String(), -1))
		return n >= 6, fmt.Sprint(n) + " failed tries"
	})
	out := c.Stderr.String()
	tries, lines := len(failed.FindAllString(out, -1)), len(huge.FindAllString(out, -1))
	if lines > 2*tries+4 {
		t.Errorf("%d log lines about default/huge for %d tries, want about 2 a try:\n%s", lines, tries, out)
	}
	if n := countPods(); n != 100 {
		t.Errorf("%d pods, want the 100 of the quota", n)
	}
	if resp, err := http.Get(c.URL + "/readyz"); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("/readyz: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
}
