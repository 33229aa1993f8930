package sim

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/metalshift/metalshift/agent/configdrive"
	"github.com/metalshift/metalshift/agent/metalcloud"
	equinixapi "github.com/metalshift/metalshift/api/equinixmetal/v1"
	"github.com/metalshift/metalshift/sim/equinix"
	"github.com/metalshift/metalshift/sim/machine"
	"github.com/metalshift/metalshift/sim/qemu"
)

// OSMetalCloudInstaller is what a metal cloud's machine runs while the
// live image installs it (machine.BootedOS).
const OSMetalCloudInstaller = "metal-cloud-installer"

// MetalCloudOptions configure a MetalCloud.
type MetalCloudOptions struct {
	// DiskSizeBytes is the size of each machine's disk; default 480 GB.
	DiskSizeBytes int64
	// CA is the PEM of CAs that the machines' firmware and live image
	// trust besides the system's roots (the hub's, for an https iPXE
	// script URL); the live image also trusts its boot configuration's CA.
	CA []byte
	// OnDiskBoot, when set, runs when a machine boots its installed disk,
	// with the config drive it found (the installed OS), until ctx ends.
	OnDiskBoot func(ctx context.Context, m *machine.Machine, cd configdrive.Contents)
	// Console, when set, also gets every console line, as
	// "<device ID>: <line>".
	Console io.Writer
	// RetryPause is the live image's first pause before it reads the
	// metadata again after a failure (metalcloud.DefaultRetryPause when 0).
	RetryPause time.Duration
}

// MetalCloud boots simulated machines for the devices of the Equinix
// Metal emulator: it is the emulator's equinix.Machines. A device that
// starts provisioning gets a machine (its MACs, its private address, one
// disk), which network-boots the device's iPXE script the way the cloud's
// iPXE does: the script at the device's iPXE URL, or the userdata when it
// is one; the live image it loads installs the machine
// (agent/metalcloud, with the metadata service reached from the device's
// private address, which is how the service knows it), then the machine
// boots its disk. Every call the machine makes comes from its device's
// private address (the emulator hands out loopback addresses).
//
// The emulator's calls return at once: what they do to machines is done
// in order on a goroutine of the MetalCloud's own.
type MetalCloud struct {
	opts MetalCloudOptions
	fw   *Firmware

	// q, qemu and pxe are the QEMU backend's options, the backend and its
	// network boot server (NewQEMUMetalCloud).
	q    MetalCloudQEMU
	qemu *qemu.Firmware
	pxe  *http.Server

	mu      sync.Mutex
	devices map[string]*metalDevice
	vms     int // QEMU machines made, which numbers their serials
	queue   serialQueue
}

var _ equinix.Machines = (*MetalCloud)(nil)

// metalDevice is a device's machine, and what it was last provisioned
// with.
type metalDevice struct {
	m   *machine.Machine
	dev equinix.Machine
	net *metalcloud.Recorder
}

// NewMetalCloud returns a MetalCloud without machines; give it to the
// emulator as equinix.Options.Machines.
func NewMetalCloud(opts MetalCloudOptions) *MetalCloud {
	if opts.DiskSizeBytes == 0 {
		opts.DiskSizeBytes = 480_000_000_000
	}
	return &MetalCloud{
		opts:    opts,
		fw:      &Firmware{OnDiskBoot: opts.OnDiskBoot, Console: opts.Console},
		devices: map[string]*metalDevice{},
	}
}

// Provision implements equinix.Machines: a new device gets a machine, a
// reinstalled one has its machine powered off and its disks wiped; then
// the machine powers on and network-boots (every boot does with
// always_pxe).
func (c *MetalCloud) Provision(dm equinix.Machine) {
	c.queue.do(func() {
		c.mu.Lock()
		d := c.devices[dm.ID]
		if d == nil {
			d = &metalDevice{net: &metalcloud.Recorder{}}
			if c.qemu != nil {
				d.m = c.newQEMUMachine(dm, c.vms)
				c.vms++
			} else {
				d.m = c.newMachine(dm)
			}
			c.devices[dm.ID] = d
		}
		d.dev = dm
		c.mu.Unlock()
		if dm.Reinstall {
			d.m.PowerOff()
			if c.qemu != nil {
				c.wipeQEMU(d.m)
			}
			for _, disk := range d.m.Hardware.Disks {
				disk.Wipe()
			}
			c.fw.logf(d.m, "Reinstalling: the disks are wiped")
		}
		// The light machines' firmware runs the script whatever the boot
		// mode; QEMU VMs boot with SeaBIOS and its iPXE.
		d.m.SetOverride(machine.BootOverride{Target: machine.BootPxe, Continuous: dm.AlwaysPXE, UEFI: c.qemu == nil})
		d.m.PowerOn()
	})
}

// Power implements equinix.Machines: power_on, power_off and reboot of the
// device's machine.
func (c *MetalCloud) Power(id, action string) {
	c.queue.do(func() {
		d := c.device(id)
		if d == nil {
			return
		}
		switch action {
		case equinixapi.ActionPowerOff:
			d.m.PowerOff()
		case equinixapi.ActionPowerOn:
			d.m.PowerOn()
		case equinixapi.ActionReboot:
			d.m.Reset()
		}
	})
}

// Deprovision implements equinix.Machines: the machine is powered off and
// forgotten (its console log stays).
func (c *MetalCloud) Deprovision(id string) {
	c.queue.do(func() {
		c.mu.Lock()
		d := c.devices[id]
		delete(c.devices, id)
		c.mu.Unlock()
		if d != nil {
			d.m.PowerOff()
			c.fw.logf(d.m, "Deprovisioned: powered off")
		}
	})
}

// Machine is the machine of the device with id; nil before the device
// provisions and after it is deleted.
func (c *MetalCloud) Machine(id string) *machine.Machine {
	if d := c.device(id); d != nil {
		return d.m
	}
	return nil
}

// Log is what the machine of the device with id printed on its console
// (kept after the device is deleted); of a QEMU VM, its serial console's
// last 200 lines.
func (c *MetalCloud) Log(id string) []string {
	if c.qemu == nil {
		return c.fw.Log(id)
	}
	data, _ := os.ReadFile(c.qemu.ConsoleLog(id))
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return lines[max(0, len(lines)-200):]
}

// Networks are the networks the live image configured on the machine of
// the device with id, one per install, oldest first.
func (c *MetalCloud) Networks(id string) []metalcloud.Network {
	if d := c.device(id); d != nil {
		return d.net.Networks()
	}
	return nil
}

// Close powers every machine off, once the emulator's earlier calls are
// done; with QEMU it waits for the VMs to exit.
func (c *MetalCloud) Close() {
	done := make(chan struct{})
	c.queue.do(func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, d := range c.devices {
			d.m.PowerOff()
		}
		close(done)
	})
	<-done
	if c.qemu != nil {
		c.qemu.Close()
		_ = c.pxe.Close()
	}
}

func (c *MetalCloud) device(id string) *metalDevice {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.devices[id]
}

// newMachine is a device's machine: its NICs, with the device's MACs and
// private address, and one disk.
func (c *MetalCloud) newMachine(dm equinix.Machine) *machine.Machine {
	short := dm.ID
	if len(short) > 8 {
		short = short[:8]
	}
	hw := machine.Hardware{
		Manufacturer: "Metalshift Sim", Model: "SimMetal 1U", SerialNumber: "EQ" + short,
		BIOSVersion: "2.4.1", BIOSVendor: "SimBIOS", BIOSDate: "2026-03-01",
		CPUArch: "x86_64", CPUModel: "Simulated Xeon 6000", CPUCount: 16, CPUMHz: 2600, RAMMiB: 65536,
		Disks: []*machine.Disk{{Name: "/dev/sda", Model: "SimSSD 480", Vendor: "SimDisk", SerialNumber: "SSD" + short,
			WWN: "0x5000c500" + short, HCTL: "0:0:0:0", SizeBytes: c.opts.DiskSizeBytes, Type: "SSD"}},
	}
	src, _ := sourceAddr(dm)
	for i, mac := range dm.MACs {
		n := machine.NIC{Name: fmt.Sprintf("eth%d", i), MAC: mac, SpeedGbps: 10}
		if i == 0 && src.IsValid() {
			n.IP = src.String()
		}
		hw.NICs = append(hw.NICs, n)
	}
	m := machine.New(dm.ID, dm.ID, hw)
	m.SetFirmware(metalFirmware{c: c})
	return m
}

// sourceAddr is the device's private IPv4 address, the first of its
// addresses (equinix.Machine lists the private one, the public one, then
// IPv6).
func sourceAddr(dm equinix.Machine) (netip.Addr, bool) {
	for _, p := range dm.Addresses {
		if p.Addr().Is4() {
			return p.Addr(), true
		}
	}
	return netip.Addr{}, false
}

// client is the HTTP client of the device's machine: its connections come
// from the device's private address, and it trusts the system's roots,
// the MetalCloud's CA and the PEM CAs of extraCA.
func (c *MetalCloud) client(dm equinix.Machine, extraCA string) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	d := &net.Dialer{Timeout: 30 * time.Second}
	if src, ok := sourceAddr(dm); ok {
		d.LocalAddr = &net.TCPAddr{IP: src.AsSlice()}
	}
	t.DialContext = d.DialContext
	t.TLSClientConfig = &tls.Config{RootCAs: rootsWith(c.opts.CA, []byte(extraCA)), MinVersion: tls.VersionTLS12}
	t.ResponseHeaderTimeout = time.Minute
	return &http.Client{Transport: t}
}

// metalFirmware boots a device's machine: its iPXE script from the
// network, else its disk.
type metalFirmware struct{ c *MetalCloud }

// Boot implements machine.Firmware.
func (f metalFirmware) Boot(ctx context.Context, m *machine.Machine, from machine.BootTarget) {
	var err error
	if from == machine.BootPxe {
		err = f.c.bootIPXE(ctx, m)
	} else {
		err = f.c.fw.bootDisk(ctx, m)
	}
	if err != nil && ctx.Err() == nil {
		f.c.fw.logf(m, "Boot from %s failed: %v", from, err)
		m.SetBootedOS(OSNone)
	}
}

// bootIPXE runs the device's iPXE script: it loads the live image and its
// host initrd, runs the metal cloud installer of the boot configuration,
// and boots the disk it wrote.
func (c *MetalCloud) bootIPXE(ctx context.Context, m *machine.Machine) error {
	d := c.device(m.ID)
	if d == nil {
		return fmt.Errorf("the machine's device is gone")
	}
	c.mu.Lock()
	dm := d.dev
	c.mu.Unlock()
	hc := c.client(dm, "")
	var script string
	switch {
	case dm.IPXEScriptURL != "":
		c.fw.logf(m, "iPXE: loading %s", redact(dm.IPXEScriptURL))
		data, err := c.fw.get(ctx, hc, dm.IPXEScriptURL)
		if err != nil {
			return fmt.Errorf("loading the iPXE script: %w", err)
		}
		script = string(data)
	case strings.HasPrefix(dm.Userdata, equinixapi.IPXEUserdataPrefix):
		c.fw.logf(m, "iPXE: running the script of the userdata")
		script = dm.Userdata
	default:
		c.fw.logf(m, "No iPXE script (operating system %s): booting the disk", dm.OperatingSystem)
		return c.fw.bootDisk(ctx, m)
	}
	cfg, err := c.fw.loadIPXE(ctx, hc, script)
	if err != nil {
		return err
	}
	if cfg.MetalCloud == nil {
		return fmt.Errorf("the live image's boot configuration has no metal cloud section: it is not a metal cloud's installer")
	}
	m.SetBootedOS(OSMetalCloudInstaller)
	agentHC := hc
	if cfg.CACert != "" {
		agentHC = c.client(dm, cfg.CACert)
	}
	err = metalcloud.Run(ctx, metalcloud.Options{
		Config: cfg, Devices: c.fw.devices(m, nil), HTTP: agentHC, Network: d.net, RetryPause: c.opts.RetryPause,
		Logf: func(format string, args ...any) { c.fw.logf(m, format, args...) },
	})
	if err != nil {
		return err
	}
	// The installer's reboot: straight into the disk, even with
	// always_pxe, whose script would install the machine again.
	return c.fw.bootDisk(ctx, m)
}

// serialQueue runs functions one after the other, in the order given, on
// a goroutine of its own: the emulator's calls return at once and still
// reach the machines in order.
type serialQueue struct {
	mu      sync.Mutex
	fns     []func()
	running bool
}

func (q *serialQueue) do(f func()) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.fns = append(q.fns, f)
	if !q.running {
		q.running = true
		go q.run()
	}
}

func (q *serialQueue) run() {
	for {
		q.mu.Lock()
		if len(q.fns) == 0 {
			q.running = false
			q.mu.Unlock()
			return
		}
		f := q.fns[0]
		q.fns = q.fns[1:]
		q.mu.Unlock()
		f()
	}
}
