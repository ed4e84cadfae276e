// Package apiserver is minictl's kube-apiserver: the Kubernetes REST API
// over one etcd.
//
// Design, one line a part:
//   - the server serves the resources of its catalogue (Config.Resources,
//     api.Resources() unless given another): one store, one watch cache and
//     one set of routes per entry, kinds without a Go type included (their
//     objects are unstructured JSON, as custom resources' are).
//   - served.go: what is served is one snapshot (catalogue, stores, watch
//     caches, OpenAPI documents) that every request, discovery document and
//     OpenAPI answer reads once; the built-ins are its first entries.
//   - crd.go runs kube-apiserver's apiextensions controllers (naming,
//     establishing, finalizing) over the CustomResourceDefinitions: each
//     established definition's versions join the snapshot, all with one
//     watch cache, and leave it when the definition goes.
//     conversion.go is where an object crosses between the version it is
//     served at and the one it is stored in: the None strategy, or the
//     definition's webhook (conversion_webhook.go).
//   - request.go reads a path into a requestInfo (resource, namespace,
//     name, subresource, verb), as kube-apiserver's RequestInfoFactory does.
//   - storage.go: Storage, all the server needs of etcd (a *store.Store
//     has it), and each resource's view of it, which maps objects to keys
//     and values (a built-in kind's in protobuf, a custom object's in
//     JSON: codec.go) and does read-modify-write with compare-and-swap
//     (GuaranteedUpdate).
//   - write.go and delete.go are the create, update, patch and delete paths:
//     server-set metadata, defaults, admission, validation, graceful
//     deletion, finalizers and propagation policy. fieldmanager.go records
//     every write in managedFields; apply.go is server-side apply;
//     typeconverter.go gives both each kind's shape.
//   - admission.go is the admission chain, every step in kube-apiserver's
//     order: NamespaceLifecycle, LimitRanger (limitrange.go), ServiceAccount
//     (serviceaccount_admission.go), DefaultTolerationSeconds,
//     DefaultIngressClass (ingressclass_admission.go), ResourceQuota
//     (quota.go).
//   - watchcache.go holds one etcd watch per resource, the current state
//     of every object and a window of recent events (the Cacher); a
//     custom resource's versions share it, each through a cacheView
//     (watchcache_view.go);
//     watchcache_watchers.go fans each event out to the HTTP watchers
//     that can want it, which watchcache_index.go finds by namespace, name
//     and, as kube indexes them, a pod's node or the name of a node,
//     secret or config map;
//     watchcache_offer.go takes, from a write, the object it stores, so its
//     event costs no decoding; watchcache_fresh.go waits until the cache
//     has caught up with a revision, which makes a list from the cache as
//     fresh as one from etcd (its waits are on a clock.Clock, which tests
//     move by hand). read.go serves lists and watches from the cache or
//     from etcd, with Kubernetes' resourceVersion semantics. Events have
//     no cache, as in kube-apiserver (--watch-cache-sizes):
//     watchcache_uncached.go reads them from etcd, and relays each watch
//     of them from an etcd watch of its own.
//   - health.go serves /healthz, /livez and /readyz with kube-apiserver's
//     checks and text: ping, etcd (the store's probe), and for readyz
//     poststarthook/storage-readiness and shutdown.
//   - limits.go bounds what one request may cost: the nesting depth of
//     every body and patch, a JSON patch's operations, copies and array
//     moves, the list items a strategic merge patch compares.
//     mergepatch.go and jsonpatch.go apply merge and JSON patches in time
//     linear in their size; strategicmerge.go checks a strategic merge
//     patch's lists before k8s.io/apimachinery merges them.
//   - inflight.go bounds how many requests run at once, as kube-apiserver's
//     max-in-flight filter does: a request beyond its priority level's
//     seats is answered 429 TooManyRequests with Retry-After; flowschema.go
//     puts each request in a priority level named after kube's API Priority
//     and Fairness defaults, so that the system's own components (leases,
//     node status, bindings) keep seats no flood of users can take.
//   - subresources.go serves status, scale, binding and finalize.
//     tokenrequest.go serves serviceaccounts/token, kube's TokenRequest.
//   - auth.go is the filter chain of both listeners; authentication.go
//     builds the secure port's authenticators (client certificates, the
//     token file, ServiceAccount and bootstrap tokens) from the Config,
//     finding the objects a token names in the watch caches.
//   - podlog.go serves pods/log: kube-apiserver's options, container
//     choice and errors, then the kubelet's /containerLogs of the pod's
//     node (InternalIP, daemonEndpoints port), its text streamed back as
//     it comes. connect.go answers exec, attach, portforward and proxy.
//   - resourcemetrics.go serves metrics.k8s.io (kubectl top), get and
//     list only, from the server's metrics server (package
//     metricsserver), which Run starts once the server is ready.
//   - discovery.go serves /api, /apis and the resource lists, generated from
//     the catalogue.
//   - table.go answers reads in the form the Accept header asks for: the
//     objects (JSON or protobuf), a meta.k8s.io Table of the kind's columns
//     (what `kubectl get` prints) or PartialObjectMetadata.
//   - openapi.go and openapi_schema.go serve /openapi/v2 (JSON or protobuf)
//     and /openapi/v3, built by reflection over the k8s.io/api types (a kind
//     without one is an object that keeps unknown fields); kubectl
//     validates, applies, edits and explains with them.
//   - fieldvalidation.go is ?fieldValidation= (Strict, Warn, Ignore) and
//     ?fieldManager= of writes, and the Warning headers of a response;
//     protobuf.go reads the protobuf bodies client-go's typed clients send,
//     and writes protobuf answers (the wire format is api/protobuf.go).
//
// Guarantees: every error is a Kubernetes Status with the right code and
// reason, and a request that fails changes nothing; a panic in a handler
// answers 500 and the server keeps serving; a resourceVersion is an etcd
// revision, so versions only grow, across restarts too.
//
// Outages: every request but a long-running one (a watch, a pod's log)
// ends within Config.RequestTimeout
// (504 Timeout), or at once with 503 ServiceUnavailable while etcd is
// known not to answer; /readyz fails within seconds and recovers by itself.
// Watches stay open, reads at resourceVersion=0 are served from the cache,
// and when etcd returns nothing is lost. If etcd comes back without its
// history (wiped, restored from an older backup, another cluster), every
// watcher ends with 410 Gone and the caches list the new history: no
// client sees a resourceVersion go back without a 410 or a list of its
// own.
package apiserver
