package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/metalshift/metalshift/agent/configdrive"
)

// TestSimImage: `metalshift sim image` serves a whole-disk image with a
// GPT that sgdisk finds no problem in, and the deploy agent adds the config
// drive partition after it, as on a real OS image.
func TestSimImage(t *testing.T) {
	g := NewWithT(t)
	img, err := osImage(4 << 20)
	g.Expect(err).NotTo(HaveOccurred())
	path := filepath.Join(t.TempDir(), "os.raw")
	g.Expect(os.WriteFile(path, img, 0o600)).To(Succeed())
	if _, err := exec.LookPath("sgdisk"); err == nil {
		out, err := exec.Command("sgdisk", "-v", path).CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), string(out))
		g.Expect(string(out)).To(ContainSubstring("No problems found."))
	} else {
		t.Log("sgdisk is not installed (Debian package gdisk): the GPT is checked by the deploy agent only")
	}

	const size = 256 << 20
	disk, err := os.Create(filepath.Join(t.TempDir(), "disk"))
	g.Expect(err).NotTo(HaveOccurred())
	defer disk.Close()
	g.Expect(disk.Truncate(size)).To(Succeed())
	_, err = disk.WriteAt(img, 0)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(configdrive.Write(disk, size, configdrive.Contents{UserData: []byte("user data")})).To(Succeed())
	cd, ok, err := configdrive.Read(disk, size)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeTrue())
	g.Expect(string(cd.UserData)).To(Equal("user data"))
}
