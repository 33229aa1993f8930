package ports

import (
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// TestReservationsAreExclusive: while held, two reservations never have
// the same port, even when the range holds fewer ports than asked for;
// a released port can be had again.
func TestReservationsAreExclusive(t *testing.T) {
	rg := testRange(t, 8)
	held := map[int]*Reservation{}
	for range 8 {
		r, err := ReserveIn(rg, 0)
		if err != nil {
			t.Fatalf("after %d reservations: %v", len(held), err)
		}
		if held[r.Port] != nil {
			t.Fatalf("port %d reserved twice", r.Port)
		}
		if r.Port < rg.Low || r.Port > rg.High {
			t.Fatalf("port %d outside %v", r.Port, rg)
		}
		held[r.Port] = r
	}
	if r, err := ReserveIn(rg, 0); err == nil {
		t.Fatalf("a ninth reservation in a range of 8 got port %d", r.Port)
	}
	for port, r := range held {
		if again, _ := ReserveIn(rg, port); again != nil {
			t.Fatalf("port %d asked for by number while reserved", port)
		}
		r.Release()
		again, err := ReserveIn(rg, port)
		if err != nil || again.Port != port {
			t.Fatalf("released port %d not given back: %v %v", port, again, err)
		}
		again.Release()
		break
	}
	for _, r := range held {
		r.Release()
	}
}

// TestListenedPortIsNotReserved: a port another listener holds, one that
// did not reserve it, is never returned, asked for by number or not.
func TestListenedPortIsNotReserved(t *testing.T) {
	rg := testRange(t, 3)
	var lns []net.Listener
	for p := rg.Low; p < rg.High; p++ {
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Skipf("cannot listen on %d for the test: %v", p, err)
		}
		lns = append(lns, l)
	}
	defer func() {
		for _, l := range lns {
			l.Close()
		}
	}()
	for _, l := range lns {
		port := l.Addr().(*net.TCPAddr).Port
		r, err := ReserveIn(rg, port)
		if err != nil {
			t.Fatal(err)
		}
		if r.Port != rg.High {
			t.Fatalf("asked for listened port %d, got %d; want the only free one, %d", port, r.Port, rg.High)
		}
		r.Release()
	}
}

// TestReservationHeldAcrossProcesses: a port reserved by another process
// is not returned here until that process exits.
func TestReservationHeldAcrossProcesses(t *testing.T) {
	if os.Getenv("PORTS_TEST_HOLD") != "" {
		held := func() {
			rg := rangeFromEnv()
			r, err := ReserveIn(rg, 0)
			if err != nil {
				os.Exit(3)
			}
			os.Stdout.WriteString(strconv.Itoa(r.Port) + "\n")
			// Hold it until the parent closes stdin.
			_, _ = os.Stdin.Read(make([]byte, 1))
			os.Exit(0)
		}
		held()
	}
	rg := testRange(t, 2)
	cmd := exec.Command(os.Args[0], "-test.run=^TestReservationHeldAcrossProcesses$")
	cmd.Env = append(os.Environ(), "PORTS_TEST_HOLD=1", "PORTS_TEST_RANGE="+strconv.Itoa(rg.Low)+"-"+strconv.Itoa(rg.High))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 16)
	n, err := stdout.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := strconv.Atoi(strings.TrimSpace(string(buf[:n])))
	if err != nil {
		t.Fatalf("child said %q", buf[:n])
	}
	// Both ways of asking: by number and from the range.
	if r, _ := ReserveIn(rg, theirs); r == nil || r.Port == theirs {
		t.Fatalf("port %d reserved by the other process was returned (%v)", theirs, r)
	} else {
		r.Release()
	}
	for range 5 {
		if r, _ := ReserveIn(rg, 0); r == nil || r.Port == theirs {
			t.Fatalf("port %d reserved by the other process was returned (%v)", theirs, r)
		} else {
			r.Release()
		}
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	// The lock went with the process: its descriptors are closed once
	// Wait returns.
	r, err := ReserveIn(rg, theirs)
	if err != nil || r.Port != theirs {
		t.Fatalf("port %d not free after its holder exited: %v %v", theirs, r, err)
	}
	r.Release()
}

// TestDefaultRangeBelowEphemeral: reservations are picked where the kernel
// does not pick ports by itself.
func TestDefaultRangeBelowEphemeral(t *testing.T) {
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		t.Skip("no ip_local_port_range here")
	}
	low, _ := strconv.Atoi(strings.Fields(string(data))[0])
	rg, err := DefaultRange()
	if err != nil {
		t.Fatal(err)
	}
	if rg.High >= low || rg.Low < 1024 || rg.High-rg.Low < 100 {
		t.Fatalf("range %v for an ephemeral range from %d", rg, low)
	}
	r, err := Reserve(0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	if r.Port < rg.Low || r.Port > rg.High {
		t.Fatalf("reserved %d outside %v", r.Port, rg)
	}
}

// testRange returns n ports of the default range, a window picked per
// process so that concurrent test runs seldom share it; shared, the
// reservations still exclude each other, and a test whose window is in use
// elsewhere would fail its counts, so it looks for a window of n ports
// that it can reserve all of first.
func testRange(t *testing.T, n int) Range {
	t.Helper()
	rg, err := DefaultRange()
	if err != nil {
		t.Skip(err)
	}
	base := rg.Low + os.Getpid()%(rg.High-rg.Low-n)
	for range (rg.High - rg.Low) / n {
		base += n
		if base+n-1 > rg.High {
			base = rg.Low
		}
		w := Range{Low: base, High: base + n - 1}
		var rs []*Reservation
		for p := w.Low; p <= w.High; p++ {
			if r, _ := try(mustLockDir(t), p); r != nil {
				rs = append(rs, r)
			}
		}
		for _, r := range rs {
			r.Release()
		}
		if len(rs) == n {
			return w
		}
	}
	t.Skipf("no %d consecutive free ports in %v", n, rg)
	return Range{}
}

func mustLockDir(t *testing.T) string {
	d, err := lockDir()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func rangeFromEnv() Range {
	lo, hi, _ := strings.Cut(os.Getenv("PORTS_TEST_RANGE"), "-")
	l, _ := strconv.Atoi(lo)
	h, _ := strconv.Atoi(hi)
	return Range{Low: l, High: h}
}
