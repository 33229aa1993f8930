//go:build linux

package boot

import (
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"
)

// bondInNetns is set in the child process TestConfigureBond runs in a
// network namespace of its own.
const bondInNetns = "METALSHIFT_BOND_TEST_NETNS"

// TestConfigureBond: the bond is made of the NICs with its MAC addresses
// (one listed is missing), in its mode; the address and route a member
// had from DHCP move to it; it gets its addresses and routes; and a second
// call changes nothing. Like TestDHCPLeaseIsRenewed it runs in a network
// namespace of its own (unshare -n, as root) with veth pairs as NICs, and
// is skipped where there is none, or where the kernel makes no bonds.
func TestConfigureBond(t *testing.T) {
	if os.Getenv(bondInNetns) == "" {
		if _, err := exec.LookPath("unshare"); err != nil {
			t.Skip("no unshare: the test runs in a network namespace of its own")
		}
		if err := exec.Command("unshare", "-n", "true").Run(); err != nil {
			t.Skipf("cannot make a network namespace (unshare -n needs root): %v", err)
		}
		cmd := exec.Command("unshare", "-n", os.Args[0], "-test.run", "^TestConfigureBond$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), bondInNetns+"=1")
		out, err := cmd.CombinedOutput()
		t.Logf("in its network namespace:\n%s", out)
		if strings.Contains(string(out), "--- SKIP: TestConfigureBond") {
			t.Skip("skipped in its network namespace: see above")
		}
		if err != nil || !strings.Contains(string(out), "--- PASS: TestConfigureBond") {
			t.Fatalf("the test in its network namespace failed: %v", err)
		}
		return
	}
	g := NewWithT(t)
	probe := netlink.NewLinkBond(netlink.LinkAttrs{Name: "probe0"})
	if err := netlink.LinkAdd(probe); err != nil {
		t.Skipf("the kernel makes no bond (no bonding module?): %v", err)
	}
	g.Expect(netlink.LinkDel(probe)).To(Succeed())

	macs := []string{"02:4d:00:00:00:01", "02:4d:00:00:00:02"}
	for i, mac := range macs {
		hw, _ := net.ParseMAC(mac)
		veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: []string{"nic0", "nic1"}[i], HardwareAddr: hw}, PeerName: []string{"sw0", "sw1"}[i]}
		g.Expect(netlink.LinkAdd(veth)).To(Succeed())
		for _, name := range []string{veth.Name, veth.PeerName} {
			l, err := netlink.LinkByName(name)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(netlink.LinkSetUp(l)).To(Succeed())
		}
	}
	// A bond0 in another mode is there (as the bonding module makes one
	// when loaded without max_bonds=0).
	g.Expect(netlink.LinkAdd(netlink.NewLinkBond(netlink.LinkAttrs{Name: "bond0"}))).To(Succeed())
	// nic0 has what the live image's DHCP gave it.
	nic0, err := netlink.LinkByName("nic0")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(netlink.AddrAdd(nic0, &netlink.Addr{IPNet: ipNet(netip.MustParsePrefix("10.0.2.15/24"))})).To(Succeed())
	_, booted, _ := net.ParseCIDR("192.0.2.0/24")
	g.Expect(netlink.RouteAdd(&netlink.Route{LinkIndex: nic0.Attrs().Index, Dst: booted, Gw: net.ParseIP("10.0.2.2")})).To(Succeed())

	b := Bond{
		Name: "bond0", Mode: 4, MACs: append(macs, "02:4d:00:00:00:09"),
		Addresses: []netip.Prefix{
			netip.MustParsePrefix("10.70.1.3/31"), netip.MustParsePrefix("198.51.100.3/31"),
			netip.MustParsePrefix("2001:db8::3/127"), netip.MustParsePrefix("198.51.100.77/32"),
		},
		Routes: []Route{
			{Dst: netip.MustParsePrefix("0.0.0.0/0"), Gateway: netip.MustParseAddr("198.51.100.2")},
			{Dst: netip.MustParsePrefix("::/0"), Gateway: netip.MustParseAddr("2001:db8::2")},
			{Dst: netip.MustParsePrefix("10.0.0.0/8"), Gateway: netip.MustParseAddr("10.70.1.2")},
		},
	}
	for i := range 2 {
		logs := &lines{}
		g.Expect(ConfigureBond(b, logs.logf)).To(Succeed(), "%s", logs)
		t.Logf("%s", logs)
		g.Expect(logs.String()).To(ContainSubstring("no NIC has the MAC address 02:4d:00:00:00:09"))
		g.Expect(logs.String()).To(ContainSubstring("bond0: 802.3ad bond (mode 4)"))
		g.Expect(strings.Contains(logs.String(), "bond0 is there in mode balance-rr")).To(Equal(i == 0), "made again once")
	}

	bond, err := netlink.LinkByName("bond0")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(bond.(*netlink.Bond).Mode).To(Equal(netlink.BOND_MODE_802_3AD))
	for _, name := range []string{"nic0", "nic1"} {
		l, err := netlink.LinkByName(name)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(l.Attrs().MasterIndex).To(Equal(bond.Attrs().Index), name)
	}
	addrs, err := netlink.AddrList(bond, netlink.FAMILY_ALL)
	g.Expect(err).NotTo(HaveOccurred())
	var got []string
	for _, a := range addrs {
		if a.Scope == 0 {
			got = append(got, a.IPNet.String())
		}
	}
	g.Expect(got).To(ConsistOf("10.0.2.15/24", "10.70.1.3/31", "198.51.100.3/31", "198.51.100.77/32", "2001:db8::3/127"))
	nic0Addrs, _ := netlink.AddrList(nic0, netlink.FAMILY_V4)
	g.Expect(nic0Addrs).To(BeEmpty(), "the DHCP address moved to the bond")

	routes, err := netlink.RouteList(bond, netlink.FAMILY_ALL)
	g.Expect(err).NotTo(HaveOccurred())
	var via []string
	for _, r := range routes {
		if r.Gw == nil {
			continue
		}
		dst := "default"
		if r.Dst != nil && !r.Dst.IP.IsUnspecified() {
			dst = r.Dst.String()
		}
		via = append(via, dst+" via "+r.Gw.String())
	}
	g.Expect(via).To(ConsistOf("default via 198.51.100.2", "default via 2001:db8::2", "10.0.0.0/8 via 10.70.1.2", "192.0.2.0/24 via 10.0.2.2"))
}
