package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"time"

	"github.com/minictl/minictl/auth/pki"
	"github.com/minictl/minictl/client"
)

// The secure create scenario: the create scenario's pods, created
// alternately through the plain loopback listener (the admin, as behind
// kubectl proxy) and through the secure port by an ordinary user with a
// client certificate, whom RBAC allows through a RoleBinding to edit
// among otherBindings others (plain, secure, secure, plain; 32 clients).
// What the secure port adds, TLS, authentication and authorization, is
// the difference of the two rates in one run.

const otherBindings = 1000

func (h *harness) runSecureCreate(ctx context.Context, rep int) error {
	n, clients := h.cfg.createPods, 32
	c, err := h.startCluster(ctx, clusterOptions{Profiling: h.profiling()})
	if err != nil {
		return err
	}
	defer c.stop()
	const ns = "bench"
	if err := createNamespace(ctx, c, ns); err != nil {
		return err
	}
	rbac := c.URL + "/apis/rbac.authorization.k8s.io/v1/namespaces/" + ns + "/rolebindings"
	bindings := make([][]byte, otherBindings)
	for i := range bindings {
		bindings[i] = roleBindingJSON(fmt.Sprintf("other-%04d", i), fmt.Sprintf("user-%04d", i), "view")
	}
	if _, err := createAt(ctx, rbac, bindings, clients); err != nil {
		return err
	}
	if _, err := expect(ctx, http.StatusCreated, http.MethodPost, rbac, "application/json", roleBindingJSON("bench-user", "bench-user", "edit")); err != nil {
		return err
	}
	secureURL, hc, err := benchUserClient(c, "bench-user")
	if err != nil {
		return err
	}
	defer hc.CloseIdleConnections()

	half := n / 2
	bodies := [][][]byte{
		podBodies(ns, "plain-a-%05d", unscheduled, half), podBodies(ns, "secure-a-%05d", unscheduled, half),
		podBodies(ns, "secure-b-%05d", unscheduled, half), podBodies(ns, "plain-b-%05d", unscheduled, half),
	}
	prof := h.cpuProfile(ctx, c, rep, "securecreate", max(2, n/2500))
	var plainTime, secureTime time.Duration
	var plainLat, secureLat []time.Duration
	for i, secure := range []bool{false, true, true, false} {
		url, client := podsURL(c, ns), httpClient
		if secure {
			url, client = secureURL+"/api/v1/namespaces/"+ns+"/pods", hc
		}
		start := time.Now()
		lat, err := createAtWith(ctx, client, url, bodies[i], clients)
		if err != nil {
			return fmt.Errorf("step %d: %w", i+1, err)
		}
		if secure {
			secureTime += time.Since(start)
			secureLat = append(secureLat, lat...)
		} else {
			plainTime += time.Since(start)
			plainLat = append(plainLat, lat...)
		}
	}
	prof.wait()
	slices.Sort(plainLat)
	slices.Sort(secureLat)
	plainRate := float64(2*half) / plainTime.Seconds()
	secureRate := float64(2*half) / secureTime.Seconds()
	h.res.add("securecreate", "pods created, plain listener", "pods/s", plainRate)
	h.res.add("securecreate", "pods created, secure port", "pods/s", secureRate)
	h.res.add("securecreate", "secure / plain", "%", 100*secureRate/plainRate)
	h.res.addDuration("securecreate", "secure create p50", percentile(secureLat, 50))
	h.res.addDuration("securecreate", "secure create p99", percentile(secureLat, 99))
	h.res.addDuration("securecreate", "plain create p99", percentile(plainLat, 99))
	return nil
}

// roleBindingJSON binds user to the ClusterRole role in the binding's
// namespace.
func roleBindingJSON(name, user, role string) []byte {
	data, err := json.Marshal(map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
		"metadata": map[string]any{"name": name},
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
		"subjects": []any{map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}},
	})
	if err != nil {
		panic(err) // maps of strings always encode
	}
	return data
}

// benchUserClient is an HTTPS client of the cluster's secure port with a
// client certificate for user, issued by the CA in the cluster's data
// dir, and the secure port's URL from the admin kubeconfig up wrote.
func benchUserClient(c *cluster, user string) (string, *http.Client, error) {
	kc, err := client.LoadKubeconfig(filepath.Join(c.DataDir, "kubeconfig"), "")
	if err != nil {
		return "", nil, err
	}
	ca, err := pki.LoadCA(filepath.Join(c.DataDir, "pki", "ca.crt"), filepath.Join(c.DataDir, "pki", "ca.key"))
	if err != nil {
		return "", nil, err
	}
	certPEM, keyPEM, err := ca.Issue(pki.CertRequest{CommonName: user})
	if err != nil {
		return "", nil, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return "", nil, err
	}
	tr := httpClient.Transport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{cert}}
	return kc.Server, &http.Client{Transport: tr}, nil
}
