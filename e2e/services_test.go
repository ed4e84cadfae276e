package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minictl/minictl/internal/minitest"
)

// TestServiceIPsSurviveACrash creates 500 Services from 32 clients and
// kills `minictl up` with SIGKILL in the middle of the storm, then starts
// it again on the same data dir while the clients retry. Every Service has
// a cluster IP of the default range that no other has, every IP has its
// IPAddress naming that Service, and every IPAddress belongs to a live
// Service that holds it: the crash neither leaked an address nor gave one
// twice. A NodePort another Service holds is then a 422 naming the field.
func TestServiceIPsSurviveACrash(t *testing.T) {
	const services, clients = 500, 32
	addr, dir := minitest.FreeAddr(t), t.TempDir()
	url := "http://" + addr
	p := startUp(t, addr, dir)
	p.WaitReady(t, url, 60*time.Second)

	var next, created atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for range clients {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= services {
					return
				}
				if err := createRetrying(url, fmt.Sprintf("svc-%03d", i), 120*time.Second); err != nil {
					errs <- err
					return
				}
				created.Add(1)
			}
		})
	}
	// Kill it a third of the way through, and start it again.
	for created.Load() < services/3 {
		time.Sleep(5 * time.Millisecond)
	}
	kill(t, p)
	t.Logf("killed after %d creates were acknowledged", created.Load())
	p = startUp(t, addr, dir)
	p.WaitReady(t, url, 60*time.Second)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	var svcs struct {
		Items []struct {
			Metadata struct{ Namespace, Name string }
			Spec     struct {
				ClusterIP  string   `json:"clusterIP"`
				ClusterIPs []string `json:"clusterIPs"`
			}
		}
	}
	getJSON(t, url+"/api/v1/services", &svcs)
	rng := netip.MustParsePrefix("10.96.0.0/12")
	holder := map[string]string{}
	for _, s := range svcs.Items {
		who := s.Metadata.Namespace + "/" + s.Metadata.Name
		ip, err := netip.ParseAddr(s.Spec.ClusterIP)
		if err != nil || !rng.Contains(ip) || len(s.Spec.ClusterIPs) != 1 || s.Spec.ClusterIPs[0] != s.Spec.ClusterIP {
			t.Errorf("%s: clusterIP %q clusterIPs %v, want one address of %s", who, s.Spec.ClusterIP, s.Spec.ClusterIPs, rng)
			continue
		}
		if other, dup := holder[ip.String()]; dup {
			t.Errorf("%s and %s both have %s", who, other, ip)
		}
		holder[ip.String()] = who
	}
	if len(svcs.Items) != services+1 { // and the kubernetes Service
		t.Errorf("%d Services, want %d", len(svcs.Items), services+1)
	}

	var ips struct {
		Items []struct {
			Metadata struct{ Name string }
			Spec     struct {
				ParentRef struct{ Resource, Namespace, Name string } `json:"parentRef"`
			}
		}
	}
	getJSON(t, url+"/apis/networking.k8s.io/v1/ipaddresses", &ips)
	have := map[string]bool{}
	for _, ip := range ips.Items {
		have[ip.Metadata.Name] = true
		ref := ip.Spec.ParentRef
		if who := holder[ip.Metadata.Name]; ref.Resource != "services" || who != ref.Namespace+"/"+ref.Name {
			t.Errorf("IPAddress %s names %s %s/%s, but %q holds the address", ip.Metadata.Name, ref.Resource, ref.Namespace, ref.Name, who)
		}
	}
	for ip, who := range holder {
		if !have[ip] {
			t.Errorf("%s holds %s without an IPAddress", who, ip)
		}
	}

	// A node port another Service holds is refused, naming the field.
	np := `{"apiVersion":"v1","kind":"Service","metadata":{"name":%q},"spec":{"type":"NodePort","ports":[{"port":80,"nodePort":30080}]}}`
	if code, body := post(t, url+"/api/v1/namespaces/default/services", fmt.Sprintf(np, "first")); code != http.StatusCreated {
		t.Fatalf("NodePort Service asking 30080: %d %s", code, body)
	}
	code, body := post(t, url+"/api/v1/namespaces/default/services", fmt.Sprintf(np, "second"))
	if code != http.StatusUnprocessableEntity || !strings.Contains(body, `spec.ports[0].nodePort: Invalid value: 30080: provided port is already allocated`) {
		t.Errorf("second Service asking 30080: %d %s", code, body)
	}
	kill(t, p)
}

// createRetrying creates a ClusterIP Service named name in default until
// the server answers 201, or 409 AlreadyExists for a create whose answer
// the crash lost.
func createRetrying(url, name string, timeout time.Duration) error {
	body := fmt.Sprintf(`{"apiVersion":"v1","kind":"Service","metadata":{"name":%q},"spec":{"selector":{"app":%q},"ports":[{"port":80}]}}`, name, name)
	deadline := time.Now().Add(timeout)
	for {
		resp, err := http.Post(url+"/api/v1/namespaces/default/services", "application/json", strings.NewReader(body))
		if err == nil {
			var buf bytes.Buffer
			buf.ReadFrom(resp.Body)
			resp.Body.Close()
			switch resp.StatusCode {
			case http.StatusCreated, http.StatusConflict:
				return nil
			case http.StatusUnprocessableEntity, http.StatusBadRequest:
				return fmt.Errorf("create %s: %d %s", name, resp.StatusCode, buf.String())
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("create %s: not created within %s (last error %v)", name, timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", url, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

func post(t *testing.T, url, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	buf.ReadFrom(resp.Body)
	return resp.StatusCode, buf.String()
}

// TestServiceIPsOfTwoAPIServers: two `minictl apiserver`s of one cluster,
// each given half of 150 concurrent Service creates in a range of 254
// addresses, never hand out the same address, and every address has its
// one IPAddress.
func TestServiceIPsOfTwoAPIServers(t *testing.T) {
	const services, clients = 150, 16
	members := startEtcdCluster(t)
	var endpoints []string
	for _, m := range members {
		endpoints = append(endpoints, m.clientURL)
	}
	var urls []string
	for range 2 {
		addr := minitest.FreeAddr(t)
		p := minitest.Start(t, false, "apiserver", "--listen", addr, "--etcd-endpoints", strings.Join(endpoints, ","),
			"--service-cluster-ip-range", "10.97.0.0/24")
		p.WaitReady(t, "http://"+addr, 60*time.Second)
		urls = append(urls, "http://"+addr)
	}

	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 2*clients)
	for c := range 2 * clients {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= services {
					return
				}
				if err := createRetrying(urls[c%2], fmt.Sprintf("svc-%03d", i), 60*time.Second); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	var svcs struct {
		Items []struct {
			Metadata struct{ Name string }
			Spec     struct {
				ClusterIP string `json:"clusterIP"`
			}
		}
	}
	getJSON(t, urls[0]+"/api/v1/namespaces/default/services", &svcs)
	holder := map[string]string{}
	for _, s := range svcs.Items {
		if other, dup := holder[s.Spec.ClusterIP]; dup || s.Spec.ClusterIP == "" {
			t.Errorf("%s has %q, as %q has", s.Metadata.Name, s.Spec.ClusterIP, other)
		}
		holder[s.Spec.ClusterIP] = s.Metadata.Name
	}
	var ips struct {
		Items []struct {
			Metadata struct{ Name string }
			Spec     struct {
				ParentRef struct{ Name string } `json:"parentRef"`
			}
		}
	}
	getJSON(t, urls[1]+"/apis/networking.k8s.io/v1/ipaddresses", &ips)
	if len(ips.Items) != len(holder) || len(holder) != services+1 {
		t.Errorf("%d IPAddresses for %d addresses of %d Services, want %d of each", len(ips.Items), len(holder), len(svcs.Items), services+1)
	}
	for _, ip := range ips.Items {
		if holder[ip.Metadata.Name] != ip.Spec.ParentRef.Name {
			t.Errorf("IPAddress %s names %s, but %q holds it", ip.Metadata.Name, ip.Spec.ParentRef.Name, holder[ip.Metadata.Name])
		}
	}
}
