package e2e

import (
	"fmt"
	"net/http"
	"slices"
	"testing"

	"github.com/minictl/minictl/internal/minitest"
)

// TestBadInputRefused sends the built binary three objects kube-apiserver
// refuses, a StatefulSet whose selector does not match its template, an
// autoscaling/v2 HorizontalPodAutoscaler with minReplicas 0 (HPAScaleToZero
// is off) and a claim of -1Gi, and gets for each the 422 Invalid Status
// kube's validation gives, word for word, naming the fields, with nothing
// stored. Like kube-apiserver's, the autoscaler's answer has a second
// cause: minReplicas 0 also needs an Object or External metric, and the
// defaulted metric is a Resource one.
func TestBadInputRefused(t *testing.T) {
	c := up(t, minitest.FreeAddr(t), t.TempDir(), "--fast", "--nodes", "1")
	for _, tt := range []struct {
		name, path, body string
		fields           []string
		message          string
	}{{
		name: "StatefulSet whose selector does not match its template",
		path: "/apis/apps/v1/namespaces/default/statefulsets",
		body: `{"apiVersion":"apps/v1","kind":"StatefulSet","metadata":{"name":"bad"},
		  "spec":{"serviceName":"bad","selector":{"matchLabels":{"app":"web"}},
		          "template":{"metadata":{"labels":{"app":"other"}},"spec":{"containers":[{"name":"web","image":"web:1"}]}}}}`,
		fields: []string{"spec.template.metadata.labels"},
		message: `StatefulSet.apps "bad" is invalid: spec.template.metadata.labels: ` +
			"Invalid value: {\"app\":\"other\"}: `selector` does not match template `labels`",
	}, {
		name: "HorizontalPodAutoscaler with minReplicas 0",
		path: "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers",
		body: `{"apiVersion":"autoscaling/v2","kind":"HorizontalPodAutoscaler","metadata":{"name":"bad"},
		  "spec":{"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"web"},"minReplicas":0,"maxReplicas":3}}`,
		fields: []string{"spec.minReplicas", "spec.metrics"},
		message: `HorizontalPodAutoscaler.autoscaling "bad" is invalid: [spec.minReplicas: Invalid value: 0: must be greater than or equal to 1, ` +
			`spec.metrics: Forbidden: must specify at least one Object or External metric to support scaling to zero replicas]`,
	}, {
		name: "PersistentVolumeClaim of -1Gi",
		path: "/api/v1/namespaces/default/persistentvolumeclaims",
		body: `{"apiVersion":"v1","kind":"PersistentVolumeClaim","metadata":{"name":"bad"},
		  "spec":{"accessModes":["ReadWriteOnce"],"resources":{"requests":{"storage":"-1Gi"}}}}`,
		fields:  []string{"spec.resources[storage]"},
		message: `PersistentVolumeClaim "bad" is invalid: spec.resources[storage]: Invalid value: "-1Gi": must be greater than zero`,
	}} {
		t.Run(tt.name, func(t *testing.T) {
			code, status := c.do(http.MethodPost, tt.path, "application/json", tt.body)
			if code != http.StatusUnprocessableEntity || field(status, "reason") != "Invalid" || field(status, "code") != float64(422) {
				t.Fatalf("POST %s: %d %v; want 422 Invalid", tt.path, code, status)
			}
			if got := field(status, "message"); got != tt.message {
				t.Errorf("message\n got %v\nwant %s", got, tt.message)
			}
			causes, _ := field(status, "details", "causes").([]any)
			var fields []string
			for _, c := range causes {
				fields = append(fields, fmt.Sprint(field(c.(map[string]any), "field")))
			}
			if !slices.Equal(fields, tt.fields) || field(causes[0].(map[string]any), "reason") != "FieldValueInvalid" {
				t.Errorf("causes %v; want a FieldValueInvalid naming %s first, and causes naming %v", causes, tt.fields[0], tt.fields)
			}
			if code, _ := c.do(http.MethodGet, tt.path+"/bad", "", ""); code != http.StatusNotFound {
				t.Errorf("GET the refused object: %d, want 404", code)
			}
			if code, list := c.do(http.MethodGet, tt.path, "", ""); code != http.StatusOK || fmt.Sprint(field(list, "items")) != "[]" {
				t.Errorf("list after the refusal: %d %v, want no items", code, field(list, "items"))
			}
		})
	}
}
