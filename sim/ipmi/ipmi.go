// Package ipmi puts a simulated machine behind a real IPMI BMC: OpenIPMI's
// ipmi_sim (from Debian), configured with a chassis-control program that
// drives the machine's power, reset and boot device. ipmi_sim speaks IPMI
// 1.5 and 2.0 (lanplus) on UDP; ipmitool and metalshift's IPMI driver talk
// to it like to any BMC.
//
// The control program is a POSIX shell script that exchanges small files
// with this package (a request file it writes and waits to be consumed, and
// state files this package keeps current), so nothing but sh is needed.
package ipmi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/metalshift/metalshift/sim/fault"
	"github.com/metalshift/metalshift/sim/machine"
)

// IPMISimPath is where Debian's openipmi package installs ipmi_sim.
const IPMISimPath = "/usr/bin/ipmi_sim"

// BMC is a running ipmi_sim wired to a machine.
type BMC struct {
	// Addr is host:port of the IPMI LAN interface (UDP).
	Addr string
	m    *machine.Machine
	dir  string
	cmd  *exec.Cmd
	stop context.CancelFunc
	done chan struct{}

	faults atomic.Pointer[fault.Decider]
}

// DropFor is how long the control program holds a chassis control command
// whose reply fault.IPMIDrop drops: ipmi_sim answers nothing meanwhile,
// longer than IPMI clients wait (ipmitool's lanplus retries for a few
// seconds, Ironic's for about ten).
const DropFor = 20 * time.Second

// SetFaults makes the BMC decide with d (a fault plan's decider for its
// machine; nil: none) whether each chassis control command ipmi_sim passes
// on (power on, off, cycle, reset; boot device) fails: fault.IPMIFail
// carries nothing out and ipmi_sim answers with an error completion code;
// fault.IPMIDrop carries nothing out and holds ipmi_sim, which waits for
// its chassis control program, for DropFor: it answers no command
// meanwhile, then those that queued up; fault.IPMIIgnore carries nothing
// out and ipmi_sim answers success. Status queries (power status, boot
// device) are not faulted.
func (b *BMC) SetFaults(d *fault.Decider) { b.faults.Store(d) }

// Start runs ipmi_sim for m in dir with one admin user.
func Start(m *machine.Machine, dir, username, password string) (*BMC, error) {
	if _, err := os.Stat(IPMISimPath); err != nil {
		return nil, fmt.Errorf("ipmi_sim is missing: install Debian's openipmi package: %w", err)
	}
	port, err := freeUDPPort()
	if err != nil {
		return nil, err
	}
	b := &BMC{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), m: m, dir: dir, done: make(chan struct{})}
	if err := b.writeConfig(port, username, password); err != nil {
		return nil, err
	}
	b.publish()
	ctx, cancel := context.WithCancel(context.Background())
	b.stop = cancel
	b.cmd = exec.CommandContext(ctx, IPMISimPath, "-c", filepath.Join(dir, "lan.conf"), "-f", filepath.Join(dir, "bmc.emu"),
		"-s", filepath.Join(dir, "state"), "-n")
	log, err := os.Create(filepath.Join(dir, "ipmi_sim.log"))
	if err != nil {
		cancel()
		return nil, err
	}
	b.cmd.Stdout, b.cmd.Stderr = log, log
	if err := b.cmd.Start(); err != nil {
		cancel()
		return nil, err
	}
	go b.serve(ctx)
	return b, b.waitReady()
}

// Close stops ipmi_sim.
func (b *BMC) Close() {
	b.stop()
	_ = b.cmd.Wait()
	<-b.done
}

func (b *BMC) writeConfig(port int, username, password string) error {
	if strings.ContainsAny(username+password, "\"\n") {
		return errors.New("IPMI credentials must not contain quotes or newlines")
	}
	if err := os.MkdirAll(filepath.Join(b.dir, "state"), 0o700); err != nil {
		return err
	}
	script := filepath.Join(b.dir, "chassis-control")
	lan := fmt.Sprintf(`name "metalshift-%s"
set_working_mc 0x20
  startlan 1
    addr 127.0.0.1 %d
    priv_limit admin
    allowed_auths_callback none md2 md5 straight
    allowed_auths_user none md2 md5 straight
    allowed_auths_operator none md2 md5 straight
    allowed_auths_admin none md2 md5 straight
    guid %s
  endlan
  chassis_control "%s 0x20"
  user 2 true "%s" "%s" admin 10 none md2 md5 straight
`, b.m.ID, port, strings.ReplaceAll(b.m.UUID, "-", ""), script, username, password)
	emu := "mc_setbmc 0x20\nmc_add 0x20 0 no-device-sdrs 0x23 9 8 0x9f 0x1291 0xf02 persist_sdr\nmc_enable 0x20\n"
	files := map[string]string{"lan.conf": lan, "bmc.emu": emu, "chassis-control": controlScript(b.dir)}
	for name, content := range files {
		mode := os.FileMode(0o600)
		if name == "chassis-control" {
			mode = 0o700
		}
		if err := os.WriteFile(filepath.Join(b.dir, name), []byte(content), mode); err != nil {
			return err
		}
	}
	return nil
}

// controlScript answers ipmi_sim: "get power|boot" from the state files,
// "set <parm> <value> ..." by writing a request and waiting until it is
// consumed.
func controlScript(dir string) string {
	return fmt.Sprintf(`#!/bin/sh
d=%q
shift
op=$1
shift
if [ "$op" = get ]; then
  for p in "$@"; do printf '%%s:%%s\n' "$p" "$(cat "$d/$p" 2>/dev/null || echo 0)"; done
  exit 0
fi
req="$d/request.$$"
: > "$req.tmp"
while [ $# -gt 1 ]; do echo "$1 $2" >> "$req.tmp"; shift 2; done
mv "$req.tmp" "$req"
i=0
while [ -e "$req" ]; do
  i=$((i+1))
  [ $i -gt 500 ] && { echo "machine did not answer"; exit 1; }
  sleep 0.01
done
if [ -e "$req.fail" ]; then rm -f "$req.fail"; echo "injected fault"; exit 1; fi
if [ -e "$req.drop" ]; then rm -f "$req.drop"; sleep %d; echo "injected fault"; exit 1; fi
`, dir, int(DropFor/time.Second))
}

// serve applies requests to the machine and keeps the state files current.
func (b *BMC) serve(ctx context.Context) {
	defer close(b.done)
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		b.poll()
	}
}

// poll applies the requests the control script has written and publishes
// the state. Only request.<pid> files are requests: the .tmp file being
// written and the .fail and .drop answers left for a script are not. An
// answer taken for a request would be removed before its script saw it
// (the script would report the failed command done) and would use up a
// fault decision of its own.
func (b *BMC) poll() {
	reqs, _ := filepath.Glob(filepath.Join(b.dir, "request.*"))
	for _, r := range reqs {
		if !isRequest(filepath.Base(r)) {
			continue
		}
		data, err := os.ReadFile(r)
		if err == nil {
			switch f := b.decide(); f {
			case "":
				b.apply(string(data))
			case "ignore":
				// Answered as done, carried out never.
			default:
				_ = os.WriteFile(r+"."+f, nil, 0o600)
			}
		}
		_ = os.Remove(r)
	}
	b.publish()
}

// isRequest tells a request file's name (request.<pid>) from the other
// files of the exchange.
func isRequest(name string) bool {
	pid, ok := strings.CutPrefix(name, "request.")
	if !ok || pid == "" {
		return false
	}
	for _, c := range pid {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// decide is the fault of a chassis control command: "fail", "drop",
// "ignore" or "". Every kind is decided on every command.
func (b *BMC) decide() string {
	d := b.faults.Load()
	fail, drop, ignore := d.Decide(fault.IPMIFail), d.Decide(fault.IPMIDrop), d.Decide(fault.IPMIIgnore)
	switch {
	case fail.Fired():
		return "fail"
	case drop.Fired():
		return "drop"
	case ignore.Fired():
		return "ignore"
	}
	return ""
}

func (b *BMC) apply(req string) {
	for _, line := range strings.Split(strings.TrimSpace(req), "\n") {
		parm, val, _ := strings.Cut(line, " ")
		switch parm {
		case "power":
			if val == "1" {
				b.m.PowerOn()
			} else {
				b.m.PowerOff()
			}
		case "reset":
			if val == "1" {
				b.m.Reset()
			}
		case "boot":
			o := b.m.Override()
			switch val {
			case "pxe":
				o.Target = machine.BootPxe
			case "cdrom":
				o.Target = machine.BootCd
			default:
				o.Target = machine.BootNone
			}
			o.Continuous = false
			b.m.SetOverride(o)
		}
	}
}

// publish writes the state files the control script reads.
func (b *BMC) publish() {
	power := "0"
	if b.m.PoweredOn() {
		power = "1"
	}
	boot := "default"
	switch b.m.Override().Target {
	case machine.BootPxe:
		boot = "pxe"
	case machine.BootCd:
		boot = "cdrom"
	}
	writeIfChanged(filepath.Join(b.dir, "power"), power)
	writeIfChanged(filepath.Join(b.dir, "boot"), boot)
}

func writeIfChanged(path, value string) {
	if old, err := os.ReadFile(path); err == nil && string(old) == value {
		return
	}
	tmp := path + ".tmp"
	if os.WriteFile(tmp, []byte(value), 0o600) == nil {
		_ = os.Rename(tmp, path)
	}
}

// waitReady waits until ipmi_sim has bound its UDP port.
func (b *BMC) waitReady() error {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		c, err := net.ListenPacket("udp", b.Addr)
		if err != nil {
			return nil // bound by ipmi_sim
		}
		_ = c.Close()
		time.Sleep(20 * time.Millisecond)
	}
	log, _ := os.ReadFile(filepath.Join(b.dir, "ipmi_sim.log"))
	b.Close()
	return fmt.Errorf("ipmi_sim did not start: %s", log)
}

func freeUDPPort() (int, error) {
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer c.Close() //nolint:errcheck // a probe socket
	return c.LocalAddr().(*net.UDPAddr).Port, nil
}
