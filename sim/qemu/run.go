package qemu

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/metalshift/metalshift/sim/machine"
)

// Timeouts of a QEMU process's life.
const (
	qmpConnectTimeout = 30 * time.Second
	quitTimeout       = 10 * time.Second
)

// maxUnixPath is the longest path a unix socket can have on Linux.
const maxUnixPath = 107

// maxBootFile is the longest boot file name DHCP's BOOTP file field holds.
const maxBootFile = 127

// process is a running QEMU.
type process struct {
	cmd  *exec.Cmd
	qmp  *qmpClient
	done chan struct{} // closed when QEMU has exited
	err  error         // how it exited, once done

	mu       sync.Mutex
	reason   string // of QEMU's last SHUTDOWN event
	attached string // the file in the CD drive, "" when empty
}

// shutdownReason is why QEMU said it shuts down (QMP SHUTDOWN event).
func (p *process) shutdownReason() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.reason == "" {
		return "QEMU exited"
	}
	return p.reason
}

// run starts QEMU booting from, waits until ctx is cancelled (and then
// quits QEMU) or QEMU exits, and returns QEMU's shutdown reason.
func (v *vm) run(ctx context.Context, from machine.BootTarget) (string, error) {
	uefi := v.m.Override().UEFI
	if from == machine.BootCd {
		v.waitMedia(ctx)
	}
	spec, err := v.prepare(uefi, from)
	if err != nil {
		return "", err
	}
	p, err := v.start(ctx, spec)
	if err != nil {
		return "", err
	}
	v.mu.Lock()
	v.proc = p
	v.mu.Unlock()
	defer func() {
		v.mu.Lock()
		v.proc = nil
		v.mu.Unlock()
		_ = p.qmp.Close()
	}()
	v.applyMedia()
	if err := p.qmp.execute(ctx, "cont", nil, nil); err != nil && ctx.Err() == nil {
		p.stop()
		return "", err
	}
	mode := "BIOS"
	if uefi {
		mode = "UEFI"
	}
	v.logf("QEMU started (pid %d): %s, booting from %s first", p.cmd.Process.Pid, mode, from)
	stopTail := v.tailConsole(spec.ConsoleLog)
	defer stopTail()
	select {
	case <-ctx.Done():
		p.stop()
		v.logf("QEMU quit: the machine was powered off or reset")
		return "", nil
	case <-p.done:
		if p.err != nil {
			return "", fmt.Errorf("QEMU: %w%s", p.err, v.qemuLogTail())
		}
		return p.shutdownReason(), nil
	}
}

// prepare makes the VM's state directory: disks (sparse files), UEFI
// variables; and returns its spec.
func (v *vm) prepare(uefi bool, from machine.BootTarget) (vmSpec, error) {
	o := v.f.opts
	hw := v.m.Hardware
	s := vmSpec{
		ID: v.m.ID, UUID: v.m.UUID, Hardware: hw, UEFI: uefi, From: from, Accel: o.Accel,
		QMPSocket: filepath.Join(v.dir, "qmp.sock"), ConsoleLog: filepath.Join(v.dir, "console.log"),
	}
	if o.GuestForwards != nil {
		s.GuestForwards = o.GuestForwards(v.m.ID)
	}
	if o.Segments != nil {
		s.Segments = o.Segments(v.m.ID)
		for i, d := range s.Segments {
			switch {
			case i < 1 || i >= len(hw.NICs):
				return s, fmt.Errorf("a simulated segment for NIC %d: the machine's NICs on one are 1 to %d (the first stays on user networking)", i, len(hw.NICs)-1)
			case len(d.Local) > maxUnixPath || len(d.Remote) > maxUnixPath:
				return s, fmt.Errorf("the sockets of NIC %d's segment (%s, %s) are too deep (at most %d bytes)", i, d.Local, d.Remote, maxUnixPath)
			}
		}
	}
	if o.StateDir == "" {
		return s, errors.New("the QEMU backend needs a state directory")
	}
	if len(s.QMPSocket) > maxUnixPath {
		return s, fmt.Errorf("the state directory %s is too deep for the QMP socket (%d bytes, at most %d): choose a shorter one",
			o.StateDir, len(s.QMPSocket), maxUnixPath)
	}
	if err := os.MkdirAll(v.dir, 0o700); err != nil {
		return s, err
	}
	for i, d := range hw.Disks {
		path := filepath.Join(v.dir, fmt.Sprintf("disk%d.raw", i))
		if err := sparseFile(path, d.SizeBytes); err != nil {
			return s, err
		}
		s.DiskFiles = append(s.DiskFiles, path)
	}
	if uefi {
		s.OVMFCode, s.VarsFile = o.OVMFCode, filepath.Join(v.dir, "OVMF_VARS.fd")
		if err := copyIfMissing(o.OVMFVars, s.VarsFile); err != nil {
			return s, fmt.Errorf("the VM's UEFI variables: %w", err)
		}
	}
	if o.BootURL != "" && len(hw.NICs) > 0 {
		s.BootFile = guestURL(o.BootURL, o.GuestHostAlias) + "/boot/by-mac/" + hw.NICs[0].MAC
		if len(s.BootFile) > maxBootFile {
			v.logf("The boot file URL %s is longer than DHCP's %d bytes: no network boot", s.BootFile, maxBootFile)
			s.BootFile = ""
		}
	}
	return s, nil
}

// start runs QEMU paused and connects to its QMP socket.
func (v *vm) start(ctx context.Context, s vmSpec) (*process, error) {
	_ = os.Remove(s.QMPSocket)
	qlog, err := os.OpenFile(filepath.Join(v.dir, "qemu.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer qlog.Close()
	fmt.Fprintf(qlog, "%s %s %s\n", time.Now().UTC().Format(time.RFC3339), v.f.opts.QEMU, strings.Join(args(s), " "))
	cmd := exec.Command(v.f.opts.QEMU, args(s)...)
	cmd.Dir = v.dir
	cmd.Stdout, cmd.Stderr = qlog, qlog
	// QEMU ends with the simulator, and not before it on a terminal's Ctrl-C.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	p.qmp, err = connectQMP(ctx, s.QMPSocket, p.done, func(name string, data json.RawMessage) {
		if name != "SHUTDOWN" {
			return
		}
		var ev struct{ Reason string }
		if json.Unmarshal(data, &ev) == nil {
			p.mu.Lock()
			p.reason = ev.Reason
			p.mu.Unlock()
		}
	})
	if err != nil {
		_ = cmd.Process.Kill()
		<-p.done
		return nil, fmt.Errorf("connecting to QEMU's QMP socket: %w%s", err, v.qemuLogTail())
	}
	return p, nil
}

// connectQMP dials QEMU's QMP socket until it is there, QEMU exits or
// qmpConnectTimeout passes.
func connectQMP(ctx context.Context, path string, exited <-chan struct{}, onEvent func(string, json.RawMessage)) (*qmpClient, error) {
	ctx, cancel := context.WithTimeout(ctx, qmpConnectTimeout)
	defer cancel()
	for {
		c, err := dialQMP(ctx, path, onEvent)
		if err == nil {
			return c, nil
		}
		select {
		case <-exited:
			return nil, errors.New("QEMU exited")
		case <-ctx.Done():
			return nil, err
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// stop quits QEMU (QMP quit) and kills it when it does not go.
func (p *process) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), quitTimeout)
	defer cancel()
	_ = p.qmp.execute(ctx, "quit", nil, nil) // QEMU may close the socket before it answers
	select {
	case <-p.done:
	case <-ctx.Done():
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// qemuLogTail is the end of QEMU's log, for errors.
func (v *vm) qemuLogTail() string {
	data, err := os.ReadFile(filepath.Join(v.dir, "qemu.log"))
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) > 0 && strings.Contains(lines[len(lines)-1], "-name") {
		return "" // only the command line: QEMU said nothing
	}
	return ": " + lines[len(lines)-1]
}

// tailConsole copies what the VM prints on its serial console from now on
// to the Console, until the returned function is called.
func (v *vm) tailConsole(path string) func() {
	if v.f.opts.Console == nil {
		return func() {}
	}
	var offset int64
	if fi, err := os.Stat(path); err == nil {
		offset = fi.Size()
	}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		var partial []byte
		for {
			var stopped bool
			select {
			case <-stop:
				stopped = true
			case <-time.After(200 * time.Millisecond):
			}
			partial, offset = v.readConsole(path, offset, partial)
			if stopped {
				if line := cleanConsoleLine(string(partial)); line != "" {
					v.logf("%s", line)
				}
				return
			}
		}
	}()
	return func() {
		close(stop)
		<-done
	}
}

// readConsole logs the complete lines after offset; partial is the start
// of a line read before.
func (v *vm) readConsole(path string, offset int64, partial []byte) ([]byte, int64) {
	f, err := os.Open(path)
	if err != nil {
		return partial, offset
	}
	defer f.Close()
	data, err := io.ReadAll(io.NewSectionReader(f, offset, 1<<30))
	if err != nil {
		return partial, offset
	}
	offset += int64(len(data))
	lines := strings.Split(string(append(partial, data...)), "\n")
	for _, l := range lines[:len(lines)-1] {
		if line := cleanConsoleLine(l); line != "" {
			v.logf("%s", line)
		}
	}
	return []byte(lines[len(lines)-1]), offset
}

// sparseFile makes path a file of size bytes, keeping its contents.
func sparseFile(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() == size {
		return nil
	}
	return f.Truncate(size)
}

func copyIfMissing(src, dst string) error {
	if _, err := os.Stat(dst); err == nil {
		return nil
	}
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, data, 0o600)
}

// GuestForward forwards the guest's connections to Addr, an address of its
// user network other than the host alias and the DNS server (10.0.2.100:80),
// to a new process of Command each.
type GuestForward struct {
	Addr    netip.AddrPort
	Command []string
}

// GuestURL is rawURL as a VM reaches it: a loopback host becomes alias
// (DefaultGuestHostAlias when empty).
func GuestURL(rawURL, alias string) string {
	if alias == "" {
		alias = DefaultGuestHostAlias
	}
	return guestURL(rawURL, alias)
}

// guestURL is rawURL as a VM reaches it: a loopback host becomes alias.
func guestURL(rawURL, alias string) string {
	return replaceHost(strings.TrimSuffix(rawURL, "/"), func(h string) string {
		if h == "127.0.0.1" || h == "localhost" || h == "::1" {
			return alias
		}
		return h
	})
}

// hostURL is rawURL as the host reaches it: alias becomes 127.0.0.1.
func hostURL(rawURL, alias string) string {
	return replaceHost(rawURL, func(h string) string {
		if h == alias {
			return "127.0.0.1"
		}
		return h
	})
}

func replaceHost(rawURL string, f func(string) string) string {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return rawURL
	}
	h := f(u.Hostname())
	if h == u.Hostname() {
		return rawURL
	}
	switch port := u.Port(); {
	case port != "":
		u.Host = net.JoinHostPort(h, port)
	case strings.Contains(h, ":"):
		u.Host = "[" + h + "]"
	default:
		u.Host = h
	}
	return u.String()
}
