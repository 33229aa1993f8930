package sim

import (
	"bytes"
	"io"
	"net"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/metalshift/metalshift/sim/equinix"
	"github.com/metalshift/metalshift/sim/qemu"
)

// TestMetadataForward: the forwarder connects from the device's address,
// which the other end sees, and copies both ways until the other end
// closes.
func TestMetadataForward(t *testing.T) {
	g := NewWithT(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	defer ln.Close()
	from := make(chan string, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		from <- conn.RemoteAddr().(*net.TCPAddr).IP.String()
		got, _ := io.ReadAll(conn) // until the forwarder closes its writing half
		_, _ = conn.Write(append([]byte("answer to "), got...))
	}()
	var out bytes.Buffer
	g.Expect(forwardMetadata(strings.NewReader("GET /metadata"), &out, []string{"127.64.0.9", ln.Addr().String()})).To(Equal(0))
	g.Expect(<-from).To(Equal("127.64.0.9"))
	g.Expect(out.String()).To(Equal("answer to GET /metadata"))

	g.Expect(forwardMetadata(strings.NewReader(""), &out, []string{"not an address", ln.Addr().String()})).To(Equal(2))
	g.Expect(forwardMetadata(strings.NewReader(""), &out, nil)).To(Equal(2))
}

// TestQEMUNetworkBoot: the cloud's network boot chains a device's iPXE URL
// as the VM reaches it, runs its userdata when that is a script, and
// exits to the disk otherwise; a VM's forward to the metadata address
// starts the forwarder with its device's private address.
func TestQEMUNetworkBoot(t *testing.T) {
	g := NewWithT(t)
	c := NewMetalCloud(MetalCloudOptions{})
	c.q = MetalCloudQEMU{MetadataAddr: "127.0.0.1:7001", Forwarder: []string{"/bin/sim", MetadataForwardArg}}
	addrs := []netip.Prefix{netip.MustParsePrefix("127.64.0.5/31"), netip.MustParsePrefix("127.65.0.5/31")}
	for _, dm := range []equinix.Machine{
		{ID: "d1", MACs: []string{"02:4D:00:00:00:01", "02:4d:00:00:00:02"}, Addresses: addrs,
			IPXEScriptURL: "http://127.0.0.1:6180/metalcloud/boot.ipxe?boot=x&signature=y"},
		{ID: "d2", MACs: []string{"02:4d:00:00:00:03"}, Userdata: "#!ipxe\nchain http://boot.example/x\n"},
		{ID: "d3", MACs: []string{"02:4d:00:00:00:05"}, OperatingSystem: "ubuntu_24_04"},
	} {
		c.devices[dm.ID] = &metalDevice{dev: dm}
	}
	srv := httptest.NewServer(c.pxeHandler())
	defer srv.Close()
	get := func(mac string) (int, string) {
		resp, err := srv.Client().Get(srv.URL + "/boot/by-mac/" + mac)
		g.Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, script := get("02:4d:00:00:00:01")
	g.Expect(code).To(Equal(200))
	g.Expect(script).To(HavePrefix("#!ipxe\n"))
	g.Expect(script).To(ContainSubstring("\nchain http://10.0.2.2:6180/metalcloud/boot.ipxe?boot=x&signature=y\n"))
	_, script = get("02:4d:00:00:00:03")
	g.Expect(script).To(Equal("#!ipxe\nchain http://boot.example/x\n"))
	_, script = get("02:4d:00:00:00:05")
	g.Expect(script).To(ContainSubstring("no iPXE script (operating system ubuntu_24_04): booting the disk\nexit\n"))
	code, _ = get("02:4d:00:00:00:02")
	g.Expect(code).To(Equal(404), "a device's second MAC is on no VM")

	g.Expect(c.guestForwards("d1")).To(Equal([]qemu.GuestForward{{Addr: netip.MustParseAddrPort("10.0.2.100:80"),
		Command: []string{"/bin/sim", MetadataForwardArg, "127.64.0.5", "127.0.0.1:7001"}}}))
	g.Expect(c.guestForwards("gone")).To(BeNil())
	g.Expect(MetalCloudQEMUMetadataURL).To(Equal("http://" + metadataGuestAddr.Addr().String()))
}
