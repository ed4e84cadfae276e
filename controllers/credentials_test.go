package controllers

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"flag"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/controllers/internal/controllertest"
	"github.com/minictl/minictl/internal/minitest"
)

// TestCredentialFlags: --service-account-private-key-file and
// --root-ca-file turn on serviceaccount-token and root-ca-cert-publisher;
// without them both are disabled and the rest of the manager runs.
func TestCredentialFlags(t *testing.T) {
	dir := t.TempDir()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	keyFile, caFile := filepath.Join(dir, "sa.key"), filepath.Join(dir, "ca.crt")
	const ca = "-----BEGIN CERTIFICATE-----\nthe cluster's CA\n-----END CERTIFICATE-----\n"
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(caFile, []byte(ca), 0o600); err != nil {
		t.Fatal(err)
	}

	for _, withFiles := range []bool{false, true} {
		t.Run(map[bool]string{false: "without", true: "with"}[withFiles], func(t *testing.T) {
			env := controllertest.Start(t)
			cfg := DefaultConfig()
			cfg.LeaderElect = false
			fs := flag.NewFlagSet("controller-manager", flag.ContinueOnError)
			cfg.BindFlags(fs)
			args := []string{"--controllers=serviceaccount-token,root-ca-cert-publisher,serviceaccount"}
			if withFiles {
				args = append(args, "--service-account-private-key-file="+keyFile, "--root-ca-file="+caFile)
			}
			if err := fs.Parse(args); err != nil {
				t.Fatal(err)
			}
			var buf minitest.Buffer
			m, err := NewManager(env.Client, cfg, slog.New(slog.NewJSONHandler(&buf, nil)))
			if err != nil {
				t.Fatal(err)
			}
			runCtx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- m.Run(runCtx) }()
			stop := sync.OnceValue(func() error { cancel(); return <-done })
			t.Cleanup(func() { _ = stop() })

			ctx := t.Context()
			// The serviceaccount controller runs either way.
			controllertest.Eventually(t, "default/default ServiceAccount", func() (bool, string) {
				_, err := client.For[*corev1.ServiceAccount](env.Client).Get(ctx, "default", "default")
				return err == nil, ""
			})
			secrets := client.For[*corev1.Secret](env.Client)
			if _, err := secrets.Create(ctx, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "default-token", Annotations: map[string]string{corev1.ServiceAccountNameKey: "default"}},
				Type:       corev1.SecretTypeServiceAccountToken,
			}); err != nil {
				t.Fatal(err)
			}
			cms := client.For[*corev1.ConfigMap](env.Client)
			if withFiles {
				controllertest.Eventually(t, "default/kube-root-ca.crt", func() (bool, string) {
					cm, err := cms.Get(ctx, "default", "kube-root-ca.crt")
					return err == nil && cm.Data["ca.crt"] == ca, ""
				})
				controllertest.Eventually(t, "the token Secret filled", func() (bool, string) {
					s, err := secrets.Get(ctx, "default", "default-token")
					return err == nil && strings.Count(string(s.Data["token"]), ".") == 2 && string(s.Data["ca.crt"]) == ca, ""
				})
			} else {
				for _, line := range []string{
					"serviceaccount-token is disabled because there is no private key",
					"root-ca-cert-publisher is disabled because there is no root CA",
				} {
					if !strings.Contains(buf.String(), line) {
						t.Errorf("the manager did not say %q", line)
					}
				}
				if _, err := cms.Get(ctx, "default", "kube-root-ca.crt"); !client.IsNotFound(err) {
					t.Errorf("kube-root-ca.crt without a root CA: %v", err)
				}
				if s, err := secrets.Get(ctx, "default", "default-token"); err != nil || len(s.Data) != 0 {
					t.Errorf("the token Secret without a key: %v, %d data keys", err, len(s.Data))
				}
			}
			if err := stop(); err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
}
