package boot

import (
	"net/netip"
	"strings"

	deployapi "github.com/metalshift/metalshift/api/deploy/v1"
)

// find returns the configuration of the interface with mac and name.
func find(c *deployapi.NetworkConfig, mac, name string) *deployapi.Interface {
	if c == nil {
		return nil
	}
	for i := range c.Interfaces {
		itf := &c.Interfaces[i]
		if itf.MACAddress != "" && strings.EqualFold(itf.MACAddress, mac) {
			return itf
		}
	}
	for i := range c.Interfaces {
		if itf := &c.Interfaces[i]; itf.MACAddress == "" && itf.Name == name {
			return itf
		}
	}
	return nil
}

// static tells whether itf is configured with static addresses only.
func static(itf *deployapi.Interface) bool {
	if itf == nil {
		return false
	}
	dhcp := itf.IPv4 != nil && itf.IPv4.Enabled && itf.IPv4.DHCP
	has := func(ip *deployapi.IP) bool { return ip != nil && ip.Enabled && len(ip.Address) > 0 }
	return (has(itf.IPv4) || has(itf.IPv6)) && !dhcp
}

// Bond is a bond to make of a machine's NICs, with its static addresses
// and routes: what a metal cloud's metadata describes (agent/metalcloud
// translates it), applied by ConfigureBond.
type Bond struct {
	// Name is the bond's (bond0).
	Name string
	// Mode is the Linux bonding mode (4: 802.3ad).
	Mode int
	// MACs are the member NICs' MAC addresses, lower case. A machine may
	// have fewer of them than listed (a virtual machine with one NIC): the
	// bond is made of those it has, and of at least one.
	MACs []string
	// Addresses are given the bond with their prefix lengths.
	Addresses []netip.Prefix
	// Routes are added through the bond.
	Routes []Route
}

// Route is a route through a gateway. A destination of length 0 is the
// family's default route.
type Route struct {
	Dst     netip.Prefix
	Gateway netip.Addr
}

// String is "10.0.0.0/8 via 10.70.1.2" or "default via 147.75.1.1".
func (r Route) String() string {
	dst := r.Dst.String()
	if r.Dst.Bits() == 0 {
		dst = "default"
	}
	return dst + " via " + r.Gateway.String()
}
