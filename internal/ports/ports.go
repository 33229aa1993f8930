// Package ports reserves loopback TCP ports for servers that must be told
// a port number before they listen: processes that take no inherited
// listener (etcd, kube-apiserver, a manager started as a separate process)
// and servers that must come back on the same port after a restart.
//
// Picking a free port by listening on port 0 and closing the listener is
// racy: until the server binds it, the kernel may hand the same port to any
// other :0 listener or outgoing connection on the machine, and another
// process choosing the same way may pick it too. A reservation closes both
// races:
//
//   - it is picked outside the kernel's ephemeral range
//     (/proc/sys/net/ipv4/ip_local_port_range), from which the kernel takes
//     the ports of :0 listeners and outgoing connections and only from
//     there, so nothing gets it without asking for it by number;
//   - it is locked: an exclusive flock on <os.TempDir()>/metalshift-ports/<port>,
//     held by the reserving process until Release (or its exit, however it
//     exits). Every reservation on the machine takes the lock first, so two
//     reservations, in one process or in two, never hold the same port.
//
// A port some listener already holds is never returned. What is left is a
// program that binds a fixed port of the range without asking: it finds
// the port taken, as it would with any other server there.
//
// A server that runs in the reserving process can still be handed a
// listener instead, which is better: see the Listener fields of the
// components' options.
package ports

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Reservation is a loopback port held for its owner until Release.
type Reservation struct {
	// Port is the reserved port.
	Port int
	lock *os.File
}

// Addr is the loopback address of the port, 127.0.0.1:<port>.
func (r *Reservation) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(r.Port)) }

// Release gives the port up; it is safe to call more than once. A server
// on the port keeps it; only other reservations may pick it again once it
// is free.
func (r *Reservation) Release() {
	if r != nil && r.lock != nil {
		_ = r.lock.Close()
		r.lock = nil
	}
}

// Range is where reservations pick from: [Low, High].
type Range struct{ Low, High int }

// searchWidth is how many ports below the ephemeral range are candidates.
const searchWidth = 10000

// DefaultRange returns the ports below the kernel's ephemeral range, at
// most searchWidth of them and none under 1024; the top of the usual
// range (32768-60999) when the kernel does not say.
func DefaultRange() (Range, error) {
	low := 32768
	if data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(data)); len(f) == 2 {
			if v, err := strconv.Atoi(f[0]); err == nil {
				low = v
			}
		}
	}
	r := Range{Low: max(1024, low-searchWidth), High: low - 1}
	if r.High < r.Low {
		return r, fmt.Errorf("the ephemeral port range starts at %d: no room below it for reserved ports", low)
	}
	return r, nil
}

// Reserve reserves a loopback port: want when it is not 0 and can be had
// (kept across restarts, wherever it is), else one of DefaultRange.
func Reserve(want int) (*Reservation, error) {
	rg, err := DefaultRange()
	if err != nil {
		return nil, err
	}
	return ReserveIn(rg, want)
}

// ReserveIn is Reserve picking from rg.
func ReserveIn(rg Range, want int) (*Reservation, error) {
	dir, err := lockDir()
	if err != nil {
		return nil, err
	}
	if want != 0 {
		if r, err := try(dir, want); err != nil || r != nil {
			return r, err
		}
	}
	n := rg.High - rg.Low + 1
	if n <= 0 {
		return nil, fmt.Errorf("empty port range %d-%d", rg.Low, rg.High)
	}
	// From a random point, so that concurrent reservations seldom meet on
	// a lock.
	start := rand.IntN(n) //nolint:gosec // a starting point to spread reservations, not a secret
	for i := range n {
		port := rg.Low + (start+i)%n
		if port == want {
			continue
		}
		r, err := try(dir, port)
		if err != nil {
			return nil, err
		}
		if r != nil {
			return r, nil
		}
	}
	return nil, fmt.Errorf("no free loopback port in %d-%d", rg.Low, rg.High)
}

// try reserves port, or returns nil when another reservation holds it or
// something listens on it.
func try(dir string, port int) (*Reservation, error) {
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_CREATE|os.O_RDONLY, 0o644) //nolint:gosec // an empty lock file every user of the machine must open
	if err != nil {
		return nil, fmt.Errorf("reserving port %d: %w", port, err)
	}
	switch err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); {
	case errors.Is(err, syscall.EWOULDBLOCK):
		f.Close()
		return nil, nil
	case err != nil:
		f.Close()
		return nil, fmt.Errorf("reserving port %d: %w", port, err)
	}
	// Locked: no other reservation has it. Something that did not ask
	// (a server from before, another program) may listen on it.
	if !free(port) {
		f.Close()
		return nil, nil
	}
	return &Reservation{Port: port, lock: f}, nil
}

// free reports whether port can be bound on loopback and on all addresses.
func free(port int) bool {
	for _, host := range []string{"127.0.0.1", ""} {
		l, err := net.Listen("tcp4", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			return false
		}
		l.Close()
	}
	return true
}

// lockDir is where the locks are, one empty file per port, shared by every
// user of the machine (the files are never removed: removing one would let
// two processes lock two different files for one port).
func lockDir() (string, error) {
	dir := filepath.Join(os.TempDir(), "metalshift-ports")
	if err := os.Mkdir(dir, 0o777); err == nil { //nolint:gosec // shared by every user, sticky as /tmp
		// Sticky and writable by all, as /tmp is: the umask narrows Mkdir.
		_ = os.Chmod(dir, 0o777|os.ModeSticky)
	} else if !errors.Is(err, os.ErrExist) {
		return "", err
	}
	return dir, nil
}
