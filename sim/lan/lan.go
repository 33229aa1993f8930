package lan

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// maxUnixPath is the longest path a unix socket can have on Linux.
const maxUnixPath = 107

// Options configure a LAN.
type Options struct {
	// Dir holds the ports' sockets. Keep the path short: a socket's must
	// fit in 107 bytes.
	Dir string
	// DHCP, when set, runs a DHCP server on the segment.
	DHCP *DHCPOptions
}

// Port is how a VM's NIC joins the segment: for QEMU,
// `-netdev dgram,local.type=unix,local.path=<VM>,remote.type=unix,remote.path=<LAN>`.
type Port struct {
	// LAN is the socket the LAN reads the NIC's frames from, bound when
	// the port is made.
	LAN string
	// VM is the socket QEMU binds, to which the LAN sends the frames for
	// the NIC.
	VM string
}

// LAN is a simulated Ethernet segment.
type LAN struct {
	dir  string
	dhcp *dhcpServer // nil without DHCP

	mu     sync.Mutex
	ports  map[string]*port
	macs   map[string]station // where each source MAC was seen last
	closed bool
	wg     sync.WaitGroup
}

// station is an end of the segment: a VM's port or the DHCP server.
type station interface {
	// receive is given a frame the switch forwards to the station.
	receive(frame []byte)
}

// New starts a segment whose ports are made in opts.Dir.
func New(opts Options) (*LAN, error) {
	if opts.Dir == "" {
		return nil, errors.New("the LAN needs a directory for its sockets")
	}
	l := &LAN{dir: opts.Dir, ports: map[string]*port{}, macs: map[string]station{}}
	if opts.DHCP != nil {
		s, err := newDHCPServer(l, *opts.DHCP)
		if err != nil {
			return nil, err
		}
		l.dhcp = s
	}
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, err
	}
	return l, nil
}

// portName is what a port may be named: it is part of its sockets' names.
var portName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// Attach makes the port name (letters, digits, '.', '_', '-'): it binds
// the LAN's socket and forwards what arrives there.
func (l *LAN) Attach(name string) (Port, error) {
	if !portName.MatchString(name) {
		return Port{}, fmt.Errorf("port name %q: letters, digits, '.', '_' and '-' only", name)
	}
	p := Port{LAN: filepath.Join(l.dir, name+".lan"), VM: filepath.Join(l.dir, name+".vm")}
	if len(p.VM) > maxUnixPath || len(p.LAN) > maxUnixPath {
		return Port{}, fmt.Errorf("the LAN's directory %s is too deep for the sockets of port %s (at most %d bytes): choose a shorter one",
			l.dir, name, maxUnixPath)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return Port{}, errors.New("the LAN is closed")
	}
	if _, ok := l.ports[name]; ok {
		return Port{}, fmt.Errorf("port %s is attached already", name)
	}
	_ = os.Remove(p.LAN) // a socket left by an earlier LAN in the same directory
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: p.LAN, Net: "unixgram"})
	if err != nil {
		return Port{}, err
	}
	raw, err := conn.SyscallConn()
	if err != nil {
		_ = conn.Close()
		return Port{}, err
	}
	pt := &port{l: l, name: name, conn: conn, raw: raw, vm: &unix.SockaddrUnix{Name: p.VM}}
	l.ports[name] = pt
	l.wg.Add(1)
	go pt.read()
	return p, nil
}

// Leases are the DHCP server's lease events so far, oldest first; none
// without a server.
func (l *LAN) Leases() []LeaseEvent {
	if l.dhcp == nil {
		return nil
	}
	return l.dhcp.events()
}

// Server is the DHCP server's address and MAC; none without a server.
func (l *LAN) Server() (netip.Addr, net.HardwareAddr) {
	if l.dhcp == nil {
		return netip.Addr{}, nil
	}
	return l.dhcp.ip, l.dhcp.mac
}

// Close stops the segment and removes its sockets (QEMU's are QEMU's).
func (l *LAN) Close() {
	l.mu.Lock()
	l.closed = true
	ports := make([]*port, 0, len(l.ports))
	for _, p := range l.ports {
		ports = append(ports, p)
	}
	l.mu.Unlock()
	for _, p := range ports {
		_ = p.conn.Close()
	}
	l.wg.Wait()
	for _, p := range ports {
		_ = os.Remove(p.conn.LocalAddr().String())
	}
}

// forward switches frame, which came from station from: to the station
// its destination was seen on last, or to every other station for a
// broadcast, a multicast or a destination not seen yet.
func (l *LAN) forward(from station, frame []byte) {
	h, ok := parseEthernet(frame)
	if !ok {
		return
	}
	var to []station
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	if !isGroup(h.src) {
		l.macs[h.src.String()] = from
	}
	if dst, ok := l.macs[h.dst.String()]; ok && !isGroup(h.dst) {
		if dst != from {
			to = append(to, dst)
		}
	} else {
		for _, p := range l.ports {
			if station(p) != from {
				to = append(to, p)
			}
		}
		if l.dhcp != nil && station(l.dhcp) != from {
			to = append(to, l.dhcp)
		}
	}
	l.mu.Unlock()
	for _, s := range to {
		s.receive(frame)
	}
}

// port is a VM's NIC's port.
type port struct {
	l    *LAN
	name string
	conn *net.UnixConn
	raw  syscall.RawConn
	vm   *unix.SockaddrUnix
}

// read forwards the frames the VM sends until the port is closed.
func (p *port) read() {
	defer p.l.wg.Done()
	buf := make([]byte, maxFrameLen)
	for {
		n, _, err := p.conn.ReadFromUnix(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		p.l.forward(p, append([]byte(nil), buf[:n]...))
	}
}

// receive sends frame to the VM without waiting: a VM that is not there
// (QEMU not started yet, or gone) or whose queue is full (a paused VM, a
// NIC its guest has not brought up) misses it, and the switch goes on with
// the other ports.
func (p *port) receive(frame []byte) {
	_ = p.raw.Write(func(fd uintptr) bool {
		_ = unix.Sendto(int(fd), frame, unix.MSG_DONTWAIT, p.vm)
		return true
	})
}
