package sim

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	equinixapi "github.com/metalshift/metalshift/api/equinixmetal/v1"
	"github.com/metalshift/metalshift/sim/equinix"
	"github.com/metalshift/metalshift/sim/machine"
	"github.com/metalshift/metalshift/sim/qemu"
)

// MetalCloudQEMUMetadataURL is where a QEMU device reaches the metadata
// service: an address of its user network that QEMU forwards, for each
// connection, to a MetalCloudQEMU.Forwarder process calling the service
// from the device's private address. Clusters of QEMU devices set their
// metadata URL to it.
const MetalCloudQEMUMetadataURL = "http://10.0.2.100"

// metadataGuestAddr is MetalCloudQEMUMetadataURL's address.
var metadataGuestAddr = netip.MustParseAddrPort("10.0.2.100:80")

// MetadataForwardArg is the first argument that makes a program a metadata
// forwarder (RunMetadataForward with the arguments after it); see
// MetalCloudQEMU.Forwarder.
const MetadataForwardArg = "metal-cloud-metadata-forward"

// MetalCloudQEMU makes a MetalCloud's machines QEMU VMs (sim/qemu) that
// boot the real live image.
type MetalCloudQEMU struct {
	// StateDir holds the VMs' disks and consoles (required).
	StateDir string
	// MetadataAddr is the emulator's metadata service, host:port on the
	// host's loopback: here, or by SetMetadataAddr before a device
	// provisions.
	MetadataAddr string
	// Forwarder is the program QEMU starts for each connection of a VM to
	// MetalCloudQEMUMetadataURL, with the connection as its standard input
	// and output; the device's private address and MetadataAddr are added
	// to its arguments. It must call RunMetadataForward: the simulator's
	// own executable with MetadataForwardArg first (required; a test's
	// TestMain runs RunMetadataForward when its binary is started so).
	Forwarder []string
	// QEMU is the emulator's binary (qemu.DefaultQEMU when empty).
	QEMU string
}

// RunMetadataForward copies its standard input to a TCP connection from
// args[0] (a device's private address, one of the host's loopback
// addresses) to args[1] (the metadata service), and the connection to its
// standard output: one VM's connection to the metadata service, made from
// the device's address, which is how the service knows it. It writes
// nothing else to its standard output or error, which are the VM's
// connection, and returns the exit code.
func RunMetadataForward(args []string) int {
	return forwardMetadata(os.Stdin, os.Stdout, args)
}

func forwardMetadata(in io.Reader, out io.Writer, args []string) int {
	if len(args) != 2 {
		return 2
	}
	src, err := netip.ParseAddr(args[0])
	if err != nil {
		return 2
	}
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: src.AsSlice()}, Timeout: 10 * time.Second}
	conn, err := d.Dial("tcp", args[1])
	if err != nil {
		return 1
	}
	defer conn.Close() //nolint:errcheck // the VM's connection ends either way
	tcp := conn.(*net.TCPConn)
	go func() {
		_, _ = io.Copy(tcp, in)
		_ = tcp.CloseWrite()
	}()
	_, _ = io.Copy(out, tcp)
	return 0
}

// NewQEMUMetalCloud returns a MetalCloud whose machines are QEMU VMs
// (sim/qemu, small hardware with the device's first MAC on one NIC) that
// network-boot the real live image: the cloud's network boot, which it
// serves on a loopback port of its own, chains each device's iPXE script;
// the live image reaches the metadata service at MetalCloudQEMUMetadataURL.
// Of opts, DiskSizeBytes (qemu.DefaultDiskSize when 0) and Console are
// used. It fails when QEMU is not there.
func NewQEMUMetalCloud(opts MetalCloudOptions, q MetalCloudQEMU) (*MetalCloud, error) {
	if opts.DiskSizeBytes == 0 {
		opts.DiskSizeBytes = qemu.DefaultDiskSize
	}
	c := NewMetalCloud(opts)
	c.q = q
	if q.StateDir == "" || len(q.Forwarder) == 0 {
		return nil, errors.New("a QEMU metal cloud needs a state directory and a forwarder")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	c.pxe = &http.Server{Handler: c.pxeHandler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = c.pxe.Serve(ln) }()
	c.qemu = qemu.New(qemu.Options{StateDir: q.StateDir, QEMU: q.QEMU, BootURL: "http://" + ln.Addr().String(),
		Console: c.opts.Console, GuestForwards: c.guestForwards})
	if err := c.qemu.Check(); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// SetMetadataAddr sets the metadata service's address, for an emulator
// whose metadata listener gets its port when it starts, which is after its
// Machines (this MetalCloud) are made: call it before any device
// provisions.
func (c *MetalCloud) SetMetadataAddr(addr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.q.MetadataAddr = addr
}

// guestForwards forward a VM's connections to the metadata URL to the
// forwarder, with its device's private address.
func (c *MetalCloud) guestForwards(id string) []qemu.GuestForward {
	d := c.device(id)
	if d == nil {
		return nil
	}
	c.mu.Lock()
	src, ok := sourceAddr(d.dev)
	q := c.q
	c.mu.Unlock()
	if !ok {
		return nil
	}
	cmd := append(append([]string{}, q.Forwarder...), src.String(), q.MetadataAddr)
	return []qemu.GuestForward{{Addr: metadataGuestAddr, Command: cmd}}
}

func (c *MetalCloud) pxeHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /boot/by-mac/{mac}", c.serveIPXE)
	return mux
}

// serveIPXE is the cloud's network boot of a VM, by its MAC address: as
// the cloud's iPXE does, it chains the device's iPXE URL or runs its
// userdata when that is a script; a device with neither boots its disk
// (iPXE exits to the next boot device).
func (c *MetalCloud) serveIPXE(w http.ResponseWriter, r *http.Request) {
	mac := strings.ToLower(r.PathValue("mac"))
	var dm *equinix.Machine
	c.mu.Lock()
	for _, d := range c.devices {
		if len(d.dev.MACs) > 0 && strings.EqualFold(d.dev.MACs[0], mac) {
			dev := d.dev
			dm = &dev
		}
	}
	c.mu.Unlock()
	if dm == nil {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	switch {
	case dm.IPXEScriptURL != "":
		fmt.Fprintf(w, "#!ipxe\necho Metal cloud: chaining the device's iPXE script\nchain %s\n", qemu.GuestURL(dm.IPXEScriptURL, ""))
	case strings.HasPrefix(dm.Userdata, equinixapi.IPXEUserdataPrefix):
		_, _ = io.WriteString(w, dm.Userdata)
	default:
		fmt.Fprintf(w, "#!ipxe\necho Metal cloud: no iPXE script (operating system %s): booting the disk\nexit\n", dm.OperatingSystem)
	}
}

// newQEMUMachine is a device's VM: small hardware, with the device's first
// MAC on its one NIC (a bond of one).
func (c *MetalCloud) newQEMUMachine(dm equinix.Machine, i int) *machine.Machine {
	hw := qemu.SmallHardware(i, 0, c.opts.DiskSizeBytes)
	hw.CPUCount = 1
	if len(dm.MACs) > 0 {
		hw.NICs[0].MAC = strings.ToLower(dm.MACs[0])
	}
	m := machine.New(dm.ID, dm.ID, hw)
	m.SetFirmware(c.qemu)
	return m
}

// wipeQEMU removes a VM's disk files: the next boot has blank disks.
func (c *MetalCloud) wipeQEMU(m *machine.Machine) {
	for i := range m.Hardware.Disks {
		_ = os.Remove(filepath.Join(c.qemu.Dir(m.ID), fmt.Sprintf("disk%d.raw", i)))
	}
}

// QEMU is the QEMU backend of a MetalCloud made with MetalCloudOptions.QEMU
// (its VMs' consoles and state), nil otherwise.
func (c *MetalCloud) QEMU() *qemu.Firmware { return c.qemu }
