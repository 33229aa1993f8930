package deploy

import (
	"bytes"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"

	deployapi "github.com/metalshift/metalshift/api/deploy/v1"
)

// memDisk is a disk in memory.
type memDisk struct{ b []byte }

func (d *memDisk) ReadAt(p []byte, off int64) (int, error) {
	return bytes.NewReader(d.b).ReadAt(p, off)
}
func (d *memDisk) WriteAt(p []byte, off int64) (int, error) { return copy(d.b[off:], p), nil }
func (d *memDisk) Info() DeviceInfo                         { return DeviceInfo{Name: "/dev/mem", SizeBytes: int64(len(d.b))} }

// diskSize leaves room before the config drive, as the image's.
const diskSize = deployapi.ConfigDriveSize + 1<<20

// withDrive is a disk whose config-drive region starts with raw.
func withDrive(raw string) *memDisk {
	d := &memDisk{b: make([]byte, diskSize)}
	copy(d.b[diskSize-deployapi.ConfigDriveSize:], raw)
	return d
}

// TestConfigDriveRoundTrip: first-boot software reads back exactly what the
// agent wrote, however the image left the disk before it.
func TestConfigDriveRoundTrip(t *testing.T) {
	g := NewWithT(t)
	d := withDrive("config-2 999999\n{garbage left by an earlier deploy")
	ins := &deployapi.Instructions{
		UserData:    []byte(`{"ignition":{"version":"3.4.0"}}`),
		NetworkData: []byte("links: []\n"),
		MetaData:    []byte(`{"uuid":"0c6b3e9a","name":"host-0"}`),
	}
	g.Expect(writeConfigDrive(d, ins)).To(Succeed())
	cd, ok, err := ReadConfigDrive(d, int64(len(d.b)))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeTrue())
	g.Expect(cd).To(Equal(deployapi.ConfigDrive{Label: "config-2", UserData: ins.UserData, NetworkData: ins.NetworkData, MetaData: ins.MetaData}))

	// Cleaning wipes the header: no config drive any more.
	copy(d.b[diskSize-deployapi.ConfigDriveSize:], make([]byte, 64))
	_, ok, err = ReadConfigDrive(d, int64(len(d.b)))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeFalse())
}

func TestReadConfigDrive(t *testing.T) {
	body := `{"label":"config-2","userData":"aGVsbG8="}`
	tests := []struct {
		name    string
		drive   string // the start of the config-drive region
		small   bool   // a disk smaller than a config drive
		want    deployapi.ConfigDrive
		wantOK  bool
		wantErr string // "*": any error
	}{
		{name: "written", drive: fmt.Sprintf("config-2 %d\n%s", len(body), body),
			want: deployapi.ConfigDrive{Label: "config-2", UserData: []byte("hello")}, wantOK: true},
		{name: "blank disk"},
		{name: "another label", drive: fmt.Sprintf("config-3 %d\n%s", len(body), body)},
		{name: "no length", drive: "config-2\n" + body},
		{name: "zero length", drive: "config-2 0\n"},
		{name: "negative length", drive: "config-2 -5\n" + body},
		{name: "longer than the region", drive: fmt.Sprintf("config-2 %d\n", deployapi.ConfigDriveSize+1)},
		{name: "labelled, not JSON", drive: "config-2 5\nnope!", wantOK: true, wantErr: "the config drive (5 bytes at offset"},
		{name: "labelled, length past the data", drive: fmt.Sprintf("config-2 %d\n%s", len(body)+10, body), wantOK: true, wantErr: "after top-level value"},
		{name: "labelled, length past the disk", drive: fmt.Sprintf("config-2 %d\n%s", deployapi.ConfigDriveSize, body), wantOK: true, wantErr: "after top-level value"},
		{name: "disk smaller than a config drive", small: true, wantErr: "reading the config drive header at offset -"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			disk := withDrive(tt.drive)
			if tt.small {
				disk = &memDisk{b: make([]byte, 1<<20)}
			}
			cd, ok, err := ReadConfigDrive(disk, int64(len(disk.b)))
			switch tt.wantErr {
			case "*":
				g.Expect(err).To(HaveOccurred())
			case "":
				g.Expect(err).NotTo(HaveOccurred())
			default:
				g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
			}
			g.Expect(ok).To(Equal(tt.wantOK), "a config drive is there")
			if tt.wantOK && tt.wantErr == "" {
				g.Expect(cd).To(Equal(tt.want))
			}
		})
	}
}

// TestWriteConfigDriveTooLarge: data that does not fit the region is
// refused, naming the sizes, and nothing is written.
func TestWriteConfigDriveTooLarge(t *testing.T) {
	g := NewWithT(t)
	d := withDrive("")
	big := bytes.Repeat([]byte("x"), deployapi.ConfigDriveSize)
	err := writeConfigDrive(d, &deployapi.Instructions{UserData: big})
	g.Expect(err).To(MatchError(MatchRegexp(`^config drive data is \d+ bytes, more than 67108864$`)))
	_, ok, err := ReadConfigDrive(d, int64(len(d.b)))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeFalse())
}
