//go:build linux

package boot

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// bondMiimon is how often (ms) the bond checks its members' links, as
// distributions configure bonds.
const bondMiimon = 100

// ConfigureBond makes the bond b describes of the NICs with its MAC
// addresses (those the machine has: at least one), brings it up, and gives
// it b's addresses and routes. What a member had before, the address and
// routes the live image's DHCP gave it when it booted, moves to the bond:
// an enslaved NIC's own address no longer answers, and the connection the
// machine booted over must stay. It can be called again: a bond that is
// there is kept, members in it stay, addresses and routes are replaced.
func ConfigureBond(b Bond, logf Logf) error {
	if b.Name == "" || len(b.MACs) == 0 {
		return errors.New("a bond needs a name and member MAC addresses")
	}
	links, err := netlink.LinkList()
	if err != nil {
		return fmt.Errorf("listing the NICs: %w", err)
	}
	var members []netlink.Link
	for _, mac := range b.MACs {
		if l := nicByMAC(links, mac); l != nil {
			members = append(members, l)
			continue
		}
		logf("%s: no NIC has the MAC address %s; the bond goes without it", b.Name, mac)
	}
	if len(members) == 0 {
		return fmt.Errorf("no NIC has any of the MAC addresses %s", strings.Join(b.MACs, ", "))
	}
	bond, err := ensureBond(b, logf)
	if err != nil {
		return err
	}
	if kb, ok := bond.(*netlink.Bond); ok {
		logf("%s: %s bond (mode %d)", b.Name, kb.Mode, b.Mode)
	}
	idx := bond.Attrs().Index
	var moved []netlink.Addr
	var movedRoutes []netlink.Route
	for _, m := range members {
		name := m.Attrs().Name
		if m.Attrs().MasterIndex == idx {
			continue
		}
		addrs, routes := own(m)
		// The kernel enslaves only a NIC that is down.
		if err := netlink.LinkSetDown(m); err != nil {
			return fmt.Errorf("setting %s down: %w", name, err)
		}
		if err := netlink.LinkSetMasterByIndex(m, idx); err != nil {
			return fmt.Errorf("adding %s (%s) to %s: %w", name, m.Attrs().HardwareAddr, b.Name, err)
		}
		if err := netlink.LinkSetUp(m); err != nil {
			return fmt.Errorf("setting %s up: %w", name, err)
		}
		for _, a := range addrs {
			_ = netlink.AddrDel(m, &a)
			logf("%s: %s moves from %s to the bond", b.Name, a.IPNet, name)
		}
		moved = append(moved, addrs...)
		movedRoutes = append(movedRoutes, routes...)
		logf("%s: %s (%s) is a member", b.Name, name, m.Attrs().HardwareAddr)
	}
	if err := netlink.LinkSetUp(bond); err != nil {
		return fmt.Errorf("setting %s up: %w", b.Name, err)
	}
	for _, a := range moved {
		a := netlink.Addr{IPNet: a.IPNet, ValidLft: a.ValidLft, PreferedLft: a.PreferedLft}
		if err := netlink.AddrReplace(bond, &a); err != nil {
			return fmt.Errorf("adding %s to %s: %w", a.IPNet, b.Name, err)
		}
	}
	for _, r := range movedRoutes {
		r.LinkIndex, r.ILinkIndex = idx, 0
		if err := netlink.RouteReplace(&r); err != nil {
			logf("%s: route to %v via %s: %v", b.Name, r.Dst, r.Gw, err)
		}
	}
	for _, p := range b.Addresses {
		a := &netlink.Addr{IPNet: ipNet(p)}
		if p.Addr().Is6() {
			// The cloud gave the address to this machine alone: waiting for
			// duplicate address detection would only delay the metadata's
			// next call.
			a.Flags = unix.IFA_F_NODAD
		}
		if err := netlink.AddrReplace(bond, a); err != nil {
			return fmt.Errorf("adding %s to %s: %w", p, b.Name, err)
		}
	}
	for _, r := range b.Routes {
		route := &netlink.Route{LinkIndex: idx, Gw: net.IP(r.Gateway.AsSlice())}
		if r.Dst.Bits() > 0 {
			route.Dst = ipNet(r.Dst)
		}
		if !onLink(b.Addresses, r.Gateway) {
			// A gateway outside the bond's prefixes is still on its link.
			route.Flags = int(netlink.FLAG_ONLINK)
		}
		if err := netlink.RouteReplace(route); err != nil {
			return fmt.Errorf("route %s on %s: %w", r, b.Name, err)
		}
		logf("%s: route %s", b.Name, r)
	}
	return nil
}

// nicByMAC is the NIC (not a bond, which shares its first member's MAC
// address) with mac.
func nicByMAC(links []netlink.Link, mac string) netlink.Link {
	for _, l := range links {
		if l.Type() == "bond" || l.Attrs().HardwareAddr == nil {
			continue
		}
		if strings.EqualFold(l.Attrs().HardwareAddr.String(), mac) {
			return l
		}
	}
	return nil
}

// ensureBond returns the bond b names, made with b's mode when it is not
// there or has another mode (a bond's mode is set before its members).
func ensureBond(b Bond, logf Logf) (netlink.Link, error) {
	if l, err := netlink.LinkByName(b.Name); err == nil {
		kb, ok := l.(*netlink.Bond)
		if !ok {
			return nil, fmt.Errorf("%s is there and is not a bond (%s)", b.Name, l.Type())
		}
		if kb.Mode == netlink.BondMode(b.Mode) {
			return l, nil
		}
		logf("%s is there in mode %s: making it again in mode %d", b.Name, kb.Mode, b.Mode)
		if err := netlink.LinkDel(l); err != nil {
			return nil, fmt.Errorf("removing %s: %w", b.Name, err)
		}
	}
	bond := netlink.NewLinkBond(netlink.LinkAttrs{Name: b.Name})
	bond.Mode = netlink.BondMode(b.Mode)
	bond.Miimon = bondMiimon
	if err := netlink.LinkAdd(bond); err != nil {
		return nil, fmt.Errorf("making the bond %s (mode %d): %w", b.Name, b.Mode, err)
	}
	return netlink.LinkByName(b.Name)
}

// own is what link has that moves to the bond: its addresses of global
// scope and its routes through a gateway (the kernel makes the prefix
// routes again with the addresses).
func own(link netlink.Link) ([]netlink.Addr, []netlink.Route) {
	var addrs []netlink.Addr
	all, _ := netlink.AddrList(link, netlink.FAMILY_ALL)
	for _, a := range all {
		if a.Scope == unix.RT_SCOPE_UNIVERSE {
			addrs = append(addrs, a)
		}
	}
	var routes []netlink.Route
	rs, _ := netlink.RouteList(link, netlink.FAMILY_ALL)
	for _, r := range rs {
		if r.Gw != nil {
			routes = append(routes, r)
		}
	}
	return addrs, routes
}

func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// onLink says whether gw is in one of the prefixes.
func onLink(prefixes []netip.Prefix, gw netip.Addr) bool {
	for _, p := range prefixes {
		if p.Masked().Contains(gw) {
			return true
		}
	}
	return false
}
