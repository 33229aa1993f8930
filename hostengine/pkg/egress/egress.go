package egress

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"time"
)

// ErrRefused is matched (errors.Is) by every refusal of the policy.
var ErrRefused = errors.New("refused by the hub's BMC egress policy")

// Policy says which addresses BMC connections may be opened to. Its zero
// value is the production policy: loopback (127.0.0.0/8, ::1), link-local
// (169.254.0.0/16, fe80::/10, with the cloud metadata address
// 169.254.169.254), unspecified (0.0.0.0/8, ::), multicast and broadcast
// addresses are refused; everything else is allowed.
type Policy struct {
	// AllowLoopback allows loopback addresses, where a laptop lab's
	// simulated BMCs listen.
	AllowLoopback bool
	// Allowed are networks allowed although a class above refuses them,
	// e.g. 169.254.0.0/16 for BMCs on a link-local network. A network
	// that holds a cloud metadata address allows it too: list the
	// narrowest networks that hold the BMCs.
	Allowed []netip.Prefix
}

// metadata are the addresses clouds serve instance metadata (and
// credentials) at beyond the link-local one: AWS over IPv6, Alibaba Cloud.
var metadata = []netip.Addr{
	netip.MustParseAddr("169.254.169.254"),
	netip.MustParseAddr("fd00:ec2::254"),
	netip.MustParseAddr("100.100.100.200"),
}

var broadcast = netip.AddrFrom4([4]byte{255, 255, 255, 255})

// class names why addr is refused by default; "" means it is not.
func class(addr netip.Addr) string {
	for _, m := range metadata {
		if addr == m {
			return "cloud metadata"
		}
	}
	switch {
	case addr.IsLoopback():
		return "loopback"
	case addr.IsUnspecified() || (addr.Is4() && addr.As4()[0] == 0):
		return "unspecified"
	case addr.IsLinkLocalUnicast():
		return "link-local"
	case addr.IsMulticast():
		return "multicast"
	case addr == broadcast:
		return "broadcast"
	}
	return ""
}

// RefusedError is a refused address. It matches ErrRefused.
type RefusedError struct {
	// Addr is the address refused.
	Addr netip.Addr
	// Class is why: loopback, link-local, cloud metadata, unspecified,
	// multicast or broadcast.
	Class string
}

func (e *RefusedError) Error() string {
	how := "with --bmc-allowed-networks"
	if e.Class == "loopback" {
		how = "with --bmc-allow-loopback or --bmc-allowed-networks"
	}
	return fmt.Sprintf("%s is a %s address, to which the hub's BMC egress policy allows no BMC connections (a hub allows them %s)", e.Addr, e.Class, how)
}

// Is makes a RefusedError match ErrRefused.
func (e *RefusedError) Is(target error) bool { return target == ErrRefused }

// Check returns a *RefusedError when the policy refuses addr, else nil.
// IPv4 addresses written as IPv6 (::ffff:127.0.0.1) are checked as IPv4.
func (p Policy) Check(addr netip.Addr) error {
	addr = addr.Unmap().WithZone("")
	for _, n := range p.Allowed {
		if n.Contains(addr) {
			return nil
		}
	}
	c := class(addr)
	if c == "" || (c == "loopback" && p.AllowLoopback) {
		return nil
	}
	return &RefusedError{Addr: addr, Class: c}
}

// Control is a net.Dialer Control function that refuses the connection
// before it is opened when the policy refuses its address. address is the
// resolved "ip:port" the dialer is about to connect to; one that does not
// parse is refused.
func (p Policy) Control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: cannot tell the address of %s connection to %q", ErrRefused, network, address)
	}
	return p.Check(ap.Addr())
}

// Dialer returns a dialer that opens only the connections the policy
// allows, each within timeout (0: no timeout of its own).
func (p Policy) Dialer(timeout time.Duration) *net.Dialer {
	return &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second, Control: p.Control}
}

// String describes the policy, for logs.
func (p Policy) String() string {
	refused := "loopback, link-local, cloud metadata, unspecified, multicast and broadcast addresses refused"
	if p.AllowLoopback {
		refused = "link-local, cloud metadata, unspecified, multicast and broadcast addresses refused, loopback allowed"
	}
	if len(p.Allowed) == 0 {
		return refused
	}
	nets := make([]string, len(p.Allowed))
	for i, n := range p.Allowed {
		nets[i] = n.String()
	}
	return refused + "; allowed anyway: " + strings.Join(nets, ", ")
}

// ParsePrefixes parses CIDRs such as 169.254.0.0/16 or fe80::/64, as the
// --bmc-allowed-networks flag takes them. A single address is its own
// network (/32 or /128).
func ParsePrefixes(cidrs []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(cidrs))
	for _, s := range cidrs {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if a, err := netip.ParseAddr(s); err == nil {
			out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			continue
		}
		pfx, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("%q is not a network such as 169.254.0.0/16 or fe80::/64", s)
		}
		out = append(out, pfx.Masked())
	}
	return out, nil
}
