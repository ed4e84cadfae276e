package apiserver

import (
	"net/http"
	"runtime"
	"sort"

	"github.com/go-chi/chi/v5"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"

	"github.com/minictl/minictl/api"
)

// KubernetesVersion is the Kubernetes API level minictl mirrors.
const KubernetesVersion = "v1.36.0"

var serverAddresses = []metav1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: ""}}

func (s *Server) version(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, &version.Info{
		Major: "1", Minor: "36", GitVersion: KubernetesVersion + "-minictl",
		GitTreeState: "clean", GoVersion: runtime.Version(), Compiler: runtime.Compiler,
		Platform: runtime.GOOS + "/" + runtime.GOARCH,
	})
}

func (s *Server) apiVersions(w http.ResponseWriter, r *http.Request) {
	if wantsAggregated(r) {
		writeAggregated(w, r, aggregatedDiscovery(s.discovered(), true))
		return
	}
	writeJSON(w, http.StatusOK, &metav1.APIVersions{
		TypeMeta:                   metav1.TypeMeta{Kind: "APIVersions"},
		Versions:                   []string{"v1"},
		ServerAddressByClientCIDRs: serverAddresses,
	})
}

// groups lists the named API groups and their versions, from the served
// catalogue: the built-in groups by name, then the groups only custom
// resources have, by name.
func groups(served api.Catalogue) []metav1.APIGroup {
	var out []metav1.APIGroup
	seen := map[string]int{}
	for _, res := range served {
		if res.Group == "" {
			continue
		}
		gv := metav1.GroupVersionForDiscovery{GroupVersion: res.APIVersion(), Version: res.Version}
		i, ok := seen[res.Group]
		if !ok {
			seen[res.Group] = len(out)
			out = append(out, metav1.APIGroup{Name: res.Group, PreferredVersion: gv, ServerAddressByClientCIDRs: serverAddresses})
			i = len(out) - 1
		}
		g := &out[i]
		if !containsVersion(g.Versions, gv) {
			g.Versions = append(g.Versions, gv)
		}
	}
	for i := range out {
		out[i].TypeMeta = metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}
	}
	sort.SliceStable(out, func(i, j int) bool {
		ci, cj := customGroup(served, out[i].Name), customGroup(served, out[j].Name)
		if ci != cj {
			return cj
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// customGroup reports whether every resource of group is a custom one.
func customGroup(served api.Catalogue, group string) bool {
	for _, res := range served {
		if res.Group == group && !res.Unstructured() {
			return false
		}
	}
	return true
}

func containsVersion(vs []metav1.GroupVersionForDiscovery, v metav1.GroupVersionForDiscovery) bool {
	for _, x := range vs {
		if x == v {
			return true
		}
	}
	return false
}

// discovered is the catalogue discovery describes: what is served now.
// Every discovery document reads it once.
func (s *Server) discovered() api.Catalogue { return s.serving().resources }

func (s *Server) apiGroups(w http.ResponseWriter, r *http.Request) {
	if wantsAggregated(r) {
		writeAggregated(w, r, aggregatedDiscovery(s.discovered(), false))
		return
	}
	gs := groups(s.discovered())
	for i := range gs {
		gs[i].TypeMeta = metav1.TypeMeta{}
	}
	writeJSON(w, http.StatusOK, &metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}, Groups: gs})
}

func (s *Server) apiGroup(w http.ResponseWriter, r *http.Request) {
	name := chi.URLParam(r, "group")
	for _, g := range groups(s.discovered()) {
		if g.Name == name {
			writeJSON(w, http.StatusOK, &g)
			return
		}
	}
	writeStatus(w, newNotFoundPath(r.URL.Path))
}

var (
	objectVerbs = metav1.Verbs{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}
	// createOnlyVerbs are a review's (api.Resource.CreateOnly).
	createOnlyVerbs = metav1.Verbs{"create"}
	// readOnlyVerbs are the resource metrics' (api.Resource.ReadOnly).
	readOnlyVerbs = metav1.Verbs{"get", "list"}
	subVerbs      = map[string]metav1.Verbs{
		"status":   {"get", "patch", "update"},
		"scale":    {"get", "patch", "update"},
		"binding":  {"create"},
		"eviction": {"create"},
		"finalize": {"update"},
		"log":      {"get"},
		"token":    {"create"},
	}
)

// resourceList answers /api/v1 and /apis/<group>/<version> with every
// resource and subresource of that group version.
func (s *Server) resourceList(group, ver string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		gv := api.Resource{Group: group, Version: ver}
		list := &metav1.APIResourceList{
			TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
			GroupVersion: gv.APIVersion(),
		}
		for _, res := range s.discovered() {
			if res.Group == group && res.Version == ver {
				list.APIResources = append(list.APIResources, apiResources(res)...)
			}
		}
		if list.APIResources == nil {
			writeStatus(w, newNotFoundPath(r.URL.Path))
			return
		}
		writeJSON(w, http.StatusOK, list)
	}
}

// apiResources describes res for discovery: the resource, then each of its
// subresources.
func apiResources(res *api.Resource) []metav1.APIResource {
	verbs := objectVerbs
	if res.CreateOnly {
		verbs = createOnlyVerbs
	}
	if res.ReadOnly {
		verbs = readOnlyVerbs
	}
	out := []metav1.APIResource{{
		Name: res.Plural, SingularName: res.Singular, Namespaced: res.Namespaced,
		Kind: res.Kind, Verbs: verbs, ShortNames: res.ShortNames, Categories: res.Categories,
	}}
	for _, sub := range res.Subresources {
		ar := metav1.APIResource{Name: res.Plural + "/" + sub, Namespaced: res.Namespaced, Kind: res.Kind, Verbs: subVerbs[sub]}
		switch sub {
		case "scale":
			ar.Group, ar.Version, ar.Kind = "autoscaling", "v1", "Scale"
		case "binding":
			ar.Kind = "Binding"
		case "eviction": // whose kind kubectl drain looks for
			ar.Group, ar.Version, ar.Kind = "policy", "v1", "Eviction"
		case "token":
			ar.Group, ar.Version, ar.Kind = "authentication.k8s.io", "v1", "TokenRequest"
		}
		if c, ok := connections[sub]; ok { // serveConnect answers them
			ar.Kind, ar.Verbs = c.kind, c.verbs
		}
		out = append(out, ar)
	}
	return out
}
