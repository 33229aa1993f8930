package configdrive_test

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/diskfs/go-diskfs/backend"
	"github.com/diskfs/go-diskfs/backend/file"
	"github.com/diskfs/go-diskfs/partition/gpt"
	"github.com/diskfs/go-diskfs/partition/mbr"
	. "github.com/onsi/gomega"

	"github.com/metalshift/metalshift/agent/configdrive"
)

// The tests check what Write leaves on a disk with the tools an operator
// (and first-boot software) would use. debian names their packages.
var debian = map[string]string{"sfdisk": "fdisk", "sgdisk": "gdisk", "blkid": "util-linux", "xorriso": "xorriso"}

func need(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed: install the Debian package %s", tool, debian[tool])
		}
	}
}

// run runs a tool, which must succeed, and returns what it printed.
func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// stdout runs a tool, which must succeed, and returns its standard output.
func stdout(t *testing.T, name string, args ...string) string {
	t.Helper()
	var errOut strings.Builder
	cmd := exec.Command(name, args...)
	cmd.Stderr = &errOut
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, errOut.String())
	}
	return string(out)
}

var contents = configdrive.Contents{
	UserData:    []byte(`{"ignition":{"version":"3.4.0"}}`),
	MetaData:    []byte(`{"uuid":"0c6b3e9a","name":"host-0","local-hostname":"host-0"}`),
	NetworkData: []byte(`{"links":[],"networks":[],"services":[]}`),
}

// rootfs is the image's root partition: it must survive Write.
var rootfs = bytes.Repeat([]byte("rootfs "), 4096)

// newDisk returns a sparse disk file of size bytes.
func newDisk(t testing.TB, size int64) *os.File {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "disk"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if err := f.Truncate(size); err != nil {
		t.Skipf("cannot make a sparse file of %d bytes here: %v", size, err)
	}
	return f
}

// writeGPTImage writes a whole-disk image of imageSize bytes at the start
// of the disk as an image builder makes one: a GPT (written by go-diskfs)
// with parts partitions filling the image, the backup GPT at the end of the
// image. It returns where the first partition starts.
func writeGPTImage(t *testing.T, f *os.File, imageSize int64, sectorSize int, parts int) int64 {
	t.Helper()
	ss := int64(sectorSize)
	first, last := (1<<20)/ss, imageSize/ss-2-16384/ss
	table := &gpt.Table{LogicalSectorSize: sectorSize, PhysicalSectorSize: sectorSize, ProtectiveMBR: true}
	step := (last - first + 1) / int64(parts)
	for i := range int64(parts) {
		table.Partitions = append(table.Partitions, &gpt.Partition{Start: uint64(first + i*step), End: uint64(first + (i+1)*step - 1),
			Index: int(i) + 1, Type: gpt.LinuxFilesystem, Name: "part" + strconv.Itoa(int(i))})
	}
	w, err := file.New(f, false).Writable()
	if err != nil {
		t.Fatal(err)
	}
	if err := table.Write(w, imageSize); err != nil {
		t.Fatal(err)
	}
	writeAt(t, f, rootfs, first*ss)
	return first * ss
}

// writeMBRImage writes a whole-disk image with an MBR holding the given
// number of partitions of 1 MiB, from 1 MiB on.
func writeMBRImage(t *testing.T, f *os.File, parts int) int64 {
	t.Helper()
	table := &mbr.Table{LogicalSectorSize: 512, PhysicalSectorSize: 512}
	for i := range parts {
		table.Partitions = append(table.Partitions, &mbr.Partition{Bootable: i == 0, Type: mbr.Linux, Start: uint32(2048 * (i + 1)), Size: 2048})
	}
	w, err := file.New(f, false).Writable()
	if err != nil {
		t.Fatal(err)
	}
	if err := table.Write(w, 32<<20); err != nil {
		t.Fatal(err)
	}
	writeAt(t, f, rootfs, 1<<20)
	return 1 << 20
}

func writeAt(t testing.TB, f *os.File, b []byte, off int64) {
	t.Helper()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func readAt(t testing.TB, f *os.File, n int, off int64) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	return b
}

// sfdiskTable is what sfdisk --json prints.
type sfdiskTable struct {
	Label      string `json:"label"`
	LastLBA    int64  `json:"lastlba"`
	Partitions []struct {
		Start int64  `json:"start"`
		Size  int64  `json:"size"`
		Type  string `json:"type"`
		Name  string `json:"name"`
	} `json:"partitions"`
}

func sfdisk(t *testing.T, path string) sfdiskTable {
	t.Helper()
	var out struct {
		Table sfdiskTable `json:"partitiontable"`
	}
	if err := json.Unmarshal([]byte(stdout(t, "sfdisk", "--json", path)), &out); err != nil {
		t.Fatal(err)
	}
	return out.Table
}

// expectConfigDrive checks the config drive's filesystem at off as blkid
// and xorriso see it, and that Read finds it.
func expectConfigDrive(t *testing.T, f *os.File, size, off, partSize int64, want configdrive.Contents) {
	t.Helper()
	g := NewWithT(t)
	probe := run(t, "blkid", "-p", "-O", strconv.FormatInt(off, 10), "-o", "export", f.Name())
	g.Expect(probe).To(ContainSubstring("TYPE=iso9660\n"))
	g.Expect(probe).To(ContainSubstring("LABEL=config-2\n"))

	dir := t.TempDir()
	iso := filepath.Join(dir, "config-2.iso")
	g.Expect(os.WriteFile(iso, readAt(t, f, int(partSize), off), 0o600)).To(Succeed())
	var files []string
	for _, l := range strings.Split(stdout(t, "xorriso", "-indev", iso, "-find", "/", "-type", "f"), "\n") {
		if strings.HasPrefix(l, "'/") {
			files = append(files, strings.Trim(l, "'"))
		}
	}
	g.Expect(files).To(ConsistOf(
		"/openstack/latest/user_data", "/openstack/latest/meta_data.json", "/openstack/latest/network_data.json",
		"/openstack/2012-08-10/user_data", "/openstack/2012-08-10/meta_data.json", "/openstack/2012-08-10/network_data.json"),
		"Rock Ridge names, and the files Ironic writes")
	out := filepath.Join(dir, "tree")
	run(t, "xorriso", "-osirrox", "on", "-indev", iso, "-extract", "/openstack", out)
	t.Cleanup(func() { _ = exec.Command("chmod", "-R", "u+w", out).Run() })
	for name, data := range map[string][]byte{"user_data": want.UserData, "meta_data.json": want.MetaData, "network_data.json": want.NetworkData} {
		for _, v := range []string{"latest", "2012-08-10"} {
			got, err := os.ReadFile(filepath.Join(out, v, name))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(data), "%s/%s", v, name)
		}
	}

	cd, ok, err := configdrive.Read(f, size)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeTrue())
	g.Expect(cd).To(Equal(want))
}

// expectWiped cleans the disk and checks that nothing finds a config drive
// or a partition table any more.
func expectWiped(t *testing.T, f *os.File, size int64, offs ...int64) {
	t.Helper()
	g := NewWithT(t)
	g.Expect(configdrive.Wipe(f, size)).To(Succeed())
	_, ok, err := configdrive.Read(f, size)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeFalse(), "cleaning removed the config drive")
	for _, off := range append(offs, 0) {
		out, err := exec.Command("blkid", "-p", "-O", strconv.FormatInt(off, 10), "-o", "export", f.Name()).CombinedOutput()
		var exit *exec.ExitError
		g.Expect(errors.As(err, &exit) && exit.ExitCode() == 2).To(BeTrue(), "blkid finds nothing at offset %d: %v %s", off, err, out)
	}
	out, err := exec.Command("sfdisk", "--dump", f.Name()).CombinedOutput()
	g.Expect(err).To(HaveOccurred(), "sfdisk finds no partition table: %s", out)
	g.Expect(string(out)).To(ContainSubstring("does not contain a recognized partition table"))
}

// TestWriteGPT: on a disk with a GPT whole-disk image, the config drive is
// a config-2 partition at the end of the disk, the backup GPT moved there,
// as sgdisk and sfdisk see it.
func TestWriteGPT(t *testing.T) {
	need(t, "sfdisk", "sgdisk", "blkid", "xorriso")
	g := NewWithT(t)
	const size, imageSize = 256 << 20, 32 << 20
	f := newDisk(t, size)
	rootStart := writeGPTImage(t, f, imageSize, 512, 1)
	g.Expect(run(t, "sgdisk", "-v", f.Name())).To(ContainSubstring("doesn't reside\nat the end of the disk"), "what Ironic's fix_gpt_partition looks for")

	g.Expect(configdrive.Write(f, size, contents)).To(Succeed())

	g.Expect(run(t, "sgdisk", "-v", f.Name())).To(ContainSubstring("No problems found."))
	verify := run(t, "sfdisk", "--verify", f.Name())
	g.Expect(verify).To(ContainSubstring("No errors detected."))
	g.Expect(verify).NotTo(ContainSubstring("mismatch"), "the protective MBR covers the disk")
	table := sfdisk(t, f.Name())
	g.Expect(table.Label).To(Equal("gpt"))
	g.Expect(table.LastLBA).To(BeEquivalentTo(size/512-34), "the backup GPT is at the end of the disk")
	g.Expect(table.Partitions).To(HaveLen(2))
	cd := table.Partitions[1]
	g.Expect(cd.Name).To(Equal("config-2"))
	g.Expect(cd.Type).To(Equal("0FC63DAF-8483-4772-8E79-3D69D8477DE4"), "Linux filesystem, as sgdisk -n makes it")
	g.Expect(cd.Start%2048).To(BeZero(), "aligned to 1 MiB")
	g.Expect(cd.Start+cd.Size-1).To(Equal(table.LastLBA), "the config drive ends at the last usable sector")
	g.Expect(cd.Size * 512).To(And(BeNumerically(">=", 64<<20), BeNumerically("<", 65<<20)))
	g.Expect(readAt(t, f, 8, imageSize-512)).NotTo(Equal([]byte("EFI PART")), "the image's backup GPT is gone")
	g.Expect(readAt(t, f, len(rootfs), rootStart)).To(Equal(rootfs))

	expectConfigDrive(t, f, size, cd.Start*512, cd.Size*512, contents)
	expectWiped(t, f, size, cd.Start*512, rootStart)
}

// TestWriteMBR: on a disk with an MBR image, the config drive is a primary
// partition of type 0x0c in the last 64 MiB, as parted makes it for Ironic.
func TestWriteMBR(t *testing.T) {
	need(t, "sfdisk", "blkid", "xorriso")
	g := NewWithT(t)
	const size = 256 << 20
	f := newDisk(t, size)
	rootStart := writeMBRImage(t, f, 2)

	g.Expect(configdrive.Write(f, size, contents)).To(Succeed())

	g.Expect(run(t, "sfdisk", "--verify", f.Name())).To(ContainSubstring("No errors detected."))
	table := sfdisk(t, f.Name())
	g.Expect(table.Label).To(Equal("dos"))
	g.Expect(table.Partitions).To(HaveLen(3))
	cd := table.Partitions[2]
	g.Expect(cd.Type).To(Equal("c"))
	g.Expect(cd.Start).To(BeEquivalentTo((size - 64<<20) / 512))
	g.Expect(cd.Size).To(BeEquivalentTo(64 << 20 / 512))
	g.Expect(readAt(t, f, len(rootfs), rootStart)).To(Equal(rootfs))

	expectConfigDrive(t, f, size, cd.Start*512, cd.Size*512, contents)
	expectWiped(t, f, size, cd.Start*512, rootStart)
}

// TestWriteMBRLargerThan2TiB: MBR cannot address past 2 TiB, so the config
// drive ends 1 MiB below it, as Ironic puts it.
func TestWriteMBRLargerThan2TiB(t *testing.T) {
	need(t, "sfdisk", "blkid", "xorriso")
	g := NewWithT(t)
	const size = 3 << 40
	f := newDisk(t, size)
	writeMBRImage(t, f, 1)

	g.Expect(configdrive.Write(f, size, contents)).To(Succeed())

	table := sfdisk(t, f.Name())
	g.Expect(table.Partitions).To(HaveLen(2))
	cd := table.Partitions[1]
	g.Expect(cd.Start).To(BeEquivalentTo((2<<40 - 65<<20) / 512))
	g.Expect(cd.Size).To(BeEquivalentTo(64 << 20 / 512))
	expectConfigDrive(t, f, size, cd.Start*512, cd.Size*512, contents)
	expectWiped(t, f, size, cd.Start*512)
}

// TestWriteGPT4KSectors: a GPT of 4096-byte sectors is found at 4096 and
// kept in 4096-byte sectors, as go-diskfs reads it.
func TestWriteGPT4KSectors(t *testing.T) {
	need(t, "blkid", "xorriso")
	g := NewWithT(t)
	const size = 256 << 20
	f := newDisk(t, size)
	rootStart := writeGPTImage(t, f, 32<<20, 4096, 1)

	g.Expect(configdrive.Write(f, size, contents)).To(Succeed())

	table, err := gpt.Read(file.New(f, true), 4096, 4096)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(table.Partitions).To(HaveLen(2))
	cd := table.Partitions[1]
	g.Expect(cd.Name).To(Equal("config-2"))
	g.Expect(cd.End).To(BeEquivalentTo(size/4096-6), "the last usable sector, before the backup GPT")
	g.Expect(cd.Start % 256).To(BeZero())
	g.Expect(table.Verify(file.New(f, true), size)).To(Succeed())
	g.Expect(readAt(t, f, len(rootfs), rootStart)).To(Equal(rootfs))
	expectConfigDrive(t, f, size, int64(cd.Start)*4096, int64(cd.Size), contents)
}

// TestReservedIsEnough: an image that leaves Reserved bytes at the end of
// the disk, its partitions filling it, leaves room for the config drive.
func TestReservedIsEnough(t *testing.T) {
	const size = 256<<20 + 7*512
	for _, ss := range []int{512, 4096} {
		t.Run(fmt.Sprintf("GPT, %d-byte sectors", ss), func(t *testing.T) {
			f := newDisk(t, size)
			writeGPTImage(t, f, (size-configdrive.Reserved)/int64(ss)*int64(ss), ss, 1)
			NewWithT(t).Expect(configdrive.Write(f, size, contents)).To(Succeed())
		})
	}
	t.Run("MBR", func(t *testing.T) {
		f := newDisk(t, size)
		end := (size - configdrive.Reserved) / 512
		w, err := file.New(f, false).Writable()
		if err != nil {
			t.Fatal(err)
		}
		table := &mbr.Table{LogicalSectorSize: 512, PhysicalSectorSize: 512, Partitions: []*mbr.Partition{{Type: mbr.Linux, Start: 2048, Size: uint32(end - 2048)}}}
		if err := table.Write(w, size); err != nil {
			t.Fatal(err)
		}
		NewWithT(t).Expect(configdrive.Write(f, size, contents)).To(Succeed())
	})
}

// TestWriteAgain: a disk that has a config-2 partition already (a deploy
// that is written again, an image that brings one) gets the new config
// drive in it, as Ironic reuses it; no second partition.
func TestWriteAgain(t *testing.T) {
	need(t, "sfdisk", "sgdisk", "blkid", "xorriso")
	g := NewWithT(t)
	const size = 256 << 20
	f := newDisk(t, size)
	writeGPTImage(t, f, 32<<20, 512, 1)
	g.Expect(configdrive.Write(f, size, contents)).To(Succeed())
	again := configdrive.Contents{UserData: []byte("#cloud-config\n"), MetaData: []byte(`{"uuid":"again"}`)}

	g.Expect(configdrive.Write(f, size, again)).To(Succeed())

	g.Expect(run(t, "sgdisk", "-v", f.Name())).To(ContainSubstring("No problems found."))
	table := sfdisk(t, f.Name())
	g.Expect(table.Partitions).To(HaveLen(2))
	cd, ok, err := configdrive.Read(f, size)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeTrue())
	g.Expect(cd).To(Equal(again))
}

// TestWriteUnpartitioned: an image without a partition table is refused
// by Write, as by Ironic; WriteUnpartitioned puts the filesystem at the end
// of the disk, where blkid and Read find it.
func TestWriteUnpartitioned(t *testing.T) {
	need(t, "sfdisk", "blkid", "xorriso")
	g := NewWithT(t)
	const size = 256 << 20
	f := newDisk(t, size)
	image := make([]byte, 3<<20+123)
	_, _ = rand.Read(image)
	writeAt(t, f, image, 0)

	g.Expect(configdrive.Write(f, size, contents)).To(MatchError(configdrive.ErrNoPartitionTable))
	g.Expect(configdrive.WriteUnpartitioned(f, size, contents)).To(Succeed())

	g.Expect(readAt(t, f, len(image), 0)).To(Equal(image))
	expectConfigDrive(t, f, size, size-64<<20, 64<<20, contents)
	expectWiped(t, f, size, size-64<<20)
}

// TestReadWholeDisk: a config drive attached as a disk of its own (the
// filesystem from its first byte) is found.
func TestReadWholeDisk(t *testing.T) {
	g := NewWithT(t)
	iso, err := configdrive.Build(configdrive.Contents{UserData: contents.UserData})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(iso[16*2048+40:16*2048+72])).To(Equal("config-2                        "),
		"the volume identifier, padded with spaces as ECMA-119 says (readers trim spaces)")
	cd, ok, err := configdrive.Read(bytes.NewReader(iso), int64(len(iso)))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeTrue())
	g.Expect(cd).To(Equal(configdrive.Contents{UserData: contents.UserData, MetaData: []byte("{}")}), "meta_data.json is always there")
}

// TestReadBackupGPT: with its primary GPT damaged, a disk's config drive is
// found through the backup GPT at the end of the disk.
func TestReadBackupGPT(t *testing.T) {
	g := NewWithT(t)
	const size = 128 << 20
	f := newDisk(t, size)
	writeGPTImage(t, f, 16<<20, 512, 1)
	g.Expect(configdrive.Write(f, size, contents)).To(Succeed())
	writeAt(t, f, make([]byte, 512), 512)

	cd, ok, err := configdrive.Read(f, size)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeTrue())
	g.Expect(cd).To(Equal(contents))
	g.Expect(configdrive.Write(f, size, contents)).To(MatchError(ContainSubstring("protective MBR but no valid GPT")))
}

// TestLogicalPartition: a config drive in a logical partition of an MBR's
// extended partition is found, and cleaning wipes it.
func TestLogicalPartition(t *testing.T) {
	need(t, "sfdisk", "blkid")
	g := NewWithT(t)
	const size = 64 << 20
	f := newDisk(t, size)
	cmd := exec.Command("sfdisk", "-q", f.Name())
	cmd.Stdin = strings.NewReader("label: dos\nstart=2048, size=2048, type=83\nstart=4096, size=20480, type=5\nstart=6144, size=8192, type=83\n")
	out, err := cmd.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(out))
	iso, err := configdrive.Build(contents)
	g.Expect(err).NotTo(HaveOccurred())
	writeAt(t, f, iso, 6144*512)

	cd, ok, err := configdrive.Read(f, size)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeTrue())
	g.Expect(cd).To(Equal(contents))
	expectWiped(t, f, size, 6144*512)
}

// TestWriteRefused: what Write cannot do, and says.
func TestWriteRefused(t *testing.T) {
	const size = 128 << 20
	tests := []struct {
		name    string
		image   func(t *testing.T, f *os.File)
		cd      configdrive.Contents
		wantErr string
	}{
		{name: "blank disk", image: func(*testing.T, *os.File) {}, wantErr: configdrive.ErrNoPartitionTable.Error()},
		{name: "MBR with 4 primary partitions", image: func(t *testing.T, f *os.File) { writeMBRImage(t, f, 4) },
			wantErr: "the image's MBR has 4 primary partitions already: no room for the config drive partition"},
		{name: "GPT image as large as the disk", image: func(t *testing.T, f *os.File) { writeGPTImage(t, f, size, 512, 1) },
			wantErr: "no room for the 64 MiB config drive partition at the end of the disk: the image's partitions end at LBA 262110"},
		{name: "GPT image with two config drives", image: func(t *testing.T, f *os.File) {
			writeGPTImage(t, f, 32<<20, 512, 2)
			iso, err := configdrive.Build(contents)
			if err != nil {
				t.Fatal(err)
			}
			writeAt(t, f, iso, 2048*512)
			writeAt(t, f, iso, (2048+(65502-2048+1)/2)*512) // the second of two partitions from LBA 2048 to 65502
		}, wantErr: "more than one partition is labelled config-2: 1 and 2"},
		{name: "damaged GPT", image: func(t *testing.T, f *os.File) {
			writeGPTImage(t, f, 32<<20, 512, 1)
			writeAt(t, f, []byte{0xff}, 512+40)
		}, wantErr: "the image's partition table: the GPT header at LBA 1 (512-byte sectors): header CRC32"},
		{name: "too much user data", image: func(t *testing.T, f *os.File) { writeMBRImage(t, f, 1) },
			cd:      configdrive.Contents{UserData: make([]byte, 40<<20)},
			wantErr: "the config drive data is 83886084 bytes (2 versions of user data, metadata and network data), more than the 67108864 of a config drive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			f := newDisk(t, size)
			tt.image(t, f)
			before := readAt(t, f, 1<<20, 0)
			err := configdrive.Write(f, size, tt.cd)
			g.Expect(err).To(MatchError(HavePrefix(tt.wantErr)))
			g.Expect(readAt(t, f, 1<<20, 0)).To(Equal(before), "the partition table is left as it was")
		})
	}
}

// TestBuildSizes: user data of a few MiB fits; the image stays small.
func TestBuildSizes(t *testing.T) {
	g := NewWithT(t)
	small, err := configdrive.Build(contents)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(len(small)).To(BeNumerically("<", 256<<10))
	big, err := configdrive.Build(configdrive.Contents{UserData: bytes.Repeat([]byte("a"), 8<<20)})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(len(big)).To(BeNumerically("<", 17<<20))
	cd, ok, err := configdrive.Read(bytes.NewReader(big), int64(len(big)))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeTrue())
	g.Expect(cd.UserData).To(HaveLen(8 << 20))
}

// FuzzRead: whatever is on a disk (a previous user's, say), Read returns,
// allocates at most a constant factor of the disk whatever its tables and
// directory records claim, returns contents only with a config drive, and
// reads the disk the same way every time.
// Seeds: a whole-disk config drive, small GPT and MBR disks with one in a
// partition, and testdata/fuzz/FuzzRead.
func FuzzRead(f *testing.F) {
	iso, err := configdrive.Build(contents)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(iso)
	const sectors = 64 + 256 + 64 // a partition of 128 KiB
	for _, table := range []interface {
		Write(backend.WritableFile, int64) error
	}{
		&gpt.Table{LogicalSectorSize: 512, PhysicalSectorSize: 512, ProtectiveMBR: true,
			Partitions: []*gpt.Partition{{Index: 1, Start: 64, End: 64 + 255, Type: gpt.LinuxFilesystem}}},
		&mbr.Table{LogicalSectorSize: 512, PhysicalSectorSize: 512,
			Partitions: []*mbr.Partition{{Type: mbr.Fat32LBA, Start: 64, Size: 256}}},
	} {
		d := newDisk(f, sectors*512)
		w, err := file.New(d, false).Writable()
		if err != nil {
			f.Fatal(err)
		}
		if err := table.Write(w, sectors*512); err != nil {
			f.Fatal(err)
		}
		writeAt(f, d, iso, 64*512)
		seed := readAt(f, d, sectors*512, 0)
		if cd, ok, err := configdrive.Read(bytes.NewReader(seed), int64(len(seed))); !ok || err != nil || !reflect.DeepEqual(cd, contents) {
			f.Fatalf("the seed's config drive is not read: %v %v %+v", ok, err, cd)
		}
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, disk []byte) {
		var (
			cd  configdrive.Contents
			ok  bool
			err error
		)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		cd, ok, err = configdrive.Read(bytes.NewReader(disk), int64(len(disk)))
		runtime.ReadMemStats(&after)
		if n, limit := after.TotalAlloc-before.TotalAlloc, uint64(64*len(disk)+16<<20); n > limit {
			t.Fatalf("reading a disk of %d bytes allocates %d bytes, more than %d", len(disk), n, limit)
		}
		if !ok && (cd.UserData != nil || cd.MetaData != nil || cd.NetworkData != nil) {
			t.Fatalf("no config drive, but contents %+v (%v)", cd, err)
		}
		again, ok2, err2 := configdrive.Read(bytes.NewReader(disk), int64(len(disk)))
		if ok != ok2 || (err == nil) != (err2 == nil) || !reflect.DeepEqual(cd, again) {
			t.Fatalf("the disk reads as %v %v %+v, then as %v %v %+v", ok, err, cd, ok2, err2, again)
		}
	})
}
