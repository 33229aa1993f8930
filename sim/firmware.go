package sim

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/metalshift/metalshift/agent/configdrive"
	"github.com/metalshift/metalshift/agent/deploy"
	"github.com/metalshift/metalshift/agent/discovery"
	assistedapi "github.com/metalshift/metalshift/api/assisted/v2"
	deployapi "github.com/metalshift/metalshift/api/deploy/v1"
	"github.com/metalshift/metalshift/imageservice"
	"github.com/metalshift/metalshift/sim/fault"
	"github.com/metalshift/metalshift/sim/machine"
)

// What a machine runs, as machine.BootedOS reports it.
const (
	OSDeployAgent    = "deploy-agent"
	OSDiscoveryAgent = "discovery-agent"
	OSDisk           = "disk"
	OSNone           = "no bootable device"
)

// Firmware boots simulated machines.
type Firmware struct {
	// HTTP is the firmware's and the BMC's client: it fetches virtual
	// media and network-boots (trusting the hub's CA, as a BMC or UEFI
	// configured with it). The agents that boot verify the hub's servers
	// with the CA of their boot configuration only, as on a real machine;
	// without one they use HTTP too.
	HTTP *http.Client
	// BootURL is the provisioning network's boot server, as DHCP would
	// announce it to PXE firmware; empty means no network boot.
	BootURL string
	// AgentPollInterval is the deploy agent's poll interval.
	AgentPollInterval time.Duration
	// OnDiskBoot, when set, runs when a machine boots a disk written by the
	// deploy agent, with the config drive it found (the installed OS).
	OnDiskBoot func(ctx context.Context, m *machine.Machine, cd configdrive.Contents)
	// OnBootstrap, when set, runs a bootstrap Ignition in the live
	// environment of a discovery image (the bootstrap master of an
	// agent-based install) until ctx ends.
	OnBootstrap func(ctx context.Context, m *machine.Machine, ignition []byte)
	// Resolve, when set, is the machines' DNS (the simulated network's:
	// a name it does not know comes back unchanged).
	Resolve func(host string) string
	// Console, when set, also gets every console line, as "<machine>: <line>".
	Console io.Writer
	// MediaRetries is how many more times virtual media is read after a
	// failed read (the BMC reconnects to the image's server), a second apart.
	MediaRetries int
	// Faults, when set, is the fault plan of the machines (decided with
	// Faults.For(machine ID)): fault.MachinePowerLoss cuts the power while
	// the deploy agent writes an image, fault.MachineNetDrop drops the
	// machine's network (network boot and its agents; virtual media is
	// read by the BMC, on its own network), fault.MachineDownloadDrop
	// drops it in the middle of a download.
	Faults *fault.Plan

	mu   sync.Mutex
	logs map[string][]string
	nets map[string]*machineNet
	// sources are the machines' clients from their own addresses.
	sources map[string]*http.Client
}

// Boot implements machine.Firmware.
func (f *Firmware) Boot(ctx context.Context, m *machine.Machine, from machine.BootTarget) {
	var err error
	switch from {
	case machine.BootCd:
		err = f.bootCD(ctx, m)
	case machine.BootPxe:
		err = f.bootPXE(ctx, m)
	default:
		err = f.bootDisk(ctx, m)
	}
	if err != nil && ctx.Err() == nil {
		f.logf(m, "Boot from %s failed: %v", from, err)
		m.SetBootedOS(OSNone)
	}
}

// Log returns what a machine's console printed.
func (f *Firmware) Log(id string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.logs[id]...)
}

func (f *Firmware) logf(m *machine.Machine, format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.logs == nil {
		f.logs = map[string][]string{}
	}
	line := fmt.Sprintf(format, args...)
	if f.Console != nil {
		fmt.Fprintf(f.Console, "%s: %s\n", m.ID, line)
	}
	lines := append(f.logs[m.ID], line)
	if len(lines) > 200 {
		lines = lines[len(lines)-200:]
	}
	f.logs[m.ID] = lines
}

func (f *Firmware) get(ctx context.Context, hc *http.Client, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", redact(url), resp.Status)
	}
	return io.ReadAll(io.LimitReader(resp.Body, 256<<20))
}

// redact drops the query (signatures) from a URL for logs.
func redact(url string) string {
	u, _, _ := strings.Cut(url, "?")
	return u
}

// bootCD boots the inserted image if it is a deploy ISO. Like a BMC's
// virtual media, it reads the image over HTTP ranges, only the sectors the
// boot loader asks for: the host's boot configuration in the host region.
func (f *Firmware) bootCD(ctx context.Context, m *machine.Machine) error {
	url := m.Media()
	if url == "" {
		return f.bootDisk(ctx, m)
	}
	hc := f.fromMachine(m, f.HTTP)
	media, err := openHTTPMedia(ctx, hc, url, f.MediaRetries, func(err error) { f.logf(m, "Virtual media: %v; reading it again", err) })
	if err != nil {
		return err
	}
	cfg, err := imageservice.ReadISOHostConfig(media)
	if err != nil {
		return fmt.Errorf("the virtual media is not bootable: %w", err)
	}
	return f.runAgent(ctx, m, cfg)
}

// bootPXE asks the boot server for an iPXE script by the first NIC's MAC,
// checks that its kernel and initrds are there, and reads the host's boot
// configuration from the host initrd.
func (f *Firmware) bootPXE(ctx context.Context, m *machine.Machine) error {
	if f.BootURL == "" || len(m.Hardware.NICs) == 0 {
		return f.bootDisk(ctx, m)
	}
	hc := f.machineHTTP(m, f.HTTP)
	script, err := f.get(ctx, hc, strings.TrimSuffix(f.BootURL, "/")+"/boot/by-mac/"+m.Hardware.NICs[0].MAC)
	if err != nil {
		f.logf(m, "PXE: %v; booting the disk", err)
		return f.bootDisk(ctx, m)
	}
	cfg, err := f.loadIPXE(ctx, hc, string(script))
	if err != nil {
		return err
	}
	return f.runAgent(ctx, m, cfg)
}

// loadIPXE does what iPXE does with a script of the form
// imageservice.DeployIPXEScript writes: it checks that the kernel and the
// initrds are there, with hc, and reads the host's boot configuration from
// the host initrd (host.img).
func (f *Firmware) loadIPXE(ctx context.Context, hc *http.Client, script string) (deployapi.BootConfig, error) {
	b, err := imageservice.ParseIPXEScript(script)
	if err != nil {
		return deployapi.BootConfig{}, err
	}
	if _, err := openHTTPMedia(ctx, hc, b.KernelURL, 0, nil); err != nil {
		return deployapi.BootConfig{}, fmt.Errorf("loading the kernel: %w", err)
	}
	var cfg *deployapi.BootConfig
	for _, in := range b.Initrds {
		if in.Name != "host.img" {
			if _, err := openHTTPMedia(ctx, hc, in.URL, 0, nil); err != nil {
				return deployapi.BootConfig{}, fmt.Errorf("loading initrd %s: %w", in.Name, err)
			}
			continue
		}
		data, err := f.get(ctx, hc, in.URL)
		if err != nil {
			return deployapi.BootConfig{}, fmt.Errorf("loading initrd %s: %w", in.Name, err)
		}
		c, err := imageservice.ReadHostInitrd(bytes.NewReader(data))
		if err != nil {
			return deployapi.BootConfig{}, err
		}
		cfg = &c
	}
	if cfg == nil {
		return deployapi.BootConfig{}, fmt.Errorf("the iPXE script loads no host initrd: the agent would have no configuration")
	}
	return *cfg, nil
}

// runAgent runs what the live image's init would: the discovery agent of
// an InfraEnv's image, else the deploy agent; an image with a lookup
// section (the converged flow) runs the deploy agent, which finds its host
// by MAC, and its custom deploy start_assisted_install starts the
// discovery agent.
func (f *Firmware) runAgent(ctx context.Context, m *machine.Machine, cfg deployapi.BootConfig) error {
	if cfg.Discovery != nil && cfg.Lookup == nil {
		return f.runDiscovery(ctx, m, *cfg.Discovery)
	}
	m.SetBootedOS(OSDeployAgent)
	hc, err := f.agentHTTP(m, cfg.CACert)
	if err != nil {
		return err
	}
	devs := f.devices(m, f.powerCut(ctx, m))
	opts := deploy.Options{
		Config: cfg, Devices: devs, HTTP: hc, PollInterval: f.AgentPollInterval, ProgressInterval: f.AgentPollInterval,
		Logf:      func(format string, args ...any) { f.logf(m, format, args...) },
		Inventory: func() (*deployapi.Inventory, error) { return inventory(m, devs), nil },
	}
	if cfg.Lookup != nil {
		f.logf(m, "Deploy agent started, looking its host up at %s", cfg.Lookup.EngineURL)
		for _, n := range m.Hardware.NICs {
			opts.MACs = append(opts.MACs, n.MAC)
		}
		if cfg.Discovery != nil {
			dopts, err := f.discoveryOptions(ctx, m, *cfg.Discovery)
			if err != nil {
				return err
			}
			opts.CustomDeploy = discovery.CustomDeploy(dopts)
		}
	} else {
		f.logf(m, "Deploy agent started for %s", cfg.HostID)
	}
	return deploy.Run(ctx, opts)
}

// devices are m's disks as the agents see them; cut, when set, cuts the
// power during image writes as the fault plan says.
func (f *Firmware) devices(m *machine.Machine, cut *powerCut) []deploy.BlockDevice {
	devs := make([]deploy.BlockDevice, 0, len(m.Hardware.Disks))
	for _, d := range m.Hardware.Disks {
		devs = append(devs, blockDevice{d: d, cut: cut})
	}
	return devs
}

// runDiscovery runs the discovery agent of an InfraEnv's image: the same
// code as on a real machine, with the machine's synthetic inventory and
// disks; its reboot resets the machine.
func (f *Firmware) runDiscovery(ctx context.Context, m *machine.Machine, cfg deployapi.Discovery) error {
	m.SetBootedOS(OSDiscoveryAgent)
	f.logf(m, "Discovery agent started for infra env %s", cfg.InfraEnvID)
	opts, err := f.discoveryOptions(ctx, m, cfg)
	if err != nil {
		return err
	}
	return discovery.Run(ctx, opts)
}

// agentHTTP is the client of an agent on m whose boot configuration has
// the CA caPEM: it trusts that CA (and the system's roots) only.
func (f *Firmware) agentHTTP(m *machine.Machine, caPEM string) (*http.Client, error) {
	if caPEM == "" {
		return f.machineHTTP(m, f.HTTP), nil
	}
	t, err := deploy.Transport(caPEM)
	if err != nil {
		return nil, err
	}
	return f.machineHTTP(m, &http.Client{Transport: t, Timeout: f.HTTP.Timeout}), nil
}

// discoveryOptions are the discovery agent's options on m.
func (f *Firmware) discoveryOptions(ctx context.Context, m *machine.Machine, cfg deployapi.Discovery) (discovery.Options, error) {
	hc, err := f.agentHTTP(m, strings.TrimSpace(cfg.CACert+"\n"+cfg.AdditionalTrustBundle))
	if err != nil {
		return discovery.Options{}, err
	}
	devs := f.devices(m, nil)
	opts := discovery.Options{
		Config: cfg, HostID: m.UUID, Devices: devs, HTTP: hc, PollInterval: f.AgentPollInterval, Version: "metalshift-sim",
		Logf: func(format string, args ...any) { f.logf(m, format, args...) },
		Inventory: func() (*assistedapi.Inventory, error) {
			inv := discovery.FromDeployInventory(inventory(m, devs), strings.ToLower(m.ID))
			for i, n := range m.Hardware.NICs {
				if n.IP != "" && i < len(inv.Interfaces) {
					inv.Interfaces[i].IPV4Addresses = []string{n.IP + "/24"}
				}
			}
			return inv, nil
		},
		Reboot: func(context.Context) error {
			f.logf(m, "Rebooting")
			go m.GuestReset(ctx)
			return nil
		},
	}
	if f.Resolve != nil {
		// The simulated network's names, else the host's resolver's (as a
		// DNS server that forwards).
		opts.Lookup = func(ctx context.Context, name string) []net.IP {
			if ip := net.ParseIP(f.Resolve(name)); ip != nil {
				return []net.IP{ip}
			}
			return discovery.SystemLookup(ctx, name)
		}
	}
	if f.OnBootstrap != nil {
		opts.RunBootstrap = func(bctx context.Context, ign []byte) error {
			f.OnBootstrap(bctx, m, ign)
			return nil
		}
	}
	return opts, nil
}

// inventory is what an agent on m would find.
func inventory(m *machine.Machine, devs []deploy.BlockDevice) *deployapi.Inventory {
	hw := m.Hardware
	inv := &deployapi.Inventory{
		SystemVendor: deployapi.SystemVendor{Manufacturer: hw.Manufacturer, ProductName: hw.Model, SerialNumber: hw.SerialNumber},
		BootMode:     deployapi.BootModeLegacy,
		CPU:          deployapi.CPU{Architecture: hw.CPUArch, Model: hw.CPUModel, Count: hw.CPUCount, MHz: hw.CPUMHz},
		MemoryBytes:  int64(hw.RAMMiB) << 20,
	}
	if m.Override().UEFI {
		inv.BootMode = deployapi.BootModeUEFI
	}
	for _, n := range hw.NICs {
		inv.NICs = append(inv.NICs, deployapi.NIC{Name: n.Name, MAC: n.MAC, SpeedMbps: n.SpeedGbps * 1000, HasLink: true})
	}
	for _, d := range devs {
		inv.Disks = append(inv.Disks, d.Info())
	}
	return inv
}

// bootDisk boots the first disk that holds a config drive, and reads it as
// the installed OS's first boot would.
func (f *Firmware) bootDisk(ctx context.Context, m *machine.Machine) error {
	for _, d := range m.Hardware.Disks {
		cd, ok, err := configdrive.Read(d, d.SizeBytes)
		if ok && err != nil {
			f.logf(m, "Reading the config drive of %s: %v", d.Name, err)
		}
		if err != nil || !ok {
			continue
		}
		m.SetBootedOS(OSDisk)
		f.logf(m, "Booted %s", d.Name)
		if f.OnDiskBoot != nil {
			f.OnDiskBoot(ctx, m, cd)
		}
		return nil
	}
	m.SetBootedOS(OSNone)
	f.logf(m, "No bootable device")
	return nil
}

// blockDevice adapts a simulated disk to the agent's block devices.
type blockDevice struct {
	d   *machine.Disk
	cut *powerCut
}

var _ deploy.UnpartitionedConfigDrive = blockDevice{}

func (b blockDevice) ReadAt(p []byte, off int64) (int, error) { return b.d.ReadAt(p, off) }
func (b blockDevice) WriteAt(p []byte, off int64) (int, error) {
	if b.cut == nil {
		return b.d.WriteAt(p, off)
	}
	return b.cut.writeAt(b.d, p, off)
}

// UnpartitionedConfigDrive implements deploy.UnpartitionedConfigDrive: the
// simulator's test images are random bytes without a partition table, and
// the simulated OS finds the config drive with configdrive.Read.
func (b blockDevice) UnpartitionedConfigDrive() bool { return true }

func (b blockDevice) Info() deploy.DeviceInfo {
	return deploy.DeviceInfo{Name: b.d.Name, Model: b.d.Model, Vendor: b.d.Vendor, SerialNumber: b.d.SerialNumber,
		WWN: b.d.WWN, HCTL: b.d.HCTL, SizeBytes: b.d.SizeBytes, Rotational: b.d.Rotational}
}
