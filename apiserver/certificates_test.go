package apiserver_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net/http"
	"slices"
	"strings"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/internal/testenv"
)

const csrsPath = "/apis/certificates.k8s.io/v1/certificatesigningrequests"

// csrPEM is a PEM CERTIFICATE REQUEST for cn in orgs, signed by a fresh
// ECDSA key.
func csrPEM(t testing.TB, cn string, orgs ...string) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: cn, Organization: orgs}}, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

func newCSR(t testing.TB, name, signer string) *certificatesv1.CertificateSigningRequest {
	return &certificatesv1.CertificateSigningRequest{
		TypeMeta:   metav1.TypeMeta{APIVersion: "certificates.k8s.io/v1", Kind: "CertificateSigningRequest"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request: csrPEM(t, "alice", "devs"), SignerName: signer,
			Usages: []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
		},
	}
}

func TestCSRCreateRecordsTheRequesterAndNoStatus(t *testing.T) {
	env := testenv.Start(t)
	csr := newCSR(t, "node-csr", certificatesv1.KubeAPIServerClientKubeletSignerName)
	csr.Spec.Username, csr.Spec.Groups = "system:node:forged", []string{"system:masters"}
	csr.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue}}
	csr.Spec.UID, csr.Spec.Extra = "forged", map[string]certificatesv1.ExtraValue{"k": {"v"}}
	// Everything on the plain listener is the admin.
	got := create[certificatesv1.CertificateSigningRequest](t, env, csrsPath, csr)
	if got.Spec.Username != "minictl-admin" {
		t.Errorf("spec.username = %q, want the requesting user minictl-admin", got.Spec.Username)
	}
	if want := []string{"system:masters", "system:authenticated"}; !slices.Equal(got.Spec.Groups, want) {
		t.Errorf("spec.groups = %v, want the requester's groups %v", got.Spec.Groups, want)
	}
	if got.Spec.UID != "" || got.Spec.Extra != nil {
		t.Errorf("spec.uid %q, extra %v: the client's are kept, want the requester's (none)", got.Spec.UID, got.Spec.Extra)
	}
	if len(got.Status.Conditions) != 0 {
		t.Errorf("a new request has conditions %v; it must start pending", got.Status.Conditions)
	}

	// Nobody changes who asked afterwards: an update keeps the spec.
	got.Spec.Username = "someone-else"
	got.Spec.SignerName = "example.com/other"
	upd := update[certificatesv1.CertificateSigningRequest](t, env, csrsPath+"/node-csr", got)
	if upd.Spec.Username != "minictl-admin" || upd.Spec.SignerName != certificatesv1.KubeAPIServerClientKubeletSignerName {
		t.Errorf("after an update, username %q signer %q: the spec must not change", upd.Spec.Username, upd.Spec.SignerName)
	}
}

func TestCSRValidation(t *testing.T) {
	env := testenv.Start(t)
	short := int32(599)
	cases := []struct {
		name   string
		mutate func(*certificatesv1.CertificateSigningRequest)
		want   string
	}{
		{"not a PEM request", func(c *certificatesv1.CertificateSigningRequest) { c.Spec.Request = []byte("hello") },
			"spec.request: Invalid value: \"aGVsbG8=\": PEM block type must be CERTIFICATE REQUEST"},
		{"no signer", func(c *certificatesv1.CertificateSigningRequest) { c.Spec.SignerName = "" },
			"spec.signerName: Required value"},
		{"signer without a path", func(c *certificatesv1.CertificateSigningRequest) { c.Spec.SignerName = "example.com" },
			"must be a fully qualified domain and path of the form 'example.com/signer-name'"},
		{"legacy signer", func(c *certificatesv1.CertificateSigningRequest) { c.Spec.SignerName = "kubernetes.io/legacy-unknown" },
			"the legacy signerName is not allowed via this API version"},
		{"no usages", func(c *certificatesv1.CertificateSigningRequest) { c.Spec.Usages = nil },
			"spec.usages: Required value: usages must be provided"},
		{"unknown usage", func(c *certificatesv1.CertificateSigningRequest) { c.Spec.Usages = []certificatesv1.KeyUsage{"flying"} },
			"spec.usages[0]: Unsupported value: \"flying\""},
		{"repeated usage", func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Usages = []certificatesv1.KeyUsage{certificatesv1.UsageClientAuth, certificatesv1.UsageClientAuth}
		}, "spec.usages[1]: Duplicate value: \"client auth\""},
		{"too short", func(c *certificatesv1.CertificateSigningRequest) { c.Spec.ExpirationSeconds = &short },
			"spec.expirationSeconds: Invalid value: 599: may not specify a duration less than 600 seconds (10 minutes)"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			csr := newCSR(t, "bad-"+strings.Repeat("x", i+1), "example.com/signer")
			tc.mutate(csr)
			st := do(t, env, http.MethodPost, csrsPath, jsonType, csr).wantStatus(t, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid)
			if !strings.Contains(st.Message, tc.want) {
				t.Errorf("message %q, want it to say %q", st.Message, tc.want)
			}
			do(t, env, http.MethodGet, csrsPath+"/"+csr.Name, "", nil).want(t, http.StatusNotFound)
		})
	}
}

func TestCSRApprovalSubresourceChangesOnlyTheApproval(t *testing.T) {
	env := testenv.Start(t)
	csr := create[certificatesv1.CertificateSigningRequest](t, env, csrsPath, newCSR(t, "web", "example.com/signer"))

	// The object itself does not take conditions.
	csr.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue}}
	if got := update[certificatesv1.CertificateSigningRequest](t, env, csrsPath+"/web", csr); len(got.Status.Conditions) != 0 {
		t.Fatalf("PUT on the object approved it: %v", got.Status.Conditions)
	}
	// Nor does /status take an approval.
	cur := get[certificatesv1.CertificateSigningRequest](t, env, csrsPath+"/web")
	cur.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue}}
	if got := update[certificatesv1.CertificateSigningRequest](t, env, csrsPath+"/web/status", cur); len(got.Status.Conditions) != 0 {
		t.Fatalf("PUT on /status approved it: %v", got.Status.Conditions)
	}

	// /approval does, and keeps the spec as it was.
	cur = get[certificatesv1.CertificateSigningRequest](t, env, csrsPath+"/web")
	cur.Spec.SignerName = "example.com/other"
	cur.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{
		Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "AdminApproved", Message: "looks fine",
	}}
	approved := update[certificatesv1.CertificateSigningRequest](t, env, csrsPath+"/web/approval", cur)
	if len(approved.Status.Conditions) != 1 || approved.Status.Conditions[0].Reason != "AdminApproved" {
		t.Fatalf("conditions after approval: %v", approved.Status.Conditions)
	}
	if c := approved.Status.Conditions[0]; c.LastUpdateTime.IsZero() || c.LastTransitionTime.IsZero() {
		t.Errorf("the approval has no times: %+v", c)
	}
	if approved.Spec.SignerName != "example.com/signer" {
		t.Errorf("signer after approval = %q, want it unchanged", approved.Spec.SignerName)
	}

	// Approved and Denied together are refused, and so is removing the
	// approval; neither changes anything.
	both := approved.DeepCopy()
	both.Status.Conditions = append(both.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{Type: certificatesv1.CertificateDenied, Status: corev1.ConditionTrue})
	st := do(t, env, http.MethodPut, csrsPath+"/web/approval", jsonType, both).wantStatus(t, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid)
	if !strings.Contains(st.Message, `status.conditions[1].type: Invalid value: "Denied": Approved and Denied conditions are mutually exclusive`) {
		t.Errorf("message %q", st.Message)
	}
	none := approved.DeepCopy()
	none.Status.Conditions = nil
	st = do(t, env, http.MethodPut, csrsPath+"/web/approval", jsonType, none).wantStatus(t, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid)
	if !strings.Contains(st.Message, `updates may not remove a condition of type "Approved"`) {
		t.Errorf("message %q", st.Message)
	}

	// The signer's certificate comes through /status, once.
	cur = get[certificatesv1.CertificateSigningRequest](t, env, csrsPath+"/web")
	cur.Status.Certificate = newTestCA(t, "x").pem()
	issued := update[certificatesv1.CertificateSigningRequest](t, env, csrsPath+"/web/status", cur)
	if len(issued.Status.Certificate) == 0 || len(issued.Status.Conditions) != 1 {
		t.Fatalf("after /status: certificate %d bytes, conditions %v", len(issued.Status.Certificate), issued.Status.Conditions)
	}
	issued.Status.Certificate = newTestCA(t, "x").pem()
	st = do(t, env, http.MethodPut, csrsPath+"/web/status", jsonType, issued).wantStatus(t, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid)
	if !strings.Contains(st.Message, "updates may not modify existing certificate content") {
		t.Errorf("message %q", st.Message)
	}

	// kubectl's columns.
	var table metav1.Table
	getAccept(t, env, csrsPath+"/web", kubectlAccept).want(t, http.StatusOK).into(t, &table)
	var cols []string
	for _, c := range table.ColumnDefinitions {
		cols = append(cols, c.Name)
	}
	if got, want := strings.Join(cols, " "), "Name Age SignerName Requestor RequestedDuration Condition"; got != want {
		t.Errorf("columns %q, want %q", got, want)
	}
	if len(table.Rows) != 1 || table.Rows[0].Cells[5] != "Approved,Issued" || table.Rows[0].Cells[4] != "<none>" {
		t.Errorf("row %v, want condition Approved,Issued and no requested duration", table.Rows)
	}
}

// kube does not care what a request is called: node-csr-<digest> names
// have capitals and underscores.
func TestCSRNamesAreFree(t *testing.T) {
	env := testenv.Start(t)
	create[certificatesv1.CertificateSigningRequest](t, env, csrsPath, newCSR(t, "node-csr-Ab_9", "example.com/signer"))
	get[certificatesv1.CertificateSigningRequest](t, env, csrsPath+"/node-csr-Ab_9")
}

func TestCSRForSystemMastersFromTheClientSignerIsForbidden(t *testing.T) {
	env := testenv.Start(t)
	csr := newCSR(t, "root", certificatesv1.KubeAPIServerClientSignerName)
	csr.Spec.Request = csrPEM(t, "mallory", "system:masters")
	st := do(t, env, http.MethodPost, csrsPath, jsonType, csr).wantStatus(t, http.StatusForbidden, metav1.StatusReasonForbidden)
	if want := `certificatesigningrequests.certificates.k8s.io "root" is forbidden: use of kubernetes.io/kube-apiserver-client signer with system:masters group is not allowed`; st.Message != want {
		t.Errorf("message %q, want %q", st.Message, want)
	}
}
