package apiserver

import (
	"crypto/sha512"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"slices"
	"strings"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/api"
)

// Aggregated discovery: since Kubernetes 1.30, kubectl and client-go first
// ask /api and /apis for one document that describes every group, version
// and resource at once (apidiscovery.k8s.io/v2's APIGroupDiscoveryList),
// instead of reading /api/v1 and every /apis/<group>/<version> one by one.
// They ask with an Accept header naming that form; a client that does not
// gets the APIVersions and APIGroupList documents of discovery.go. Both
// are made from the same served catalogue, so they always agree, and
// change as soon as what is served changes.

// mimeAggregatedDiscovery is the media type of the aggregated document, as
// clients ask for it and as it is answered.
const mimeAggregatedDiscovery = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"

// wantsAggregated reports whether r's Accept header asks for the
// aggregated document before it accepts a plain JSON one.
func wantsAggregated(r *http.Request) bool {
	for _, accept := range strings.Split(r.Header.Get("Accept"), ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(accept))
		if err != nil {
			continue
		}
		if params["as"] == "" {
			if mt == "application/json" || mt == "application/*" || mt == "*/*" {
				return false // the plain document comes first
			}
			continue
		}
		if mt == "application/json" && params["g"] == apidiscoveryv2.SchemeGroupVersion.Group &&
			params["v"] == apidiscoveryv2.SchemeGroupVersion.Version && params["as"] == "APIGroupDiscoveryList" {
			return true
		}
	}
	return false
}

// aggregatedDiscovery describes the served groups: the core group alone
// (for /api) or every named group (for /apis), in the order of the plain
// documents, each version's resources sorted by name as kube-apiserver
// sorts them.
func aggregatedDiscovery(served api.Catalogue, core bool) *apidiscoveryv2.APIGroupDiscoveryList {
	list := &apidiscoveryv2.APIGroupDiscoveryList{
		TypeMeta: metav1.TypeMeta{Kind: "APIGroupDiscoveryList", APIVersion: apidiscoveryv2.SchemeGroupVersion.String()},
		Items:    []apidiscoveryv2.APIGroupDiscovery{},
	}
	byVersion := func(group, version string) apidiscoveryv2.APIVersionDiscovery {
		v := apidiscoveryv2.APIVersionDiscovery{Version: version, Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent}
		for _, res := range served {
			if res.Group == group && res.Version == version {
				v.Resources = append(v.Resources, resourceDiscovery(res))
			}
		}
		slices.SortFunc(v.Resources, func(a, b apidiscoveryv2.APIResourceDiscovery) int { return strings.Compare(a.Resource, b.Resource) })
		return v
	}
	if core {
		list.Items = append(list.Items, apidiscoveryv2.APIGroupDiscovery{Versions: []apidiscoveryv2.APIVersionDiscovery{byVersion("", "v1")}})
		return list
	}
	for _, g := range groups(served) {
		gd := apidiscoveryv2.APIGroupDiscovery{ObjectMeta: metav1.ObjectMeta{Name: g.Name}}
		for _, v := range g.Versions {
			gd.Versions = append(gd.Versions, byVersion(g.Name, v.Version))
		}
		list.Items = append(list.Items, gd)
	}
	return list
}

// resourceDiscovery describes res and its subresources, with the verbs and
// kinds the plain resource list gives them (apiResources).
func resourceDiscovery(res *api.Resource) apidiscoveryv2.APIResourceDiscovery {
	entries := apiResources(res)
	main := entries[0]
	d := apidiscoveryv2.APIResourceDiscovery{
		Resource: main.Name, SingularResource: main.SingularName,
		ResponseKind: &metav1.GroupVersionKind{Group: res.Group, Version: res.Version, Kind: main.Kind},
		Scope:        apidiscoveryv2.ScopeCluster,
		Verbs:        main.Verbs, ShortNames: main.ShortNames, Categories: main.Categories,
	}
	if res.Namespaced {
		d.Scope = apidiscoveryv2.ScopeNamespace
	}
	for _, sub := range entries[1:] {
		kind := &metav1.GroupVersionKind{Group: res.Group, Version: res.Version, Kind: sub.Kind}
		if sub.Group != "" || sub.Version != "" {
			kind.Group, kind.Version = sub.Group, sub.Version
		}
		d.Subresources = append(d.Subresources, apidiscoveryv2.APISubresourceDiscovery{
			Subresource:  strings.TrimPrefix(sub.Name, res.Plural+"/"),
			ResponseKind: kind, Verbs: sub.Verbs,
		})
	}
	return d
}

// writeAggregated answers with the aggregated document, its ETag, and 304
// Not Modified when the client already holds it, as kube-apiserver does.
func writeAggregated(w http.ResponseWriter, r *http.Request, list *apidiscoveryv2.APIGroupDiscoveryList) {
	body, err := json.Marshal(list)
	if err != nil {
		writeStatus(w, fmt.Errorf("encode discovery: %w", err))
		return
	}
	etag := fmt.Sprintf("%q", fmt.Sprintf("%X", sha512.Sum512(body)))
	w.Header().Set("Vary", "Accept")
	w.Header().Set("ETag", etag)
	if r.Header.Get("If-None-Match") == etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("Content-Type", mimeAggregatedDiscovery)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}
