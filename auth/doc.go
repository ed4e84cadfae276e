// Package auth is the root of minictl's security model, kube-apiserver's
// k8s.io/apiserver/pkg/authentication and authorization and
// plugin/pkg/auth, each in a room of its own:
//
//	user           who a request comes from (user.Info) and kube's well-known names
//	authenticator  the authenticator interfaces and the chain that asks each in turn
//	authorizer     a request's attributes, the authorizer interface and the union of modes
//
// The API server runs a request through them in kube-apiserver's order:
// authenticate, audit, impersonate, take a seat (flow control), authorize,
// then serve.
package auth
