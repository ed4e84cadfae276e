package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/minictl/minictl/internal/minitest"
)

var servingOn = regexp.MustCompile(`serving on (https://\S+)`)

// The lesson's webhook, in Go: over TLS trusted through the CA file it
// wrote, it refuses a pod without a team label with a 403 and its
// message, and allows one with it.
func TestWebhookSaysNo(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	var out minitest.Buffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"--addr", "127.0.0.1:0", "--ca-file", caFile}, &out) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}()
	var url string
	deadline := time.Now().Add(10 * time.Second)
	for url == "" {
		if m := servingOn.FindStringSubmatch(out.String()); m != nil {
			url = m[1]
		} else if time.Now().After(deadline) {
			t.Fatalf("not serving after 10s: %s", out.String())
		} else {
			time.Sleep(10 * time.Millisecond) // polling interval
		}
	}
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatalf("the CA file holds no certificate: %s", caPEM)
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}

	for _, tc := range []struct {
		pod     string
		allowed bool
	}{
		{`{"metadata":{"name":"a"}}`, false},
		{`{"metadata":{"name":"b","labels":{"team":"blue"}}}`, true},
	} {
		review := admissionv1.AdmissionReview{Request: &admissionv1.AdmissionRequest{
			UID: "u-1", Operation: admissionv1.Create, Namespace: "webhooks", Name: "p",
			Object: runtime.RawExtension{Raw: []byte(tc.pod)},
		}}
		review.APIVersion, review.Kind = "admission.k8s.io/v1", "AdmissionReview"
		body, _ := json.Marshal(review)
		resp, err := hc.Post(url+"/validate", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		var got admissionv1.AdmissionReview
		err = json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
		if err != nil || got.Response == nil || got.Response.UID != "u-1" || got.Kind != "AdmissionReview" {
			t.Fatalf("pod %s: answer %+v (%v), want an AdmissionReview for uid u-1", tc.pod, got, err)
		}
		if got.Response.Allowed != tc.allowed {
			t.Errorf("pod %s: allowed %v, want %v", tc.pod, got.Response.Allowed, tc.allowed)
		}
		if !tc.allowed && (got.Response.Result == nil || got.Response.Result.Code != 403 || got.Response.Result.Message != "every pod needs a team label") {
			t.Errorf("pod %s: result %+v, want 403 and the reason", tc.pod, got.Response.Result)
		}
	}
}
