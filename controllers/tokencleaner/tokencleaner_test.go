package tokencleaner

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/clock"
	"github.com/minictl/minictl/controllers/internal/controller"
	"github.com/minictl/minictl/controllers/internal/controllertest"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestDeletesExpiredBootstrapTokens(t *testing.T) {
	env := controllertest.Start(t)
	ctx := testCtx(t)
	secrets := client.For[*corev1.Secret](env.Client)
	now := time.Now().Truncate(time.Second)
	clk := clock.NewFake(now)
	token := func(id, expiration string) {
		t.Helper()
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "bootstrap-token-" + id, Namespace: "kube-system"},
			Type:       "bootstrap.kubernetes.io/token",
			StringData: map[string]string{"token-id": id, "token-secret": "0123456789abcdef"},
		}
		if expiration != "" {
			s.StringData["expiration"] = expiration
		}
		if _, err := secrets.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	token("past00", now.Add(-time.Minute).Format(time.RFC3339))
	token("soon00", now.Add(time.Hour).Format(time.RFC3339))
	token("never0", "")
	token("garble", "next tuesday")
	// An ordinary Secret with an expiration key is no token.
	if _, err := secrets.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: "kube-system"},
		StringData: map[string]string{"expiration": "2000-01-01T00:00:00Z"},
	}); err != nil {
		t.Fatal(err)
	}

	c, err := New(Options{Common: controller.Common{Client: env.Client, Informers: env.Informers, Logger: controllertest.Logger(t), Clock: clk}})
	if err != nil {
		t.Fatal(err)
	}
	controllertest.Run(t, env.Informers, 1, c)
	names := func() []string {
		l, err := secrets.List(ctx, "kube-system", metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, s := range l.Items {
			out = append(out, s.Name)
		}
		slices.Sort(out)
		return out
	}
	want := []string{"bootstrap-token-never0", "bootstrap-token-soon00", "other"}
	controllertest.Eventually(t, "the expired and unreadable tokens deleted", func() (bool, string) {
		got := names()
		return slices.Equal(got, want), "have " + fmtList(got)
	})
	// soon00 is looked at again when it expires.
	controllertest.Eventually(t, "a wait for soon00's expiry", func() (bool, string) {
		return len(clk.Waiters()) > 0, "none"
	})
	clk.Step(time.Hour)
	want = []string{"bootstrap-token-never0", "other"}
	controllertest.Eventually(t, "soon00 deleted at its expiry", func() (bool, string) {
		got := names()
		return slices.Equal(got, want), "have " + fmtList(got)
	})
}

func fmtList(l []string) string {
	out := ""
	for _, s := range l {
		out += s + " "
	}
	return out
}
