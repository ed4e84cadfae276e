package nodeipam

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/controllers/internal/controller"
	"github.com/minictl/minictl/informer"
)

func mustSet(t *testing.T, cluster string, bits int) *cidrSet {
	t.Helper()
	s, err := newCIDRSet(netip.MustParsePrefix(cluster), bits)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestCIDRSetAllocatesEverySubnetOnce(t *testing.T) {
	s := mustSet(t, "10.244.0.0/16", 24)
	seen := map[netip.Prefix]bool{}
	for i := range 256 {
		p, err := s.allocateNext()
		if err != nil {
			t.Fatalf("allocation %d: %v", i, err)
		}
		if seen[p] || p.Bits() != 24 || !s.cluster.Contains(p.Addr()) || p != p.Masked() {
			t.Fatalf("allocation %d = %s (seen before: %v)", i, p, seen[p])
		}
		seen[p] = true
	}
	if first := netip.MustParsePrefix("10.244.0.0/24"); !seen[first] || !seen[netip.MustParsePrefix("10.244.255.0/24")] {
		t.Error("the first or last subnet was never given")
	}
	if _, err := s.allocateNext(); !errors.Is(err, errCIDRSetFull) {
		t.Fatalf("allocation 257: %v, want full", err)
	}
	if s.free() != 0 {
		t.Errorf("free = %d", s.free())
	}
	released := netip.MustParsePrefix("10.244.77.0/24")
	if err := s.release(released); err != nil {
		t.Fatal(err)
	}
	if p, err := s.allocateNext(); err != nil || p != released {
		t.Errorf("after a release got %s, %v; want %s", p, err, released)
	}
}

func TestCIDRSetGoesRoundBeforeReusing(t *testing.T) {
	s := mustSet(t, "10.0.0.0/22", 24) // 4 subnets
	a, _ := s.allocateNext()
	if a.String() != "10.0.0.0/24" {
		t.Fatalf("first = %s", a)
	}
	_ = s.release(a)
	for _, want := range []string{"10.0.1.0/24", "10.0.2.0/24", "10.0.3.0/24", "10.0.0.0/24"} {
		if p, err := s.allocateNext(); err != nil || p.String() != want {
			t.Fatalf("got %s, %v; want %s (a just-released range comes last)", p, err, want)
		}
	}
}

func TestCIDRSetOccupy(t *testing.T) {
	s := mustSet(t, "10.244.0.0/16", 24)
	for _, p := range []string{
		"10.244.0.0/24",   // exactly a subnet
		"10.244.4.0/23",   // larger: two subnets, 4 and 5
		"10.244.7.128/25", // smaller: the subnet it is in, 7
	} {
		if err := s.occupy(netip.MustParsePrefix(p)); err != nil {
			t.Fatalf("occupy %s: %v", p, err)
		}
	}
	if s.free() != 256-4 {
		t.Errorf("free = %d, want 252", s.free())
	}
	var got []string
	for range 5 {
		p, _ := s.allocateNext()
		got = append(got, p.String())
	}
	want := []string{"10.244.1.0/24", "10.244.2.0/24", "10.244.3.0/24", "10.244.6.0/24", "10.244.8.0/24"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("allocations %v, want %v", got, want)
		}
	}
	if err := s.occupy(netip.MustParsePrefix("10.244.1.0/24")); err != nil || s.free() != 256-9 {
		t.Errorf("occupying a taken subnet again: %v, free %d", err, s.free())
	}
	if err := s.release(netip.MustParsePrefix("10.244.4.0/23")); err != nil || s.free() != 256-7 {
		t.Errorf("release a /23: %v, free %d", err, s.free())
	}
	for _, p := range []string{"10.245.0.0/24", "192.168.0.0/16", "fd00::/64"} {
		if err := s.occupy(netip.MustParsePrefix(p)); err == nil {
			t.Errorf("occupy %s outside the cluster CIDR succeeded", p)
		}
	}
	if err := s.occupy(netip.MustParsePrefix("10.0.0.0/8")); err != nil || s.free() != 0 {
		t.Errorf("a prefix holding the cluster CIDR: %v, free %d", err, s.free())
	}
}

func TestCIDRSetIPv6(t *testing.T) {
	s := mustSet(t, "fd00:10:244::/56", 64)
	p, err := s.allocateNext()
	if err != nil || p.String() != "fd00:10:244::/64" {
		t.Fatalf("first = %s, %v", p, err)
	}
	p, _ = s.allocateNext()
	if p.String() != "fd00:10:244:1::/64" {
		t.Fatalf("second = %s", p)
	}
	if err := s.occupy(netip.MustParsePrefix("fd00:10:244:ff::/64")); err != nil || s.free() != 253 {
		t.Errorf("occupy the last: %v, free %d", err, s.free())
	}
}

func TestNewCIDRSetRejects(t *testing.T) {
	for _, tt := range []struct {
		cluster string
		bits    int
	}{
		{"10.244.0.0/16", 8},  // shorter than the cluster
		{"10.244.0.0/16", 33}, // longer than an address
		{"10.0.0.0/8", 25},    // 2^17 subnets
	} {
		if _, err := newCIDRSet(netip.MustParsePrefix(tt.cluster), tt.bits); err == nil {
			t.Errorf("newCIDRSet(%s, %d) succeeded", tt.cluster, tt.bits)
		}
	}
}

// The manager builds its controllers again on the same registry at each
// leadership term.
func TestNewAgainOnTheSameRegistry(t *testing.T) {
	rc, err := client.New(&client.Config{Server: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.WrapRegistererWith(prometheus.Labels{"controller": "nodeipam"}, prometheus.NewRegistry())
	for term := range 2 {
		c, err := New(Options{Common: controller.Common{Client: rc, Informers: informer.NewSharedInformerFactory(rc, informer.FactoryOptions{}), Metrics: reg}})
		if err != nil {
			t.Fatalf("term %d: %v", term, err)
		}
		c.queue.ShutDown() // as Run does when its term ends
	}
	if _, err := New(Options{Common: controller.Common{Client: rc, Informers: informer.NewSharedInformerFactory(rc, informer.FactoryOptions{})}, ClusterCIDR: "10.0.0.0/8", NodeCIDRMaskSize: 28}); err == nil {
		t.Error("New accepted 2^20 ranges")
	}
}
