package testenv_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/testenv"
)

// TestWebhookCallsTheTestsServer: a validating webhook configuration
// meant for an in-cluster Service is pointed at the test's own server,
// which serves with the certificate Start wrote: the API server calls it
// and its denial reaches the client.
func TestWebhookCallsTheTestsServer(t *testing.T) {
	path := "/validate-configmaps"
	fail := admissionregistrationv1.Fail
	none := admissionregistrationv1.SideEffectClassNone
	env := testenv.Start(t, testenv.Webhooks(testenv.WebhookInstallOptions{
		ValidatingWebhooks: []*admissionregistrationv1.ValidatingWebhookConfiguration{{
			ObjectMeta: metav1.ObjectMeta{Name: "configmap-policy"},
			Webhooks: []admissionregistrationv1.ValidatingWebhook{{
				Name:                    "configmaps.example.com",
				ClientConfig:            admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Namespace: "system", Name: "webhook-service", Path: &path}},
				Rules:                   []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create}, Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}},
				FailurePolicy:           &fail,
				SideEffects:             &none,
				AdmissionReviewVersions: []string{"v1"},
			}},
		}},
	}))
	w := env.WebhookInstallOptions
	cert, err := tls.LoadX509KeyPair(filepath.Join(w.LocalServingCertDir, "tls.crt"), filepath.Join(w.LocalServingCertDir, "tls.key"))
	if err != nil {
		t.Fatalf("the webhook serving certificate: %v", err)
	}
	ln, err := tls.Listen("tcp", w.String(), &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc(path, func(rw http.ResponseWriter, r *http.Request) {
		var review admissionv1.AdmissionReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil {
			http.Error(rw, err.Error(), http.StatusBadRequest)
			return
		}
		var cm corev1.ConfigMap
		_ = json.Unmarshal(review.Request.Object.Raw, &cm)
		resp := &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: cm.Data["forbidden"] == ""}
		if !resp.Allowed {
			resp.Result = &metav1.Status{Message: "configmaps may not say forbidden"}
		}
		review.Response = resp
		_ = json.NewEncoder(rw).Encode(review)
	})
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })

	ctx := context.Background()
	configmaps := client.For[*corev1.ConfigMap](env.Client())
	if _, err := configmaps.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "ok", Namespace: "default"}}); err != nil {
		t.Fatalf("an allowed configmap: %v", err)
	}
	_, err = configmaps.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "no", Namespace: "default"}, Data: map[string]string{"forbidden": "yes"}})
	if err == nil || !strings.Contains(err.Error(), "configmaps may not say forbidden") {
		t.Fatalf("a configmap the webhook denies: want its message, got %v", err)
	}
	if got := *w.ValidatingWebhooks[0].Webhooks[0].ClientConfig.URL; got != "https://"+net.JoinHostPort(w.LocalServingHost, itoa(w.LocalServingPort))+path {
		t.Fatalf("the webhook's URL = %s", got)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
