package api

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// A CertificateSigningRequest is written by three hands, and each may
// change only its own part, as in kube-apiserver:
//
//   - the requester creates it: spec (the PEM request, the signer, the
//     usages, the duration); the server fills in who asked (username,
//     uid, groups, extra) and nobody may change that afterwards;
//   - an approver writes the Approved or Denied condition through
//     /approval;
//   - the signer writes the certificate (and a Failed condition if it
//     cannot) through /status.
//
// A write to the object itself changes neither spec nor status: only
// metadata.

// prepareCSRForCreate: a request is created without status, so that
// nobody creates a request approved already; its conditions come through
// /approval and its certificate through /status. Who asked is the
// server's to say (SetCSRRequester), never the client's.
func prepareCSRForCreate(csr *certificatesv1.CertificateSigningRequest) {
	csr.Spec.Username, csr.Spec.UID, csr.Spec.Groups, csr.Spec.Extra = "", "", nil, nil
	csr.Status = certificatesv1.CertificateSigningRequestStatus{}
}

// SetCSRRequester records on a request about to be created the user who
// asked for it: the API server calls it with the request's user.
func SetCSRRequester(obj Object, name, uid string, groups []string, extra map[string][]string) {
	csr, ok := obj.(*certificatesv1.CertificateSigningRequest)
	if !ok {
		return
	}
	csr.Spec.Username, csr.Spec.UID = name, uid
	csr.Spec.Groups = slices.Clone(groups)
	csr.Spec.Extra = nil
	for k, v := range extra {
		if csr.Spec.Extra == nil {
			csr.Spec.Extra = map[string]certificatesv1.ExtraValue{}
		}
		csr.Spec.Extra[k] = slices.Clone(v)
	}
}

// prepareCSRForUpdate: an update of the request itself keeps spec and
// status; it changes metadata only.
func prepareCSRForUpdate(csr, old *certificatesv1.CertificateSigningRequest) {
	csr.Spec = old.Spec
	csr.Status = old.Status
}

// prepareCSRForStatusUpdate: the signer's write keeps the spec (done by
// every status write) and the approval: the Approved and Denied conditions
// stay as they were, whatever the body says. The certificate and the
// other conditions are the signer's.
func prepareCSRForStatusUpdate(csr, old *certificatesv1.CertificateSigningRequest) {
	conds := slices.DeleteFunc(slices.Clone(csr.Status.Conditions), isApprovalCondition)
	for _, c := range old.Status.Conditions {
		if isApprovalCondition(c) {
			conds = append(conds, c)
		}
	}
	csr.Status.Conditions = conds
	stampConditions(csr, old, time.Now())
}

// PrepareCSRForApprovalUpdate is what a write to /approval may change: the
// Approved and Denied conditions, and nothing else. The spec, the
// certificate and the other conditions are kept from old; what the server
// keeps of the metadata is the caller's (api.PrepareObjectMetaForUpdate).
func PrepareCSRForApprovalUpdate(obj, old Object) {
	csr, o := obj.(*certificatesv1.CertificateSigningRequest), old.(*certificatesv1.CertificateSigningRequest)
	csr.Spec = o.Spec
	csr.Status.Certificate = o.Status.Certificate
	conds := slices.DeleteFunc(slices.Clone(csr.Status.Conditions), func(c certificatesv1.CertificateSigningRequestCondition) bool {
		return !isApprovalCondition(c)
	})
	for _, c := range o.Status.Conditions {
		if !isApprovalCondition(c) {
			conds = append(conds, c)
		}
	}
	csr.Status.Conditions = conds
	stampConditions(csr, o, time.Now())
}

func isApprovalCondition(c certificatesv1.CertificateSigningRequestCondition) bool {
	return c.Type == certificatesv1.CertificateApproved || c.Type == certificatesv1.CertificateDenied
}

// stampConditions fills in the times a writer left out, as kube-apiserver
// does: lastUpdateTime is now; lastTransitionTime is kept from the old
// condition of the same type when its status did not change, else now.
func stampConditions(csr, old *certificatesv1.CertificateSigningRequest, now time.Time) {
	t := metav1.NewTime(now.Truncate(time.Second))
	for i := range csr.Status.Conditions {
		c := &csr.Status.Conditions[i]
		if c.LastUpdateTime.IsZero() {
			c.LastUpdateTime = t
		}
		if !c.LastTransitionTime.IsZero() {
			continue
		}
		c.LastTransitionTime = t
		for _, oc := range old.Status.Conditions {
			if oc.Type == c.Type && oc.Status == c.Status && !oc.LastTransitionTime.IsZero() {
				c.LastTransitionTime = oc.LastTransitionTime
			}
		}
	}
}

// csrNameValid: kube does not care what a request is called, as long as
// it can be a path segment of its URL.
func csrNameValid(name string, prefix bool) []string {
	var msgs []string
	if !prefix {
		switch name {
		case ".", "..":
			msgs = append(msgs, fmt.Sprintf("may not be '%s'", name))
		}
	}
	for _, bad := range []string{"/", "%"} {
		if strings.Contains(name, bad) {
			msgs = append(msgs, fmt.Sprintf("may not contain '%s'", bad))
		}
	}
	return msgs
}

// The usages kube-apiserver knows.
var csrUsages = []string{
	"signing", "digital signature", "content commitment", "key encipherment", "key agreement",
	"data encipherment", "cert sign", "crl sign", "encipher only", "decipher only", "any",
	"server auth", "client auth", "code signing", "email protection", "s/mime", "ipsec end system",
	"ipsec tunnel", "ipsec user", "timestamping", "ocsp signing", "microsoft sgc", "netscape sgc",
}

// MinCSRExpirationSeconds is the shortest duration a request may ask for.
const MinCSRExpirationSeconds = 600

// ParseCSR decodes the PEM CERTIFICATE REQUEST of a CSR's spec.request.
func ParseCSR(pemBytes []byte) (*x509.CertificateRequest, error) {
	block, _ := pem.Decode(pemBytes)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return nil, errors.New("PEM block type must be CERTIFICATE REQUEST")
	}
	return x509.ParseCertificateRequest(block.Bytes)
}

// validateCSR checks a request as kube-apiserver does, on create and on
// every update: the request is a PEM CERTIFICATE REQUEST whose signature
// holds, the signer is named, the usages are known and not repeated, the
// duration is at least ten minutes, the conditions are well formed, and a
// certificate, if there is one, is PEM CERTIFICATE blocks.
func validateCSR(csr *certificatesv1.CertificateSigningRequest) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	if req, err := ParseCSR(csr.Spec.Request); err != nil {
		errs = append(errs, field.Invalid(spec.Child("request"), csr.Spec.Request, err.Error()))
	} else if err := req.CheckSignature(); err != nil {
		errs = append(errs, field.Invalid(spec.Child("request"), csr.Spec.Request, err.Error()))
	}
	if len(csr.Spec.Usages) == 0 {
		errs = append(errs, field.Required(spec.Child("usages"), "usages must be provided"))
	}
	seen := map[certificatesv1.KeyUsage]bool{}
	for i, u := range csr.Spec.Usages {
		if !slices.Contains(csrUsages, string(u)) {
			errs = append(errs, field.NotSupported(spec.Child("usages").Index(i), u, csrUsages))
		}
		if seen[u] {
			errs = append(errs, field.Duplicate(spec.Child("usages").Index(i), u))
		}
		seen[u] = true
	}
	if csr.Spec.SignerName == "kubernetes.io/legacy-unknown" {
		errs = append(errs, field.Invalid(spec.Child("signerName"), csr.Spec.SignerName, "the legacy signerName is not allowed via this API version"))
	} else {
		errs = append(errs, validateSignerName(spec.Child("signerName"), csr.Spec.SignerName)...)
	}
	if s := csr.Spec.ExpirationSeconds; s != nil && *s < MinCSRExpirationSeconds {
		errs = append(errs, field.Invalid(spec.Child("expirationSeconds"), *s, "may not specify a duration less than 600 seconds (10 minutes)"))
	}
	errs = append(errs, validateCSRConditions(field.NewPath("status", "conditions"), csr.Status.Conditions)...)
	if err := validateCSRCertificate(csr.Status.Certificate); err != nil {
		errs = append(errs, field.Invalid(field.NewPath("status", "certificate"), "<certificate data>", err.Error()))
	}
	return errs
}

// validateSignerName: a signer is named domain/path, the domain a DNS
// subdomain.
func validateSignerName(p *field.Path, name string) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(p, "")}
	}
	domain, path, ok := strings.Cut(name, "/")
	if !ok || strings.Contains(path, "/") {
		return field.ErrorList{field.Invalid(p, name, "must be a fully qualified domain and path of the form 'example.com/signer-name'")}
	}
	var errs field.ErrorList
	for _, msg := range isDNS1123Subdomain(domain) {
		errs = append(errs, field.Invalid(p, name, "validating domain component: "+msg))
	}
	if path == "" {
		errs = append(errs, field.Invalid(p, name, "validating path component: must not be empty"))
	} else if len(path) > 253 {
		errs = append(errs, field.TooLong(p, name, 253))
	}
	return errs
}

// validateCSRConditions: each condition has a type and a status; Approved
// and Denied can only be True, no type appears twice, and a request is
// not both approved and denied.
func validateCSRConditions(p *field.Path, conds []certificatesv1.CertificateSigningRequestCondition) field.ErrorList {
	var errs field.ErrorList
	seen := map[certificatesv1.RequestConditionType]bool{}
	var approved, denied bool
	statuses := []string{string(corev1.ConditionFalse), string(corev1.ConditionTrue), string(corev1.ConditionUnknown)}
	for i, c := range conds {
		if c.Type == "" {
			errs = append(errs, field.Required(p.Index(i).Child("type"), ""))
		}
		switch c.Status {
		case corev1.ConditionTrue, corev1.ConditionFalse, corev1.ConditionUnknown:
		case "":
			errs = append(errs, field.Required(p.Index(i).Child("status"), ""))
		default:
			errs = append(errs, field.NotSupported(p.Index(i).Child("status"), c.Status, statuses))
		}
		switch c.Type {
		case certificatesv1.CertificateApproved, certificatesv1.CertificateDenied:
			// The second of the two is the one refused, where it stands.
			if c.Type == certificatesv1.CertificateApproved {
				approved = true
			} else {
				denied = true
			}
			if approved && denied {
				errs = append(errs, field.Invalid(p.Index(i).Child("type"), c.Type, "Approved and Denied conditions are mutually exclusive"))
			}
			if c.Status != corev1.ConditionTrue {
				errs = append(errs, field.NotSupported(p.Index(i).Child("status"), c.Status, []string{string(corev1.ConditionTrue)}))
			}
		}
		if seen[c.Type] {
			errs = append(errs, field.Duplicate(p.Index(i).Child("type"), c.Type))
		}
		seen[c.Type] = true
	}
	return errs
}

// validateCSRCertificate: an issued certificate is one or more PEM
// CERTIFICATE blocks without headers (text around them is allowed).
func validateCSRCertificate(data []byte) error {
	if len(data) == 0 {
		return nil
	}
	blocks := 0
	for {
		block, rest := pem.Decode(data)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			return fmt.Errorf("only CERTIFICATE PEM blocks are allowed, found %q", block.Type)
		}
		if len(block.Headers) != 0 {
			return errors.New("no PEM block headers are permitted")
		}
		blocks++
		certs, err := x509.ParseCertificates(block.Bytes)
		if err != nil {
			return err
		}
		if len(certs) == 0 {
			return errors.New("found CERTIFICATE PEM block containing 0 certificates")
		}
		data = rest
	}
	if blocks == 0 {
		return errors.New("must contain at least one CERTIFICATE PEM block")
	}
	return nil
}

// validateCSRUpdate: who asked never changes; an Approved or Denied
// condition, once there, is never removed nor changed; a certificate, once
// issued, never changes.
func validateCSRUpdate(csr, old *certificatesv1.CertificateSigningRequest) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	if csr.Spec.Username != old.Spec.Username || csr.Spec.UID != old.Spec.UID ||
		!slices.Equal(csr.Spec.Groups, old.Spec.Groups) || !apiequality.Semantic.DeepEqual(csr.Spec.Extra, old.Spec.Extra) {
		errs = append(errs, field.Forbidden(spec, "field is immutable"))
	}
	conds := field.NewPath("status", "conditions")
	for _, t := range []certificatesv1.RequestConditionType{certificatesv1.CertificateApproved, certificatesv1.CertificateDenied} {
		was, is := csrConditionsOf(old, t), csrConditionsOf(csr, t)
		if len(is) < len(was) {
			errs = append(errs, field.Forbidden(conds, fmt.Sprintf("updates may not remove a condition of type %q", t)))
			continue
		}
		for i := range was {
			if was[i].Status != is[i].Status {
				errs = append(errs, field.Forbidden(conds, fmt.Sprintf("updates may not modify a condition of type %q", t)))
			}
		}
	}
	if len(old.Status.Certificate) > 0 && !bytes.Equal(old.Status.Certificate, csr.Status.Certificate) {
		errs = append(errs, field.Invalid(field.NewPath("status", "certificate"), "<certificate data>", "updates may not modify existing certificate content"))
	}
	return errs
}

func csrConditionsOf(csr *certificatesv1.CertificateSigningRequest, t certificatesv1.RequestConditionType) []certificatesv1.CertificateSigningRequestCondition {
	var out []certificatesv1.CertificateSigningRequestCondition
	for _, c := range csr.Status.Conditions {
		if c.Type == t {
			out = append(out, c)
		}
	}
	return out
}

// CSRCondition is kubectl's CONDITION of a request: Denied, Approved or
// Pending, then Failed and Issued when they apply.
func CSRCondition(csr *certificatesv1.CertificateSigningRequest) string {
	var approved, denied, failed bool
	for _, c := range csr.Status.Conditions {
		switch c.Type {
		case certificatesv1.CertificateApproved:
			approved = true
		case certificatesv1.CertificateDenied:
			denied = true
		case certificatesv1.CertificateFailed:
			failed = true
		}
	}
	s := "Pending"
	switch {
	case denied:
		s = "Denied"
	case approved:
		s = "Approved"
	}
	if failed {
		s += ",Failed"
	}
	if len(csr.Status.Certificate) > 0 {
		s += ",Issued"
	}
	return s
}

var csrSpecDoc = certificatesv1.CertificateSigningRequestSpec{}.SwaggerDoc()

var csrTable = printer([]metav1.TableColumnDefinition{
	nameColumn,
	ageColumn,
	{Name: "SignerName", Type: "string", Description: csrSpecDoc["signerName"]},
	{Name: "Requestor", Type: "string", Description: csrSpecDoc["username"]},
	{Name: "RequestedDuration", Type: "string", Description: csrSpecDoc["expirationSeconds"]},
	{Name: "Condition", Type: "string", Description: certificatesv1.CertificateSigningRequestStatus{}.SwaggerDoc()["conditions"]},
}, func(csr *certificatesv1.CertificateSigningRequest, now time.Time) []any {
	requested := "<none>"
	if s := csr.Spec.ExpirationSeconds; s != nil {
		requested = duration.HumanDuration(time.Duration(*s) * time.Second)
	}
	return []any{csr.Name, age(csr.CreationTimestamp, now), csr.Spec.SignerName, csr.Spec.Username, requested, CSRCondition(csr)}
})
