package equinix

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	deployapi "github.com/metalshift/metalshift/api/deploy/v1"
	equinixapi "github.com/metalshift/metalshift/api/equinixmetal/v1"
	"github.com/metalshift/metalshift/hostengine/deployserver"
	"github.com/metalshift/metalshift/imageservice"
	"github.com/metalshift/metalshift/infrastructure/equinix/metalclient"
	"github.com/metalshift/metalshift/sim"
	simequinix "github.com/metalshift/metalshift/sim/equinix"
)

// TestQEMUDevice: a device created with custom_ipxe pointing at the deploy
// server's signed metal cloud script boots as a QEMU VM: the cloud's iPXE
// chains the script, which loads the real live image; its installer reads
// the metadata service as the device (through the VM's forwarder, from the
// device's private address), bonds the NIC and configures the device's
// addresses (IPv4 private and public, IPv6) and routes with netlink, reads
// the Ignition userdata, writes the test OS image once and its config
// drive, and reboots; the VM boots its disk, whose OS prints the SHA-256
// of the user data its config drive holds.
func TestQEMUDevice(t *testing.T) {
	images := os.Getenv("METALSHIFT_IMAGES_DIR")
	if images == "" {
		t.Skip("METALSHIFT_IMAGES_DIR is not set: `make test` builds the images and sets it")
	}
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		t.Skip("qemu-system-x86_64 is missing: install Debian's qemu-system-x86, ovmf and ipxe-qemu (.ci/run does)")
	}
	g := NewWithT(t)
	ctx := context.Background()

	// The deploy server with the real live images; the VMs reach the
	// host's loopback at 10.0.2.2.
	dsLn, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	_, dsPort, _ := net.SplitHostPort(dsLn.Addr().String())
	guestBase := "http://10.0.2.2:" + dsPort
	live, err := imageservice.LoadImages(images)
	g.Expect(err).NotTo(HaveOccurred())
	ds, err := deployserver.New(deployserver.Options{Client: env.Client, Key: key, BaseURL: guestBase, Images: live})
	g.Expect(err).NotTo(HaveOccurred())
	dsSrv := &http.Server{Handler: ds.BootHandler(guestBase), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = dsSrv.Serve(dsLn) }()
	t.Cleanup(func() { _ = dsSrv.Close() })

	osImage, err := os.ReadFile(filepath.Join(images, "metalshift-testos.img"))
	g.Expect(err).NotTo(HaveOccurred())
	sum := sha256.Sum256(osImage)
	var imageGets atomic.Int32
	imgLn, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	_, imgPort, _ := net.SplitHostPort(imgLn.Addr().String())
	imgSrv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		imageGets.Add(1)
		http.ServeContent(w, r, "os.img", time.Time{}, bytes.NewReader(osImage))
	})}
	go func() { _ = imgSrv.Serve(imgLn) }()
	t.Cleanup(func() { _ = imgSrv.Close() })

	// The emulator, its metadata service, and the cloud of QEMU VMs.
	mdLn, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	self, err := os.Executable()
	g.Expect(err).NotTo(HaveOccurred())
	cloud, err := sim.NewQEMUMetalCloud(sim.MetalCloudOptions{}, sim.MetalCloudQEMU{StateDir: t.TempDir(),
		MetadataAddr: mdLn.Addr().String(), Forwarder: []string{self, sim.MetadataForwardArg}})
	g.Expect(err).NotTo(HaveOccurred())
	s := simequinix.New(simequinix.Options{Machines: cloud,
		Timings: simequinix.Timings{Queued: 100 * time.Millisecond, Provisioning: 300 * time.Millisecond, Deprovisioning: 200 * time.Millisecond, Power: 100 * time.Millisecond}})
	mdSrv := &http.Server{Handler: s.MetadataHandler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = mdSrv.Serve(mdLn) }()
	t.Cleanup(func() { _ = mdSrv.Close() })
	apiLn, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	apiSrv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = apiSrv.Serve(apiLn) }()
	t.Cleanup(func() { _ = apiSrv.Close() })
	t.Cleanup(cloud.Close) // first: the VMs stop before the servers
	token := s.NewToken()
	project, err := s.CreateProject(token, "qemu")
	g.Expect(err).NotTo(HaveOccurred())
	mc, err := metalclient.New(metalclient.Options{BaseURL: "http://" + apiLn.Addr().String() + "/metal/v1", Token: token})
	g.Expect(err).NotTo(HaveOccurred())

	query, err := deployapi.SignMetalCloudQuery(key, deployapi.MetalCloudBoot{Machine: "qemu/device-0/0b5e1c2a",
		MetalCloud: deployapi.MetalCloud{MetadataURL: sim.MetalCloudQEMUMetadataURL, Image: deployapi.Image{
			URL: "http://10.0.2.2:" + imgPort + "/os.img", Checksum: hex.EncodeToString(sum[:]), ChecksumType: "sha256"}}},
		time.Now().Add(time.Hour))
	g.Expect(err).NotTo(HaveOccurred())
	const userdata = `{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/hostname","contents":{"source":"data:,device-0"}}]}}`
	start := time.Now()
	dev, err := mc.CreateDevice(ctx, project.ID, equinixapi.DeviceCreateInput{Metro: "sv", Plan: "c3.small.x86", Hostname: "device-0",
		OperatingSystem: equinixapi.OSCustomIPXE, IPXEScriptURL: guestBase + deployapi.MetalCloudScriptPath + "?" + query, Userdata: userdata})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("console of %s (tail):\n%s", dev.ID, strings.Join(cloud.Log(dev.ID), "\n"))
		}
	})
	g.Eventually(func(g Gomega) {
		dev, err = mc.GetDevice(ctx, dev.ID)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(dev.State).To(Equal(equinixapi.StateActive))
	}).WithTimeout(time.Minute).Should(Succeed())

	// The installed OS boots with the device's user data on its config
	// drive.
	userdataSum := sha256.Sum256([]byte(userdata))
	console := func() string {
		data, _ := os.ReadFile(cloud.QEMU().ConsoleLog(dev.ID))
		return string(data)
	}
	g.Eventually(console).WithTimeout(10*time.Minute).WithPolling(time.Second).
		Should(ContainSubstring("user_data sha256 "+hex.EncodeToString(userdataSum[:])), "the disk boots with the device's user data")
	t.Logf("device %s: created → booted its installed disk in %s", dev.ID, time.Since(start).Round(time.Second))

	// The addresses the metadata lists, configured on the bond, and the
	// routes through their gateways.
	out := console()
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "bond0") || strings.Contains(l, "This is device") || strings.Contains(l, "Installed") || strings.Contains(l, "user_data sha256") {
			t.Logf("console: %s", strings.TrimSpace(l))
		}
	}
	var kinds []string
	for _, a := range dev.IPAddresses {
		kind := map[bool]string{true: "public", false: "private"}[a.Public]
		family := map[int]string{4: "IPv4", 6: "IPv6"}[a.AddressFamily]
		kinds = append(kinds, kind+" "+family)
		g.Expect(out).To(ContainSubstring(fmt.Sprintf("Configured bond0 address %s/%d gateway %s (%s %s)", a.Address, a.CIDR, a.Gateway, kind, family)))
		if a.Public {
			g.Expect(out).To(ContainSubstring(fmt.Sprintf("bond0: route default via %s", a.Gateway)))
		}
	}
	g.Expect(kinds).To(ConsistOf("private IPv4", "public IPv4", "public IPv6"))
	g.Expect(out).To(ContainSubstring("bond0: 802.3ad bond (mode 4)"), "the metadata's mode, as the kernel has it")
	g.Expect(out).To(ContainSubstring("bond0: 10.0.2.15/24 moves from eth0 to the bond"), "slirp's address stays, on the bond")
	g.Expect(imageGets.Load()).To(Equal(int32(1)), "the image was downloaded once")
}
