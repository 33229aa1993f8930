package equinix

import (
	"net/netip"
	"testing"

	. "github.com/onsi/gomega"
)

func TestPool(t *testing.T) {
	g := NewWithT(t)
	p := newPool(netip.MustParsePrefix("127.66.0.0/16"))
	a, err := p.allocate(2)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(a.String()).To(Equal("127.66.0.0/31"))
	b, _ := p.allocate(4)
	g.Expect(b.String()).To(Equal("127.66.0.4/30"), "aligned on its size")
	c, _ := p.allocate(1)
	g.Expect(c.String()).To(Equal("127.66.0.2/32"), "the lowest free")
	p.free(a)
	d, _ := p.allocate(2)
	g.Expect(d).To(Equal(a), "given back, handed out again")
	_, err = p.allocate(3)
	g.Expect(err).To(HaveOccurred())
	g.Expect(netmask(b)).To(Equal("255.255.255.252"))

	small := newPool(netip.MustParsePrefix("127.67.0.0/31"))
	_, err = small.allocate(2)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = small.allocate(1)
	g.Expect(err).To(MatchError(errExhausted))

	v6 := newPool(netip.MustParsePrefix("fd6d:6574:616c::/48"))
	e, _ := v6.allocate(2)
	f, _ := v6.allocate(2)
	g.Expect(e.String()).To(Equal("fd6d:6574:616c::/127"))
	g.Expect(f.String()).To(Equal("fd6d:6574:616c::2/127"))
	g.Expect(addOffset(netip.MustParseAddr("127.64.0.255"), 1).String()).To(Equal("127.64.1.0"))
	g.Expect(offsetOf(netip.MustParseAddr("127.64.0.0"), netip.MustParseAddr("127.64.1.3"))).To(Equal(uint64(259)))
}
