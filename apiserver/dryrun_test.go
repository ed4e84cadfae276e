package apiserver_test

import (
	"net/http"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/internal/testenv"
)

// TestDryRunValues checks that dryRun takes only All, as in Kubernetes:
// any other value is refused with 422 Invalid naming the write's options,
// not taken for a dry run (or for a real write), and nothing is written.
func TestDryRunValues(t *testing.T) {
	env := testenv.Start(t)
	existing := create[corev1.ConfigMap](t, env, cmPath("default", ""), configMap("existing", nil, map[string]string{"k": "v"}))
	create[corev1.Pod](t, env, podPath("default", ""), pod("web", "", nil))
	binding := `{"apiVersion":"v1","kind":"Binding","metadata":{"name":"web"},"target":{"kind":"Node","name":"n1"}}`

	const bogus = `dryRun: Unsupported value: ["Bogus"]: supported values: "All"`
	for _, tc := range []struct {
		name, method, path, contentType string
		body                            any
		message                         string
	}{
		{"create", http.MethodPost, cmPath("default", "") + "?dryRun=Bogus", jsonType, configMap("new", nil, nil),
			`CreateOptions.meta.k8s.io "" is invalid: ` + bogus},
		{"update", http.MethodPut, cmPath("default", "existing") + "?dryRun=Bogus", jsonType, existing,
			`UpdateOptions.meta.k8s.io "" is invalid: ` + bogus},
		{"patch", http.MethodPatch, cmPath("default", "existing") + "?dryRun=Bogus", mergePatch, `{"data":{"k":"x"}}`,
			`PatchOptions.meta.k8s.io "" is invalid: ` + bogus},
		{"status patch", http.MethodPatch, podPath("default", "web") + "/status?dryRun=Bogus", mergePatch, `{"status":{"phase":"Running"}}`,
			`PatchOptions.meta.k8s.io "" is invalid: ` + bogus},
		{"binding", http.MethodPost, podPath("default", "web") + "/binding?dryRun=Bogus", jsonType, binding,
			`CreateOptions.meta.k8s.io "" is invalid: ` + bogus},
		{"delete", http.MethodDelete, cmPath("default", "existing") + "?dryRun=Bogus", "", nil,
			`DeleteOptions.meta.k8s.io "" is invalid: ` + bogus},
		{"delete with the options in the body", http.MethodDelete, cmPath("default", "existing"), jsonType, `{"dryRun":["Bogus"]}`,
			`DeleteOptions.meta.k8s.io "" is invalid: ` + bogus},
		{"deletecollection", http.MethodDelete, cmPath("default", "") + "?dryRun=Bogus", "", nil,
			`DeleteOptions.meta.k8s.io "" is invalid: ` + bogus},
		{"All and something else", http.MethodPost, cmPath("default", "") + "?dryRun=All&dryRun=Bogus", jsonType, configMap("new", nil, nil),
			`CreateOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: ["All","Bogus"]: supported values: "All"`},
		{"empty", http.MethodPost, cmPath("default", "") + "?dryRun=", jsonType, configMap("new", nil, nil),
			`CreateOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: [""]: supported values: "All"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := revision(t, env)
			st := do(t, env, tc.method, tc.path, tc.contentType, tc.body).wantStatus(t, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid)
			if st.Message != tc.message {
				t.Errorf("message\n%s\nwant\n%s", st.Message, tc.message)
			}
			if st.Details == nil || st.Details.Group != metav1.GroupName || len(st.Details.Causes) != 1 || st.Details.Causes[0].Field != "dryRun" {
				t.Errorf("details %+v, want group %s and one cause on dryRun", st.Details, metav1.GroupName)
			}
			if after := revision(t, env); after != before {
				t.Errorf("etcd revision moved from %d to %d: something was written", before, after)
			}
		})
	}

	// All is a dry run: answered, and nothing written.
	before := revision(t, env)
	do(t, env, http.MethodPost, cmPath("default", "")+"?dryRun=All", jsonType, configMap("new", nil, nil)).want(t, http.StatusCreated)
	do(t, env, http.MethodDelete, cmPath("default", "existing")+"?dryRun=All", "", nil).want(t, http.StatusOK)
	if after := revision(t, env); after != before {
		t.Errorf("etcd revision moved from %d to %d: a dry run wrote", before, after)
	}
}
