package metalcloud

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"

	"github.com/metalshift/metalshift/agent/boot"
	equinixapi "github.com/metalshift/metalshift/api/equinixmetal/v1"
)

// DefaultBond is the bond's name when the metadata names none.
const DefaultBond = "bond0"

// Network is the machine's network as the metadata describes it: one bond
// of its NICs, and the addresses to configure on it.
type Network struct {
	// Bond is the bond's name (bond0).
	Bond string
	// BondMode is the Linux bonding mode (4: 802.3ad, LACP).
	BondMode int
	// Members are the NICs in the bond, known by their MAC addresses (the
	// names the metadata gives them need not be the kernel's).
	Members []NIC
	// Addresses are configured on the bond, in the metadata's order.
	Addresses []Address
	// PrivateSubnets are the project's private blocks (the metadata's
	// private_subnets, 10.0.0.0/8 on Equinix Metal), reached through the
	// private address's gateway.
	PrivateSubnets []netip.Prefix
}

// NIC is a member of the bond.
type NIC struct {
	// Name is the metadata's name for it (eth0).
	Name string
	MAC  string
}

// Address is an address of the bond, with its prefix length and gateway.
type Address struct {
	// Prefix is the address with its network's prefix length
	// (147.75.1.2/31).
	Prefix netip.Prefix
	// Gateway is the network's gateway; invalid when the metadata gives
	// none.
	Gateway netip.Addr
	// Public: reachable from the internet; else on the project's private
	// network.
	Public bool
	// Management: the metadata's management flag (the device's own
	// addresses have it; elastic ones do not).
	Management bool
}

// IPv6 says whether the address is an IPv6 one.
func (a Address) IPv6() bool { return a.Prefix.Addr().Is6() && !a.Prefix.Addr().Is4In6() }

// String is "147.75.1.2/31 gateway 147.75.1.1 (public IPv4)".
func (a Address) String() string {
	kind := "private"
	if a.Public {
		kind = "public"
	}
	family := "IPv4"
	if a.IPv6() {
		family = "IPv6"
	}
	gw := "none"
	if a.Gateway.IsValid() {
		gw = a.Gateway.String()
	}
	return fmt.Sprintf("%s gateway %s (%s %s)", a.Prefix, gw, kind, family)
}

// NetworkConfigurator applies a Network to the machine. On the live image
// it is Netlink (the bond of the member NICs found by MAC, the static
// addresses and the routes of Plan); the simulator's is Recorder.
type NetworkConfigurator interface {
	Configure(ctx context.Context, n Network) error
}

// NetworkFromMetadata is the network the metadata describes: its bond (the
// one its interfaces name; DefaultBond when they name none), the bond's
// mode, its member NICs, and every enabled address. Metadata that names
// two bonds, a NIC without a MAC or an address that does not parse is an
// error: configuring part of it would leave the machine half reachable.
func NetworkFromMetadata(md equinixapi.Metadata) (Network, error) {
	n := Network{BondMode: md.Network.Bonding.Mode}
	for _, in := range md.Network.Interfaces {
		if in.Bond != "" && n.Bond != "" && in.Bond != n.Bond {
			return Network{}, fmt.Errorf("the metadata puts the NICs in two bonds (%s and %s): one is supported", n.Bond, in.Bond)
		}
		if in.Bond != "" {
			n.Bond = in.Bond
		}
		if in.MAC == "" {
			return Network{}, fmt.Errorf("the metadata's interface %s has no MAC address", in.Name)
		}
		n.Members = append(n.Members, NIC{Name: in.Name, MAC: strings.ToLower(in.MAC)})
	}
	if n.Bond == "" {
		n.Bond = DefaultBond
	}
	if len(n.Members) == 0 {
		return Network{}, errors.New("the metadata lists no network interfaces")
	}
	for _, a := range md.Network.Addresses {
		if !a.Enabled {
			continue
		}
		addr, err := netip.ParseAddr(a.Address)
		if err != nil {
			return Network{}, fmt.Errorf("the metadata's address %q: %w", a.Address, err)
		}
		p, err := addr.Prefix(a.CIDR)
		if err != nil || a.CIDR <= 0 {
			return Network{}, fmt.Errorf("the metadata's address %s has prefix length %d", a.Address, a.CIDR)
		}
		out := Address{Prefix: netip.PrefixFrom(addr, p.Bits()), Public: a.Public, Management: a.Management}
		if a.Gateway != "" {
			gw, err := netip.ParseAddr(a.Gateway)
			if err != nil {
				return Network{}, fmt.Errorf("the gateway %q of the metadata's address %s: %w", a.Gateway, a.Address, err)
			}
			if gw.Is4() != addr.Is4() {
				return Network{}, fmt.Errorf("the gateway %s of the metadata's address %s is of another family", gw, a.Address)
			}
			out.Gateway = gw
		}
		n.Addresses = append(n.Addresses, out)
	}
	if len(n.Addresses) == 0 {
		return Network{}, errors.New("the metadata lists no enabled addresses")
	}
	for _, s := range md.PrivateSubnets {
		p, err := netip.ParsePrefix(s)
		if err != nil || !p.Addr().Is4() {
			return Network{}, fmt.Errorf("the metadata's private subnet %q is not an IPv4 prefix", s)
		}
		n.PrivateSubnets = append(n.PrivateSubnets, p.Masked())
	}
	return n, nil
}

// DefaultPrivateSubnet is the private block routed through the private
// gateway when the metadata lists none: Equinix Metal's.
var DefaultPrivateSubnet = netip.MustParsePrefix("10.0.0.0/8")

// Plan is how a Network is applied to the machine: a bond of the member
// NICs in the metadata's mode, every address with its prefix length, and
// the routes of the gateways as Equinix Metal's own images configure them —
// the IPv4 and IPv6 default routes through the public gateways, and the
// project's private subnets through the private one. Of several addresses
// of a kind with a gateway, the first management one's (the device's own,
// not an elastic address) is used.
func Plan(n Network) boot.Bond {
	b := boot.Bond{Name: n.Bond, Mode: n.BondMode}
	for _, m := range n.Members {
		b.MACs = append(b.MACs, m.MAC)
	}
	for _, a := range n.Addresses {
		b.Addresses = append(b.Addresses, a.Prefix)
	}
	gateway := func(public, v6 bool) netip.Addr {
		var found netip.Addr
		for _, a := range n.Addresses {
			if a.Public != public || a.IPv6() != v6 || !a.Gateway.IsValid() {
				continue
			}
			if a.Management {
				return a.Gateway
			}
			if !found.IsValid() {
				found = a.Gateway
			}
		}
		return found
	}
	if gw := gateway(true, false); gw.IsValid() {
		b.Routes = append(b.Routes, boot.Route{Dst: netip.PrefixFrom(netip.IPv4Unspecified(), 0), Gateway: gw})
	}
	if gw := gateway(true, true); gw.IsValid() {
		b.Routes = append(b.Routes, boot.Route{Dst: netip.PrefixFrom(netip.IPv6Unspecified(), 0), Gateway: gw})
	}
	if gw := gateway(false, false); gw.IsValid() {
		subnets := n.PrivateSubnets
		if len(subnets) == 0 {
			subnets = []netip.Prefix{DefaultPrivateSubnet}
		}
		for _, s := range subnets {
			b.Routes = append(b.Routes, boot.Route{Dst: s, Gateway: gw})
		}
	}
	return b
}

// Recorder is the simulator's NetworkConfigurator: its machines have no
// network stack of their own (they use their device's addresses as source
// addresses on the host's loopback), so it applies nothing and records
// every Network it was asked to configure.
type Recorder struct {
	mu   sync.Mutex
	nets []Network
}

// Configure implements NetworkConfigurator.
func (r *Recorder) Configure(_ context.Context, n Network) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.nets = append(r.nets, clone(n))
	return nil
}

// Networks are the networks configured so far, oldest first.
func (r *Recorder) Networks() []Network {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Network, 0, len(r.nets))
	for _, n := range r.nets {
		out = append(out, clone(n))
	}
	return out
}

func clone(n Network) Network {
	n.Members, n.Addresses, n.PrivateSubnets = slices.Clone(n.Members), slices.Clone(n.Addresses), slices.Clone(n.PrivateSubnets)
	return n
}
