package sim

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metalshift/metalshift/agent/configdrive"
	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
	"github.com/metalshift/metalshift/internal/manifest"
	"github.com/metalshift/metalshift/sim/cluster"
	"github.com/metalshift/metalshift/sim/fault"
	"github.com/metalshift/metalshift/sim/ipmi"
	"github.com/metalshift/metalshift/sim/machine"
	"github.com/metalshift/metalshift/sim/qemu"
	"github.com/metalshift/metalshift/sim/redfish"
)

// Backends: what a lab's machines are.
const (
	// BackendLight machines run simulated firmware: the deploy agent runs
	// in-process against simulated disks; thousands fit in one process.
	BackendLight = "light"
	// BackendQEMU machines are QEMU VMs (sim/qemu) that boot what their
	// BMC says: virtual media, iPXE from the boot server, their disks.
	BackendQEMU = "qemu"
)

// BMC protocols of legacy-BIOS machines (LabOptions.LegacyBMC).
const (
	LegacyBMCRedfish = "redfish"
	LegacyBMCIPMI    = "ipmi"
)

// LabOptions describe a simulated lab.
type LabOptions struct {
	// Hosts is the number of machines.
	Hosts int
	// NamePrefix names machines <prefix>-<n>; default "host".
	NamePrefix string
	// Username and Password are the BMC credentials; defaults admin / a random password.
	Username, Password string
	// BootURL is the provisioning network's boot server (the engine's
	// deploy server, or its plain http for network boot); empty means no
	// network boot.
	BootURL string
	// CA is the PEM of the CA of the hub's servers, which the machines'
	// BMCs (virtual media) and firmware (network boot) trust besides the
	// system's roots, as ones configured with it would; CAFile names a
	// file holding it, read at each connection (a lab may start before its
	// hub makes its CA). The agents they boot trust the CA of their boot
	// configuration only.
	CA     []byte
	CAFile string
	// UnverifiedMedia makes the BMCs and firmware fetch over https without
	// verifying the server, as BMCs given no CA do; the agents still
	// verify it with their boot configuration's CA.
	UnverifiedMedia bool
	// DiskSizeBytes is the size of each machine's disk; default 480 GB.
	DiskSizeBytes int64
	// AgentPollInterval is how often deploy agents poll; default 250ms.
	AgentPollInterval time.Duration
	// Subnet is the first three octets of the machines' IPs; default 192.0.2.
	Subnet string
	// MACOctet is the fourth octet of the machines' MAC addresses, so that
	// labs sharing a provisioning network do not clash; default 0x6d. It
	// also tells the machines' UUIDs apart: agent-based installs name
	// Agents after them.
	MACOctet byte
	// World, when set, runs what machines boot from their disks: the
	// installed OpenShift cluster (see sim/cluster). Without it a booted
	// disk only records that it booted.
	World *cluster.World
	// Console, when set, gets the machines' console lines (boot, deploy
	// agent; with QEMU the BMC's events and the VMs' serial consoles), each
	// as "<machine>: <line>".
	Console io.Writer
	// Backend is BackendLight (the default) or BackendQEMU. QEMU machines
	// have small hardware (qemu.SmallHardware, DiskSizeBytes default 8
	// GiB) and run no World.
	Backend string
	// StateDir holds what machines keep on the host: the QEMU backend's VMs
	// and the ipmi_sim of legacy machines; default a new temporary
	// directory that Close removes.
	StateDir string
	// GuestHostAlias is where QEMU VMs reach the host's loopback (the boot
	// server, images); default 10.0.2.2.
	GuestHostAlias string
	// BootModes are the machines' firmware (machine i has
	// BootModes[i%len(BootModes)]): metal3v1.UEFI (the default) or
	// metal3v1.Legacy (SeaBIOS with QEMU). BareMetalHosts say the same.
	BootModes []metal3v1.BootMode
	// LegacyBMC is how the BareMetalHosts of legacy machines reach their
	// BMC: "" (as UEFI machines), LegacyBMCRedfish (Redfish, network boot)
	// or LegacyBMCIPMI (an ipmi_sim per legacy machine, network boot).
	LegacyBMC string
	// HostLabels and HostAnnotations are set on the BareMetalHosts that
	// Host and Manifests return.
	HostLabels, HostAnnotations map[string]string
	// Faults, when set, is the lab's fault plan (package sim/fault; see
	// fault.Parse for the syntax): its Redfish kinds on every machine's
	// BMC, its IPMI kinds on the ipmi_sim BMCs, and, with the light
	// backend, its machine kinds on the machines. A plan without a seed
	// gets a random one (EnsureSeed), printed to Console when set.
	Faults *fault.Plan
}

// Lab is a running set of simulated machines behind one Redfish endpoint.
type Lab struct {
	Opts LabOptions
	BMC  *redfish.Server
	// Firmware boots the machines of the light backend, QEMU those of the
	// QEMU backend; the other is nil.
	Firmware *Firmware
	QEMU     *qemu.Firmware
	Machines []*machine.Machine
	// IPMI are the ipmi_sim BMCs of legacy machines by machine ID, with
	// LegacyBMCIPMI, once started.
	IPMI map[string]*ipmi.BMC

	modes     map[string]metal3v1.BootMode
	tempState bool
	listener  net.Listener
	server    *http.Server
}

// NewLab creates the machines; Start serves their BMC.
func NewLab(opts LabOptions) *Lab {
	if opts.NamePrefix == "" {
		opts.NamePrefix = "host"
	}
	if opts.Username == "" {
		opts.Username = "admin"
	}
	if opts.Password == "" {
		opts.Password = randomPassword()
	}
	if opts.Backend == "" {
		opts.Backend = BackendLight
	}
	if opts.DiskSizeBytes == 0 {
		opts.DiskSizeBytes = 480_000_000_000
		if opts.Backend == BackendQEMU {
			opts.DiskSizeBytes = qemu.DefaultDiskSize
		}
	}
	if opts.AgentPollInterval == 0 {
		opts.AgentPollInterval = 250 * time.Millisecond
	}
	if opts.Subnet == "" {
		opts.Subnet = "192.0.2"
	}
	if opts.MACOctet == 0 {
		opts.MACOctet = defaultMACOctet
	}
	tempState := false
	if opts.StateDir == "" && (opts.Backend == BackendQEMU || opts.LegacyBMC == LegacyBMCIPMI) {
		opts.StateDir, tempState = filepath.Join(os.TempDir(), "metalshift-lab-"+randomPassword()[:8]), true
	}
	if opts.Faults.EnsureSeed() && opts.Console != nil {
		fmt.Fprintf(opts.Console, "fault plan: %s (seed chosen at random; give it to replay)\n", opts.Faults)
	}
	l := &Lab{Opts: opts, BMC: redfish.New(opts.Username, opts.Password), IPMI: map[string]*ipmi.BMC{},
		modes: map[string]metal3v1.BootMode{}, tempState: tempState}
	l.BMC.SetPlan(opts.Faults)
	if opts.Backend == BackendQEMU {
		// Images are large; a power-off or eject cancels the download.
		l.QEMU = qemu.New(qemu.Options{StateDir: opts.StateDir, BootURL: opts.BootURL, GuestHostAlias: opts.GuestHostAlias,
			MediaRetries: 30, Console: opts.Console, HTTP: &http.Client{Transport: opts.firmwareTransport()}})
		for i := range opts.Hosts {
			l.add(machine.New(fmt.Sprintf("%s-%d", opts.NamePrefix, i), machineUUID(i, opts.MACOctet), qemu.SmallHardware(i, opts.MACOctet, opts.DiskSizeBytes)), i)
		}
		return l
	}
	l.Firmware = &Firmware{HTTP: &http.Client{Timeout: 30 * time.Second, Transport: opts.firmwareTransport()}, BootURL: opts.BootURL, AgentPollInterval: opts.AgentPollInterval,
		Console: opts.Console, MediaRetries: 30, Faults: opts.Faults}
	if w := opts.World; w != nil {
		l.Firmware.OnDiskBoot = func(ctx context.Context, m *machine.Machine, cd configdrive.Contents) {
			w.Run(ctx, cluster.Machine{ID: m.ID, IP: m.Hardware.NICs[0].IP, UserData: cd.UserData, MetaData: cd.MetaData})
		}
		l.Firmware.OnBootstrap = func(ctx context.Context, m *machine.Machine, ign []byte) {
			w.Run(ctx, cluster.Machine{ID: m.ID + "-bootstrap", IP: m.Hardware.NICs[0].IP, UserData: ign})
		}
		l.Firmware.Resolve = w.Resolve
	}
	for i := range opts.Hosts {
		l.add(NewMachine(opts.NamePrefix, i, opts.Subnet, opts.MACOctet, opts.DiskSizeBytes), i)
	}
	return l
}

// firmwareTransport is the BMCs' and firmware's: trusting the system's
// roots and the lab's CA, or verifying nothing with UnverifiedMedia.
func (o LabOptions) firmwareTransport() http.RoundTripper {
	t := http.DefaultTransport.(*http.Transport).Clone()
	switch {
	case o.UnverifiedMedia:
		t.TLSClientConfig = &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12} //nolint:gosec // a BMC given no CA, as many are
	case o.CAFile != "":
		// Each connection reads the file: the hub may make it later.
		d := &net.Dialer{Timeout: 30 * time.Second}
		t.DialTLSContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			host, _, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			pem, _ := os.ReadFile(o.CAFile) // missing: the system's roots only
			td := &tls.Dialer{NetDialer: d, Config: &tls.Config{RootCAs: rootsWith(o.CA, pem), ServerName: host, MinVersion: tls.VersionTLS12}}
			return td.DialContext(ctx, network, addr)
		}
	case len(o.CA) > 0:
		t.TLSClientConfig = &tls.Config{RootCAs: rootsWith(o.CA), MinVersion: tls.VersionTLS12}
	}
	return t
}

// rootsWith is the system's roots and the PEM CAs of cas.
func rootsWith(cas ...[]byte) *x509.CertPool {
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	for _, ca := range cas {
		pool.AppendCertsFromPEM(ca)
	}
	return pool
}

// add puts machine number i in the lab, with its boot mode and firmware.
func (l *Lab) add(m *machine.Machine, i int) {
	mode := metal3v1.UEFI
	if n := len(l.Opts.BootModes); n > 0 && l.Opts.BootModes[i%n] != "" {
		mode = l.Opts.BootModes[i%n]
	}
	l.modes[m.ID] = mode
	m.SetOverride(machine.BootOverride{Target: machine.BootNone, UEFI: mode != metal3v1.Legacy})
	if l.QEMU != nil {
		m.SetFirmware(l.QEMU)
	} else {
		m.SetFirmware(l.Firmware)
	}
	l.BMC.Add(m)
	l.Machines = append(l.Machines, m)
}

// defaultMACOctet is LabOptions.MACOctet's default.
const defaultMACOctet = 0x6d

// machineUUID is the UUID of machine number i of the lab whose MACs have
// macOctet: machines of labs with different octets have different UUIDs,
// and those of the default octet keep the UUIDs they always had.
func machineUUID(i int, macOctet byte) string {
	return fmt.Sprintf("6d657461-6c73-4869-8674-%02x%010x", macOctet^defaultMACOctet, i)
}

// NewMachine returns machine number i with plausible, unique hardware.
func NewMachine(prefix string, i int, subnet string, macOctet byte, diskSize int64) *machine.Machine {
	id := fmt.Sprintf("%s-%d", prefix, i)
	hi, lo := byte(i>>8&0xff), byte(i&0xff)
	return machine.New(id, machineUUID(i, macOctet), machine.Hardware{
		Manufacturer: "Metalshift Sim", Model: "SimServer 2U", SerialNumber: fmt.Sprintf("MS%06d", i),
		BIOSVersion: "2.4.1", BIOSVendor: "SimBIOS", BIOSDate: "2026-03-01",
		CPUArch: "x86_64", CPUModel: "Simulated Xeon 6000", CPUCount: 32, CPUMHz: 2600, RAMMiB: 131072,
		NICs: []machine.NIC{
			{Name: "eno1", MAC: fmt.Sprintf("52:54:00:%02x:%02x:%02x", macOctet, hi, lo), IP: fmt.Sprintf("%s.%d", subnet, 10+i%240), SpeedGbps: 25},
			{Name: "eno2", MAC: fmt.Sprintf("52:54:01:%02x:%02x:%02x", macOctet, hi, lo), SpeedGbps: 25},
		},
		Disks: []*machine.Disk{
			{Name: "/dev/sda", Model: "SimSSD 480", Vendor: "SimDisk", SerialNumber: fmt.Sprintf("SSD%06d", i),
				WWN: fmt.Sprintf("0x5000c500%08x", i), HCTL: "0:0:0:0", SizeBytes: diskSize, Type: "SSD"},
			{Name: "/dev/sdb", Model: "SimHDD 4T", Vendor: "SimDisk", SerialNumber: fmt.Sprintf("HDD%06d", i),
				WWN: fmt.Sprintf("0x5000c501%08x", i), HCTL: "0:0:1:0", SizeBytes: 4_000_000_000_000, Rotational: true, Type: "HDD"},
		},
	})
}

// Start serves the BMC emulator on addr (e.g. 127.0.0.1:0), and an
// ipmi_sim per legacy machine with LegacyBMCIPMI.
func (l *Lab) Start(addr string) error {
	switch l.Opts.Backend {
	case BackendLight:
	case BackendQEMU:
		if err := l.QEMU.Check(); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unknown backend %q: %s or %s", l.Opts.Backend, BackendLight, BackendQEMU)
	}
	switch l.Opts.LegacyBMC {
	case "", LegacyBMCRedfish, LegacyBMCIPMI:
	default:
		return fmt.Errorf("unknown BMC %q for legacy machines: %s or %s", l.Opts.LegacyBMC, LegacyBMCRedfish, LegacyBMCIPMI)
	}
	if err := l.startIPMI(); err != nil {
		l.Close()
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		l.Close()
		return err
	}
	l.listener = ln
	l.server = &http.Server{Handler: l.BMC.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = l.server.Serve(ln) }()
	return nil
}

func (l *Lab) startIPMI() error {
	if l.Opts.LegacyBMC != LegacyBMCIPMI {
		return nil
	}
	for _, m := range l.Machines {
		if l.modes[m.ID] != metal3v1.Legacy {
			continue
		}
		b, err := ipmi.Start(m, filepath.Join(l.Opts.StateDir, m.ID, "ipmi"), l.Opts.Username, l.Opts.Password)
		if err != nil {
			return fmt.Errorf("the IPMI BMC of %s: %w", m.ID, err)
		}
		b.SetFaults(l.Opts.Faults.For(m.ID))
		l.IPMI[m.ID] = b
	}
	return nil
}

// Close stops the BMC emulators and powers every machine off; with QEMU it
// waits until every VM has exited.
func (l *Lab) Close() {
	if l.server != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = l.server.Shutdown(ctx)
	}
	for id, b := range l.IPMI {
		b.Close()
		delete(l.IPMI, id)
	}
	for _, m := range l.Machines {
		m.PowerOff()
	}
	if l.QEMU != nil {
		l.QEMU.Close()
	}
	if l.tempState {
		_ = os.RemoveAll(l.Opts.StateDir)
	}
}

// Endpoint is the BMC emulator's address, host:port.
func (l *Lab) Endpoint() string {
	if l.listener == nil {
		return ""
	}
	return l.listener.Addr().String()
}

// Machine returns the machine with id.
func (l *Lab) Machine(id string) *machine.Machine { return l.BMC.Machine(id) }

// BMCAddress is the BareMetalHost BMC address of m: virtual media or PXE;
// for a legacy machine, as LegacyBMC says.
func (l *Lab) BMCAddress(m *machine.Machine, virtualMedia bool) string {
	if l.modes[m.ID] == metal3v1.Legacy {
		switch l.Opts.LegacyBMC {
		case LegacyBMCIPMI:
			if b := l.IPMI[m.ID]; b != nil {
				return "ipmi://" + b.Addr
			}
			return "ipmi://"
		case LegacyBMCRedfish:
			virtualMedia = false
		}
	}
	scheme := "redfish+http"
	if virtualMedia {
		scheme = "redfish-virtualmedia+http"
	}
	return fmt.Sprintf("%s://%s/redfish/v1/Systems/%s", scheme, l.Endpoint(), m.ID)
}

// Host returns a BareMetalHost and its credentials Secret for m.
func (l *Lab) Host(m *machine.Machine, namespace string, virtualMedia bool) (*metal3v1.BareMetalHost, *corev1.Secret) {
	secret := &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: m.ID + "-bmc-secret", Namespace: namespace},
		Type:       corev1.SecretTypeOpaque,
		StringData: map[string]string{"username": l.Opts.Username, "password": l.Opts.Password},
	}
	host := &metal3v1.BareMetalHost{
		TypeMeta:   metav1.TypeMeta{APIVersion: metal3v1.GroupVersion.String(), Kind: "BareMetalHost"},
		ObjectMeta: metav1.ObjectMeta{Name: m.ID, Namespace: namespace},
		Spec: metal3v1.BareMetalHostSpec{
			BMC:            metal3v1.BMCDetails{Address: l.BMCAddress(m, virtualMedia), CredentialsName: secret.Name},
			BootMACAddress: m.Hardware.NICs[0].MAC,
			BootMode:       l.bootMode(m),
			Online:         false,
		},
	}
	if len(l.Opts.HostLabels) > 0 {
		host.Labels = maps.Clone(l.Opts.HostLabels)
	}
	if len(l.Opts.HostAnnotations) > 0 {
		host.Annotations = maps.Clone(l.Opts.HostAnnotations)
	}
	return host, secret
}

// bootMode is m's firmware mode; UEFI for a machine that is not the lab's.
func (l *Lab) bootMode(m *machine.Machine) metal3v1.BootMode {
	if mode, ok := l.modes[m.ID]; ok {
		return mode
	}
	return metal3v1.UEFI
}

// Manifests returns YAML with a Secret and a BareMetalHost per machine.
func (l *Lab) Manifests(namespace string, virtualMedia bool) ([]byte, error) {
	var docs []string
	for _, m := range l.Machines {
		host, secret := l.Host(m, namespace, virtualMedia)
		for _, obj := range []any{secret, host} {
			data, err := manifest.Marshal(obj)
			if err != nil {
				return nil, err
			}
			docs = append(docs, string(data))
		}
	}
	return []byte(strings.Join(docs, "---\n")), nil
}
