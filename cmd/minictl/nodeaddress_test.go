package main

import "testing"

// TestNodeAddressesAreOwn: the first nodes keep the addresses the kubelet
// itself would choose, and the nodes of a 5,000-node cluster never share
// one (they did past node 255, when the address wrapped around).
func TestNodeAddressesAreOwn(t *testing.T) {
	for i, want := range map[int]string{1: "127.0.1.1", 255: "127.0.1.255", 256: "127.0.2.0", 5000: "127.0.20.136"} {
		if got := nodeAddress(i); got != want {
			t.Errorf("nodeAddress(%d) = %s, want %s", i, got, want)
		}
	}
	seen := map[string]int{}
	for i := 1; i <= 5000; i++ {
		a := nodeAddress(i)
		if j, ok := seen[a]; ok {
			t.Fatalf("nodes %d and %d share address %s", j, i, a)
		}
		seen[a] = i
	}
}
