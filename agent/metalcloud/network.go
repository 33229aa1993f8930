package metalcloud

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"

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
// it is applied with the image's network tooling (the bond of the member
// NICs found by MAC, static addresses and default routes through the
// gateways, public first); that configurator is not written yet. The
// simulator's is Recorder.
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
	return n, nil
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
	n.Members, n.Addresses = slices.Clone(n.Members), slices.Clone(n.Addresses)
	return n
}
