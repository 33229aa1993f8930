// Package lan is a simulated Ethernet segment for the simulator's QEMU
// VMs, with a DHCP server on it. A VM's NIC joins the segment through a
// port: a pair of UNIX datagram sockets in the LAN's directory, one Ethernet
// frame a datagram, which is what QEMU's `-netdev dgram` speaks. The LAN
// binds its end of a port when the port is made, before QEMU starts, and
// sends to QEMU's end (Port.VM), which QEMU binds; frames sent before QEMU
// is there, or that a VM does not read in time, are dropped, as a switch
// drops them. The LAN is a learning switch: it forwards a frame to the port
// its destination MAC was last seen on and floods broadcasts and unknown
// destinations. No TCP or UDP port of the host is used.
//
// The DHCP server (Options.DHCP) is a station on the segment with an
// address of its own (the subnet's first): it offers addresses of its
// subnet from .10 on (DISCOVER, OFFER, REQUEST, ACK), extends a lease when
// its client asks for it unicast (renewing) or by broadcast (rebinding; the
// live image's client renews this way), refuses with a NAK a REQUEST for an
// address that is not the client's, answers ARP for its own address, and
// records every lease it grants, extends or refuses (LAN.Leases) for tests
// to wait on. Its leases are short when a test asks (Options.DHCP.Lease),
// unlike QEMU's user networking, whose leases last a day: this is where the
// live image's lease renewal is seen on a booted machine. It offers no
// router and no DNS server: a VM keeps its first NIC's default route.
//
// Frames are Ethernet II with IPv4, UDP and ARP headers built and parsed
// here; DHCP messages are github.com/insomniacslk/dhcp's.
package lan
