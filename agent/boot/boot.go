//go:build linux

package boot

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4/nclient4"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	"k8s.io/utils/clock"

	deployapi "github.com/metalshift/metalshift/api/deploy/v1"
)

// ModulesOrder lists the modules to load, one path per line relative to
// /lib/modules/<release>, dependencies first.
const ModulesOrder = "/lib/modules/load.order"

// Logf is where the init reports; the console by default.
type Logf func(format string, args ...any)

// Setup mounts /proc, /sys, /dev, /run and /tmp, loads the modules and
// configures the network: static addresses where netcfg (may be nil) gives
// them, DHCP on the other NICs with a link. Errors of single modules or
// NICs are logged, not returned: a NIC without DHCP must not stop the one
// that has it.
func Setup(ctx context.Context, logf Logf, netcfg *deployapi.NetworkConfig) error {
	if err := Prepare(logf); err != nil {
		return err
	}
	return Network(ctx, logf, netcfg)
}

// Prepare is Setup but the network: it mounts the kernel's filesystems and
// loads the modules, after which the NICs are there (to choose a network
// configuration by their MAC addresses).
func Prepare(logf Logf) error {
	if err := Mount(); err != nil {
		return err
	}
	LoadModules(logf)
	// Drivers probe devices asynchronously: give NICs and disks a moment.
	waitFor(3*time.Second, func() bool { return len(nics()) > 0 })
	return nil
}

// Mount mounts /proc, /sys, /dev (devtmpfs), /run and /tmp.
func Mount() error {
	for _, m := range []struct{ src, dst, fstype string }{
		{"proc", "/proc", "proc"}, {"sysfs", "/sys", "sysfs"}, {"devtmpfs", "/dev", "devtmpfs"},
		{"tmpfs", "/run", "tmpfs"}, {"tmpfs", "/tmp", "tmpfs"},
	} {
		if err := os.MkdirAll(m.dst, 0o755); err != nil { //nolint:gosec // the root filesystem's mount points
			return err
		}
		if err := unix.Mount(m.src, m.dst, m.fstype, unix.MS_NOSUID, ""); err != nil && !errors.Is(err, unix.EBUSY) {
			return fmt.Errorf("mounting %s: %w", m.dst, err)
		}
	}
	return nil
}

// LoadModules loads the modules ModulesOrder lists, in order.
func LoadModules(logf Logf) {
	var uts unix.Utsname
	_ = unix.Uname(&uts)
	dir := filepath.Join("/lib/modules", unix.ByteSliceToString(uts.Release[:]))
	f, err := os.Open(ModulesOrder)
	if err != nil {
		logf("No modules to load: %v", err)
		return
	}
	defer f.Close()
	loaded, failed := 0, 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rel := strings.TrimSpace(sc.Text())
		if rel == "" {
			continue
		}
		if err := loadModule(filepath.Join(dir, rel)); err != nil {
			failed++
			logf("Loading module %s: %v", filepath.Base(rel), err)
			continue
		}
		loaded++
	}
	logf("Loaded %d kernel modules (%d failed)", loaded, failed)
}

// moduleParams are the parameters of modules, by name. Loaded without,
// bonding makes a bond0 of its own in mode 0, which DHCP would wait on for
// a link; the metal cloud installer makes the bond it needs.
var moduleParams = map[string]string{"bonding": "max_bonds=0"}

func loadModule(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	err = unix.FinitModule(int(f.Fd()), moduleParams[strings.TrimSuffix(filepath.Base(path), ".ko")], 0)
	if errors.Is(err, unix.EEXIST) {
		return nil
	}
	return err
}

func waitFor(d time.Duration, ok func() bool) bool {
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
	return true
}

// nics returns the names of the network interfaces but loopback.
func nics() []string {
	entries, _ := os.ReadDir("/sys/class/net")
	var out []string
	for _, e := range entries {
		if e.Name() != "lo" {
			out = append(out, e.Name())
		}
	}
	return out
}

// Network brings loopback and every NIC up, gives the NICs netcfg
// configures their static addresses and runs DHCP on the others that have
// a link, in parallel. It succeeds when at least one NIC got an address;
// it can be called again when none did.
func Network(ctx context.Context, logf Logf, netcfg *deployapi.NetworkConfig) error {
	if lo, err := netlink.LinkByName("lo"); err == nil {
		_ = netlink.LinkSetUp(lo)
	}
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		leases int
		// names maps the configuration's interface names to links.
		names = map[string]netlink.Link{}
	)
	for _, name := range nics() {
		link, err := netlink.LinkByName(name)
		if err != nil {
			continue
		}
		if err := netlink.LinkSetUp(link); err != nil {
			logf("%s: setting the link up: %v", name, err)
			continue
		}
		if itf := find(netcfg, link.Attrs().HardwareAddr.String(), name); static(itf) {
			if err := configureStatic(link, itf, logf); err != nil {
				logf("%s (%s): %v", name, link.Attrs().HardwareAddr, err)
				continue
			}
			mu.Lock()
			leases++
			names[itf.Name] = link
			mu.Unlock()
			continue
		}
		logf("%s (%s): link up, waiting for carrier", name, link.Attrs().HardwareAddr)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !waitFor(10*time.Second, func() bool { return carrier(name) }) {
				logf("%s (%s): no link", name, link.Attrs().HardwareAddr)
				return
			}
			if err := dhcp(ctx, link, logf); err != nil {
				logf("%s (%s): DHCP: %v", name, link.Attrs().HardwareAddr, err)
				return
			}
			mu.Lock()
			leases++
			mu.Unlock()
		}()
	}
	wg.Wait()
	if netcfg != nil {
		applyRoutesAndDNS(netcfg, names, logf)
	}
	if leases == 0 {
		return errors.New("no NIC got an address, from DHCP or the network data")
	}
	return nil
}

// static gives link the static addresses itf lists.
func configureStatic(link netlink.Link, itf *deployapi.Interface, logf Logf) error {
	var addrs []string
	for _, ip := range []*deployapi.IP{itf.IPv4, itf.IPv6} {
		if ip == nil || !ip.Enabled {
			continue
		}
		for _, a := range ip.Address {
			ipnet := &net.IPNet{IP: net.ParseIP(a.IP), Mask: net.CIDRMask(a.PrefixLength, map[bool]int{true: 32, false: 128}[net.ParseIP(a.IP).To4() != nil])}
			if err := netlink.AddrReplace(link, &netlink.Addr{IPNet: ipnet}); err != nil {
				return fmt.Errorf("adding %s: %w", ipnet, err)
			}
			addrs = append(addrs, ipnet.String())
		}
	}
	logf("%s (%s): %s (static, from the network data's %s)", link.Attrs().Name, link.Attrs().HardwareAddr, strings.Join(addrs, ", "), itf.Name)
	return nil
}

// applyRoutesAndDNS adds the network data's routes and DNS servers.
func applyRoutesAndDNS(cfg *deployapi.NetworkConfig, names map[string]netlink.Link, logf Logf) {
	for _, r := range cfg.Routes.Config {
		_, dst, _ := net.ParseCIDR(r.Destination)
		route := &netlink.Route{Dst: dst, Gw: net.ParseIP(r.NextHopAddress)}
		if ones, _ := dst.Mask.Size(); ones == 0 {
			route.Dst = nil // the default route
		}
		if link, ok := names[r.NextHopInterface]; ok {
			route.LinkIndex = link.Attrs().Index
		}
		if err := netlink.RouteReplace(route); err != nil {
			logf("route to %s via %s: %v", r.Destination, r.NextHopAddress, err)
			continue
		}
		logf("route to %s via %s", r.Destination, r.NextHopAddress)
	}
	if servers := cfg.DNSResolver.Config.Server; len(servers) > 0 {
		_ = os.MkdirAll("/etc", 0o755) //nolint:gosec // the root filesystem's /etc
		_ = os.WriteFile("/etc/resolv.conf", []byte("nameserver "+strings.Join(servers, "\nnameserver ")+"\n"), 0o644)
	}
}

func carrier(name string) bool {
	b, err := os.ReadFile(filepath.Join("/sys/class/net", name, "carrier"))
	return err == nil && strings.TrimSpace(string(b)) == "1"
}

// dhcp asks for a lease on link and configures its address, the default
// route and the resolver, then keeps the lease (keepLease) while ctx lasts.
func dhcp(ctx context.Context, link netlink.Link, logf Logf) error {
	name := link.Attrs().Name
	logf("%s: DHCP", name)
	c, err := nclient4.New(name, nclient4.WithTimeout(4*time.Second), nclient4.WithRetry(4))
	if err != nil {
		return err
	}
	lease, err := c.Request(ctx)
	if err == nil {
		err = configureLease(link, lease, logf)
	}
	if err != nil {
		_ = c.Close()
		return err
	}
	go func() {
		defer c.Close() //nolint:errcheck // a DHCP client socket
		keepLease(ctx, c, clock.RealClock{}, lease,
			func(l *nclient4.Lease) error {
				// On a bond the address only: its routes are the bond's
				// configuration's.
				if h := holder(link); h.Attrs().Index != link.Attrs().Index {
					return netlink.AddrReplace(h, leaseAddr(l))
				}
				return configureLease(link, l, logf)
			},
			func(l *nclient4.Lease) { _ = netlink.AddrDel(holder(link), leaseAddr(l)) }, logf)
	}()
	return nil
}

// holder is the link that holds link's lease: link, or the bond it was
// made a member of since (ConfigureBond moves the address there).
func holder(link netlink.Link) netlink.Link {
	cur, err := netlink.LinkByIndex(link.Attrs().Index)
	if err != nil || cur.Attrs().MasterIndex == 0 {
		return link
	}
	if master, err := netlink.LinkByIndex(cur.Attrs().MasterIndex); err == nil {
		return master
	}
	return link
}

// leaseAddr is the address of a lease, valid (in the kernel) for as long
// as the lease, so that an address whose lease ended without a renewal is
// not used on.
func leaseAddr(lease *nclient4.Lease) *netlink.Addr {
	ack := lease.ACK
	mask := ack.SubnetMask()
	if mask == nil {
		mask = net.CIDRMask(24, 32)
	}
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: ack.YourIPAddr, Mask: mask}}
	if length, _, _ := leaseTimes(ack); length < infiniteLease {
		addr.ValidLft = int(length / time.Second)
		addr.PreferedLft = addr.ValidLft
	}
	return addr
}

// configureLease configures link with lease: its address, the default
// route and the resolver.
func configureLease(link netlink.Link, lease *nclient4.Lease, logf Logf) error {
	name := link.Attrs().Name
	ack := lease.ACK
	addr := leaseAddr(lease)
	if err := netlink.AddrReplace(link, addr); err != nil {
		return fmt.Errorf("adding %s: %w", addr.IPNet, err)
	}
	msg := fmt.Sprintf("%s (%s): %s", name, link.Attrs().HardwareAddr, addr.IPNet)
	if routers := ack.Router(); len(routers) > 0 {
		if err := netlink.RouteReplace(&netlink.Route{LinkIndex: link.Attrs().Index, Gw: routers[0]}); err != nil {
			logf("%s: default route via %s: %v", name, routers[0], err)
		} else {
			msg += " via " + routers[0].String()
		}
	}
	if dns := ack.DNS(); len(dns) > 0 {
		var b strings.Builder
		for _, d := range dns {
			fmt.Fprintf(&b, "nameserver %s\n", d)
		}
		_ = os.MkdirAll("/etc", 0o755) //nolint:gosec // the root filesystem's /etc
		_ = os.WriteFile("/etc/resolv.conf", []byte(b.String()), 0o644)
	}
	if length, _, _ := leaseTimes(ack); length < infiniteLease {
		msg += fmt.Sprintf(", lease %s", length)
	}
	logf("%s", msg)
	return nil
}

// Reap collects orphaned children forever, as PID 1 must.
func Reap() {
	for {
		var ws unix.WaitStatus
		if _, err := unix.Wait4(-1, &ws, 0, nil); errors.Is(err, unix.ECHILD) {
			time.Sleep(time.Second)
		}
	}
}
