package apiserver_test

import (
	"net/http"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/internal/testenv"
)

const (
	policiesPath = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies"
	bindingsPath = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings"
)

// labelledNamespace creates a namespace with labels.
func labelledNamespace(t *testing.T, env *testenv.Env, name string, labels map[string]string) {
	t.Helper()
	ns := namespace(name)
	ns.Labels = labels
	create[corev1.Namespace](t, env, "/api/v1/namespaces", ns)
}

// untilDeploymentCreate retries a dry-run create of a deployment with
// replicas in ns until the answer is code: a policy takes effect once the
// watch caches have it and its binding.
func untilDeploymentCreate(t *testing.T, env *testenv.Env, ns string, replicas int32, code int) *reply {
	t.Helper()
	var last *reply
	eventually(t, "the policy takes effect", func() (bool, string) {
		last = do(t, env, http.MethodPost, deployPath(ns, "")+"?dryRun=All", jsonType, deployment("probe", replicas))
		return last.code == code, string(last.body)
	})
	return last
}

// TestValidatingAdmissionPolicyDeniesDeployment is the example of kube's
// documentation: a policy refusing Deployments of more than five
// replicas, bound to the namespaces labelled environment=test. The
// refusal is kube's Status word for word; other namespaces are not
// checked.
func TestValidatingAdmissionPolicyDeniesDeployment(t *testing.T) {
	env := testenv.Start(t)
	labelledNamespace(t, env, "test", map[string]string{"environment": "test"})
	do(t, env, http.MethodPost, policiesPath, yamlType, `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: demo-policy.example.com
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - apiGroups:   ["apps"]
      apiVersions: ["v1"]
      operations:  ["CREATE", "UPDATE"]
      resources:   ["deployments"]
  validations:
  - expression: "object.spec.replicas <= 5"
`).want(t, http.StatusCreated)
	do(t, env, http.MethodPost, bindingsPath, yamlType, `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: demo-binding-test.example.com
spec:
  policyName: demo-policy.example.com
  validationActions: [Deny]
  matchResources:
    namespaceSelector:
      matchLabels:
        environment: test
`).want(t, http.StatusCreated)
	untilDeploymentCreate(t, env, "test", 6, http.StatusUnprocessableEntity)

	r := do(t, env, http.MethodPost, deployPath("test", ""), jsonType, deployment("web", 6))
	st := r.wantStatus(t, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid)
	want := "deployments.apps \"web\" is forbidden: ValidatingAdmissionPolicy 'demo-policy.example.com' with binding 'demo-binding-test.example.com' denied request: failed expression: object.spec.replicas <= 5"
	if st.Message != want {
		t.Errorf("message %q\nwant    %q", st.Message, want)
	}
	do(t, env, http.MethodGet, deployPath("test", "web"), "", nil).want(t, http.StatusNotFound)

	create[map[string]any](t, env, deployPath("test", ""), deployment("small", 5))
	create[map[string]any](t, env, deployPath("default", ""), deployment("big", 6)) // not in a bound namespace

	// An update is checked too.
	d := deployment("small", 7)
	do(t, env, http.MethodPut, deployPath("test", "small"), jsonType, d).wantStatus(t, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid)

	// kube's table columns.
	var tbl metav1.Table
	getAccept(t, env, policiesPath, "application/json;as=Table;v=v1;g=meta.k8s.io").want(t, http.StatusOK).into(t, &tbl)
	var cols []string
	for _, c := range tbl.ColumnDefinitions {
		cols = append(cols, c.Name)
	}
	if strings.Join(cols, " ") != "Name Validations ParamKind Age" || len(tbl.Rows) != 1 ||
		tbl.Rows[0].Cells[1] != float64(1) || tbl.Rows[0].Cells[2] != "<unset>" {
		t.Errorf("policy table columns %v rows %v", cols, tbl.Rows)
	}
	getAccept(t, env, bindingsPath, "application/json;as=Table;v=v1;g=meta.k8s.io").want(t, http.StatusOK).into(t, &tbl)
	cols = nil
	for _, c := range tbl.ColumnDefinitions {
		cols = append(cols, c.Name)
	}
	if strings.Join(cols, " ") != "Name PolicyName ParamRef Age" || len(tbl.Rows) != 1 || tbl.Rows[0].Cells[1] != "demo-policy.example.com" {
		t.Errorf("binding table columns %v rows %v", cols, tbl.Rows)
	}
}

// TestValidatingAdmissionPolicyActionsAndParams: one server, several
// policies, each bound to a namespace of its own.
//   - Warn: the write goes through, with kube's Warning header.
//   - params from a ConfigMap: the limit is the ConfigMap's maxReplicas,
//     the message a messageExpression; with parameterNotFoundAction Deny
//     and no ConfigMap, the write is refused.
//   - variables: composed, each read through variables.
//   - failurePolicy on a runtime error: Fail refuses, Ignore lets through.
func TestValidatingAdmissionPolicyActionsAndParams(t *testing.T) {
	env := testenv.Start(t)
	for _, ns := range []string{"warn", "params", "vars", "fail", "ignore"} {
		labelledNamespace(t, env, ns, map[string]string{"policy": ns})
	}
	policy := func(name, failurePolicy, extra string) {
		t.Helper()
		do(t, env, http.MethodPost, policiesPath, yamlType, `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: `+name+`
spec:
  failurePolicy: `+failurePolicy+`
  matchConstraints:
    resourceRules:
    - apiGroups:   ["apps"]
      apiVersions: ["v1"]
      operations:  ["CREATE", "UPDATE"]
      resources:   ["deployments"]
`+extra).want(t, http.StatusCreated)
	}
	binding := func(name, policy, ns, action, extra string) {
		t.Helper()
		do(t, env, http.MethodPost, bindingsPath, yamlType, `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: `+name+`
spec:
  policyName: `+policy+`
  validationActions: [`+action+`]
  matchResources:
    namespaceSelector:
      matchLabels:
        policy: `+ns+`
`+extra).want(t, http.StatusCreated)
	}

	t.Run("Warn", func(t *testing.T) {
		policy("warn-policy", "Fail", `
  validations:
  - expression: "object.spec.replicas <= 5"
    message: "more than five replicas"
`)
		binding("warn-binding", "warn-policy", "warn", "Warn", "")
		var r *reply
		eventually(t, "the policy warns", func() (bool, string) {
			r = do(t, env, http.MethodPost, deployPath("warn", "")+"?dryRun=All", jsonType, deployment("probe", 6))
			return r.code == http.StatusCreated && r.header.Get("Warning") != "", string(r.body)
		})
		want := `299 - "Validation failed for ValidatingAdmissionPolicy 'warn-policy' with binding 'warn-binding': more than five replicas"`
		if got := r.header.Get("Warning"); got != want {
			t.Errorf("Warning %q\nwant    %q", got, want)
		}
	})

	t.Run("params from a ConfigMap", func(t *testing.T) {
		policy("replica-limit", "Fail", `
  paramKind:
    apiVersion: v1
    kind: ConfigMap
  validations:
  - expression: "object.spec.replicas <= int(params.data.maxReplicas)"
    messageExpression: "'replicas must be no more than ' + params.data.maxReplicas"
    reason: Forbidden
`)
		binding("replica-limit-params", "replica-limit", "params", "Deny", `
  paramRef:
    name: replica-limits
    parameterNotFoundAction: Deny
`)
		r := untilDeploymentCreate(t, env, "params", 1, http.StatusUnprocessableEntity)
		st := r.status(t)
		want := "ValidatingAdmissionPolicy 'replica-limit' with binding 'replica-limit-params' denied request: failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction"
		if !strings.HasSuffix(st.Message, want) {
			t.Errorf("without params: %q, want it to end in %q", st.Message, want)
		}

		create[corev1.ConfigMap](t, env, cmPath("params", ""), configMap("replica-limits", nil, map[string]string{"maxReplicas": "2"}))
		r = untilDeploymentCreate(t, env, "params", 3, http.StatusForbidden)
		st = r.wantStatus(t, http.StatusForbidden, metav1.StatusReasonForbidden)
		if want := "ValidatingAdmissionPolicy 'replica-limit' with binding 'replica-limit-params' denied request: replicas must be no more than 2"; !strings.HasSuffix(st.Message, want) {
			t.Errorf("over the limit: %q, want it to end in %q", st.Message, want)
		}
		create[map[string]any](t, env, deployPath("params", ""), deployment("two", 2))
	})

	t.Run("params by selector, none found allowed", func(t *testing.T) {
		labelledNamespace(t, env, "selector", map[string]string{"policy": "selector"})
		policy("selector-limit", "Fail", `
  paramKind:
    apiVersion: v1
    kind: ConfigMap
  validations:
  - expression: "object.spec.replicas <= int(params.data.maxReplicas)"
    messageExpression: "'replicas must be no more than ' + params.data.maxReplicas"
`)
		binding("selector-limit-params", "selector-limit", "selector", "Deny", `
  paramRef:
    selector: {matchLabels: {limit: "true"}}
    parameterNotFoundAction: Allow
`)
		// With two labelled ConfigMaps, the policy runs once with each; the
		// lower limit refuses.
		create[corev1.ConfigMap](t, env, cmPath("selector", ""), configMap("four", map[string]string{"limit": "true"}, map[string]string{"maxReplicas": "4"}))
		create[corev1.ConfigMap](t, env, cmPath("selector", ""), configMap("two", map[string]string{"limit": "true"}, map[string]string{"maxReplicas": "2"}))
		create[corev1.ConfigMap](t, env, cmPath("selector", ""), configMap("one", nil, map[string]string{"maxReplicas": "1"}))
		st := untilDeploymentCreate(t, env, "selector", 3, http.StatusUnprocessableEntity).status(t)
		if !strings.HasSuffix(st.Message, "denied request: replicas must be no more than 2") {
			t.Errorf("message %q", st.Message)
		}
		// With none labelled, there is nothing to check against: allowed.
		for _, name := range []string{"four", "two"} {
			do(t, env, http.MethodDelete, cmPath("selector", name), "", nil).want(t, http.StatusOK)
		}
		untilDeploymentCreate(t, env, "selector", 9, http.StatusCreated)
		create[map[string]any](t, env, deployPath("selector", ""), deployment("two", 2))
	})

	t.Run("variables", func(t *testing.T) {
		policy("vars-policy", "Fail", `
  variables:
  - name: replicas
    expression: "object.spec.replicas"
  - name: tooMany
    expression: "variables.replicas > 4"
  validations:
  - expression: "!variables.tooMany"
    messageExpression: "'replicas ' + string(variables.replicas) + ' is too many'"
`)
		binding("vars-binding", "vars-policy", "vars", "Deny", "")
		st := untilDeploymentCreate(t, env, "vars", 5, http.StatusUnprocessableEntity).status(t)
		if !strings.HasSuffix(st.Message, "denied request: replicas 5 is too many") {
			t.Errorf("message %q", st.Message)
		}
		create[map[string]any](t, env, deployPath("vars", ""), deployment("four", 4))
	})

	t.Run("failurePolicy", func(t *testing.T) {
		for _, fp := range []string{"Fail", "Ignore"} {
			policy("broken-"+strings.ToLower(fp), fp, `
  validations:
  - expression: "object.spec.noSuchField > 1"
`)
		}
		binding("broken-fail", "broken-fail", "fail", "Deny", "")
		binding("broken-ignore", "broken-ignore", "ignore", "Deny", "")
		st := untilDeploymentCreate(t, env, "fail", 1, http.StatusUnprocessableEntity).status(t)
		if !strings.Contains(st.Message, "ValidatingAdmissionPolicy 'broken-fail' with binding 'broken-fail' denied request: expression 'object.spec.noSuchField > 1' resulted in error: no such key: noSuchField") {
			t.Errorf("Fail: %q", st.Message)
		}
		// The Ignore policy is in effect once its binding is in the cache,
		// which the Fail one's taking effect does not prove: wait for a
		// third binding written after it to act.
		binding("broken-ignore-probe", "broken-fail", "ignore", "Deny", "")
		untilDeploymentCreate(t, env, "ignore", 1, http.StatusUnprocessableEntity)
		do(t, env, http.MethodDelete, bindingsPath+"/broken-ignore-probe", "", nil).want(t, http.StatusOK)
		untilDeploymentCreate(t, env, "ignore", 1, http.StatusCreated)
	})

	t.Run("audit annotations", func(t *testing.T) {
		labelledNamespace(t, env, "audit", map[string]string{"policy": "audit"})
		policy("audit-policy", "Fail", `
  auditAnnotations:
  - key: replicas
    valueExpression: "'replicas: ' + string(object.spec.replicas)"
  - key: broken
    valueExpression: "object.spec.replicas"
`)
		binding("audit-binding", "audit-policy", "audit", "Audit", "")
		st := untilDeploymentCreate(t, env, "audit", 1, http.StatusUnprocessableEntity).status(t)
		if want := "denied request: valueExpression 'object.spec.replicas' resulted in unsupported return type: int. Return type must be either string or null."; !strings.HasSuffix(st.Message, want) {
			t.Errorf("message %q, want it to end in %q", st.Message, want)
		}
	})

	t.Run("a bad expression is a 422", func(t *testing.T) {
		r := do(t, env, http.MethodPost, policiesPath, yamlType, `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: bad
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: ["apps"]
      apiVersions: ["v1"]
      operations: ["CREATE"]
      resources: ["deployments"]
  validations:
  - expression: "object.spec.replicas <="
`)
		st := r.wantStatus(t, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid)
		if st.Details == nil || len(st.Details.Causes) != 1 || st.Details.Causes[0].Field != "spec.validations[0].expression" ||
			!strings.Contains(st.Details.Causes[0].Message, "compilation failed: ERROR: <input>:1:") {
			t.Errorf("status %+v", st)
		}
		do(t, env, http.MethodGet, policiesPath+"/bad", "", nil).want(t, http.StatusNotFound)

		r = do(t, env, http.MethodPost, bindingsPath, yamlType, `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: both
spec:
  policyName: warn-policy
  validationActions: [Deny, Warn]
`)
		if st := r.wantStatus(t, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid); !strings.Contains(st.Message, "must not contain both Deny and Warn") {
			t.Errorf("Deny and Warn: %q", st.Message)
		}
	})
}

// TestApplyPolicyBindingActionsAreASet: a binding's validationActions
// are a set, as kube marks them: two managers each apply an action, and
// the binding has both, each owned by its manager.
func TestApplyPolicyBindingActionsAreASet(t *testing.T) {
	env := testenv.Start(t)
	binding := func(action string) string {
		return "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\n" +
			"metadata: {name: b}\nspec:\n  policyName: p\n  validationActions: [" + action + "]\n"
	}
	do(t, env, http.MethodPatch, bindingsPath+"/b?fieldManager=ops", applyType, binding("Deny")).want(t, http.StatusCreated)
	var b struct {
		Spec struct {
			ValidationActions []string `json:"validationActions"`
		} `json:"spec"`
	}
	do(t, env, http.MethodPatch, bindingsPath+"/b?fieldManager=audit", applyType, binding("Audit")).want(t, http.StatusOK).into(t, &b)
	if strings.Join(b.Spec.ValidationActions, ",") != "Deny,Audit" {
		t.Errorf("validationActions %v, want [Deny Audit]", b.Spec.ValidationActions)
	}
}
