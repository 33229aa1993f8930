package egress

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestCheck(t *testing.T) {
	lab := Policy{AllowLoopback: true}
	linkLocal := Policy{Allowed: []netip.Prefix{netip.MustParsePrefix("169.254.10.0/24"), netip.MustParsePrefix("fe80::/64")}}
	tests := []struct {
		name   string
		policy Policy
		addr   string
		class  string // "" means allowed
	}{
		{name: "a BMC network", addr: "10.0.0.5"},
		{name: "IPv6 unique local", addr: "fd00::5"},
		{name: "public", addr: "192.0.2.9"},
		{name: "loopback", addr: "127.0.0.1", class: "loopback"},
		{name: "loopback, anywhere in 127/8", addr: "127.9.8.7", class: "loopback"},
		{name: "IPv6 loopback", addr: "::1", class: "loopback"},
		{name: "IPv4-mapped loopback", addr: "::ffff:127.0.0.1", class: "loopback"},
		{name: "loopback in a lab", policy: lab, addr: "127.0.0.1"},
		{name: "IPv6 loopback in a lab", policy: lab, addr: "::1"},
		{name: "cloud metadata", addr: "169.254.169.254", class: "cloud metadata"},
		{name: "cloud metadata in a lab", policy: lab, addr: "169.254.169.254", class: "cloud metadata"},
		{name: "IPv4-mapped cloud metadata", addr: "::ffff:169.254.169.254", class: "cloud metadata"},
		{name: "AWS IPv6 metadata", addr: "fd00:ec2::254", class: "cloud metadata"},
		{name: "link-local", addr: "169.254.1.1", class: "link-local"},
		{name: "IPv6 link-local", addr: "fe80::1", class: "link-local"},
		{name: "IPv6 link-local with a zone", addr: "fe80::1%eth0", class: "link-local"},
		{name: "unspecified", addr: "0.0.0.0", class: "unspecified"},
		{name: "this network", addr: "0.1.2.3", class: "unspecified"},
		{name: "IPv6 unspecified", addr: "::", class: "unspecified"},
		{name: "multicast", addr: "224.0.0.1", class: "multicast"},
		{name: "IPv6 multicast", addr: "ff02::1", class: "multicast"},
		{name: "broadcast", addr: "255.255.255.255", class: "broadcast"},
		{name: "an allowed link-local network", policy: linkLocal, addr: "169.254.10.7"},
		{name: "outside the allowed network", policy: linkLocal, addr: "169.254.11.7", class: "link-local"},
		{name: "metadata outside the allowed network", policy: linkLocal, addr: "169.254.169.254", class: "cloud metadata"},
		{name: "an allowed IPv6 link-local network", policy: linkLocal, addr: "fe80::7%eth1"},
		{name: "loopback is not link-local", policy: linkLocal, addr: "127.0.0.1", class: "loopback"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			err := tt.policy.Check(netip.MustParseAddr(tt.addr))
			if tt.class == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(errors.Is(err, ErrRefused)).To(BeTrue(), "got %v", err)
			var re *RefusedError
			g.Expect(errors.As(err, &re)).To(BeTrue())
			g.Expect(re.Class).To(Equal(tt.class))
			g.Expect(err.Error()).To(ContainSubstring("BMC egress policy"))
			g.Expect(err.Error()).To(ContainSubstring("--bmc-allowed-networks"), "the message says how a hub allows it")
		})
	}
}

// TestDialerRefusesBeforeConnecting: the dialer refuses loopback, the
// metadata address and a name that resolves to loopback before a
// connection is opened: a server on loopback accepts nothing from it.
func TestDialerRefusesBeforeConnecting(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())

	refused := Policy{}.Dialer(2 * time.Second)
	for _, addr := range []string{
		ln.Addr().String(), net.JoinHostPort("localhost", port), net.JoinHostPort("::1", port),
		net.JoinHostPort("169.254.169.254", "80"), net.JoinHostPort("::ffff:127.0.0.1", port), net.JoinHostPort("0.0.0.0", port),
	} {
		conn, err := refused.DialContext(ctx, "tcp", addr)
		if conn != nil {
			conn.Close()
		}
		g.Expect(errors.Is(err, ErrRefused)).To(BeTrue(), "%s: got %v", addr, err)
		conn, err = refused.DialContext(ctx, "udp", addr)
		if conn != nil {
			conn.Close()
		}
		g.Expect(errors.Is(err, ErrRefused)).To(BeTrue(), "udp %s: got %v", addr, err)
	}

	// The first connection the server accepts is the one a lab's policy
	// allows: none of the refused ones reached it.
	allowed, err := Policy{AllowLoopback: true}.Dialer(2*time.Second).DialContext(ctx, "tcp", ln.Addr().String())
	g.Expect(err).NotTo(HaveOccurred())
	defer allowed.Close()
	first, err := ln.Accept()
	g.Expect(err).NotTo(HaveOccurred())
	defer first.Close()
	g.Expect(first.RemoteAddr().String()).To(Equal(allowed.LocalAddr().String()))
}

func TestParsePrefixes(t *testing.T) {
	g := NewWithT(t)
	got, err := ParsePrefixes([]string{"169.254.10.0/24", " fe80::/64", "10.1.2.3", "192.168.1.77/24", ""})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal([]netip.Prefix{
		netip.MustParsePrefix("169.254.10.0/24"), netip.MustParsePrefix("fe80::/64"),
		netip.MustParsePrefix("10.1.2.3/32"), netip.MustParsePrefix("192.168.1.0/24"),
	}))
	_, err = ParsePrefixes([]string{"169.254.0.0/33"})
	g.Expect(err).To(MatchError(ContainSubstring(`"169.254.0.0/33" is not a network`)))
	g.Expect(Policy{AllowLoopback: true, Allowed: got[:1]}.String()).To(Equal(
		"link-local, cloud metadata, unspecified, multicast and broadcast addresses refused, loopback allowed; allowed anyway: 169.254.10.0/24"))
}
