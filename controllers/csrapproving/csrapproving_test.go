package csrapproving

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/controllers/internal/controller"
	"github.com/minictl/minictl/controllers/internal/controllertest"
	"github.com/minictl/minictl/controllers/internal/csr"
	"github.com/minictl/minictl/informer"
)

// The approver asks the API server through SubjectAccessReviews. These
// tests put a real HTTP front in front of a real API server on a real
// etcd: it passes every request through, and answers the
// SubjectAccessReviews itself, as an authorizer whose rule the test sets,
// and records what it was asked. Every request on the server's plain
// listener is the admin, minictl-admin: that is the requester the reviews
// name.

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

type reviews struct {
	mu    sync.Mutex
	asked []authorizationv1.SubjectAccessReviewSpec
	allow func(authorizationv1.SubjectAccessReviewSpec) bool
}

func (rv *reviews) all() []authorizationv1.SubjectAccessReviewSpec {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	return append([]authorizationv1.SubjectAccessReviewSpec(nil), rv.asked...)
}

// start runs the approver, with one worker, behind a front whose reviews
// allow what allow says.
func start(t *testing.T, allow func(authorizationv1.SubjectAccessReviewSpec) bool) (*reviews, *client.Client[*certificatesv1.CertificateSigningRequest]) {
	env := controllertest.Start(t)
	target, err := url.Parse(env.Client.Server())
	if err != nil {
		t.Fatal(err)
	}
	rv := &reviews{allow: allow}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.FlushInterval = -1 // watches stream
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/apis/authorization.k8s.io/v1/subjectaccessreviews" {
			proxy.ServeHTTP(w, r)
			return
		}
		var sar authorizationv1.SubjectAccessReview
		if err := json.NewDecoder(r.Body).Decode(&sar); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rv.mu.Lock()
		rv.asked = append(rv.asked, sar.Spec)
		rv.mu.Unlock()
		sar.Status.Allowed = rv.allow(sar.Spec)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(&sar)
	}))
	t.Cleanup(front.Close)
	rc, err := client.New(&client.Config{Server: front.URL, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	informers := informer.NewSharedInformerFactory(rc, informer.FactoryOptions{})
	c, err := New(Options{Common: controller.Common{Client: rc, Informers: informers, Logger: controllertest.Logger(t)}})
	if err != nil {
		t.Fatal(err)
	}
	controllertest.Run(t, informers, 1, c)
	return rv, client.For[*certificatesv1.CertificateSigningRequest](env.Client)
}

func nodeCSR(t *testing.T, name, cn string) *certificatesv1.CertificateSigningRequest {
	return controllertest.CSR(t, name, certificatesv1.KubeAPIServerClientKubeletSignerName, cn, []string{"system:nodes"},
		certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth)
}

func TestApprovesANodeClientRequestTheRequesterMayCreate(t *testing.T) {
	rv, csrs := start(t, func(s authorizationv1.SubjectAccessReviewSpec) bool {
		return s.ResourceAttributes != nil && s.ResourceAttributes.Subresource == "nodeclient"
	})
	if _, err := csrs.Create(testCtx(t), nodeCSR(t, "node-csr-1", "system:node:node-1")); err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, "node-csr-1 approved", func() (bool, string) {
		r, err := csrs.Get(testCtx(t), "", "node-csr-1")
		if err != nil {
			return false, err.Error()
		}
		return csr.Approved(r), "not yet"
	})
	r, err := csrs.Get(testCtx(t), "", "node-csr-1")
	if err != nil {
		t.Fatal(err)
	}
	c, _ := csr.Condition(r, certificatesv1.CertificateApproved)
	if c.Reason != "AutoApproved" || c.Message != "Auto approving kubelet client certificate after SubjectAccessReview." {
		t.Errorf("approval %q %q, want kube's AutoApproved for a kubelet client certificate", c.Reason, c.Message)
	}
	asked := rv.all()
	if len(asked) != 1 {
		t.Fatalf("reviews asked: %+v, want one: the requester is not the node, so selfnodeclient does not apply", asked)
	}
	want := authorizationv1.ResourceAttributes{Group: "certificates.k8s.io", Version: "*", Resource: "certificatesigningrequests", Subresource: "nodeclient", Verb: "create"}
	if a := asked[0].ResourceAttributes; a == nil || *a != want || asked[0].User != "minictl-admin" {
		t.Errorf("review %+v, want %+v for minictl-admin", asked[0], want)
	}
}

func TestLeavesPendingWhatTheReviewRefusesAndWhatItDoesNotKnow(t *testing.T) {
	rv, csrs := start(t, func(s authorizationv1.SubjectAccessReviewSpec) bool {
		return s.ResourceAttributes != nil && s.ResourceAttributes.Subresource == "nodeclient"
	})
	// A client certificate for a person, and a kubelet request with the
	// wrong usages: neither is a kubelet client request; no review.
	person := controllertest.CSR(t, "alice", certificatesv1.KubeAPIServerClientSignerName, "alice", nil, certificatesv1.UsageClientAuth)
	odd := controllertest.CSR(t, "odd", certificatesv1.KubeAPIServerClientKubeletSignerName, "system:node:n", []string{"system:nodes"}, certificatesv1.UsageClientAuth)
	for _, r := range []*certificatesv1.CertificateSigningRequest{person, odd} {
		if _, err := csrs.Create(testCtx(t), r); err != nil {
			t.Fatal(err)
		}
	}
	// One worker takes requests in turn: once the last one created is
	// approved, the two before it have been looked at.
	if _, err := csrs.Create(testCtx(t), nodeCSR(t, "last", "system:node:n")); err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, "last approved", func() (bool, string) {
		r, err := csrs.Get(testCtx(t), "", "last")
		if err != nil {
			return false, err.Error()
		}
		return csr.Approved(r), "not yet"
	})
	for _, name := range []string{"alice", "odd"} {
		r, err := csrs.Get(testCtx(t), "", name)
		if err != nil {
			t.Fatal(err)
		}
		if csr.Decided(r) {
			t.Errorf("%s: %v, want it left pending", name, r.Status.Conditions)
		}
	}
	if n := len(rv.all()); n != 1 {
		t.Errorf("%d reviews asked, want 1 (for last only)", n)
	}
}

func TestRefusedReviewLeavesTheRequestPending(t *testing.T) {
	rv, csrs := start(t, func(authorizationv1.SubjectAccessReviewSpec) bool { return false })
	if _, err := csrs.Create(testCtx(t), nodeCSR(t, "refused", "system:node:n")); err != nil {
		t.Fatal(err)
	}
	// It is asked again, after a back-off: the requester may be granted
	// the permission meanwhile.
	controllertest.Eventually(t, "two reviews", func() (bool, string) {
		return len(rv.all()) >= 2, "fewer"
	})
	r, err := csrs.Get(testCtx(t), "", "refused")
	if err != nil {
		t.Fatal(err)
	}
	if csr.Decided(r) {
		t.Errorf("%v, want it pending", r.Status.Conditions)
	}
}

// A node renewing its own certificate is selfnodeclient, tried first;
// anyone else asking for a node's is nodeclient only.
func TestRecognizers(t *testing.T) {
	r := nodeCSR(t, "n", "system:node:n")
	req, err := api.ParseCSR(r.Spec.Request)
	if err != nil {
		t.Fatal(err)
	}
	r.Spec.Username = "system:node:n"
	if !isSelfNodeClient(r, req) || !isNodeClient(r, req) {
		t.Errorf("the node's own request: self %v, node %v; want both", isSelfNodeClient(r, req), isNodeClient(r, req))
	}
	r.Spec.Username = "system:bootstrap:abcdef"
	if isSelfNodeClient(r, req) || !isNodeClient(r, req) {
		t.Errorf("a bootstrap token's request: self %v, node %v; want nodeclient only", isSelfNodeClient(r, req), isNodeClient(r, req))
	}
	r.Spec.SignerName = certificatesv1.KubeAPIServerClientSignerName
	if isNodeClient(r, req) {
		t.Error("a request to the kube-apiserver-client signer is not a kubelet's")
	}
}
