package kubelet

import (
	"fmt"
	"net/netip"
)

// ipAllocator hands out pod IPs from a node's pod CIDR, the way the
// host-local IPAM plugin of a real node does: never an address in use, and
// round the range from the last one given, so that an address just freed
// is the last to be given again. The network address, the gateway (the
// first host) and the broadcast address are never given.
//
// It remembers only the last address given; which addresses are in use is
// the caller's to say. It is not safe for concurrent use.
type ipAllocator struct {
	last netip.Addr
}

// maxScanBits bounds how many addresses one allocation looks at (2^16),
// for very large (IPv6) ranges.
const maxScanBits = 16

func (a *ipAllocator) allocate(cidr string, inUse func(netip.Addr) bool) (netip.Addr, error) {
	prefix, err := netip.ParsePrefix(cidr)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("pod CIDR %q: %w", cidr, err)
	}
	prefix = prefix.Masked()
	first := prefix.Addr().Next().Next()
	usable := func(ip netip.Addr) bool {
		return ip.IsValid() && prefix.Contains(ip) && prefix.Contains(ip.Next())
	}
	if !usable(first) {
		return netip.Addr{}, fmt.Errorf("pod CIDR %s has no address for pods", prefix)
	}
	ip := a.last.Next()
	if !usable(ip) || ip.Less(first) {
		ip = first
	}
	for range 1 << min(prefix.Addr().BitLen()-prefix.Bits(), maxScanBits) {
		if !inUse(ip) {
			a.last = ip
			return ip, nil
		}
		if ip = ip.Next(); !usable(ip) {
			ip = first
		}
	}
	return netip.Addr{}, fmt.Errorf("pod CIDR %s is full", prefix)
}
