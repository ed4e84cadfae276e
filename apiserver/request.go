package apiserver

import (
	"net/http"
	"strings"

	"github.com/minictl/minictl/api"
)

// requestInfo is what a resource path says: which resource, in which
// namespace, which object and which subresource, and the verb that the
// method and the query make of it.
type requestInfo struct {
	res         *api.Resource
	namespace   string
	name        string
	subresource string
	verb        string // get, list, watch, create, update, patch, delete, deletecollection
	// store and cache are res's, from the same snapshot of what is
	// served (served.go) as res.
	store *resourceStore
	cache *cacheView
	// terminating: res is a custom resource whose definition is being
	// deleted.
	terminating bool
}

// longRunning reports whether the request may outlast the request
// timeout and holds no seat of the in-flight limit, as kube-apiserver's
// long-running check says: a watch, and a pod's log and connections.
func (ri *requestInfo) longRunning() bool {
	switch ri.subresource {
	case "log", "attach", "exec", "portforward", "proxy":
		return true
	}
	return ri.verb == "watch"
}

// isCollection reports whether the request targets the whole collection.
func (ri *requestInfo) isCollection() bool { return ri.name == "" }

// parseResourcePath reads the part of a path after /api/v1 or
// /apis/<group>/<version>: {plural}[/{name}[/{sub}]] for cluster-scoped
// resources and all-namespace lists, and
// namespaces/{ns}/{plural}[/{name}[/{sub}]] for namespaced ones. The one
// ambiguity, namespaces/{name}/{x}, is a namespaced resource when x names one
// and a namespace subresource otherwise, exactly as in kube-apiserver.
// Resources are looked up in served.
func parseResourcePath(served api.Catalogue, group, version string, segs []string) (*requestInfo, bool) {
	ri := &requestInfo{}
	if len(segs) >= 3 && segs[0] == "namespaces" {
		if res, ok := served.Lookup(group, version, segs[2]); ok && res.Namespaced {
			if segs[1] == "" || (len(segs) > 5 && segs[4] != "proxy") {
				return nil, false
			}
			ri.res, ri.namespace = res, segs[1]
			segs = segs[3:]
			return ri.withNameAndSub(segs)
		}
	}
	if len(segs) == 0 || len(segs) > 3 {
		return nil, false
	}
	res, ok := served.Lookup(group, version, segs[0])
	if !ok {
		return nil, false
	}
	ri.res = res
	// A namespaced resource without a namespace is only a list or watch
	// across all namespaces.
	if res.Namespaced && len(segs) > 1 {
		return nil, false
	}
	return ri.withNameAndSub(segs[1:])
}

func (ri *requestInfo) withNameAndSub(segs []string) (*requestInfo, bool) {
	switch len(segs) {
	case 0:
	case 1:
		ri.name = segs[0]
	case 2:
		ri.name, ri.subresource = segs[0], segs[1]
		if !ri.res.HasSubresource(ri.subresource) {
			return nil, false
		}
	default:
		// pods/{name}/proxy/{path}: the path is the pod's, not ours.
		if segs[1] != "proxy" || !ri.res.HasSubresource("proxy") {
			return nil, false
		}
		ri.name, ri.subresource = segs[0], segs[1]
	}
	if len(segs) > 0 && ri.name == "" {
		return nil, false
	}
	return ri, true
}

// verbFor names the operation the way Kubernetes' RBAC and audit do.
func verbFor(r *http.Request, ri *requestInfo) (string, bool) {
	if isConnect(ri.subresource) {
		return connectVerb(r.Method)
	}
	watch := isTrue(r.URL.Query().Get("watch"))
	switch r.Method {
	case http.MethodGet:
		switch {
		case ri.isCollection() && watch:
			return "watch", true
		case ri.isCollection():
			return "list", true
		default:
			return "get", true
		}
	case http.MethodPost:
		if ri.isCollection() {
			return "create", true
		}
		// POST on an object is only meaningful for pods/binding,
		// pods/eviction and serviceaccounts/token.
		if ri.subresource == "binding" || ri.subresource == "eviction" || ri.subresource == "token" {
			return "create", true
		}
	case http.MethodPut:
		if !ri.isCollection() {
			return "update", true
		}
	case http.MethodPatch:
		if !ri.isCollection() {
			return "patch", true
		}
	case http.MethodDelete:
		if ri.isCollection() {
			return "deletecollection", true
		}
		if ri.subresource == "" {
			return "delete", true
		}
	}
	return "", false
}

// connectVerb is the verb of a request to a pod's connection, as
// kube-apiserver names it: kubectl exec, attach and port-forward POST
// ("create"), a WebSocket client GETs ("get"), and a proxy request may use
// any method.
func connectVerb(method string) (string, bool) {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return "get", true
	case http.MethodPost:
		return "create", true
	case http.MethodPut:
		return "update", true
	case http.MethodPatch:
		return "patch", true
	case http.MethodDelete:
		return "delete", true
	}
	return "", false
}

func isTrue(s string) bool { return s == "true" || s == "1" }

func splitPath(p string) []string {
	p = strings.Trim(p, "/")
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}
