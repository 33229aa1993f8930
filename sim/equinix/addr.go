package equinix

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"net/netip"
)

// pool hands out aligned blocks of addresses from a prefix, lowest first,
// and takes them back.
type pool struct {
	prefix netip.Prefix
	used   map[uint64]bool // offsets from the prefix's first address
}

func newPool(p netip.Prefix) *pool {
	return &pool{prefix: p.Masked(), used: map[uint64]bool{}}
}

// size is the number of addresses of the pool (saturated at 2^63).
func (p *pool) size() uint64 {
	host := p.prefix.Addr().BitLen() - p.prefix.Bits()
	if host >= 63 {
		return 1 << 63
	}
	return 1 << host
}

var errExhausted = errors.New("no free addresses")

// allocate reserves n addresses (a power of two), aligned on n.
func (p *pool) allocate(n int) (netip.Prefix, error) {
	if n < 1 || n&(n-1) != 0 {
		return netip.Prefix{}, fmt.Errorf("%d is not a power of two", n)
	}
	size := p.size()
	for off := uint64(0); off+uint64(n) <= size; off += uint64(n) {
		free := true
		for i := uint64(0); i < uint64(n); i++ {
			if p.used[off+i] {
				free = false
				break
			}
		}
		if !free {
			continue
		}
		for i := uint64(0); i < uint64(n); i++ {
			p.used[off+i] = true
		}
		bitsLen := p.prefix.Addr().BitLen() - bits.TrailingZeros(uint(n))
		return netip.PrefixFrom(addOffset(p.prefix.Addr(), off), bitsLen), nil
	}
	return netip.Prefix{}, errExhausted
}

// free gives a block back.
func (p *pool) free(b netip.Prefix) {
	if !b.IsValid() || !p.prefix.Contains(b.Addr()) {
		return
	}
	start := offsetOf(p.prefix.Addr(), b.Addr())
	n := uint64(1) << (b.Addr().BitLen() - b.Bits())
	for i := uint64(0); i < n; i++ {
		delete(p.used, start+i)
	}
}

// addOffset is a + off.
func addOffset(a netip.Addr, off uint64) netip.Addr {
	b := a.As16()
	lo, carry := bits.Add64(binary.BigEndian.Uint64(b[8:]), off, 0)
	binary.BigEndian.PutUint64(b[:8], binary.BigEndian.Uint64(b[:8])+carry)
	binary.BigEndian.PutUint64(b[8:], lo)
	r := netip.AddrFrom16(b)
	if a.Is4() {
		return r.Unmap()
	}
	return r
}

// offsetOf is b - a, for b in a's block (less than 2^64 apart).
func offsetOf(a, b netip.Addr) uint64 {
	x, y := a.As16(), b.As16()
	d, _ := bits.Sub64(binary.BigEndian.Uint64(y[8:]), binary.BigEndian.Uint64(x[8:]), 0)
	return d
}

// netmask is the dotted (IPv4) or colon (IPv6) form of p's mask.
func netmask(p netip.Prefix) string {
	n := p.Addr().BitLen()
	b := make([]byte, n/8)
	for i := 0; i < p.Bits(); i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a.String()
}
