package audit

import (
	"slices"
	"strings"
	"testing"

	"github.com/minictl/minictl/auth/authorizer"
	"github.com/minictl/minictl/auth/user"
)

const testPolicy = `
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  users: ["system:kube-proxy"]
  verbs: ["watch"]
- level: None
  userGroups: ["system:nodes"]
  nonResourceURLs: ["/healthz*", "/version"]
- level: Metadata
  resources:
  - group: ""
    resources: ["secrets", "configmaps"]
- level: RequestResponse
  namespaces: ["kube-system"]
  resources:
  - group: "apps"
    resources: ["deployments/*"]
  - group: ""
    resources: ["*/status"]
  omitStages: [ResponseStarted]
  omitManagedFields: false
- level: Request
  resources:
  - group: ""
    resources: ["pods"]
    resourceNames: ["web"]
- level: None
  resources:
  - group: "coordination.k8s.io"
- level: Metadata
  omitManagedFields: true
`

func res(u *user.Info, verb, group, resource, sub, ns, name string) authorizer.Attributes {
	return authorizer.Attributes{User: u, Verb: verb, ResourceRequest: true, APIGroup: group, Resource: resource, Subresource: sub, Namespace: ns, Name: name}
}

// TestPolicyEvaluate: the first rule a request matches gives its level,
// with kube's matching of users, groups, verbs, paths, namespaces and
// resources (subresources and wildcards, names).
func TestPolicyEvaluate(t *testing.T) {
	p, err := ParsePolicy([]byte(testPolicy))
	if err != nil {
		t.Fatal(err)
	}
	proxy := &user.Info{Name: "system:kube-proxy"}
	node := &user.Info{Name: "system:node:n1", Groups: []string{"system:nodes"}}
	alice := &user.Info{Name: "alice"}
	for _, tc := range []struct {
		a     authorizer.Attributes
		level Level
	}{
		{res(proxy, "watch", "", "endpoints", "", "", ""), LevelNone},
		{res(proxy, "list", "", "endpoints", "", "", ""), LevelMetadata},
		{authorizer.Attributes{User: node, Verb: "get", Path: "/healthz/ready"}, LevelNone},
		{authorizer.Attributes{User: node, Verb: "get", Path: "/version"}, LevelNone},
		{authorizer.Attributes{User: node, Verb: "get", Path: "/versions"}, LevelMetadata},
		{authorizer.Attributes{User: alice, Verb: "get", Path: "/healthz"}, LevelMetadata},
		{res(alice, "get", "", "secrets", "", "kube-system", "s"), LevelMetadata},
		{res(alice, "update", "apps", "deployments", "scale", "kube-system", "d"), LevelRequestResponse},
		{res(alice, "update", "apps", "deployments", "", "kube-system", "d"), LevelRequestResponse},
		{res(alice, "update", "apps", "deployments", "scale", "default", "d"), LevelMetadata},
		{res(alice, "update", "", "pods", "status", "kube-system", "p"), LevelRequestResponse},
		{res(alice, "update", "", "pods", "", "kube-system", "p"), LevelMetadata},
		{res(alice, "create", "", "pods", "", "default", "web"), LevelRequest},
		{res(alice, "create", "", "pods", "", "default", "db"), LevelMetadata},
		{res(alice, "update", "coordination.k8s.io", "leases", "", "kube-node-lease", "n1"), LevelNone},
	} {
		if got := p.Evaluate(tc.a).Level; got != tc.level {
			t.Errorf("%+v: level %s, want %s", tc.a, got, tc.level)
		}
	}
	d := p.Evaluate(res(alice, "update", "", "pods", "status", "kube-system", "p"))
	if !slices.Equal(d.OmitStages, []Stage{StageRequestReceived, StageResponseStarted}) || d.OmitManagedFields {
		t.Errorf("stages and managed fields of a RequestResponse rule: %+v", d)
	}
	if d := p.Evaluate(res(alice, "get", "", "nodes", "", "", "n1")); !d.OmitManagedFields || !d.Omits(StageRequestReceived) || d.Omits(StageResponseComplete) {
		t.Errorf("the last rule: %+v", d)
	}
	if d := DefaultPolicy().Evaluate(res(alice, "get", "", "secrets", "", "x", "s")); d.Level != LevelMetadata {
		t.Errorf("the default policy records %s", d.Level)
	}
}

// TestParsePolicyRefuses policies kube-apiserver would not start with.
func TestParsePolicyRefuses(t *testing.T) {
	for _, tc := range []struct{ policy, want string }{
		{"apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Everything\n", `rules[0].level: Unsupported value: "Everything"`},
		{"apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [Done]\nrules:\n- level: None\n", `omitStages[0]: Unsupported value: "Done"`},
		{"apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: None\n  nonResourceURLs: [\"/a*b\"]\n", "non-resource URL wildcards '*' must be the final character"},
		{"apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: None\n  nonResourceURLs: [\"/a\"]\n  namespaces: [x]\n", "rules cannot apply to both regular resources and non-resource URLs"},
		{"apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: None\n  verb: [get]\n", `unknown field "verb"`},
		{"apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: []\n", "0 rules"},
		{"apiVersion: v1\nkind: ConfigMap\n", "want apiVersion audit.k8s.io/v1 and kind Policy"},
	} {
		_, err := ParsePolicy([]byte(tc.policy))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want an error with %q", tc.policy, err, tc.want)
		}
	}
	// JSON is YAML too.
	if _, err := ParsePolicy([]byte(`{"apiVersion":"audit.k8s.io/v1","kind":"Policy","rules":[{"level":"Metadata"}]}`)); err != nil {
		t.Errorf("a JSON policy: %v", err)
	}
}
