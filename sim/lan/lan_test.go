package lan

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv4/nclient4"
	. "github.com/onsi/gomega"
	clocktesting "k8s.io/utils/clock/testing"
)

// waitFrame bounds the wait for a frame the test expects; frames come at
// once, this only keeps a broken LAN from hanging the test.
const waitFrame = 10 * time.Second

var (
	subnet = netip.MustParsePrefix("10.99.0.0/24")
	macA   = net.HardwareAddr{0x52, 0x54, 0x00, 0x00, 0x00, 0x0a}
	macB   = net.HardwareAddr{0x52, 0x54, 0x00, 0x00, 0x00, 0x0b}
	macC   = net.HardwareAddr{0x52, 0x54, 0x00, 0x00, 0x00, 0x0c}
)

func newLAN(t *testing.T, dhcp *DHCPOptions) *LAN {
	t.Helper()
	l, err := New(Options{Dir: t.TempDir(), DHCP: dhcp})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l
}

// nic is a VM's NIC on a port, as QEMU's -netdev dgram is: it binds the
// port's VM socket and sends its frames to the LAN's.
type nic struct {
	t    *testing.T
	mac  net.HardwareAddr
	conn *net.UnixConn
	lan  *net.UnixAddr
}

func attach(t *testing.T, l *LAN, name string, mac net.HardwareAddr) *nic {
	t.Helper()
	p, err := l.Attach(name)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: p.VM, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return &nic{t: t, mac: mac, conn: conn, lan: &net.UnixAddr{Name: p.LAN, Net: "unixgram"}}
}

func (n *nic) send(frame []byte) {
	n.t.Helper()
	if _, err := n.conn.WriteToUnix(frame, n.lan); err != nil {
		n.t.Fatal(err)
	}
}

// next is the next frame the NIC would take: to its MAC or a group.
func (n *nic) next() frameHeader {
	n.t.Helper()
	buf := make([]byte, maxFrameLen)
	_ = n.conn.SetReadDeadline(time.Now().Add(waitFrame))
	for {
		k, _, err := n.conn.ReadFromUnix(buf)
		if err != nil {
			n.t.Fatalf("%s: no frame: %v", n.mac, err)
		}
		if h, ok := parseEthernet(append([]byte(nil), buf[:k]...)); ok && (isGroup(h.dst) || equalMAC(h.dst, n.mac)) {
			return h
		}
	}
}

// client is an nclient4 client on the NIC, as the live image runs it on a
// raw packet socket: it is given the IPv4 packets of the frames for the
// NIC and broadcasts the packets it sends. Closing it leaves the NIC's
// socket open for the test.
func (n *nic) client(t *testing.T) *nclient4.Client {
	t.Helper()
	c, err := nclient4.NewWithConn(nclient4.NewBroadcastUDPConn(ipConn{n}, &net.UDPAddr{Port: dhcpv4.ClientPort}), n.mac,
		nclient4.WithTimeout(2*time.Second), nclient4.WithRetry(2))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// ipConn is a NIC as a raw IPv4 packet socket (AF_PACKET, SOCK_DGRAM).
type ipConn struct{ n *nic }

func (c ipConn) ReadFrom(b []byte) (int, net.Addr, error) {
	buf := make([]byte, maxFrameLen)
	for {
		k, _, err := c.n.conn.ReadFromUnix(buf)
		if err != nil {
			return 0, nil, err
		}
		h, ok := parseEthernet(buf[:k])
		if ok && h.etherType == etherTypeIPv4 && (isGroup(h.dst) || equalMAC(h.dst, c.n.mac)) {
			return copy(b, h.payload), &net.UnixAddr{}, nil
		}
	}
}

func (c ipConn) WriteTo(b []byte, _ net.Addr) (int, error) {
	c.n.send(ethernet(broadcastMAC, c.n.mac, etherTypeIPv4, b))
	return len(b), nil
}

// Close ends the client's reads (a deadline in the past), not the NIC.
func (c ipConn) Close() error { return c.n.conn.SetReadDeadline(time.Now()) }

func (c ipConn) LocalAddr() net.Addr                { return c.n.conn.LocalAddr() }
func (c ipConn) SetDeadline(t time.Time) error      { return c.n.conn.SetDeadline(t) }
func (c ipConn) SetReadDeadline(t time.Time) error  { return c.n.conn.SetReadDeadline(t) }
func (c ipConn) SetWriteDeadline(t time.Time) error { return c.n.conn.SetWriteDeadline(t) }

func addr(s string) netip.Addr { return netip.MustParseAddr(s) }

// TestDHCPLeaseRenewAndRefuse: over its port's sockets, the live image's
// DHCP client (nclient4, broadcasting) gets a lease with the configured
// length and times, rebinds it by broadcast; the same NIC finds the server
// by ARP and renews unicast, getting the ACK at its address; a second
// client gets another address and a NAK for the first's and for one
// outside the subnet. The server records each.
func TestDHCPLeaseRenewAndRefuse(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC))
	l := newLAN(t, &DHCPOptions{Subnet: subnet, Lease: 20 * time.Second, Clock: clk})
	serverIP, serverMAC := l.Server()
	g.Expect(serverIP).To(Equal(addr("10.99.0.1")))

	a := attach(t, l, "vm-a.1", macA)
	ca := a.client(t)
	lease, err := ca.Request(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	ack := lease.ACK
	g.Expect(ack.YourIPAddr.String()).To(Equal("10.99.0.10"))
	g.Expect(ack.ServerIdentifier().String()).To(Equal("10.99.0.1"))
	g.Expect(ack.SubnetMask()).To(Equal(net.CIDRMask(24, 32)))
	g.Expect(ack.IPAddressLeaseTime(0)).To(Equal(20 * time.Second))
	g.Expect(ack.IPAddressRenewalTime(0)).To(Equal(10 * time.Second))
	g.Expect(ack.IPAddressRebindingTime(0)).To(Equal(17*time.Second), "7/8 of 20s, in whole seconds")
	g.Expect(ack.Router()).To(BeEmpty(), "the VM keeps its first NIC's default route")

	clk.Step(10 * time.Second)
	renewed, err := ca.Renew(ctx, lease)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(renewed.ACK.YourIPAddr.String()).To(Equal("10.99.0.10"))
	g.Expect(ca.Close()).To(Succeed())
	g.Expect(a.conn.SetReadDeadline(time.Time{})).To(Succeed())

	// ARP for the server, then a renewal sent to it.
	who := arpPacket{op: arpRequest, senderMAC: macA, senderIP: addr("10.99.0.10"), target: make(net.HardwareAddr, 6), targetIP: serverIP}
	a.send(ethernet(broadcastMAC, macA, etherTypeARP, who.bytes()))
	h := a.next()
	g.Expect(h.etherType).To(BeEquivalentTo(etherTypeARP))
	g.Expect(h.dst).To(Equal(macA))
	is, ok := parseARP(h.payload)
	g.Expect(ok).To(BeTrue())
	g.Expect(is).To(Equal(arpPacket{op: arpReply, senderMAC: serverMAC, senderIP: serverIP, target: macA, targetIP: addr("10.99.0.10")}))

	clk.Step(10 * time.Second)
	req, err := dhcpv4.NewRenewFromAck(renewed.ACK)
	g.Expect(err).NotTo(HaveOccurred())
	a.send(ethernet(is.senderMAC, macA, etherTypeIPv4,
		udpPacket(netip.AddrPortFrom(addr("10.99.0.10"), dhcpv4.ClientPort), netip.AddrPortFrom(serverIP, dhcpv4.ServerPort), req.ToBytes())))
	h = a.next()
	g.Expect(h.dst).To(Equal(macA), "the ACK to a renewal goes to the client's MAC")
	expectChecksums(g, h.payload)
	u, ok := parseUDP(h.payload)
	g.Expect(ok).To(BeTrue())
	g.Expect(u.src).To(Equal(netip.AddrPortFrom(serverIP, dhcpv4.ServerPort)))
	g.Expect(u.dst).To(Equal(netip.AddrPortFrom(addr("10.99.0.10"), dhcpv4.ClientPort)), "and to its address")
	reply, err := dhcpv4.FromBytes(u.payload)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(reply.MessageType()).To(Equal(dhcpv4.MessageTypeAck))
	g.Expect(reply.YourIPAddr.String()).To(Equal("10.99.0.10"))
	g.Expect(reply.TransactionID).To(Equal(req.TransactionID))

	// Another client gets another address, and NAKs for the first's and
	// for one outside the subnet.
	b := attach(t, l, "vm-b.1", macB)
	cb := b.client(t)
	leaseB, err := cb.Request(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(leaseB.ACK.YourIPAddr.String()).To(Equal("10.99.0.11"))
	stolenACK := *leaseB.ACK
	stolenACK.YourIPAddr = net.ParseIP("10.99.0.10")
	_, err = cb.Renew(ctx, &nclient4.Lease{Offer: leaseB.Offer, ACK: &stolenACK})
	var nak *nclient4.ErrNak
	g.Expect(errors.As(err, &nak)).To(BeTrue(), "renewing another client's address: %v", err)
	offer := *leaseB.Offer
	offer.YourIPAddr = net.ParseIP("192.0.2.7")
	_, err = cb.RequestFromOffer(ctx, &offer)
	g.Expect(errors.As(err, &nak)).To(BeTrue(), "asking for an address outside the subnet: %v", err)

	t0 := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	g.Expect(l.Leases()).To(Equal([]LeaseEvent{
		{Time: t0, MAC: macA.String(), Addr: addr("10.99.0.10"), Kind: LeaseNew, Lease: 20 * time.Second},
		{Time: t0.Add(10 * time.Second), MAC: macA.String(), Addr: addr("10.99.0.10"), Kind: LeaseRebound, Lease: 20 * time.Second},
		{Time: t0.Add(20 * time.Second), MAC: macA.String(), Addr: addr("10.99.0.10"), Kind: LeaseRenewed, Lease: 20 * time.Second},
		{Time: t0.Add(20 * time.Second), MAC: macB.String(), Addr: addr("10.99.0.11"), Kind: LeaseNew, Lease: 20 * time.Second},
		{Time: t0.Add(20 * time.Second), MAC: macB.String(), Addr: addr("10.99.0.10"), Kind: LeaseRefused},
		{Time: t0.Add(20 * time.Second), MAC: macB.String(), Addr: addr("192.0.2.7"), Kind: LeaseRefused},
	}))
}

// TestExpiredAddressGoesToAnother: an address whose lease ended without a
// renewal is offered to the next client, and its former holder's renewal
// is refused.
func TestExpiredAddressGoesToAnother(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC))
	l := newLAN(t, &DHCPOptions{Subnet: subnet, Lease: 20 * time.Second, Clock: clk})
	ca := attach(t, l, "a", macA).client(t)
	leaseA, err := ca.Request(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	cb := attach(t, l, "b", macB).client(t)
	clk.Step(19 * time.Second)
	leaseB, err := cb.Request(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(leaseB.ACK.YourIPAddr.String()).To(Equal("10.99.0.11"), "A's lease still runs")

	clk.Step(time.Second)
	cc := attach(t, l, "c", macC).client(t)
	leaseC, err := cc.Request(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(leaseC.ACK.YourIPAddr.String()).To(Equal("10.99.0.10"), "A's lease ended")
	_, err = ca.Renew(ctx, leaseA)
	var nak *nclient4.ErrNak
	g.Expect(errors.As(err, &nak)).To(BeTrue(), "%v", err)
}

// TestInitReboot: a client that asks for the address it had, without an
// offer (RFC 2131's INIT-REBOOT), gets it; another client asking for that
// address is refused, one asking for a free address gets it.
func TestInitReboot(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	l := newLAN(t, &DHCPOptions{Subnet: subnet, Lease: 20 * time.Second})
	ca, cb := attach(t, l, "a", macA).client(t), attach(t, l, "b", macB).client(t)
	_, err := ca.Request(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	reboot := func(c *nclient4.Client, mac net.HardwareAddr, ip string) dhcpv4.MessageType {
		t.Helper()
		req, err := dhcpv4.New(dhcpv4.WithMessageType(dhcpv4.MessageTypeRequest), dhcpv4.WithHwAddr(mac), dhcpv4.WithBroadcast(true),
			dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(net.ParseIP(ip))))
		g.Expect(err).NotTo(HaveOccurred())
		reply, err := c.SendAndRead(ctx, nclient4.DefaultServers, req, nclient4.IsMessageType(dhcpv4.MessageTypeAck, dhcpv4.MessageTypeNak))
		g.Expect(err).NotTo(HaveOccurred())
		return reply.MessageType()
	}
	g.Expect(reboot(ca, macA, "10.99.0.10")).To(Equal(dhcpv4.MessageTypeAck))
	g.Expect(reboot(cb, macB, "10.99.0.10")).To(Equal(dhcpv4.MessageTypeNak))
	g.Expect(reboot(cb, macB, "10.99.0.20")).To(Equal(dhcpv4.MessageTypeAck))
	g.Expect(reboot(ca, macA, "10.99.0.21")).To(Equal(dhcpv4.MessageTypeNak), "A's address is .10")
	var kinds []string
	for _, e := range l.Leases() {
		kinds = append(kinds, fmt.Sprintf("%s %s %s", e.MAC, e.Kind, e.Addr))
	}
	g.Expect(kinds).To(Equal([]string{
		macA.String() + " new 10.99.0.10", macA.String() + " new 10.99.0.10", macB.String() + " refused 10.99.0.10",
		macB.String() + " new 10.99.0.20", macA.String() + " refused 10.99.0.21",
	}))
}

// TestSwitch: a broadcast reaches every other port; once the switch has
// seen a MAC, frames to it reach its port only.
func TestSwitch(t *testing.T) {
	g := NewWithT(t)
	l := newLAN(t, nil)
	a, b, c := attach(t, l, "a", macA), attach(t, l, "b", macB), attach(t, l, "c", macC)
	a.send(ethernet(broadcastMAC, macA, 0x88b5, []byte("hello from a")))
	for _, n := range []*nic{b, c} {
		h := n.next()
		g.Expect(h.src).To(Equal(macA))
		g.Expect(string(h.payload[:12])).To(Equal("hello from a"))
	}
	b.send(ethernet(macA, macB, 0x88b5, []byte("to a")))
	g.Expect(string(a.next().payload[:4])).To(Equal("to a"))
	// The port reads in order: had c got b's frame to a, it would come
	// before this one.
	b.send(ethernet(broadcastMAC, macB, 0x88b5, []byte("marker")))
	g.Expect(string(c.next().payload[:6])).To(Equal("marker"))
	g.Expect(string(a.next().payload[:6])).To(Equal("marker"))

	_, err := l.Attach("a")
	g.Expect(err).To(MatchError(ContainSubstring("attached already")))
	_, err = l.Attach("../x")
	g.Expect(err).To(HaveOccurred())
}

// TestAFrameNobodyReads: frames to a VM that is not there, or whose queue
// is full because it does not read, are dropped at once; the switch goes
// on forwarding to the others.
func TestAFrameNobodyReads(t *testing.T) {
	g := NewWithT(t)
	l := newLAN(t, nil)
	if _, err := l.Attach("absent"); err != nil {
		t.Fatal(err)
	}
	a, b := attach(t, l, "a", macA), attach(t, l, "b", macB)
	stuck := attach(t, l, "stuck", macC) // never reads
	// The switch learns where b and the stuck NIC are.
	b.send(ethernet(broadcastMAC, macB, 0x88b5, []byte("b")))
	stuck.send(ethernet(broadcastMAC, macC, 0x88b5, []byte("c")))
	g.Expect([]string{string(a.next().payload[:1]), string(a.next().payload[:1])}).To(ConsistOf("b", "c"))
	for range 2000 {
		a.send(ethernet(macC, macA, 0x88b5, make([]byte, 1000)))
	}
	a.send(ethernet(macB, macA, 0x88b5, []byte("after")))
	g.Expect(string(b.next().payload[:1])).To(Equal("c"), "the stuck NIC's broadcast")
	g.Expect(string(b.next().payload[:5])).To(Equal("after"))
}

func TestAddressRange(t *testing.T) {
	tests := []struct{ subnet, server, first, last, err string }{
		{subnet: "10.99.0.0/24", server: "10.99.0.1", first: "10.99.0.10", last: "10.99.0.254"},
		{subnet: "192.168.7.77/28", server: "192.168.7.65", first: "192.168.7.74", last: "192.168.7.78"},
		{subnet: "10.0.0.0/8", server: "10.0.0.1", first: "10.0.0.10", last: "10.255.255.254"},
		{subnet: "10.99.0.0/29", err: "want an IPv4 network from /8 to /28"},
		{subnet: "fd00::/64", err: "want an IPv4 network"},
	}
	for _, tt := range tests {
		t.Run(tt.subnet, func(t *testing.T) {
			g := NewWithT(t)
			s, err := newDHCPServer(nil, DHCPOptions{Subnet: netip.MustParsePrefix(tt.subnet)})
			if tt.err != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tt.err)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect([]netip.Addr{s.ip, s.first, s.last}).To(Equal([]netip.Addr{addr(tt.server), addr(tt.first), addr(tt.last)}))
			g.Expect(s.lease).To(Equal(DefaultLease))
		})
	}
}

// expectChecksums checks an IPv4 packet's header checksum and its UDP
// checksum (over the pseudo-header) as a receiving stack does.
func expectChecksums(g *WithT, p []byte) {
	g.Expect(checksum(p[:ipv4HeaderLen], 0)).To(BeEquivalentTo(0xffff), "IPv4 header checksum")
	total := int(binary.BigEndian.Uint16(p[2:4]))
	u := p[ipv4HeaderLen:total]
	g.Expect(binary.BigEndian.Uint16(u[6:8])).NotTo(BeZero(), "a UDP checksum is given")
	g.Expect(checksum(u, pseudoHeaderSum([4]byte(p[12:16]), [4]byte(p[16:20]), len(u)))).To(BeEquivalentTo(0xffff), "UDP checksum")
}
