package metalclient

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/metalshift/metalshift/agent/configdrive"
	"github.com/metalshift/metalshift/agent/metalcloud"
	deployapi "github.com/metalshift/metalshift/api/deploy/v1"
	equinixapi "github.com/metalshift/metalshift/api/equinixmetal/v1"
	"github.com/metalshift/metalshift/imageservice"
	"github.com/metalshift/metalshift/sim"
	"github.com/metalshift/metalshift/sim/equinix"
	"github.com/metalshift/metalshift/sim/machine"
)

// bootEnv is the emulator with machines for its devices (sim.MetalCloud),
// its metadata service, and a boot server with the live image of a metal
// cloud's installer and an OS image.
type bootEnv struct {
	*env
	cloud     *sim.MetalCloud
	boot      *httptest.Server
	image     []byte
	imageGets atomic.Int32
	// booted are the config drives the installed OS found, by device ID.
	mu     sync.Mutex
	booted map[string][]configdrive.Contents
}

func newBootEnv(t *testing.T) *bootEnv {
	t.Helper()
	b := &bootEnv{image: make([]byte, 2<<20+17), booted: map[string][]configdrive.Contents{}}
	_, _ = rand.Read(b.image)
	b.cloud = sim.NewMetalCloud(sim.MetalCloudOptions{
		DiskSizeBytes: 64 << 30, RetryPause: time.Millisecond,
		OnDiskBoot: func(_ context.Context, m *machine.Machine, cd configdrive.Contents) {
			b.mu.Lock()
			defer b.mu.Unlock()
			b.booted[m.ID] = append(b.booted[m.ID], cd)
		},
	})
	b.env = newEnv(t, equinix.Options{Machines: b.cloud})
	md := httptest.NewServer(b.sim.MetadataHandler())
	t.Cleanup(md.Close)

	images, err := imageservice.LightImages()
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b.image)
	mux := http.NewServeMux()
	b.boot = httptest.NewServer(mux)
	t.Cleanup(b.boot.Close)
	host, err := imageservice.HostInitrd(deployapi.BootConfig{MetalCloud: &deployapi.MetalCloud{
		MetadataURL: md.URL, Image: deployapi.Image{URL: b.boot.URL + "/os.img", Checksum: hex.EncodeToString(sum[:])},
	}})
	if err != nil {
		t.Fatal(err)
	}
	script := imageservice.DeployIPXEScript(b.boot.URL+"/vmlinuz", b.boot.URL+"/initrd.img", b.boot.URL+"/host.img")
	serve := func(name string, r func() io.ReadSeeker) {
		mux.HandleFunc("GET /"+name, func(w http.ResponseWriter, req *http.Request) {
			http.ServeContent(w, req, name, time.Time{}, r())
		})
	}
	serve("boot.ipxe", func() io.ReadSeeker { return bytes.NewReader([]byte(script)) })
	serve("vmlinuz", func() io.ReadSeeker { return images.Kernel() })
	serve("initrd.img", func() io.ReadSeeker { return images.Initrd() })
	serve("host.img", func() io.ReadSeeker { return bytes.NewReader(host) })
	mux.HandleFunc("GET /os.img", func(w http.ResponseWriter, req *http.Request) {
		b.imageGets.Add(1)
		http.ServeContent(w, req, "os.img", time.Time{}, bytes.NewReader(b.image))
	})
	// First of the cleanups: the machines stop before the servers do.
	t.Cleanup(b.cloud.Close)
	return b
}

// create creates a device and takes it to active on the fake clock.
func (b *bootEnv) create(t *testing.T, in equinixapi.DeviceCreateInput) *equinixapi.Device {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	d, err := b.c.CreateDevice(ctx, b.project, in)
	g.Expect(err).NotTo(HaveOccurred())
	b.clock.Step(timings.Queued)
	d, err = b.c.GetDevice(ctx, d.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.State).To(Equal(equinixapi.StateProvisioning))
	b.clock.Step(timings.Provisioning)
	d, err = b.c.GetDevice(ctx, d.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.State).To(Equal(equinixapi.StateActive))
	return d
}

// machine waits for the device's machine to exist.
func (b *bootEnv) machine(g Gomega, id string) *machine.Machine {
	g.Eventually(func() *machine.Machine { return b.cloud.Machine(id) }).WithTimeout(10 * time.Second).ShouldNot(BeNil())
	return b.cloud.Machine(id)
}

func (b *bootEnv) bootedDrives(id string) []configdrive.Contents {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]configdrive.Contents(nil), b.booted[id]...)
}

const ignition = `{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/motd","contents":{"source":"data:,hello"}}]}}`

// TestDeviceBootsMachine: a custom_ipxe device boots a machine that runs
// its iPXE script; the live image reads the metadata as the device (from
// its private address), configures the bond of the device's NICs with
// its three addresses, writes the OS image once and a config drive with
// the device's userdata and provider ID, and boots the disk. A reinstall
// installs it again; a delete powers it off.
func TestDeviceBootsMachine(t *testing.T) {
	g := NewWithT(t)
	b := newBootEnv(t)
	ctx := context.Background()
	d := b.create(t, equinixapi.DeviceCreateInput{Metro: "da", Plan: "c3.small.x86", OperatingSystem: equinixapi.OSCustomIPXE,
		Hostname: "worker-0", IPXEScriptURL: b.boot.URL + "/boot.ipxe", Userdata: ignition})
	m := b.machine(g, d.ID)
	g.Eventually(m.BootedOS).WithTimeout(30*time.Second).Should(Equal(sim.OSDisk), func() []string { return b.cloud.Log(d.ID) })

	g.Expect(b.imageGets.Load()).To(Equal(int32(1)), "the OS image is written once")
	disk := m.DiskByName("/dev/sda")
	got := make([]byte, len(b.image))
	_, err := disk.ReadAt(got, 0)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(b.image), "the disk holds the OS image")
	cd, ok, err := configdrive.Read(disk, disk.SizeBytes)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeTrue())
	g.Expect(string(cd.UserData)).To(Equal(d.Userdata), "the config drive's user data is the device's")
	var meta map[string]string
	g.Expect(json.Unmarshal(cd.MetaData, &meta)).To(Succeed())
	g.Expect(meta).To(Equal(map[string]string{"uuid": d.ID, "name": "worker-0", "local-hostname": "worker-0",
		"providerid": "equinixmetal://" + d.ID}))
	g.Expect(b.bootedDrives(d.ID)).To(HaveLen(1), "the installed OS booted with the config drive")
	g.Expect(b.bootedDrives(d.ID)[0].UserData).To(Equal(cd.UserData))

	// The network is the device's, as the API reports it.
	var macs []string
	for _, p := range d.NetworkPorts {
		if p.Type == equinixapi.PortTypeNIC {
			macs = append(macs, p.Data.MAC)
		}
	}
	g.Expect(macs).To(HaveLen(2))
	var want []metalcloud.Address
	for _, a := range d.IPAddresses {
		want = append(want, metalcloud.Address{Prefix: netip.PrefixFrom(netip.MustParseAddr(a.Address), a.CIDR),
			Gateway: netip.MustParseAddr(a.Gateway), Public: a.Public, Management: a.Management})
	}
	nets := b.cloud.Networks(d.ID)
	g.Expect(nets).To(HaveLen(1))
	n := nets[0]
	g.Expect(n.Bond).To(Equal("bond0"))
	g.Expect(n.BondMode).To(Equal(equinixapi.BondModeLACP))
	g.Expect([]string{n.Members[0].MAC, n.Members[1].MAC}).To(Equal(macs))
	g.Expect(n.Addresses).To(Equal(want))
	var kinds []string
	for _, a := range n.Addresses {
		kinds = append(kinds, fmt.Sprintf("public=%t ipv6=%t gateway=%t", a.Public, a.IPv6(), a.Gateway.IsValid()))
	}
	g.Expect(kinds).To(ConsistOf("public=false ipv6=false gateway=true", "public=true ipv6=false gateway=true", "public=true ipv6=true gateway=true"),
		"the private IPv4, public IPv4 and public IPv6 addresses, each with its gateway")
	for _, a := range n.Addresses {
		g.Expect(b.cloud.Log(d.ID)).To(ContainElement("Configured bond0 address " + a.String()))
	}

	// A reinstall wipes the disk and installs again.
	g.Expect(b.c.DeviceAction(ctx, d.ID, equinixapi.DeviceActionInput{Type: equinixapi.ActionReinstall})).To(Succeed())
	g.Eventually(b.bootedDrives).WithArguments(d.ID).WithTimeout(30 * time.Second).Should(HaveLen(2))
	g.Expect(b.imageGets.Load()).To(Equal(int32(2)))
	g.Expect(b.cloud.Networks(d.ID)).To(HaveLen(2))
	g.Expect(b.cloud.Machine(d.ID)).To(BeIdenticalTo(m), "the device keeps its machine")

	// A delete powers the machine off, and it goes.
	g.Expect(b.c.DeleteDevice(ctx, d.ID, false)).To(Succeed())
	g.Eventually(m.PoweredOn).WithTimeout(10 * time.Second).Should(BeFalse())
	g.Eventually(func() *machine.Machine { return b.cloud.Machine(d.ID) }).WithTimeout(10 * time.Second).Should(BeNil())
	g.Expect(m.BootedOS()).To(BeEmpty())
}

// TestDeviceBootFailures: a device whose userdata is its iPXE script boots
// the live image, which stops without writing a disk because the userdata
// is not Ignition, and says so; a device of another operating system has
// no iPXE script and boots nothing; power actions reach the machine.
func TestDeviceBootFailures(t *testing.T) {
	g := NewWithT(t)
	b := newBootEnv(t)
	ctx := context.Background()
	script := imageservice.DeployIPXEScript(b.boot.URL+"/vmlinuz", b.boot.URL+"/initrd.img", b.boot.URL+"/host.img")
	d := b.create(t, equinixapi.DeviceCreateInput{Metro: "da", Plan: "c3.small.x86", OperatingSystem: equinixapi.OSCustomIPXE,
		Hostname: "worker-1", Userdata: script})
	m := b.machine(g, d.ID)
	g.Eventually(func() []string { return b.cloud.Log(d.ID) }).WithTimeout(30 * time.Second).Should(ContainElement(
		ContainSubstring("Boot from Pxe failed: the user data is not an Ignition config: it starts with '#'")))
	g.Expect(b.cloud.Log(d.ID)).To(ContainElement("iPXE: running the script of the userdata"))
	g.Expect(m.BootedOS()).To(Equal(sim.OSNone))
	g.Expect(b.imageGets.Load()).To(BeZero(), "nothing is written")
	g.Expect(m.DiskByName("/dev/sda").Writes()).To(BeZero())
	g.Expect(b.cloud.Networks(d.ID)).To(HaveLen(1), "the network was configured before the userdata was read")

	u := b.create(t, equinixapi.DeviceCreateInput{Metro: "da", Plan: "c3.small.x86", OperatingSystem: "ubuntu_24_04", Hostname: "ubuntu-0"})
	um := b.machine(g, u.ID)
	g.Eventually(func() []string { return b.cloud.Log(u.ID) }).WithTimeout(10 * time.Second).Should(ContainElement("No bootable device"))
	g.Expect(b.cloud.Log(u.ID)).To(ContainElement("No iPXE script (operating system ubuntu_24_04): booting the disk"))
	g.Expect(um.BootedOS()).To(Equal(sim.OSNone))

	g.Expect(b.c.PowerOff(ctx, u.ID)).To(Succeed())
	g.Eventually(um.PoweredOn).WithTimeout(10 * time.Second).Should(BeFalse())
	b.clock.Step(timings.Power)
	_, err := b.c.GetDevice(ctx, u.ID)
	g.Expect(err).NotTo(HaveOccurred())
	boots := um.Boots()
	g.Expect(b.c.PowerOn(ctx, u.ID)).To(Succeed())
	g.Eventually(um.Boots).WithTimeout(10 * time.Second).Should(Equal(boots + 1))
	g.Expect(um.PoweredOn()).To(BeTrue())
}
