package serviceaccounttoken_test

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sa "github.com/minictl/minictl/auth/serviceaccount"
	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/controllers/internal/controller"
	"github.com/minictl/minictl/controllers/internal/controllertest"
	"github.com/minictl/minictl/controllers/serviceaccounttoken"
)

const rootCA = "-----BEGIN CERTIFICATE-----\nnot really a CA, but what the file holds\n-----END CERTIFICATE-----\n"

type fixture struct {
	secrets  *client.Client[*corev1.Secret]
	accounts *client.Client[*corev1.ServiceAccount]
	key      crypto.PublicKey
}

func start(t *testing.T) *fixture {
	t.Helper()
	env := controllertest.Start(t)
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := sa.NewSigner(key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := serviceaccounttoken.New(serviceaccounttoken.Options{
		Common: controller.Common{Client: env.Client, Informers: env.Informers, Logger: controllertest.Logger(t)},
		Signer: signer, RootCA: []byte(rootCA),
	})
	if err != nil {
		t.Fatal(err)
	}
	controllertest.Run(t, env.Informers, 1, c)
	return &fixture{secrets: client.For[*corev1.Secret](env.Client), accounts: client.For[*corev1.ServiceAccount](env.Client), key: key.Public()}
}

func tokenSecret(name, account string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Annotations: map[string]string{corev1.ServiceAccountNameKey: account}},
		Type:       corev1.SecretTypeServiceAccountToken,
	}
}

func TestTokenSecretIsFilled(t *testing.T) {
	f := start(t)
	ctx := t.Context()
	acct, err := f.accounts.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "robot"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.secrets.Create(ctx, tokenSecret("robot-token", "robot")); err != nil {
		t.Fatal(err)
	}
	var s *corev1.Secret
	controllertest.Eventually(t, "the token Secret filled", func() (bool, string) {
		s, err = f.secrets.Get(ctx, "default", "robot-token")
		if err != nil {
			return false, err.Error()
		}
		return len(s.Data[corev1.ServiceAccountTokenKey]) > 0, fmt.Sprintf("data keys %v", len(s.Data))
	})
	if string(s.Data[corev1.ServiceAccountRootCAKey]) != rootCA || string(s.Data[corev1.ServiceAccountNamespaceKey]) != "default" ||
		s.Annotations[corev1.ServiceAccountUIDKey] != string(acct.UID) {
		t.Errorf("ca.crt %q, namespace %q, uid annotation %q", s.Data["ca.crt"], s.Data["namespace"], s.Annotations[corev1.ServiceAccountUIDKey])
	}
	claims, err := sa.VerifyLegacy(string(s.Data[corev1.ServiceAccountTokenKey]), []crypto.PublicKey{f.key})
	if err != nil {
		t.Fatalf("the token does not verify: %v", err)
	}
	if claims.SecretName != "robot-token" || claims.ServiceAccountName != "robot" || claims.ServiceAccountUID != string(acct.UID) || claims.Namespace != "default" {
		t.Errorf("claims %+v", claims)
	}

	// A changed ca.crt is put back; the token stays.
	s.Data[corev1.ServiceAccountRootCAKey] = []byte("stale")
	tok := string(s.Data[corev1.ServiceAccountTokenKey])
	if _, err := f.secrets.Update(ctx, s); err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, "ca.crt restored", func() (bool, string) {
		s, err := f.secrets.Get(ctx, "default", "robot-token")
		if err != nil {
			return false, err.Error()
		}
		return string(s.Data[corev1.ServiceAccountRootCAKey]) == rootCA && string(s.Data[corev1.ServiceAccountTokenKey]) == tok, string(s.Data["ca.crt"])
	})

	// The ServiceAccount goes: so does its token Secret.
	if err := f.accounts.Delete(ctx, "default", "robot", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, "the token Secret deleted with its ServiceAccount", func() (bool, string) {
		_, err := f.secrets.Get(ctx, "default", "robot-token")
		return client.IsNotFound(err), fmt.Sprint(err)
	})
}

func TestTokenSecretOfNoServiceAccountIsDeleted(t *testing.T) {
	f := start(t)
	ctx := t.Context()
	if _, err := f.secrets.Create(ctx, tokenSecret("ghost-token", "ghost")); err != nil {
		t.Fatal(err)
	}
	// A Secret of another type, naming the same ServiceAccount, is not
	// the controller's.
	other := tokenSecret("opaque", "ghost")
	other.Type = corev1.SecretTypeOpaque
	if _, err := f.secrets.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, "the orphan token Secret deleted", func() (bool, string) {
		_, err := f.secrets.Get(ctx, "default", "ghost-token")
		return client.IsNotFound(err), fmt.Sprint(err)
	})
	if _, err := f.secrets.Get(ctx, "default", "opaque"); err != nil {
		t.Errorf("the Opaque Secret: %v", err)
	}
}
