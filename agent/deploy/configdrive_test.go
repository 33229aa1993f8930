package deploy

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/metalshift/metalshift/agent/configdrive"
	deployapi "github.com/metalshift/metalshift/api/deploy/v1"
)

// memDisk is a disk in memory.
type memDisk struct{ b []byte }

func (d *memDisk) ReadAt(p []byte, off int64) (int, error) {
	return bytes.NewReader(d.b).ReadAt(p, off)
}
func (d *memDisk) WriteAt(p []byte, off int64) (int, error) { return copy(d.b[off:], p), nil }
func (d *memDisk) Info() DeviceInfo                         { return DeviceInfo{Name: "/dev/mem", SizeBytes: int64(len(d.b))} }

// simDisk is a disk that takes the config drive of an image without a
// partition table, as the simulator's do.
type simDisk struct{ *memDisk }

func (simDisk) UnpartitionedConfigDrive() bool { return true }

// diskSize leaves room for an image of 8 MiB before the config drive.
const diskSize = configdrive.Reserved + 8<<20

// imageDisk is a disk an image of 4 MiB was written to, with an MBR
// partition table unless raw.
func imageDisk(raw bool) *memDisk {
	d := &memDisk{b: make([]byte, diskSize)}
	_, _ = rand.Read(d.b[:4<<20])
	if !raw {
		clear(d.b[446:510])
		e := d.b[446:]
		e[4] = 0x83
		binary.LittleEndian.PutUint32(e[8:], 2048)
		binary.LittleEndian.PutUint32(e[12:], 4<<20/512-2048)
		d.b[510], d.b[511] = 0x55, 0xaa
	}
	return d
}

var instructions = &deployapi.Instructions{
	UserData:    []byte(`{"ignition":{"version":"3.4.0"}}`),
	NetworkData: []byte(`{"links":[]}`),
	MetaData:    []byte(`{"uuid":"0c6b3e9a","name":"host-0"}`),
}

// writeConfigDrive writes the config drive of ins as the agent's deploy does.
func writeConfigDrive(a *agent, dev BlockDevice, ins *deployapi.Instructions) error {
	return WriteConfigDrive(dev, configdrive.Contents{UserData: ins.UserData, NetworkData: ins.NetworkData, MetaData: ins.MetaData}, a.opts.Logf)
}

func newTestAgent(devs ...BlockDevice) (*agent, *[]string) {
	var logs []string
	return &agent{opts: Options{Devices: devs, Logf: func(format string, args ...any) {
		logs = append(logs, fmt.Sprintf(format, args...))
	}}}, &logs
}

// TestConfigDriveRoundTrip: first-boot software reads back what the agent
// wrote after the image, and cleaning removes it.
func TestConfigDriveRoundTrip(t *testing.T) {
	g := NewWithT(t)
	d := imageDisk(false)
	image := bytes.Clone(d.b[512 : 4<<20])
	a, _ := newTestAgent(d)

	g.Expect(writeConfigDrive(a, d, instructions)).To(Succeed())

	g.Expect(d.b[512:4<<20]).To(Equal(image), "the image is left as it was, but its partition table")
	cd, ok, err := configdrive.Read(d, int64(len(d.b)))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeTrue())
	g.Expect(cd).To(Equal(configdrive.Contents{UserData: instructions.UserData, NetworkData: instructions.NetworkData, MetaData: instructions.MetaData}))

	g.Expect(a.clean()).To(Succeed())
	_, ok, err = configdrive.Read(d, int64(len(d.b)))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeFalse(), "metadata cleaning removed the config drive")
	g.Expect(d.b[:1<<20]).To(Equal(make([]byte, 1<<20)), "and the partition table")
}

// TestConfigDriveWithoutPartitionTable: an image without a partition table
// fails the deploy, as in Ironic, naming the disk; the simulator's disks
// take the config drive at their end without a partition.
func TestConfigDriveWithoutPartitionTable(t *testing.T) {
	g := NewWithT(t)
	d := imageDisk(true)
	a, logs := newTestAgent(d)
	g.Expect(writeConfigDrive(a, d, instructions)).To(MatchError(
		"writing the config drive to /dev/mem: the image has no partition table (neither GPT nor MBR) to add the config drive partition to"))
	_, ok, err := configdrive.Read(d, int64(len(d.b)))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeFalse())

	g.Expect(writeConfigDrive(a, simDisk{d}, instructions)).To(Succeed())
	g.Expect(*logs).To(ConsistOf("The image on /dev/mem has no partition table: writing the config drive to the end of the disk without a partition"))
	cd, ok, err := configdrive.Read(d, int64(len(d.b)))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeTrue())
	g.Expect(cd.UserData).To(Equal(instructions.UserData))

	g.Expect(a.clean()).To(Succeed())
	_, ok, err = configdrive.Read(d, int64(len(d.b)))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeFalse(), "metadata cleaning removed the config drive")
}

// TestWriteConfigDriveTooLarge: data that does not fit a config drive is
// refused, naming the sizes, and nothing is written.
func TestWriteConfigDriveTooLarge(t *testing.T) {
	g := NewWithT(t)
	d := imageDisk(false)
	before := bytes.Clone(d.b)
	a, _ := newTestAgent(d)
	err := writeConfigDrive(a, d, &deployapi.Instructions{UserData: make([]byte, deployapi.ConfigDriveSize/2)})
	g.Expect(err).To(MatchError(MatchRegexp(`^writing the config drive to /dev/mem: the config drive data is \d+ bytes \(2 versions of user data, metadata and network data\), more than the 67108864 of a config drive$`)))
	g.Expect(bytes.Equal(d.b, before)).To(BeTrue(), "nothing is written")
}
