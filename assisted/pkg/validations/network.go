package validations

import (
	"net"
	"net/netip"

	assistedapi "github.com/metalshift/metalshift/api/assisted/v2"
)

// hostPrefixes returns the addresses (with their prefix length) of every
// interface of an inventory.
func hostPrefixes(inv *assistedapi.Inventory) []netip.Prefix {
	var out []netip.Prefix
	for _, nic := range inv.Interfaces {
		for _, list := range [][]string{nic.IPV4Addresses, nic.IPV6Addresses} {
			for _, a := range list {
				if p, err := netip.ParsePrefix(a); err == nil {
					out = append(out, p)
				} else if ip, err := netip.ParseAddr(a); err == nil {
					out = append(out, netip.PrefixFrom(ip, ip.BitLen()))
				}
			}
		}
	}
	return out
}

// inAllNetworks tells whether the host has an address in every CIDR.
func inAllNetworks(inv *assistedapi.Inventory, cidrs []string) bool {
	addrs := hostPrefixes(inv)
	for _, c := range cidrs {
		n, err := netip.ParsePrefix(c)
		if err != nil {
			return false
		}
		found := false
		for _, a := range addrs {
			if n.Masked().Contains(a.Addr()) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// SNOMachineNetwork returns the machine network a single-node cluster with
// user-managed networking gets from its host, as upstream derives it when
// the user gives none: the network of the interface that holds the default
// route, else of the first address. "" if the inventory has no address.
func SNOMachineNetwork(inv *assistedapi.Inventory) string {
	if inv == nil {
		return ""
	}
	for _, r := range inv.Routes {
		if !isDefaultRoute(r.Destination) {
			continue
		}
		for _, nic := range inv.Interfaces {
			if nic.Name != r.Interface {
				continue
			}
			list := nic.IPV4Addresses
			if r.Family == 10 { // AF_INET6
				list = nic.IPV6Addresses
			}
			if n := firstNetwork(list); n != "" {
				return n
			}
		}
	}
	for _, nic := range inv.Interfaces {
		if n := firstNetwork(append(append([]string(nil), nic.IPV4Addresses...), nic.IPV6Addresses...)); n != "" {
			return n
		}
	}
	return ""
}

// VIPMachineNetwork returns the network of the inventory's interface
// address that holds vip, as upstream derives a multi-node cluster's
// machine network from its API VIP when the user gives none; "" if no
// interface is on the VIP's network.
func VIPMachineNetwork(inv *assistedapi.Inventory, vip string) string {
	ip, err := netip.ParseAddr(vip)
	if inv == nil || err != nil {
		return ""
	}
	for _, p := range hostPrefixes(inv) {
		if p.Bits() < p.Addr().BitLen() && p.Masked().Contains(ip) {
			return p.Masked().String()
		}
	}
	return ""
}

func isDefaultRoute(dst string) bool {
	ip := net.ParseIP(dst)
	return dst == "default" || ip != nil && ip.IsUnspecified()
}

func firstNetwork(addrs []string) string {
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a); err == nil {
			return p.Masked().String()
		}
	}
	return ""
}

// isBroadcast tells whether ip is the last address of an IPv4 network.
func isBroadcast(ip netip.Addr, n netip.Prefix) bool {
	if !ip.Is4() || !n.Addr().Is4() || n.Bits() >= 31 {
		return false
	}
	last := n.Masked().Addr().As4()
	mask := net.CIDRMask(n.Bits(), 32)
	for i := range last {
		last[i] |= ^mask[i]
	}
	return ip == netip.AddrFrom4(last)
}

// overlap tells whether two CIDRs overlap.
func overlap(a, b string) (bool, error) {
	pa, err := netip.ParsePrefix(a)
	if err != nil {
		return false, err
	}
	pb, err := netip.ParsePrefix(b)
	if err != nil {
		return false, err
	}
	return pa.Masked().Overlaps(pb.Masked()), nil
}
