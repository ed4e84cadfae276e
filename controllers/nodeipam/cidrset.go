package nodeipam

import (
	"errors"
	"fmt"
	"net/netip"
)

// maxSubnetBits bounds how many subnets a cluster CIDR is cut into: 2^16,
// as upstream's cidrset does (a /8 into /24s would be 65536 already).
const maxSubnetBits = 16

// errCIDRSetFull: every subnet is taken.
var errCIDRSetFull = errors.New("no free CIDR left")

// cidrSet hands out the subnets of one cluster CIDR, each of the same
// size: a bitmap with one bit per subnet, set while the subnet is in use.
//
// Properties:
//
//   - allocateNext never hands out a subnet whose bit is set, and sets it.
//   - It goes round the range from where it last stopped, so that a subnet
//     just released is the last to be handed out again (a node's old pod
//     IPs may linger in routes and caches for a while).
//   - occupy marks what is in use already, whatever its size: a larger
//     prefix takes every subnet inside it, a smaller one the subnet it is
//     in. release undoes it the same way.
//
// It is not safe for concurrent use.
type cidrSet struct {
	cluster    netip.Prefix
	subnetBits int // prefix length of each subnet
	count      int // number of subnets: 2^(subnetBits - cluster.Bits())
	used       []uint64
	inUse      int
	next       int // where the next allocation starts looking
}

// newCIDRSet cuts cluster into subnets of prefix length subnetBits.
func newCIDRSet(cluster netip.Prefix, subnetBits int) (*cidrSet, error) {
	if !cluster.IsValid() {
		return nil, fmt.Errorf("invalid cluster CIDR %v", cluster)
	}
	cluster = cluster.Masked()
	switch diff := subnetBits - cluster.Bits(); {
	case subnetBits > cluster.Addr().BitLen():
		return nil, fmt.Errorf("node CIDR mask size %d is longer than an address of %s", subnetBits, cluster)
	case diff < 0:
		return nil, fmt.Errorf("node CIDR mask size %d is shorter than the cluster CIDR %s", subnetBits, cluster)
	case diff > maxSubnetBits:
		return nil, fmt.Errorf("node CIDR mask size %d cuts %s into more than 2^%d subnets", subnetBits, cluster, maxSubnetBits)
	}
	count := 1 << (subnetBits - cluster.Bits())
	return &cidrSet{
		cluster:    cluster,
		subnetBits: subnetBits,
		count:      count,
		used:       make([]uint64, (count+63)/64),
	}, nil
}

// allocateNext takes the next free subnet.
func (s *cidrSet) allocateNext() (netip.Prefix, error) {
	for n := range s.count {
		i := (s.next + n) % s.count
		if !s.isSet(i) {
			s.set(i)
			s.next = (i + 1) % s.count
			return s.subnet(i), nil
		}
	}
	return netip.Prefix{}, fmt.Errorf("%w in %s (/%d each)", errCIDRSetFull, s.cluster, s.subnetBits)
}

// occupy marks the subnets p covers as in use.
func (s *cidrSet) occupy(p netip.Prefix) error {
	first, last, err := s.indexRange(p)
	if err != nil {
		return err
	}
	for i := first; i <= last; i++ {
		if !s.isSet(i) {
			s.set(i)
		}
	}
	return nil
}

// release marks the subnets p covers as free.
func (s *cidrSet) release(p netip.Prefix) error {
	first, last, err := s.indexRange(p)
	if err != nil {
		return err
	}
	for i := first; i <= last; i++ {
		if s.isSet(i) {
			s.clear(i)
		}
	}
	return nil
}

// contains reports whether p lies in the cluster CIDR.
func (s *cidrSet) contains(p netip.Prefix) bool {
	return p.IsValid() && p.Addr().BitLen() == s.cluster.Addr().BitLen() && s.cluster.Overlaps(p)
}

// free returns how many subnets are free.
func (s *cidrSet) free() int { return s.count - s.inUse }

// indexRange returns the indexes of the first and last subnets p covers.
func (s *cidrSet) indexRange(p netip.Prefix) (first, last int, err error) {
	if !s.contains(p) {
		return 0, 0, fmt.Errorf("%s is not in the cluster CIDR %s", p, s.cluster)
	}
	p = p.Masked()
	if p.Bits() <= s.cluster.Bits() {
		return 0, s.count - 1, nil // p holds the whole cluster CIDR
	}
	first = int(addrBits(p.Addr(), s.cluster.Bits(), min(p.Bits(), s.subnetBits)-s.cluster.Bits()))
	if p.Bits() >= s.subnetBits {
		return first, first, nil
	}
	span := 1 << (s.subnetBits - p.Bits())
	first <<= s.subnetBits - p.Bits()
	return first, first + span - 1, nil
}

// subnet returns subnet number i.
func (s *cidrSet) subnet(i int) netip.Prefix {
	addr := withBits(s.cluster.Addr(), s.cluster.Bits(), s.subnetBits-s.cluster.Bits(), uint64(i))
	return netip.PrefixFrom(addr, s.subnetBits)
}

func (s *cidrSet) isSet(i int) bool { return s.used[i/64]&(1<<(i%64)) != 0 }
func (s *cidrSet) set(i int)        { s.used[i/64] |= 1 << (i % 64); s.inUse++ }
func (s *cidrSet) clear(i int)      { s.used[i/64] &^= 1 << (i % 64); s.inUse-- }

// addrBits reads n (≤ 64) bits of addr starting at bit from (0 is the most
// significant).
func addrBits(addr netip.Addr, from, n int) uint64 {
	b := addr.AsSlice()
	var v uint64
	for k := from; k < from+n; k++ {
		bit := (b[k/8] >> (7 - k%8)) & 1
		v = v<<1 | uint64(bit)
	}
	return v
}

// withBits returns addr with the n (≤ 64) bits starting at bit from set to
// the low bits of v.
func withBits(addr netip.Addr, from, n int, v uint64) netip.Addr {
	b := addr.AsSlice()
	for k := from + n - 1; k >= from; k-- {
		mask := byte(1) << (7 - k%8)
		if v&1 == 1 {
			b[k/8] |= mask
		} else {
			b[k/8] &^= mask
		}
		v >>= 1
	}
	out, _ := netip.AddrFromSlice(b)
	return out
}
