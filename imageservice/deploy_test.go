package imageservice

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	deployapi "github.com/metalshift/metalshift/api/deploy/v1"
)

var hostCfg = deployapi.BootConfig{EngineURL: "http://10.0.2.2:6180", HostID: "ns~h~abc", Ticket: "0000000000000001.123.sig"}

// TestLightISO: the light ISO carries the host's configuration in its host
// region, read through the filesystem as GRUB would; reading it in ranges
// gives the same bytes as reading it whole; a base image without a host
// region is refused.
func TestLightISO(t *testing.T) {
	g := NewWithT(t)
	im, err := LightImages()
	g.Expect(err).NotTo(HaveOccurred())
	iso, err := im.ISO(hostCfg)
	g.Expect(err).NotTo(HaveOccurred())
	whole, err := io.ReadAll(iso)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(len(whole) % 2048).To(BeZero())
	got, err := ReadISOHostConfig(bytes.NewReader(whole))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(hostCfg))

	// Ranges across the region's edges.
	off := im.regionOffset
	for _, r := range [][2]int64{{0, 4096}, {off - 100, off + 300}, {off + HostRegionSize - 7, off + HostRegionSize + 9}, {off + 10, off + 20}} {
		r[1] = min(r[1], int64(len(whole)))
		part := make([]byte, r[1]-r[0])
		_, err := iso.ReadAt(part, r[0])
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(part).To(Equal(whole[r[0]:r[1]]), "range %v", r)
	}
	// The base ISO itself has no configuration.
	_, err = ReadISOHostConfig(im.iso)
	g.Expect(err).To(MatchError(ContainSubstring("was not given a host's configuration")))

	_, err = FindHostRegion(bytes.NewReader(make([]byte, 1<<20)), 1<<20)
	g.Expect(err).To(MatchError(ContainSubstring("not built by `make images`")))
}

// TestHostInitrd: the host's initrd is a cpio archive the kernel unpacks to
// deployapi.BootConfigFile, padded to the region's size; a configuration
// too large for the region is refused.
func TestHostInitrd(t *testing.T) {
	g := NewWithT(t)
	region, err := HostRegion(hostCfg)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(region).To(HaveLen(HostRegionSize))
	got, err := ReadHostInitrd(bytes.NewReader(region))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(hostCfg))

	if _, err := exec.LookPath("cpio"); err == nil {
		initrd, _ := HostInitrd(hostCfg)
		dir := t.TempDir()
		cmd := exec.Command("cpio", "-idm", "--quiet")
		cmd.Dir, cmd.Stdin = dir, bytes.NewReader(initrd)
		out, err := cmd.CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), "%s", out)
		data, err := os.ReadFile(filepath.Join(dir, deployapi.BootConfigFile))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(data)).To(ContainSubstring(hostCfg.Ticket))
	}

	big := hostCfg
	big.CACert = strings.Repeat("x", HostRegionSize)
	_, err = HostRegion(big)
	g.Expect(err).To(MatchError(ContainSubstring(fmt.Sprintf("more than the %d of the live image", HostRegionSize))))
}

func TestIPXERoundTrip(t *testing.T) {
	g := NewWithT(t)
	script := DeployIPXEScript("http://e/images/vmlinuz?a=1&b=2", "http://e/images/initrd", "http://e/images/host.img")
	b, err := ParseIPXEScript(script)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(b.KernelURL).To(Equal("http://e/images/vmlinuz?a=1&b=2"))
	g.Expect(b.Initrds).To(Equal([]IPXEInitrd{{"initrd.img", "http://e/images/initrd"}, {"host.img", "http://e/images/host.img"}}))
	g.Expect(b.Args).To(ContainElements("initrd=initrd.img", "initrd=host.img", "console=ttyS0,115200n8"))
	_, err = ParseIPXEScript("kernel x")
	g.Expect(err).To(HaveOccurred())
}

// TestLiveImages: the images `make images` built load, their host region is
// found, a host's ISO carries its configuration, and the ISO boots BIOS and
// UEFI (El Torito entries as xorriso reports them).
func TestLiveImages(t *testing.T) {
	dir := os.Getenv("METALSHIFT_IMAGES_DIR")
	if dir == "" {
		t.Skip("METALSHIFT_IMAGES_DIR is not set: `make test` sets it after `make images`")
	}
	g := NewWithT(t)
	im, err := LoadImages(dir)
	g.Expect(err).NotTo(HaveOccurred())
	defer im.Close()
	iso, err := im.ISO(hostCfg)
	g.Expect(err).NotTo(HaveOccurred())
	got, err := ReadISOHostConfig(iso)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(hostCfg))

	out, err := exec.Command("xorriso", "-indev", filepath.Join(dir, LiveISOFile), "-report_el_torito", "plain").CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "%s", out)
	g.Expect(string(out)).To(MatchRegexp(`El Torito boot img :\s+1\s+BIOS\s+y`))
	g.Expect(string(out)).To(MatchRegexp(`El Torito boot img :\s+2\s+UEFI\s+y`))
}
