package bootstrapsigner

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/controllers/internal/controller"
	"github.com/minictl/minictl/controllers/internal/controllertest"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// verify checks a detached JWS of content the way a joining node does,
// with nothing but the token: the header says HS256 and the token id, and
// the HMAC of header.payload under the token's secret is the signature.
func verify(t *testing.T, jws, content, id, secret string) {
	t.Helper()
	header, sig, ok := strings.Cut(jws, "..")
	if !ok {
		t.Fatalf("%q is not a detached JWS (header..signature)", jws)
	}
	raw, err := base64.RawURLEncoding.DecodeString(header)
	if err != nil {
		t.Fatal(err)
	}
	var h struct{ Alg, Kid string }
	if err := json.Unmarshal(raw, &h); err != nil {
		t.Fatal(err)
	}
	if h.Alg != "HS256" || h.Kid != id {
		t.Errorf("header %s, want alg HS256 and kid %s", raw, id)
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(header + "." + base64.RawURLEncoding.EncodeToString([]byte(content))))
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil {
		t.Fatal(err)
	}
	if !hmac.Equal(got, mac.Sum(nil)) {
		t.Errorf("the signature by %s does not verify", id)
	}
}

func tokenSecret(id, secret string, data map[string]string) *corev1.Secret {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "bootstrap-token-" + id, Namespace: "kube-system"},
		Type:       "bootstrap.kubernetes.io/token",
		StringData: map[string]string{"token-id": id, "token-secret": secret},
	}
	for k, v := range data {
		s.StringData[k] = v
	}
	return s
}

func TestSignsClusterInfoWithEachSigningToken(t *testing.T) {
	env := controllertest.Start(t)
	ctx := testCtx(t)
	secrets := client.For[*corev1.Secret](env.Client)
	cms := client.For[*corev1.ConfigMap](env.Client)
	const kubeconfig = "apiVersion: v1\nkind: Config\nclusters:\n- name: \"\"\n  cluster:\n    server: https://127.0.0.1:6443\n"
	if _, err := cms.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "cluster-info", Namespace: "kube-public"},
		Data:       map[string]string{"kubeconfig": kubeconfig},
	}); err != nil {
		t.Fatal(err)
	}
	misnamed := tokenSecret("yyyyyy", "2222222222222222", map[string]string{"usage-bootstrap-signing": "true"})
	misnamed.Name = "bootstrap-token-zzzzzz"
	for _, s := range []*corev1.Secret{
		tokenSecret("abcdef", "0123456789abcdef", map[string]string{"usage-bootstrap-signing": "true"}),
		tokenSecret("ghijkl", "fedcba9876543210", map[string]string{"usage-bootstrap-signing": "true"}),
		// Not for signing, expired, or malformed: no signature.
		tokenSecret("mnopqr", "0000000000000000", map[string]string{"usage-bootstrap-authentication": "true"}),
		tokenSecret("stuvwx", "1111111111111111", map[string]string{"usage-bootstrap-signing": "true", "expiration": "2000-01-01T00:00:00Z"}),
		misnamed,
	} {
		if _, err := secrets.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	c, err := New(Options{Common: controller.Common{Client: env.Client, Informers: env.Informers, Logger: controllertest.Logger(t)}})
	if err != nil {
		t.Fatal(err)
	}
	controllertest.Run(t, env.Informers, 1, c)

	sigs := func() map[string]string {
		cm, err := cms.Get(ctx, "kube-public", "cluster-info")
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for k, v := range cm.Data {
			if id, ok := strings.CutPrefix(k, "jws-kubeconfig-"); ok {
				out[id] = v
			}
		}
		return out
	}
	controllertest.Eventually(t, "cluster-info signed by abcdef and ghijkl", func() (bool, string) {
		s := sigs()
		return len(s) == 2 && s["abcdef"] != "" && s["ghijkl"] != "", "not yet"
	})
	s := sigs()
	verify(t, s["abcdef"], kubeconfig, "abcdef", "0123456789abcdef")
	verify(t, s["ghijkl"], kubeconfig, "ghijkl", "fedcba9876543210")

	// A token deleted takes its signature with it.
	if err := secrets.Delete(ctx, "kube-system", "bootstrap-token-ghijkl", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, "ghijkl's signature removed", func() (bool, string) {
		s := sigs()
		return len(s) == 1 && s["abcdef"] != "", "not yet"
	})
}
