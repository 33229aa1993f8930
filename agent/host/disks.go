package host

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/metalshift/metalshift/agent/deploy"
)

// Paths are the roots the facts are read from.
type Paths struct {
	Sys, Proc, Dev string
}

// Linux are the paths of the running machine.
var Linux = Paths{Sys: "/sys", Proc: "/proc", Dev: "/dev"}

// diskName matches the block devices an OS can be installed on: SCSI / SATA /
// USB (sd), virtio (vd), Xen (xvd), IDE (hd), NVMe namespaces (nvmeXnY) and
// MMC (mmcblkN, not its boot or RPMB areas). Partitions, loop, RAM, device
// mapper, md, optical and floppy devices are not disks to deploy to.
var diskName = regexp.MustCompile(`^(sd[a-z]+|vd[a-z]+|xvd[a-z]+|hd[a-z]+|nvme[0-9]+n[0-9]+|mmcblk[0-9]+)$`)

// hctlName is a SCSI address, host:channel:target:lun.
var hctlName = regexp.MustCompile(`^[0-9]+:[0-9]+:[0-9]+:[0-9]+$`)

// Disk is a block device of the machine; it opens the device on first use.
type Disk struct {
	info deploy.DeviceInfo
	path string

	mu  sync.Mutex
	f   *os.File
	err error
}

var _ deploy.BlockDevice = &Disk{}

// Info returns the device's facts.
func (d *Disk) Info() deploy.DeviceInfo { return d.info }

func (d *Disk) file() (*os.File, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.f == nil && d.err == nil {
		d.f, d.err = os.OpenFile(d.path, os.O_RDWR, 0)
	}
	return d.f, d.err
}

// ReadAt reads the device.
func (d *Disk) ReadAt(p []byte, off int64) (int, error) {
	f, err := d.file()
	if err != nil {
		return 0, err
	}
	return f.ReadAt(p, off)
}

// WriteAt writes the device.
func (d *Disk) WriteAt(p []byte, off int64) (int, error) {
	f, err := d.file()
	if err != nil {
		return 0, err
	}
	return f.WriteAt(p, off)
}

// Sync flushes what was written to the device.
func (d *Disk) Sync() error {
	f, err := d.file()
	if err != nil {
		return err
	}
	return f.Sync()
}

// Close closes the device if it was opened.
func (d *Disk) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.f == nil {
		return nil
	}
	err := d.f.Close()
	d.f, d.err = nil, errors.New("closed")
	return err
}

// Disks returns the machine's disks, by name, with what sysfs says of
// them. Devices without media (size 0) are left out.
func Disks(p Paths) ([]*Disk, error) {
	entries, err := os.ReadDir(filepath.Join(p.Sys, "block"))
	if err != nil {
		return nil, fmt.Errorf("listing block devices: %w", err)
	}
	var out []*Disk
	for _, e := range entries {
		name := e.Name()
		if !diskName.MatchString(name) {
			continue
		}
		info, err := diskInfo(p, name)
		if err != nil {
			return nil, err
		}
		if info.SizeBytes == 0 {
			continue
		}
		out = append(out, &Disk{info: info, path: filepath.Join(p.Dev, name)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].info.Name < out[j].info.Name })
	return out, nil
}

func diskInfo(p Paths, name string) (deploy.DeviceInfo, error) {
	dir := filepath.Join(p.Sys, "block", name)
	sectors, err := readInt(filepath.Join(dir, "size"))
	if err != nil {
		return deploy.DeviceInfo{}, fmt.Errorf("block device %s: %w", name, err)
	}
	info := deploy.DeviceInfo{
		Name: "/dev/" + name,
		// sysfs counts 512-byte sectors whatever the logical block size.
		SizeBytes:    sectors * 512,
		Rotational:   readString(filepath.Join(dir, "queue", "rotational")) == "1",
		Model:        readString(filepath.Join(dir, "device", "model")),
		Vendor:       readString(filepath.Join(dir, "device", "vendor")),
		SerialNumber: first(readString(filepath.Join(dir, "device", "serial")), readString(filepath.Join(dir, "serial"))),
		WWN:          wwn(first(readString(filepath.Join(dir, "device", "wwid")), readString(filepath.Join(dir, "wwid")))),
	}
	if target, err := filepath.EvalSymlinks(filepath.Join(dir, "device")); err == nil && hctlName.MatchString(filepath.Base(target)) {
		info.HCTL = filepath.Base(target)
	}
	return info, nil
}

// wwn spells a sysfs wwid ("naa.5000c500a1b2c3d4", "eui.0025388b...") as
// udev's ID_WWN and Ironic's inventory do: 0x<hex>. Other identifiers
// (t10 vendor strings) are not WWNs.
func wwn(wwid string) string {
	for _, prefix := range []string{"naa.", "eui.", "0x"} {
		if rest, ok := strings.CutPrefix(wwid, prefix); ok {
			return "0x" + strings.ToLower(rest)
		}
	}
	return ""
}

func first(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

// readString returns a sysfs attribute without surrounding blanks; "" when
// the attribute does not exist or cannot be read.
func readString(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func readInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}
