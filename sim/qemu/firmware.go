package qemu

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/metalshift/metalshift/sim/machine"
)

// Defaults of Options: Debian's packages (qemu-system-x86, ovmf).
const (
	DefaultQEMU           = "qemu-system-x86_64"
	DefaultOVMFCode       = "/usr/share/OVMF/OVMF_CODE_4M.fd"
	DefaultOVMFVars       = "/usr/share/OVMF/OVMF_VARS_4M.fd"
	DefaultGuestHostAlias = "10.0.2.2"
)

// Options configure the QEMU backend.
type Options struct {
	// StateDir holds a directory per machine (named by its ID) with its
	// disks, UEFI variables, downloaded virtual media, QMP socket, serial
	// console (console.log), BMC log (bmc.log) and QEMU's own log
	// (qemu.log). Keep the path short: the QMP socket's must fit in 107
	// bytes.
	StateDir string
	// QEMU is the emulator; default qemu-system-x86_64 from PATH.
	QEMU string
	// OVMFCode and OVMFVars are the UEFI firmware and the template of a
	// VM's variable store (copied on its first UEFI boot); default Debian's
	// ovmf.
	OVMFCode, OVMFVars string
	// Accel is QEMU's accelerator; default tcg.
	Accel string
	// BootURL is the provisioning network's boot server (the engine's
	// deploy server) as the host reaches it. VMs are offered
	// <BootURL>/boot/by-mac/<mac> as their DHCP boot file, with a loopback
	// host replaced by GuestHostAlias; iPXE fetches it over HTTP. Empty
	// means no boot file.
	BootURL string
	// GuestHostAlias is the address at which VMs reach the host's loopback;
	// default 10.0.2.2 (QEMU's user networking). Virtual media URLs with
	// this host are downloaded from 127.0.0.1 by the BMC, which runs on the
	// host.
	GuestHostAlias string
	// HTTP downloads virtual media; default a client without a timeout
	// (images are large; a power-off or eject cancels the download).
	HTTP *http.Client
	// MediaRetries is how many more times a failed virtual media download
	// is tried, a second apart.
	MediaRetries int
	// Console, when set, gets the BMC's events and the VMs' serial
	// consoles, each line as "<machine>: <line>".
	Console io.Writer
	// GuestForwards, when set, says for a machine (by ID) which TCP
	// addresses of its first NIC's user network are forwarded to a program
	// on the host (QEMU's guestfwd): each connection of the guest to one
	// starts the program, whose standard input and output are the
	// connection.
	GuestForwards func(id string) []GuestForward
	// Segments, when set, says for a machine (by ID) which of its NICs
	// other than the first are on a simulated Ethernet segment (sim/lan)
	// instead of QEMU's user networking: NIC i (i ≥ 1) joins the one
	// whose sockets are at index i. The first NIC stays on user
	// networking, which reaches the host.
	Segments func(id string) map[int]Dgram
}

// Dgram is a NIC's end of a simulated Ethernet segment: QEMU binds the
// UNIX datagram socket Local and sends the NIC's frames, one a datagram,
// to Remote (QEMU's -netdev dgram). Remote is bound before QEMU starts.
type Dgram struct {
	Local, Remote string
}

// ErrNotRunning is returned for a machine whose VM does not run.
var ErrNotRunning = errors.New("the VM does not run")

// Firmware boots each machine it is installed in as a QEMU VM: power on
// starts QEMU, power off or reset ends it, a guest that powers off or
// reboots turns into the machine's power off or reset, and the BMC's
// virtual media is downloaded and attached to the VM's CD drive.
type Firmware struct {
	opts Options

	mu     sync.Mutex
	vms    map[string]*vm
	closed bool
}

var (
	_ machine.Firmware     = &Firmware{}
	_ machine.MediaWatcher = &Firmware{}
)

// New returns the backend; Check says whether it can run.
func New(opts Options) *Firmware {
	if opts.QEMU == "" {
		opts.QEMU = DefaultQEMU
	}
	if opts.OVMFCode == "" {
		opts.OVMFCode = DefaultOVMFCode
	}
	if opts.OVMFVars == "" {
		opts.OVMFVars = DefaultOVMFVars
	}
	if opts.Accel == "" {
		opts.Accel = "tcg"
	}
	if opts.GuestHostAlias == "" {
		opts.GuestHostAlias = DefaultGuestHostAlias
	}
	if opts.HTTP == nil {
		opts.HTTP = &http.Client{}
	}
	if abs, err := filepath.Abs(opts.StateDir); err == nil && opts.StateDir != "" {
		opts.StateDir = abs // QEMU runs in the VM's directory
	}
	return &Firmware{opts: opts, vms: map[string]*vm{}}
}

// Check reports what is missing to run VMs: QEMU, OVMF, a state directory.
func (f *Firmware) Check() error {
	if _, err := exec.LookPath(f.opts.QEMU); err != nil {
		return fmt.Errorf("QEMU is missing (Debian: qemu-system-x86, ipxe-qemu, ovmf): %w", err)
	}
	for _, p := range []string{f.opts.OVMFCode, f.opts.OVMFVars} {
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("UEFI firmware is missing (Debian: ovmf): %w", err)
		}
	}
	if f.opts.StateDir == "" {
		return errors.New("the QEMU backend needs a state directory")
	}
	return nil
}

// Boot implements machine.Firmware: it runs the machine's VM until ctx is
// cancelled (power off, reset) or the VM ends by itself.
func (f *Firmware) Boot(ctx context.Context, m *machine.Machine, from machine.BootTarget) {
	v := f.vm(m)
	if v == nil {
		return
	}
	v.syncMedia()
	select {
	case v.slot <- struct{}{}: // the previous boot's QEMU has exited
	case <-ctx.Done():
		return
	}
	if f.isClosed() {
		<-v.slot
		return
	}
	reason, err := v.run(ctx, from)
	<-v.slot
	switch {
	case ctx.Err() != nil:
	case err != nil:
		v.logf("The VM stopped: %v", err)
		m.GuestPowerOff(ctx)
	case reason == "guest-reset":
		v.logf("The guest reset the VM")
		m.GuestReset(ctx)
	default:
		v.logf("The VM powered off (%s)", reason)
		m.GuestPowerOff(ctx)
	}
}

// MediaChanged implements machine.MediaWatcher: the BMC downloads the new
// image and attaches it to the running VM, or ejects it.
func (f *Firmware) MediaChanged(m *machine.Machine) {
	if v := f.vm(m); v != nil {
		v.syncMedia()
	}
}

// Dir is the state directory of the machine with id.
func (f *Firmware) Dir(id string) string { return filepath.Join(f.opts.StateDir, id) }

// ConsoleLog is the file the VM's serial console goes to, across boots.
func (f *Firmware) ConsoleLog(id string) string { return filepath.Join(f.Dir(id), "console.log") }

// PID is the process ID of the machine's QEMU, 0 when none runs.
func (f *Firmware) PID(id string) int {
	if p := f.proc(id); p != nil {
		return p.cmd.Process.Pid
	}
	return 0
}

// QueryCD asks the running VM (QMP query-block) which file its CD drive
// holds; "" when it is empty.
func (f *Firmware) QueryCD(ctx context.Context, id string) (string, error) {
	p := f.proc(id)
	if p == nil {
		return "", ErrNotRunning
	}
	var blocks []struct {
		QDev     string `json:"qdev"`
		Inserted *struct {
			File string `json:"file"`
		} `json:"inserted"`
	}
	if err := p.qmp.execute(ctx, "query-block", nil, &blocks); err != nil {
		return "", err
	}
	for _, b := range blocks {
		if b.QDev == cdDevice {
			if b.Inserted == nil {
				return "", nil
			}
			return b.Inserted.File, nil
		}
	}
	return "", fmt.Errorf("the VM has no drive %s", cdDevice)
}

// Close stops virtual media downloads and waits until no VM runs; power
// the machines off first. Machines that boot later do not start a VM.
func (f *Firmware) Close() {
	f.mu.Lock()
	f.closed = true
	vms := make([]*vm, 0, len(f.vms))
	for _, v := range f.vms {
		vms = append(vms, v)
	}
	f.mu.Unlock()
	for _, v := range vms {
		v.mu.Lock()
		if v.media.cancel != nil {
			v.media.cancel()
		}
		v.mu.Unlock()
		v.slot <- struct{}{}
		<-v.slot
	}
}

func (f *Firmware) isClosed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.closed
}

// vm returns the machine's VM state, nil once closed.
func (f *Firmware) vm(m *machine.Machine) *vm {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil
	}
	v := f.vms[m.ID]
	if v == nil {
		v = &vm{f: f, m: m, dir: f.Dir(m.ID), slot: make(chan struct{}, 1)}
		f.vms[m.ID] = v
	}
	return v
}

func (f *Firmware) proc(id string) *process {
	f.mu.Lock()
	v := f.vms[id]
	f.mu.Unlock()
	if v == nil {
		return nil
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.proc
}

// vm is one machine's VM: at most one QEMU process at a time (slot), the
// virtual media the BMC holds for it, its logs.
type vm struct {
	f    *Firmware
	m    *machine.Machine
	dir  string
	slot chan struct{} // held while a QEMU process of this machine runs

	mu    sync.Mutex
	proc  *process // the running QEMU, nil when none
	media media

	applyMu sync.Mutex // serializes attaching media to the running VM
	logMu   sync.Mutex
}

func (v *vm) logf(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	v.logMu.Lock()
	defer v.logMu.Unlock()
	if c := v.f.opts.Console; c != nil {
		fmt.Fprintf(c, "%s: %s\n", v.m.ID, line)
	}
	if err := os.MkdirAll(v.dir, 0o700); err != nil {
		return
	}
	if lf, err := os.OpenFile(filepath.Join(v.dir, "bmc.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600); err == nil {
		fmt.Fprintf(lf, "%s %s\n", time.Now().UTC().Format(time.RFC3339Nano), line)
		_ = lf.Close()
	}
}
