// Package client is minictl's Go client for its REST API, the part of
// client-go (rest, typed clients, watch decoding) that controllers need,
// written once with generics instead of generated per kind.
//
// Design, one line per part:
//
//   - config.go: Config, LoadKubeconfig and BindFlags, how a program finds and
//     authenticates to a server (kubectl's kubeconfig and flags, the subset
//     minictl needs).
//   - rest.go: RESTClient, one HTTP exchange: credentials, rate limit,
//     timeout, retries the server asks for, Status errors (client-go's
//     rest.RESTClient).
//   - client.go: Client[T], get, list, create, update, patch, delete and
//     watch for any kind in the api catalogue (client-go's typed clients);
//     ForResource, the same by catalogue entry, for kinds known only at run
//     time (client-go's dynamic client).
//   - watch.go: Watcher[T], decoding a watch stream, JSON lines or
//     protobuf frames, into events (client-go's watch.StreamWatcher).
//   - errors.go: StatusError and the Is* helpers (apimachinery's api/errors).
//   - subresources.go: pods/binding and the scale subresource.
//   - discovery.go: ServerPreferredResources, what the server serves as a
//     catalogue, kinds nobody compiled in included (client-go's discovery
//     client).
//
// Properties:
//
//   - Every non-2xx response is a *StatusError carrying the server's Status,
//     or one synthesized from the HTTP code; branch with IsNotFound,
//     IsConflict, IsGone and the rest, which see through wrapping.
//   - Objects returned are fresh and belong to the caller, with kind and
//     apiVersion set. Objects passed in are never modified, so objects from
//     an informer's cache may be passed as they are (after a DeepCopy if the
//     caller changes them, as always).
//   - A RESTClient and the Client[T]s on it are safe for concurrent use and
//     share connections and the rate limit.
//   - Config.Timeout bounds each request but never a watch; a watch lives
//     until its context is cancelled, Stop is called, or the server ends it.
//   - A Watcher owns exactly one goroutine and the response body; both are
//     gone once its Events channel is closed, and Stop waits for that.
//   - The only retries are those the server asks for, as client-go's: a 429
//     or a 5xx with a Retry-After is sent again after that wait, at most 10
//     times, unless the wait would outlast the request's context. Any
//     other failure is returned to the caller, who knows whether it is safe
//     to repeat.
//   - Lists and watches ask for protobuf and take JSON, as client-go's typed
//     clients do; writes are JSON, and so is every Status.
package client
