package rootcacertpublisher_test

import (
	"fmt"
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/controllers/internal/controller"
	"github.com/minictl/minictl/controllers/internal/controllertest"
	"github.com/minictl/minictl/controllers/rootcacertpublisher"
)

const rootCA = "-----BEGIN CERTIFICATE-----\nthe cluster's CA\n-----END CERTIFICATE-----\n"

func TestRootCAIsPublishedInEveryNamespace(t *testing.T) {
	env := controllertest.Start(t)
	c, err := rootcacertpublisher.New(rootcacertpublisher.Options{
		Common: controller.Common{Client: env.Client, Informers: env.Informers, Logger: controllertest.Logger(t)},
		RootCA: []byte(rootCA),
	})
	if err != nil {
		t.Fatal(err)
	}
	controllertest.Run(t, env.Informers, 1, c)
	ctx := t.Context()
	cms := client.For[*corev1.ConfigMap](env.Client)
	published := func(ns string) func() (bool, string) {
		return func() (bool, string) {
			cm, err := cms.Get(ctx, ns, "kube-root-ca.crt")
			if err != nil {
				return false, err.Error()
			}
			return maps.Equal(cm.Data, map[string]string{"ca.crt": rootCA}) &&
				cm.Annotations["kubernetes.io/description"] == rootcacertpublisher.Description, fmt.Sprintf("%+v", cm.Data)
		}
	}
	for _, ns := range []string{"default", "kube-system", "kube-public", "kube-node-lease"} {
		controllertest.Eventually(t, ns+"/kube-root-ca.crt", published(ns))
	}
	if _, err := client.For[*corev1.Namespace](env.Client).Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}}); err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, "team/kube-root-ca.crt", published("team"))

	cm, err := cms.Get(ctx, "team", "kube-root-ca.crt")
	if err != nil {
		t.Fatal(err)
	}
	cm.Data = map[string]string{"ca.crt": "forged", "extra": "x"}
	if _, err := cms.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, "a changed kube-root-ca.crt put back", published("team"))

	first, _ := cms.Get(ctx, "team", "kube-root-ca.crt")
	if err := cms.Delete(ctx, "team", "kube-root-ca.crt", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, "a deleted kube-root-ca.crt recreated", func() (bool, string) {
		cm, err := cms.Get(ctx, "team", "kube-root-ca.crt")
		if err != nil {
			return false, err.Error()
		}
		return cm.UID != first.UID, "still the first"
	})
}
