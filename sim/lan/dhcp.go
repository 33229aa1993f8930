package lan

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"k8s.io/utils/clock"
)

// DefaultLease is the length of a lease when DHCPOptions.Lease is 0.
const DefaultLease = time.Hour

// firstHost is the offset in the subnet of the first address the server
// hands out; the server has the subnet's first address.
const firstHost = 10

// serverMAC is the DHCP server's MAC address, a locally administered one.
var serverMAC = net.HardwareAddr{0x02, 0x6d, 0x73, 0x00, 0x00, 0x01}

// DHCPOptions configure the segment's DHCP server.
type DHCPOptions struct {
	// Subnet is the segment's IPv4 network (at most a /28): the server has
	// its first address and hands out those from the tenth to the last
	// but one.
	Subnet netip.Prefix
	// Lease is how long a lease lasts; DefaultLease when 0. The renewal
	// time (T1) offered is half of it, the rebinding time (T2) seven
	// eighths, as RFC 2131 suggests.
	Lease time.Duration
	// Clock is the time of leases and events; the real one when nil.
	Clock clock.PassiveClock
}

// LeaseKind is what became of a lease.
type LeaseKind string

// The kinds of lease events.
const (
	// LeaseNew is a lease granted to a client after an offer, or confirmed
	// to a client that asks for its address again after a reboot.
	LeaseNew LeaseKind = "new"
	// LeaseRenewed is a lease extended at the client's request sent
	// unicast to the server (RFC 2131's RENEWING state).
	LeaseRenewed LeaseKind = "renewed"
	// LeaseRebound is a lease extended at the client's request sent by
	// broadcast (RFC 2131's REBINDING state; also a client that only ever
	// broadcasts, as the live image's does).
	LeaseRebound LeaseKind = "rebound"
	// LeaseRefused is a request the server answered with a NAK: the
	// address asked for is not the client's.
	LeaseRefused LeaseKind = "refused"
)

// LeaseEvent is one lease the server granted, extended or refused.
type LeaseEvent struct {
	Time time.Time
	// MAC is the client's hardware address, lower case with colons.
	MAC string
	// Addr is the address leased, or asked for when refused.
	Addr netip.Addr
	Kind LeaseKind
	// Lease is how long the lease lasts from Time; 0 when refused.
	Lease time.Duration
}

func (e LeaseEvent) String() string {
	return fmt.Sprintf("%s %s %s %s (%s)", e.Time.Format("15:04:05.000"), e.MAC, e.Kind, e.Addr, e.Lease)
}

// dhcpServer is the DHCP server station.
type dhcpServer struct {
	l                    *LAN
	ip                   netip.Addr
	mac                  net.HardwareAddr
	subnet               netip.Prefix
	first, last          netip.Addr // the range handed out
	lease, renew, rebind time.Duration
	clock                clock.PassiveClock

	mu       sync.Mutex
	bindings map[string]*binding // by client MAC
	log      []LeaseEvent
}

// binding is the address a client was offered or leased, and until when
// no other client gets it.
type binding struct {
	addr    netip.Addr
	expires time.Time
}

func newDHCPServer(l *LAN, o DHCPOptions) (*dhcpServer, error) {
	subnet := o.Subnet.Masked()
	if !subnet.Addr().Is4() || subnet.Bits() > 28 || subnet.Bits() < 8 {
		return nil, fmt.Errorf("DHCP subnet %s: want an IPv4 network from /8 to /28", o.Subnet)
	}
	if o.Lease == 0 {
		o.Lease = DefaultLease
	}
	if o.Lease < 2*time.Second {
		return nil, fmt.Errorf("DHCP lease %s: want at least 2s (DHCP counts whole seconds)", o.Lease)
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	s := &dhcpServer{l: l, ip: subnet.Addr().Next(), mac: serverMAC, subnet: subnet,
		lease: o.Lease, renew: o.Lease / 2, rebind: o.Lease * 7 / 8, clock: o.Clock, bindings: map[string]*binding{}}
	s.first = subnet.Addr()
	for range firstHost {
		s.first = s.first.Next()
	}
	// The last address of the subnet is its broadcast address.
	b := subnet.Addr().As4()
	broadcast := binary.BigEndian.Uint32(b[:]) | ^uint32(0)>>subnet.Bits()
	binary.BigEndian.PutUint32(b[:], broadcast-1)
	s.last = netip.AddrFrom4(b)
	return s, nil
}

func (s *dhcpServer) events() []LeaseEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]LeaseEvent(nil), s.log...)
}

// receive answers ARP for the server's address and DHCP requests.
func (s *dhcpServer) receive(frame []byte) {
	h, ok := parseEthernet(frame)
	if !ok || !(isGroup(h.dst) || equalMAC(h.dst, s.mac)) {
		return
	}
	var reply []byte
	switch h.etherType {
	case etherTypeARP:
		reply = s.arp(h.payload)
	case etherTypeIPv4:
		reply = s.dhcp(h.payload)
	}
	if reply != nil {
		s.l.forward(s, reply)
	}
}

// arp answers a request for the server's address.
func (s *dhcpServer) arp(p []byte) []byte {
	a, ok := parseARP(p)
	if !ok || a.op != arpRequest || a.targetIP != s.ip {
		return nil
	}
	r := arpPacket{op: arpReply, senderMAC: s.mac, senderIP: s.ip, target: a.senderMAC, targetIP: a.senderIP}
	return ethernet(a.senderMAC, s.mac, etherTypeARP, r.bytes())
}

// dhcp answers a DHCP message sent to the server's address or broadcast.
func (s *dhcpServer) dhcp(p []byte) []byte {
	u, ok := parseUDP(p)
	if !ok || u.dst.Port() != dhcpv4.ServerPort || (u.dst.Addr() != s.ip && u.dst.Addr() != netip.AddrFrom4([4]byte{255, 255, 255, 255})) {
		return nil
	}
	req, err := dhcpv4.FromBytes(u.payload)
	if err != nil || req.OpCode != dhcpv4.OpcodeBootRequest || len(req.ClientHWAddr) != 6 {
		return nil
	}
	reply := s.answer(req, u.dst.Addr() == s.ip)
	if reply == nil {
		return nil
	}
	// Where a reply goes, for a client on the segment (RFC 2131 4.1): a
	// NAK or a reply to a client that asks for broadcasts is broadcast;
	// the others go to the client's MAC, at its address (ciaddr) or at the
	// one given (yiaddr).
	dstMAC, dstIP := req.ClientHWAddr, netip.AddrFrom4([4]byte{255, 255, 255, 255})
	switch ciaddr, _ := netip.AddrFromSlice(req.ClientIPAddr.To4()); {
	case reply.MessageType() == dhcpv4.MessageTypeNak:
		dstMAC = broadcastMAC
	case ciaddr.IsValid() && !ciaddr.IsUnspecified():
		dstIP = ciaddr
	case req.IsBroadcast():
		dstMAC = broadcastMAC
	default:
		dstIP, _ = netip.AddrFromSlice(reply.YourIPAddr.To4())
	}
	packet := udpPacket(netip.AddrPortFrom(s.ip, dhcpv4.ServerPort), netip.AddrPortFrom(dstIP, dhcpv4.ClientPort), reply.ToBytes())
	return ethernet(dstMAC, s.mac, etherTypeIPv4, packet)
}

// answer is the server's reply to req, nil for none; unicast tells whether
// req was sent to the server's address.
func (s *dhcpServer) answer(req *dhcpv4.DHCPv4, unicast bool) *dhcpv4.DHCPv4 {
	s.mu.Lock()
	defer s.mu.Unlock()
	mac := req.ClientHWAddr.String()
	now := s.clock.Now()
	requested := addrOf(req.RequestedIPAddress())
	ciaddr := addrOf(req.ClientIPAddr)
	switch req.MessageType() {
	case dhcpv4.MessageTypeDiscover:
		addr, ok := s.pick(mac, requested, now)
		if !ok {
			return nil // no address left: the client asks again later
		}
		s.bindings[mac] = &binding{addr: addr, expires: now.Add(s.lease)}
		return s.reply(req, dhcpv4.MessageTypeOffer, addr)
	case dhcpv4.MessageTypeRequest:
		return s.request(req, mac, requested, ciaddr, unicast, now)
	case dhcpv4.MessageTypeRelease, dhcpv4.MessageTypeDecline:
		// A declined address may be in use by a machine the server does
		// not know: the client gets another one next time.
		delete(s.bindings, mac)
	}
	return nil
}

// request answers a REQUEST in each of RFC 2131's client states (4.3.2).
func (s *dhcpServer) request(req *dhcpv4.DHCPv4, mac string, requested, ciaddr netip.Addr, unicast bool, now time.Time) *dhcpv4.DHCPv4 {
	b := s.bindings[mac]
	var kind LeaseKind
	var addr netip.Addr
	switch sid := addrOf(req.ServerIdentifier()); {
	case sid.IsValid():
		// SELECTING: the client takes an offer, ours or another server's.
		if sid != s.ip {
			return nil
		}
		addr, kind = requested, LeaseNew
		if b == nil || b.addr != requested {
			return s.nak(req, mac, requested, now)
		}
	case !ciaddr.IsValid():
		// INIT-REBOOT: a client that had an address asks for it again.
		if !requested.IsValid() {
			return nil
		}
		addr, kind = requested, LeaseNew
		if owner, held := s.holder(requested, now); !s.inRange(requested) || (held && owner != mac) || (b != nil && b.addr != requested) {
			return s.nak(req, mac, requested, now)
		}
	default:
		// RENEWING (unicast to the server) or REBINDING (broadcast).
		addr, kind = ciaddr, LeaseRebound
		if unicast {
			kind = LeaseRenewed
		}
		if b == nil || b.addr != ciaddr {
			return s.nak(req, mac, ciaddr, now)
		}
	}
	s.bindings[mac] = &binding{addr: addr, expires: now.Add(s.lease)}
	s.log = append(s.log, LeaseEvent{Time: now, MAC: mac, Addr: addr, Kind: kind, Lease: s.lease})
	ack := s.reply(req, dhcpv4.MessageTypeAck, addr)
	if ack != nil {
		ack.ClientIPAddr = req.ClientIPAddr
	}
	return ack
}

// pick chooses the address to offer mac: the one it has, the one it asks
// for if free, else the first free one.
func (s *dhcpServer) pick(mac string, requested netip.Addr, now time.Time) (netip.Addr, bool) {
	if b := s.bindings[mac]; b != nil {
		return b.addr, true
	}
	if requested.IsValid() && s.inRange(requested) {
		if _, held := s.holder(requested, now); !held {
			s.release(requested)
			return requested, true
		}
	}
	for a := s.first; a.Compare(s.last) <= 0; a = a.Next() {
		if _, held := s.holder(a, now); !held {
			s.release(a)
			return a, true
		}
	}
	return netip.Addr{}, false
}

// holder is the client whose unexpired binding holds addr.
func (s *dhcpServer) holder(addr netip.Addr, now time.Time) (string, bool) {
	for mac, b := range s.bindings {
		if b.addr == addr && now.Before(b.expires) {
			return mac, true
		}
	}
	return "", false
}

// release drops the expired bindings of addr, which another client gets.
func (s *dhcpServer) release(addr netip.Addr) {
	for mac, b := range s.bindings {
		if b.addr == addr {
			delete(s.bindings, mac)
		}
	}
}

func (s *dhcpServer) inRange(a netip.Addr) bool {
	return a.Is4() && a.Compare(s.first) >= 0 && a.Compare(s.last) <= 0
}

// reply is an OFFER or an ACK of addr, with the lease's times.
func (s *dhcpServer) reply(req *dhcpv4.DHCPv4, typ dhcpv4.MessageType, addr netip.Addr) *dhcpv4.DHCPv4 {
	r, err := dhcpv4.NewReplyFromRequest(req, dhcpv4.WithMessageType(typ), dhcpv4.WithYourIP(addr.AsSlice()),
		dhcpv4.WithOption(dhcpv4.OptServerIdentifier(s.ip.AsSlice())),
		dhcpv4.WithNetmask(net.CIDRMask(s.subnet.Bits(), 32)),
		dhcpv4.WithOption(dhcpv4.OptIPAddressLeaseTime(s.lease)),
		dhcpv4.WithOption(dhcpv4.OptRenewTimeValue(s.renew)),
		dhcpv4.WithOption(dhcpv4.OptRebindingTimeValue(s.rebind)))
	if err != nil {
		return nil // only making a transaction ID fails, which the reply then takes from req
	}
	return r
}

// nak refuses req's address, which is recorded.
func (s *dhcpServer) nak(req *dhcpv4.DHCPv4, mac string, addr netip.Addr, now time.Time) *dhcpv4.DHCPv4 {
	s.log = append(s.log, LeaseEvent{Time: now, MAC: mac, Addr: addr, Kind: LeaseRefused})
	r, err := dhcpv4.NewReplyFromRequest(req, dhcpv4.WithMessageType(dhcpv4.MessageTypeNak),
		dhcpv4.WithOption(dhcpv4.OptServerIdentifier(s.ip.AsSlice())),
		dhcpv4.WithOption(dhcpv4.OptMessage(fmt.Sprintf("%s is not yours", addr))))
	if err != nil {
		return nil
	}
	return r
}

func addrOf(ip net.IP) netip.Addr {
	a, ok := netip.AddrFromSlice(ip.To4())
	if !ok || a.IsUnspecified() {
		return netip.Addr{}
	}
	return a
}

func equalMAC(a, b net.HardwareAddr) bool { return bytes.Equal(a, b) }
