package client

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/api"
)

func TestResourcePath(t *testing.T) {
	tests := []struct {
		name      string
		res       *api.Resource
		namespace string
		obj       string
		sub       []string
		want      string
	}{
		{"core namespaced object", api.Pods, "default", "web", nil, "/api/v1/namespaces/default/pods/web"},
		{"core namespaced subresource", api.Pods, "default", "web", []string{"binding"}, "/api/v1/namespaces/default/pods/web/binding"},
		{"core namespaced collection", api.ConfigMaps, "kube-system", "", nil, "/api/v1/namespaces/kube-system/configmaps"},
		{"core namespaced, all namespaces", api.ConfigMaps, "", "", nil, "/api/v1/configmaps"},
		{"core cluster-scoped object", api.Nodes, "", "node-1", nil, "/api/v1/nodes/node-1"},
		{"core cluster-scoped ignores namespace", api.Nodes, "default", "node-1", []string{"status"}, "/api/v1/nodes/node-1/status"},
		{"core cluster-scoped collection", api.Namespaces, "", "", nil, "/api/v1/namespaces"},
		{"namespace finalize", api.Namespaces, "", "shop", []string{"finalize"}, "/api/v1/namespaces/shop/finalize"},
		{"apps object", api.Deployments, "default", "web", nil, "/apis/apps/v1/namespaces/default/deployments/web"},
		{"apps scale", api.Deployments, "default", "web", []string{"scale"}, "/apis/apps/v1/namespaces/default/deployments/web/scale"},
		{"apps all namespaces", api.ReplicaSets, "", "", nil, "/apis/apps/v1/replicasets"},
		{"dotted group", api.Leases, "kube-node-lease", "node-1", nil, "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/node-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ResourcePath(tt.res, tt.namespace, tt.obj, tt.sub...); got != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
}

func TestObjectPathChecks(t *testing.T) {
	tests := []struct {
		name            string
		res             *api.Resource
		namespace, obj  string
		wantErrContains string
	}{
		{"empty name", api.Pods, "default", "", "resource name may not be empty"},
		{"slash in name", api.Pods, "default", "a/b", "may not contain"},
		{"percent in name", api.Pods, "default", "a%2Fb", "may not contain"},
		{"dot-dot name", api.Nodes, "", "..", "may not be"},
		{"namespaced without namespace", api.Pods, "", "web", "namespace may not be empty"},
		{"slash in namespace", api.Pods, "a/b", "web", "may not contain"},
		{"cluster-scoped without namespace", api.Nodes, "", "node-1", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := objectPath(tt.res, tt.namespace, tt.obj)
			if tt.wantErrContains == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErrContains) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.wantErrContains)
			}
		})
	}
}

func TestListOptionsQuery(t *testing.T) {
	timeout := int64(30)
	initial := true
	q := ListOptionsQuery(metav1.ListOptions{
		LabelSelector:        "app=web,tier!=db",
		FieldSelector:        "spec.nodeName=node-1",
		ResourceVersion:      "42",
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
		TimeoutSeconds:       &timeout,
		AllowWatchBookmarks:  true,
		SendInitialEvents:    &initial,
		Limit:                10,
		Continue:             "token",
		Watch:                true,
	})
	want := "allowWatchBookmarks=true&continue=token&fieldSelector=spec.nodeName%3Dnode-1" +
		"&labelSelector=app%3Dweb%2Ctier%21%3Ddb&limit=10&resourceVersion=42&resourceVersionMatch=NotOlderThan" +
		"&sendInitialEvents=true&timeoutSeconds=30&watch=true"
	if got := q.Encode(); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if got := ListOptionsQuery(metav1.ListOptions{}).Encode(); got != "" {
		t.Errorf("empty options encode as %q, want nothing", got)
	}
}
