package minitest

import (
	"net"
	"strconv"
	"testing"
)

// FreeAddr's ports lie below the kernel's ephemeral range, where no
// connection of another test can take them, and can be listened on.
func TestFreeAddrBelowTheEphemeralRange(t *testing.T) {
	low := ephemeralLow()
	if low <= minFreePort+1000 {
		t.Skipf("the ephemeral range starts at %d: no room below it", low)
	}
	seen := map[string]bool{}
	for range 20 {
		addr := FreeAddr(t)
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.Atoi(port)
		if host != "127.0.0.1" || n < minFreePort || n >= low {
			t.Fatalf("FreeAddr = %s, want 127.0.0.1 and a port in [%d, %d)", addr, minFreePort, low)
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("listen on %s: %v", addr, err)
		}
		ln.Close()
		seen[addr] = true
	}
	if len(seen) < 2 {
		t.Errorf("20 calls gave %d address: picked at random, they should differ", len(seen))
	}
}
