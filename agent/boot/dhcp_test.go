//go:build linux

package boot

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv4/server4"
	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"
)

// inNetns is set in the child process TestDHCPLeaseIsRenewed runs in a
// network namespace of its own.
const inNetns = "METALSHIFT_DHCP_TEST_NETNS"

// TestDHCPLeaseIsRenewed: the live image's DHCP client, against a DHCP
// server that gives 4-second leases over a veth pair, keeps its address
// past the lease's end by renewing it, and the kernel has the address
// with the lease's lifetime. It runs in a network namespace of its own
// (unshare -n, which needs root), so that the machine's network is not
// touched; without one it is skipped.
func TestDHCPLeaseIsRenewed(t *testing.T) {
	if os.Getenv(inNetns) == "" {
		if _, err := exec.LookPath("unshare"); err != nil {
			t.Skip("no unshare: the test runs in a network namespace of its own")
		}
		if err := exec.Command("unshare", "-n", "true").Run(); err != nil {
			t.Skipf("cannot make a network namespace (unshare -n needs root): %v", err)
		}
		cmd := exec.Command("unshare", "-n", os.Args[0], "-test.run", "^TestDHCPLeaseIsRenewed$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), inNetns+"=1")
		out, err := cmd.CombinedOutput()
		t.Logf("in its network namespace:\n%s", out)
		if err != nil || !strings.Contains(string(out), "--- PASS: TestDHCPLeaseIsRenewed") {
			t.Fatalf("the test in its network namespace failed: %v", err)
		}
		return
	}
	g := NewWithT(t)
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "dhcps0"}, PeerName: "dhcpc0"}
	g.Expect(netlink.LinkAdd(veth)).To(Succeed())
	srvLink, err := netlink.LinkByName("dhcps0")
	g.Expect(err).NotTo(HaveOccurred())
	cliLink, err := netlink.LinkByName("dhcpc0")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(netlink.LinkSetUp(srvLink)).To(Succeed())
	g.Expect(netlink.LinkSetUp(cliLink)).To(Succeed())
	serverIP := net.IPv4(10, 99, 0, 1).To4()
	g.Expect(netlink.AddrAdd(srvLink, &netlink.Addr{IPNet: &net.IPNet{IP: serverIP, Mask: net.CIDRMask(24, 32)}})).To(Succeed())

	var mu sync.Mutex
	var asked []string // the message types the server answered
	srv, err := server4.NewServer("dhcps0", &net.UDPAddr{IP: net.IPv4zero, Port: dhcpv4.ServerPort}, func(conn net.PacketConn, peer net.Addr, m *dhcpv4.DHCPv4) {
		typ := dhcpv4.MessageTypeAck
		if m.MessageType() == dhcpv4.MessageTypeDiscover {
			typ = dhcpv4.MessageTypeOffer
		}
		reply, err := dhcpv4.NewReplyFromRequest(m, dhcpv4.WithMessageType(typ), dhcpv4.WithYourIP(net.IPv4(10, 99, 0, 10)),
			dhcpv4.WithServerIP(serverIP), dhcpv4.WithOption(dhcpv4.OptServerIdentifier(serverIP)),
			dhcpv4.WithNetmask(net.CIDRMask(24, 32)), dhcpv4.WithLeaseTime(4))
		if err != nil {
			return
		}
		mu.Lock()
		asked = append(asked, m.MessageType().String())
		mu.Unlock()
		to := peer.(*net.UDPAddr)
		if to.IP.IsUnspecified() {
			to = &net.UDPAddr{IP: net.IPv4bcast, Port: dhcpv4.ClientPort}
		}
		_, _ = conn.WriteTo(reply.ToBytes(), to)
	})
	g.Expect(err).NotTo(HaveOccurred())
	go func() { _ = srv.Serve() }()
	defer srv.Close()

	// Up on both ends (sysfs is the parent namespace's: netlink says).
	g.Eventually(func() netlink.LinkOperState {
		l, err := netlink.LinkByName("dhcpc0")
		if err != nil {
			return netlink.OperUnknown
		}
		return l.Attrs().OperState
	}, 10*time.Second, 10*time.Millisecond).Should(Equal(netlink.LinkOperState(netlink.OperUp)))
	logs := &lines{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g.Expect(dhcp(ctx, cliLink, logs.logf)).To(Succeed())
	renewed := func() int { return strings.Count(logs.String(), "Renewed the DHCP lease of 10.99.0.10 for 4s") }
	// Three renewals, two seconds apart (T1): past the first lease's end.
	g.Eventually(renewed, 30*time.Second, 100*time.Millisecond).Should(BeNumerically(">=", 3), "%s", logs)
	addrs, err := netlink.AddrList(cliLink, netlink.FAMILY_V4)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(addrs).To(ContainElement(And(HaveField("IPNet.IP", Equal(net.IPv4(10, 99, 0, 10).To4())),
		HaveField("ValidLft", BeNumerically("<=", 4)), HaveField("ValidLft", BeNumerically(">", 0)))), "the renewed address, valid for the lease")
	mu.Lock()
	defer mu.Unlock()
	// A DISCOVER may be asked again before the first offer comes (the link
	// is new); once the lease came, renewals only.
	first := slices.Index(asked, "REQUEST")
	g.Expect(first).To(BeNumerically(">", 0), "%v", asked)
	g.Expect(asked[:first]).To(HaveEach("DISCOVER"))
	g.Expect(asked[first:]).To(HaveEach("REQUEST"), "renewals, no new DISCOVER")
}

// lines is a Logf that keeps the lines.
type lines struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lines) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.WriteString(strings.TrimSpace(fmt.Sprintf(format, args...)) + "\n")
}

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
