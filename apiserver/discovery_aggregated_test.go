package apiserver_test

import (
	"net/http"
	"slices"
	"testing"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/internal/testenv"
)

// kubectlDiscoveryAccept is what kubectl 1.30+ asks /api and /apis for.
const kubectlDiscoveryAccept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList," +
	"application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json"

func TestAggregatedDiscovery(t *testing.T) {
	env := testenv.Start(t)

	aggregated := func(t *testing.T, path string) (*apidiscoveryv2.APIGroupDiscoveryList, *reply) {
		t.Helper()
		r := getAccept(t, env, path, kubectlDiscoveryAccept).want(t, http.StatusOK)
		if ct := r.header.Get("Content-Type"); ct != "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList" {
			t.Fatalf("GET %s: Content-Type %q", path, ct)
		}
		var l apidiscoveryv2.APIGroupDiscoveryList
		r.into(t, &l)
		if l.Kind != "APIGroupDiscoveryList" || l.APIVersion != "apidiscovery.k8s.io/v2" {
			t.Fatalf("GET %s: kind %q apiVersion %q", path, l.Kind, l.APIVersion)
		}
		return &l, r
	}
	resource := func(t *testing.T, l *apidiscoveryv2.APIGroupDiscoveryList, group, version, name string) apidiscoveryv2.APIResourceDiscovery {
		t.Helper()
		for _, g := range l.Items {
			for _, v := range g.Versions {
				for _, r := range v.Resources {
					if g.Name == group && v.Version == version && r.Resource == name {
						return r
					}
				}
			}
		}
		t.Fatalf("%s/%s %s missing from %+v", group, version, name, l.Items)
		return apidiscoveryv2.APIResourceDiscovery{}
	}

	t.Run("/api has the core group alone", func(t *testing.T) {
		l, _ := aggregated(t, "/api")
		if len(l.Items) != 1 || l.Items[0].Name != "" || len(l.Items[0].Versions) != 1 || l.Items[0].Versions[0].Version != "v1" {
			t.Fatalf("items %+v", l.Items)
		}
		if f := l.Items[0].Versions[0].Freshness; f != apidiscoveryv2.DiscoveryFreshnessCurrent {
			t.Errorf("freshness %q", f)
		}
		pods := resource(t, l, "", "v1", "pods")
		if pods.Scope != apidiscoveryv2.ScopeNamespace || pods.SingularResource != "pod" || pods.ResponseKind.Kind != "Pod" ||
			!slices.Contains(pods.ShortNames, "po") || !slices.Contains(pods.Categories, "all") || !slices.Contains(pods.Verbs, "watch") {
			t.Errorf("pods %+v", pods)
		}
		var subs []string
		for _, s := range pods.Subresources {
			subs = append(subs, s.Subresource)
		}
		if !slices.Contains(subs, "status") || !slices.Contains(subs, "binding") {
			t.Errorf("pods' subresources %v", subs)
		}
		if nodes := resource(t, l, "", "v1", "nodes"); nodes.Scope != apidiscoveryv2.ScopeCluster {
			t.Errorf("nodes' scope %q", nodes.Scope)
		}
	})

	t.Run("/apis has every named group", func(t *testing.T) {
		l, _ := aggregated(t, "/apis")
		for _, g := range l.Items {
			if g.Name == "" {
				t.Errorf("the core group is in /apis")
			}
		}
		deploy := resource(t, l, "apps", "v1", "deployments")
		var scale *apidiscoveryv2.APISubresourceDiscovery
		for i, s := range deploy.Subresources {
			if s.Subresource == "scale" {
				scale = &deploy.Subresources[i]
			}
		}
		if scale == nil || *scale.ResponseKind != (metav1.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"}) {
			t.Errorf("deployments/scale %+v", scale)
		}
		resource(t, l, "coordination.k8s.io", "v1", "leases")
	})

	t.Run("agrees with the plain documents", func(t *testing.T) {
		l, _ := aggregated(t, "/apis")
		plain := get[metav1.APIGroupList](t, env, "/apis")
		for _, g := range plain.Groups {
			for _, v := range g.Versions {
				rl := get[metav1.APIResourceList](t, env, "/apis/"+v.GroupVersion)
				for _, r := range rl.APIResources {
					if r.Group == "" && !containsSlash(r.Name) {
						resource(t, l, g.Name, v.Version, r.Name)
					}
				}
			}
		}
	})

	t.Run("ETag and If-None-Match", func(t *testing.T) {
		_, r := aggregated(t, "/apis")
		etag := r.header.Get("ETag")
		if etag == "" {
			t.Fatal("no ETag")
		}
		req, err := http.NewRequest(http.MethodGet, env.URL+"/apis", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Accept", kubectlDiscoveryAccept)
		req.Header.Set("If-None-Match", etag)
		resp, err := env.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotModified {
			t.Errorf("If-None-Match the current ETag: %d, want 304", resp.StatusCode)
		}
	})

	t.Run("a client that does not ask gets the plain documents", func(t *testing.T) {
		var gl metav1.APIGroupList
		getAccept(t, env, "/apis", "application/json, */*").want(t, http.StatusOK).into(t, &gl)
		if gl.Kind != "APIGroupList" {
			t.Errorf("kind %q", gl.Kind)
		}
		var v metav1.APIVersions
		getAccept(t, env, "/api", "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json").
			want(t, http.StatusOK).into(t, &v)
		if v.Kind != "APIVersions" {
			t.Errorf("kind %q", v.Kind)
		}
	})
}

func containsSlash(s string) bool { return slices.Contains([]rune(s), '/') }
