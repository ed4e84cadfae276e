// Command team-webhook is an admission webhook in one file: an HTTPS
// server that the API server calls before it stores a pod, and that says
// no to any pod without a "team" label.
//
// It makes its own certificate authority at start, signs its serving
// certificate with it, and writes the CA's certificate to --ca-file: that
// PEM, base64-encoded, is the caBundle of the webhook's configuration, so
// that the API server trusts this server and no other.
//
//	go run . --addr 127.0.0.1:8443 --ca-file ca.pem
package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "team-webhook:", err)
		os.Exit(1)
	}
}

// run serves the webhook until ctx ends. It prints "serving on <url>"
// once it listens.
func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("team-webhook", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:8443", "the address to serve HTTPS on")
	caFile := fs.String("ca-file", "ca.pem", "where to write the CA certificate (the caBundle)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	caPEM, cert, err := newCertificates()
	if err != nil {
		return err
	}
	if err := os.WriteFile(*caFile, caPEM, 0o644); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(out, nil))
	mux := http.NewServeMux()
	mux.HandleFunc("POST /validate", func(w http.ResponseWriter, r *http.Request) { validate(w, r, log) })
	srv := &http.Server{
		Handler:           mux,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 5 * time.Second,
	}
	fmt.Fprintf(out, "serving on https://%s\n", ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- srv.ServeTLS(ln, "", "") }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = srv.Shutdown(shutdown)
	<-errc
	return err
}

// validate answers one AdmissionReview: allowed if the pod has a "team"
// label, refused with a 403 and a message that says why if not.
func validate(w http.ResponseWriter, r *http.Request, log *slog.Logger) {
	var review admissionv1.AdmissionReview
	if err := json.NewDecoder(io.LimitReader(r.Body, 3<<20)).Decode(&review); err != nil || review.Request == nil {
		http.Error(w, "send an AdmissionReview", http.StatusBadRequest)
		return
	}
	req := review.Request
	var obj struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
	}
	_ = json.Unmarshal(req.Object.Raw, &obj)
	resp := &admissionv1.AdmissionResponse{UID: req.UID, Allowed: obj.Metadata.Labels["team"] != ""}
	if !resp.Allowed {
		resp.Result = &metav1.Status{Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden,
			Message: "every pod needs a team label"}
	}
	name := req.Name
	if name == "" {
		name = obj.Metadata.GenerateName + "*"
	}
	log.Info("review", "operation", req.Operation, "pod", req.Namespace+"/"+name, "allowed", resp.Allowed)
	review.Request, review.Response = nil, resp
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(&review)
}

// newCertificates makes a CA, and a serving certificate for 127.0.0.1
// that it signs; it returns the CA's certificate in PEM.
func newCertificates() (caPEM []byte, cert tls.Certificate, err error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, cert, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "team-webhook CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, cert, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, cert, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, cert, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "team-webhook"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:    x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, cert, err
	}
	caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	return caPEM, tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
