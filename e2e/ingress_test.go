package e2e

import (
	"context"
	"fmt"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/cloud/sim"
	"github.com/minictl/minictl/internal/minitest"
)

// TestIngressGetsALoadBalancer: `minictl up` runs the simulated ingress
// controller as its own user, which creates the default class "sim"; an
// Ingress that names no class is given it by admission, gets an address
// from a load balancer of the cloud in the banner, and takes the load
// balancer with it when deleted.
func TestIngressGetsALoadBalancer(t *testing.T) {
	addr := minitest.FreeAddr(t)
	c := up(t, addr, t.TempDir(), "--nodes", "1", "--fast")
	var url string
	eventually(t, "the cloud's URL in the banner", func() (bool, string) {
		m := cloudLine.FindStringSubmatch(c.Stdout.String())
		if m != nil {
			url = m[1]
		}
		return m != nil, c.Stdout.String()
	})
	cl, err := sim.NewClient(url, sim.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rc := c.client(t)
	classes := client.For[*networkingv1.IngressClass](rc)
	ingresses := client.For[*networkingv1.Ingress](rc)
	eventually(t, "the IngressClass sim", func() (bool, string) {
		ic, err := classes.Get(ctx, "", "sim")
		if err != nil {
			return false, err.Error()
		}
		return ic.Spec.Controller == "sim.minictl.io/ingress", ic.Spec.Controller
	})

	prefix := networkingv1.PathTypePrefix
	var ing *networkingv1.Ingress
	eventually(t, "an Ingress created with the default class", func() (bool, string) {
		created, err := ingresses.Create(ctx, &networkingv1.Ingress{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "web-", Namespace: "default"},
			Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{Host: "web.example.com",
				IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
					Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: &prefix, Backend: networkingv1.IngressBackend{
						Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}},
					}}},
				}}}}},
		})
		if err != nil {
			return false, err.Error()
		}
		if created.Spec.IngressClassName == nil || *created.Spec.IngressClassName != "sim" {
			_ = ingresses.Delete(ctx, "default", created.Name, metav1.DeleteOptions{})
			return false, fmt.Sprintf("class %v", created.Spec.IngressClassName)
		}
		ing = created
		return true, ""
	})
	var ip string
	eventually(t, "the Ingress's address", func() (bool, string) {
		cur, err := ingresses.Get(ctx, "default", ing.Name)
		if err != nil {
			return false, err.Error()
		}
		if lb := cur.Status.LoadBalancer.Ingress; len(lb) == 1 {
			ip = lb[0].IP
		}
		return ip != "", fmt.Sprintf("%+v", cur.Status)
	})
	lbs, err := cl.ListLoadBalancers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, lb := range lbs {
		found = found || (lb.IP == ip && lb.Tags[sim.TagIngress] == "default/"+ing.Name)
	}
	if !found {
		t.Fatalf("GET /v1/loadbalancers: %+v, want one at %s tagged default/%s", lbs, ip, ing.Name)
	}

	if err := ingresses.Delete(ctx, "default", ing.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the Ingress and its load balancer gone", func() (bool, string) {
		_, err := ingresses.Get(ctx, "default", ing.Name)
		lbs, lerr := cl.ListLoadBalancers(ctx)
		for _, lb := range lbs {
			if lb.Tags[sim.TagIngress] == "default/"+ing.Name {
				return false, "load balancer " + lb.Name + " still there"
			}
		}
		return apierrors.IsNotFound(err) && lerr == nil, fmt.Sprint(err, lerr)
	})
}
