package apiserver_test

import (
	"net/http"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/internal/testenv"
)

// TestPatchErrorsSayWhy sends patches that do not apply to the object they
// name. Each is a 422 Invalid that says which object, and why, in its
// message and in a cause on the field "patch" (kube-apiserver answers
// "the server rejected our request due to an error in our request" with
// empty details); a malformed strategic merge patch is a 400, as there.
// Nothing is written.
func TestPatchErrorsSayWhy(t *testing.T) {
	env := testenv.Start(t)
	create[corev1.ConfigMap](t, env, cmPath("default", ""), configMap("cm", nil, map[string]string{"a": "1"}))
	create[appsv1.Deployment](t, env, deployPath("default", ""), deployment("web", 1))
	create[corev1.Pod](t, env, podPath("default", ""), pod("p", "", nil))

	for _, tc := range []struct {
		name, path, contentType, body string
		group, kind, objName          string
		message                       string
	}{
		{"a JSON patch test that fails", cmPath("default", "cm"), jsonPatch, `[{"op":"test","path":"/data/a","value":"2"}]`,
			"", "ConfigMap", "cm", `ConfigMap "cm" is invalid: patch: Invalid value: operation 0 (test /data/a): testing value /data/a failed`},
		{"a JSON patch of a path the object does not have", deployPath("default", "web"), jsonPatch, `[{"op":"remove","path":"/spec/paused"}]`,
			"apps", "Deployment", "web", `Deployment.apps "web" is invalid: patch: Invalid value: operation 0 (remove /spec/paused): the document has no such path`},
		{"a JSON patch past the end of an array", podPath("default", "p"), jsonPatch, `[{"op":"add","path":"/spec/containers/5","value":{}}]`,
			"", "Pod", "p", `Pod "p" is invalid: patch: Invalid value: operation 0 (add /spec/containers/5): index 5 is out of range for an array of 1`},
		{"a JSON patch of a scale", deployPath("default", "web") + "/scale", jsonPatch, `[{"op":"test","path":"/spec/replicas","value":7}]`,
			"autoscaling", "Scale", "web", `Scale.autoscaling "web" is invalid: patch: Invalid value: operation 0 (test /spec/replicas): testing value /spec/replicas failed`},
		{"a strategic merge patch without a merge key", podPath("default", "p"), strategicPtch, `{"spec":{"containers":[{"image":"x"}]}}`,
			"", "Pod", "p", `Pod "p" is invalid: patch: Invalid value: map: map[image:x] does not contain declared merge key: name`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := revision(t, env)
			st := do(t, env, http.MethodPatch, tc.path, tc.contentType, tc.body).wantStatus(t, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid)
			if st.Message != tc.message {
				t.Errorf("message\n%s\nwant\n%s", st.Message, tc.message)
			}
			d := st.Details
			if d == nil || d.Group != tc.group || d.Kind != tc.kind || d.Name != tc.objName ||
				len(d.Causes) != 1 || d.Causes[0].Field != "patch" || d.Causes[0].Type != metav1.CauseTypeFieldValueInvalid {
				t.Errorf("details %+v, want group %q kind %s name %s and one cause on the field patch", d, tc.group, tc.kind, tc.objName)
			}
			if after := revision(t, env); after != before {
				t.Errorf("etcd revision moved from %d to %d: the failed patch wrote", before, after)
			}
		})
	}

	// A field $retainKeys does not name: kube-apiserver's 400.
	st := do(t, env, http.MethodPatch, deployPath("default", "web"), strategicPtch,
		`{"spec":{"strategy":{"$retainKeys":["type"],"type":"Recreate","rollingUpdate":{"maxSurge":1}}}}`).
		wantStatus(t, http.StatusBadRequest, metav1.StatusReasonBadRequest)
	if st.Message != "invalid patch format of retainKeys" {
		t.Errorf("a malformed strategic merge patch: message %q, want kube-apiserver's %q", st.Message, "invalid patch format of retainKeys")
	}
}
