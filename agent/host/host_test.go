package host

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/metalshift/metalshift/agent/deploy"
)

// machine writes a sysfs, procfs and /dev tree of a server with a SATA
// SSD, an NVMe namespace, a virtio disk, a card reader without media and
// the devices that are not disks (loop, optical, device mapper, eMMC boot
// area); two NICs (one without link), lo and a bridge; UEFI.
func machine(t *testing.T) Paths {
	t.Helper()
	root := t.TempDir()
	p := Paths{Sys: filepath.Join(root, "sys"), Proc: filepath.Join(root, "proc"), Dev: filepath.Join(root, "dev")}
	write := func(path, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	link := func(target, path string) {
		t.Helper()
		if err := os.MkdirAll(target, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, path); err != nil {
			t.Fatal(err)
		}
	}
	disk := func(name, sectors, rotational string) string {
		dir := filepath.Join(p.Sys, "block", name)
		write(filepath.Join(dir, "size"), sectors+"\n")
		write(filepath.Join(dir, "queue", "rotational"), rotational+"\n")
		write(filepath.Join(p.Dev, name), "")
		return dir
	}
	devices := filepath.Join(p.Sys, "devices", "pci0000:00")

	sda := disk("sda", "20971520", "0") // 10 GiB
	scsi := filepath.Join(devices, "0000:00:1f.2", "ata1", "host0", "target0:0:0", "0:0:0:0")
	link(scsi, filepath.Join(sda, "device"))
	write(filepath.Join(scsi, "model"), "Micron_5300_MTFD\n")
	write(filepath.Join(scsi, "vendor"), "ATA     \n")
	write(filepath.Join(scsi, "wwid"), "naa.500A0751E1B2C3D4\n")

	nvme := disk("nvme0n1", "1953525168", "0") // 1 TB
	ctrl := filepath.Join(devices, "0000:01:00.0", "nvme", "nvme0")
	link(ctrl, filepath.Join(nvme, "device"))
	write(filepath.Join(ctrl, "model"), "Samsung SSD 980 PRO 1TB                 \n")
	write(filepath.Join(ctrl, "serial"), "S5GXNX0R123456   \n")
	write(filepath.Join(nvme, "wwid"), "eui.002538b111c2d3e4\n")

	vda := disk("vda", "41943040", "1") // 20 GiB
	link(filepath.Join(devices, "0000:00:04.0", "virtio2"), filepath.Join(vda, "device"))
	write(filepath.Join(vda, "serial"), "vd-0001\n")

	disk("sdc", "0", "1") // a card reader without a card
	for _, notADisk := range []string{"loop0", "sr0", "dm-0", "md0", "mmcblk0boot0", "zram0"} {
		disk(notADisk, "2048", "0")
	}

	write(filepath.Join(p.Proc, "cpuinfo"), "processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz\nflags\t\t: fpu vme\n\n"+
		"processor\t: 1\nmodel name\t: Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz\n\n")
	write(filepath.Join(p.Proc, "meminfo"), "MemTotal:       16314608 kB\nMemFree:         1234 kB\n")
	net := filepath.Join(p.Sys, "class", "net")
	for name, attrs := range map[string][3]string{
		"eno1": {"B8:CE:F6:01:02:03", "1", "25000"},
		"eno2": {"b8:ce:f6:01:02:04", "0", "-1"},
		"lo":   {"00:00:00:00:00:00", "1", ""},
		"br0":  {"b8:ce:f6:01:02:03", "1", ""},
	} {
		write(filepath.Join(net, name, "address"), attrs[0]+"\n")
		write(filepath.Join(net, name, "carrier"), attrs[1]+"\n")
		write(filepath.Join(net, name, "speed"), attrs[2]+"\n")
		if name == "eno1" || name == "eno2" {
			link(filepath.Join(devices, "0000:02:00."+name[3:]), filepath.Join(net, name, "device"))
		}
	}
	dmi := filepath.Join(p.Sys, "class", "dmi", "id")
	write(filepath.Join(dmi, "sys_vendor"), "Dell Inc.\n")
	write(filepath.Join(dmi, "product_name"), "PowerEdge R650\n")
	write(filepath.Join(dmi, "product_serial"), "ABC1234\n")
	if err := os.MkdirAll(filepath.Join(p.Sys, "firmware", "efi"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestDisks: the disks an OS can go on, with the facts root device hints
// match (name, model, vendor, serial, WWN as 0x…, HCTL, size, rotational);
// not partitions, loop, optical, device-mapper, md, eMMC boot areas, zram
// or a reader without media.
func TestDisks(t *testing.T) {
	g := NewWithT(t)
	disks, err := Disks(machine(t))
	g.Expect(err).NotTo(HaveOccurred())
	var infos []deploy.DeviceInfo
	for _, d := range disks {
		infos = append(infos, d.Info())
	}
	g.Expect(infos).To(Equal([]deploy.DeviceInfo{
		{Name: "/dev/nvme0n1", Model: "Samsung SSD 980 PRO 1TB", SerialNumber: "S5GXNX0R123456", WWN: "0x002538b111c2d3e4", SizeBytes: 1953525168 * 512},
		{Name: "/dev/sda", Model: "Micron_5300_MTFD", Vendor: "ATA", WWN: "0x500a0751e1b2c3d4", HCTL: "0:0:0:0", SizeBytes: 10 << 30},
		{Name: "/dev/vda", SerialNumber: "vd-0001", SizeBytes: 20 << 30, Rotational: true},
	}))
}

// TestDiskReadWrite: the agent writes and reads the device node, opened on
// first use, and flushes it.
func TestDiskReadWrite(t *testing.T) {
	g := NewWithT(t)
	p := machine(t)
	disks, err := Disks(p)
	g.Expect(err).NotTo(HaveOccurred())
	sda := disks[1]
	g.Expect(os.Truncate(filepath.Join(p.Dev, "sda"), 1<<20)).To(Succeed())
	_, err = sda.WriteAt([]byte("metalshift"), 4096)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sda.Sync()).To(Succeed())
	buf := make([]byte, 10)
	_, err = sda.ReadAt(buf, 4096)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(buf)).To(Equal("metalshift"))
	g.Expect(sda.Close()).To(Succeed())
	onDisk, err := os.ReadFile(filepath.Join(p.Dev, "sda"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(onDisk[4096:4106])).To(Equal("metalshift"))

	// A device that cannot be opened says which.
	g.Expect(os.Remove(filepath.Join(p.Dev, "vda"))).To(Succeed())
	_, err = disks[2].WriteAt([]byte("x"), 0)
	g.Expect(err).To(MatchError(ContainSubstring(filepath.Join(p.Dev, "vda"))))
}

// TestInventory: CPUs, memory, the NICs backed by a device (with MAC, link
// and speed), disks, DMI identity and UEFI.
func TestInventory(t *testing.T) {
	g := NewWithT(t)
	p := machine(t)
	inv, err := ReadInventory(p)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(inv.SystemVendor).To(Equal(SystemVendor{Manufacturer: "Dell Inc.", ProductName: "PowerEdge R650", SerialNumber: "ABC1234"}))
	g.Expect(inv.BootMode).To(Equal(BootModeUEFI))
	g.Expect(inv.CPU.Count).To(Equal(2))
	g.Expect(inv.CPU.Model).To(Equal("Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz"))
	g.Expect(inv.MemoryBytes).To(Equal(int64(16314608 * 1024)))
	g.Expect(inv.NICs).To(Equal([]NIC{
		{Name: "eno1", MAC: "b8:ce:f6:01:02:03", SpeedMbps: 25000, HasLink: true},
		{Name: "eno2", MAC: "b8:ce:f6:01:02:04"},
	}))
	g.Expect(inv.Disks).To(HaveLen(3))

	g.Expect(os.Remove(filepath.Join(p.Sys, "firmware", "efi"))).To(Succeed())
	inv, err = ReadInventory(p)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(inv.BootMode).To(Equal(BootModeLegacy), "without /sys/firmware/efi the kernel was booted by a BIOS")
}

// TestInventoryOfThisMachine: on the machine the tests run on, the
// inventory agrees with what Go and the kernel say.
func TestInventoryOfThisMachine(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("Linux only")
	}
	g := NewWithT(t)
	inv, err := ReadInventory(Linux)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(inv.CPU.Count).To(BeNumerically(">=", runtime.NumCPU()), "every online CPU, whatever this process may use")
	g.Expect(inv.MemoryBytes).To(BeNumerically(">", 0))
	for _, d := range inv.Disks {
		g.Expect(filepath.Join("/sys/block", filepath.Base(d.Name))).To(BeADirectory())
		g.Expect(d.SizeBytes).To(BeNumerically(">", 0))
	}
	for _, n := range inv.NICs {
		g.Expect(n.MAC).To(MatchRegexp(`^[0-9a-f]{2}(:[0-9a-f]{2})+$`), n.Name)
	}
}
