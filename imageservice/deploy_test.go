package imageservice

import (
	"bytes"
	"testing"

	. "github.com/onsi/gomega"

	deployapi "github.com/metalshift/metalshift/api/deploy/v1"
)

func TestDeployISORoundTrip(t *testing.T) {
	g := NewWithT(t)
	cfg := deployapi.BootConfig{EngineURL: "http://127.0.0.1:9999", HostID: "ns~h~abc", Token: "123.sig"}
	iso, err := BuildDeployISO(cfg)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(len(iso)%2048).To(BeZero(), "ISO 9660 sectors")
	g.Expect(string(iso[0x8001:0x8006])).To(Equal("CD001"), "primary volume descriptor")
	got, err := ReadDeployISO(bytes.NewReader(iso))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(cfg))

	_, err = ReadDeployISO(bytes.NewReader(make([]byte, 64<<10)))
	g.Expect(err).To(HaveOccurred())
}

func TestIPXERoundTrip(t *testing.T) {
	g := NewWithT(t)
	cfg := deployapi.BootConfig{EngineURL: "http://127.0.0.1:9999", HostID: "ns~h~abc", Token: "123.sig"}
	script := DeployIPXEScript("http://e/images/vmlinuz", "http://e/images/initrd", cfg)
	b, err := ParseIPXEScript(script)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(b.KernelURL).To(Equal("http://e/images/vmlinuz"))
	g.Expect(b.InitrdURL).To(Equal("http://e/images/initrd"))
	got, err := BootConfigFromArgs(b.Args)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(cfg))
}
