package lan

import (
	"encoding/binary"
	"net"
	"net/netip"
)

// Ethernet, IPv4, UDP and ARP as the segment carries them.
const (
	etherHeaderLen = 14
	minFrameLen    = 60 // without the frame check sequence, which QEMU does not carry
	etherTypeIPv4  = 0x0800
	etherTypeARP   = 0x0806
	ipv4HeaderLen  = 20
	udpHeaderLen   = 8
	protocolUDP    = 17
	arpLen         = 28
	arpRequest     = 1
	arpReply       = 2
	maxFrameLen    = 65536
)

var broadcastMAC = net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// ethernet is a frame to dst from src with payload, padded to Ethernet's
// minimum length.
func ethernet(dst, src net.HardwareAddr, etherType uint16, payload []byte) []byte {
	f := make([]byte, max(etherHeaderLen+len(payload), minFrameLen))
	copy(f[0:6], dst)
	copy(f[6:12], src)
	binary.BigEndian.PutUint16(f[12:14], etherType)
	copy(f[etherHeaderLen:], payload)
	return f
}

// frameHeader is what a frame says of itself: destination, source, type.
type frameHeader struct {
	dst, src  net.HardwareAddr
	etherType uint16
	payload   []byte
}

func parseEthernet(f []byte) (frameHeader, bool) {
	if len(f) < etherHeaderLen {
		return frameHeader{}, false
	}
	return frameHeader{dst: net.HardwareAddr(f[0:6]), src: net.HardwareAddr(f[6:12]),
		etherType: binary.BigEndian.Uint16(f[12:14]), payload: f[etherHeaderLen:]}, true
}

// isGroup tells whether mac is a broadcast or multicast address.
func isGroup(mac net.HardwareAddr) bool { return len(mac) > 0 && mac[0]&1 == 1 }

// udpPacket is an IPv4 packet (no options, not fragmented) holding a UDP
// datagram from src to dst, with both checksums.
func udpPacket(src, dst netip.AddrPort, payload []byte) []byte {
	p := make([]byte, ipv4HeaderLen+udpHeaderLen+len(payload))
	ip := p[:ipv4HeaderLen]
	ip[0] = 4<<4 | ipv4HeaderLen/4
	binary.BigEndian.PutUint16(ip[2:4], uint16(len(p))) //nolint:gosec // a DHCP message is far below 64 KiB
	ip[8] = 64                                          // TTL
	ip[9] = protocolUDP
	s, d := src.Addr().As4(), dst.Addr().As4()
	copy(ip[12:16], s[:])
	copy(ip[16:20], d[:])
	binary.BigEndian.PutUint16(ip[10:12], ^checksum(ip, 0))

	u := p[ipv4HeaderLen:]
	binary.BigEndian.PutUint16(u[0:2], src.Port())
	binary.BigEndian.PutUint16(u[2:4], dst.Port())
	binary.BigEndian.PutUint16(u[4:6], uint16(len(u))) //nolint:gosec // as above
	copy(u[udpHeaderLen:], payload)
	sum := ^checksum(u, pseudoHeaderSum(s, d, len(u)))
	if sum == 0 {
		sum = 0xffff // 0 would say "no checksum"
	}
	binary.BigEndian.PutUint16(u[6:8], sum)
	return p
}

// udpDatagram is what parseUDP finds in an IPv4 packet.
type udpDatagram struct {
	src, dst netip.AddrPort
	payload  []byte
}

// parseUDP reads a UDP datagram from an IPv4 packet; it ignores what
// follows the packet's total length (a short frame's padding) and does not
// check checksums (a VM's NIC may leave the UDP one to offloading).
func parseUDP(p []byte) (udpDatagram, bool) {
	if len(p) < ipv4HeaderLen || p[0]>>4 != 4 {
		return udpDatagram{}, false
	}
	hlen, total := int(p[0]&0x0f)*4, int(binary.BigEndian.Uint16(p[2:4]))
	if hlen < ipv4HeaderLen || total < hlen+udpHeaderLen || total > len(p) || p[9] != protocolUDP {
		return udpDatagram{}, false
	}
	if binary.BigEndian.Uint16(p[6:8])&0x3fff != 0 {
		return udpDatagram{}, false // a fragment: DHCP messages are not fragmented
	}
	u := p[hlen:total]
	ulen := int(binary.BigEndian.Uint16(u[4:6]))
	if ulen < udpHeaderLen || ulen > len(u) {
		return udpDatagram{}, false
	}
	src, dst := netip.AddrFrom4([4]byte(p[12:16])), netip.AddrFrom4([4]byte(p[16:20]))
	return udpDatagram{
		src:     netip.AddrPortFrom(src, binary.BigEndian.Uint16(u[0:2])),
		dst:     netip.AddrPortFrom(dst, binary.BigEndian.Uint16(u[2:4])),
		payload: u[udpHeaderLen:ulen],
	}, true
}

// checksum is the one's complement sum of b (RFC 1071) added to initial,
// folded to 16 bits.
func checksum(b []byte, initial uint32) uint16 {
	sum := initial
	for ; len(b) >= 2; b = b[2:] {
		sum += uint32(binary.BigEndian.Uint16(b))
	}
	if len(b) == 1 {
		sum += uint32(b[0]) << 8
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	return uint16(sum)
}

// pseudoHeaderSum is the sum of UDP's IPv4 pseudo-header.
func pseudoHeaderSum(src, dst [4]byte, udpLen int) uint32 {
	var ph [12]byte
	copy(ph[0:4], src[:])
	copy(ph[4:8], dst[:])
	ph[9] = protocolUDP
	binary.BigEndian.PutUint16(ph[10:12], uint16(udpLen)) //nolint:gosec // a DHCP message is far below 64 KiB
	return uint32(checksum(ph[:], 0))
}

// arpPacket is an ARP packet for IPv4 over Ethernet.
type arpPacket struct {
	op                 uint16
	senderMAC, target  net.HardwareAddr
	senderIP, targetIP netip.Addr
}

func parseARP(p []byte) (arpPacket, bool) {
	if len(p) < arpLen || binary.BigEndian.Uint16(p[0:2]) != 1 || binary.BigEndian.Uint16(p[2:4]) != etherTypeIPv4 ||
		p[4] != 6 || p[5] != 4 {
		return arpPacket{}, false
	}
	return arpPacket{
		op:        binary.BigEndian.Uint16(p[6:8]),
		senderMAC: net.HardwareAddr(p[8:14]), senderIP: netip.AddrFrom4([4]byte(p[14:18])),
		target: net.HardwareAddr(p[18:24]), targetIP: netip.AddrFrom4([4]byte(p[24:28])),
	}, true
}

func (a arpPacket) bytes() []byte {
	p := make([]byte, arpLen)
	binary.BigEndian.PutUint16(p[0:2], 1) // Ethernet
	binary.BigEndian.PutUint16(p[2:4], etherTypeIPv4)
	p[4], p[5] = 6, 4
	binary.BigEndian.PutUint16(p[6:8], a.op)
	copy(p[8:14], a.senderMAC)
	s, t := a.senderIP.As4(), a.targetIP.As4()
	copy(p[14:18], s[:])
	copy(p[18:24], a.target)
	copy(p[24:28], t[:])
	return p
}
