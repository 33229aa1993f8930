package machine

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// BootTarget is where a machine boots from.
type BootTarget string

// Boot targets, named as Redfish names them.
const (
	BootNone BootTarget = "None"
	BootPxe  BootTarget = "Pxe"
	BootCd   BootTarget = "Cd"
	BootHdd  BootTarget = "Hdd"
)

// BootOverride is a boot source override set through the BMC.
type BootOverride struct {
	Target BootTarget
	// Continuous keeps the override for every boot; otherwise it is used once.
	Continuous bool
	// UEFI is the boot mode (false: legacy).
	UEFI bool
}

// NIC is a network interface of a machine.
type NIC struct {
	Name      string
	MAC       string
	IP        string
	SpeedGbps int
}

// Hardware is what a machine is made of.
type Hardware struct {
	Manufacturer, Model, SerialNumber string
	BIOSVersion, BIOSVendor, BIOSDate string
	CPUArch, CPUModel                 string
	CPUCount                          int
	CPUMHz                            float64
	RAMMiB                            int
	NICs                              []NIC
	Disks                             []*Disk
}

// Firmware runs what a machine boots. Boot is called in its own goroutine
// each time the machine powers on or resets, with a context cancelled when
// it powers off or resets again.
type Firmware interface {
	Boot(ctx context.Context, m *Machine, from BootTarget)
}

// MediaWatcher is implemented by firmware that must know when the virtual
// CD drive's media changes while the machine runs, not only when it boots
// (a VM's BMC attaches the image to the running VM). MediaChanged is called
// after each InsertMedia and EjectMedia, outside the machine's lock, and
// possibly concurrently: it reads m.Media() for what the drive holds now.
type MediaWatcher interface {
	MediaChanged(m *Machine)
}

// FirmwareFunc adapts a function to Firmware.
type FirmwareFunc func(ctx context.Context, m *Machine, from BootTarget)

// Boot calls f.
func (f FirmwareFunc) Boot(ctx context.Context, m *Machine, from BootTarget) { f(ctx, m, from) }

// Machine is one simulated machine. It is safe for concurrent use.
type Machine struct {
	ID       string
	UUID     string
	Hardware Hardware

	mu        sync.Mutex
	powered   bool
	override  BootOverride
	media     string // URL of the image in the virtual CD drive; "" when empty
	firmware  Firmware
	cancel    context.CancelFunc
	boots     int
	bootedOS  string
	powerLag  time.Duration
	stateLog  []string
	mediaFail bool
}

// New returns a powered-off machine.
func New(id, uuid string, hw Hardware) *Machine {
	return &Machine{ID: id, UUID: uuid, Hardware: hw, override: BootOverride{Target: BootNone, UEFI: true}}
}

// SetFirmware installs what runs on boot.
func (m *Machine) SetFirmware(f Firmware) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.firmware = f
}

// SetPowerLag makes power transitions take d (a slow BMC or PSU).
func (m *Machine) SetPowerLag(d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.powerLag = d
}

// PowerLag returns the injected power transition time.
func (m *Machine) PowerLag() time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.powerLag
}

// SetMediaFault makes virtual media refuse to insert.
func (m *Machine) SetMediaFault(fail bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.mediaFail = fail
}

// PoweredOn reports the power state.
func (m *Machine) PoweredOn() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.powered
}

// Boots counts how many times the machine booted.
func (m *Machine) Boots() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.boots
}

// Override returns the current boot override.
func (m *Machine) Override() BootOverride {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.override
}

// SetOverride sets the boot override.
func (m *Machine) SetOverride(o BootOverride) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.override = o
}

// Media returns the URL of the inserted image, "" when the drive is empty.
func (m *Machine) Media() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.media
}

// ErrMediaFault is returned by InsertMedia while a media fault is injected.
var ErrMediaFault = fmt.Errorf("virtual media device error")

// InsertMedia puts an image URL in the virtual CD drive.
func (m *Machine) InsertMedia(url string) error {
	m.mu.Lock()
	if m.mediaFail {
		m.mu.Unlock()
		return ErrMediaFault
	}
	m.media = url
	m.mu.Unlock()
	m.mediaChanged()
	return nil
}

// EjectMedia empties the virtual CD drive.
func (m *Machine) EjectMedia() {
	m.mu.Lock()
	m.media = ""
	m.mu.Unlock()
	m.mediaChanged()
}

func (m *Machine) mediaChanged() {
	m.mu.Lock()
	w, ok := m.firmware.(MediaWatcher)
	m.mu.Unlock()
	if ok {
		w.MediaChanged(m)
	}
}

// SetBootedOS records what the machine runs now, for inspection by tests
// and the simulator ("deploy-agent", "disk:<image url>").
func (m *Machine) SetBootedOS(os string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.bootedOS = os
	m.stateLog = append(m.stateLog, os)
}

// BootedOS is what the machine runs now; "" when off.
func (m *Machine) BootedOS() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.bootedOS
}

// PowerOn powers the machine on and boots it; no-op when already on.
func (m *Machine) PowerOn() {
	m.lag()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.powered {
		return
	}
	m.powered = true
	m.bootLocked()
}

// PowerOff cuts the power; no-op when already off.
func (m *Machine) PowerOff() {
	m.lag()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.powerOffLocked()
}

// Reset restarts a powered machine, or powers on one that is off.
func (m *Machine) Reset() {
	m.lag()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.powerOffLocked()
	m.powered = true
	m.bootLocked()
}

// GuestPowerOff records that what the boot with ctx runs turned the
// machine off by itself (an ACPI power-off, or a VM that exited): the power
// is off, as after PowerOff. No-op when that boot is over (the machine was
// powered off or reset since).
func (m *Machine) GuestPowerOff(ctx context.Context) {
	m.mu.Lock()
	defer m.mu.Unlock()
	// Boots end by cancelling their context under m.mu.
	if ctx.Err() == nil {
		m.powerOffLocked()
	}
}

// GuestReset records that what the boot with ctx runs restarted the
// machine (a warm reboot from the OS): it boots again as after Reset, a
// one-time boot override being used up already. No-op when that boot is
// over.
func (m *Machine) GuestReset(ctx context.Context) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if ctx.Err() == nil {
		m.powerOffLocked()
		m.powered = true
		m.bootLocked()
	}
}

func (m *Machine) lag() {
	m.mu.Lock()
	d := m.powerLag
	m.mu.Unlock()
	if d > 0 {
		time.Sleep(d)
	}
}

func (m *Machine) powerOffLocked() {
	if m.cancel != nil {
		m.cancel()
		m.cancel = nil
	}
	m.powered = false
	m.bootedOS = ""
}

// bootLocked picks the boot device (override, else disk) and runs the firmware.
func (m *Machine) bootLocked() {
	m.boots++
	from := BootHdd
	if m.override.Target != BootNone && m.override.Target != "" {
		from = m.override.Target
		if !m.override.Continuous {
			m.override.Target = BootNone
		}
	}
	if m.firmware == nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	fw := m.firmware
	go fw.Boot(ctx, m, from)
}

// DiskByName returns the disk with the given device name.
func (m *Machine) DiskByName(name string) *Disk {
	for _, d := range m.Hardware.Disks {
		if d.Name == name {
			return d
		}
	}
	return nil
}
