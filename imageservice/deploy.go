package imageservice

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/kdomanski/iso9660"

	deployapi "github.com/metalshift/metalshift/api/deploy/v1"
	"github.com/metalshift/metalshift/imageservice/cpio"
)

// Paths on the live ISO and names in an images directory.
const (
	// ISOHostPath is the per-host region of the live ISO: GRUB loads it as
	// a second initrd after ISOInitrdPath.
	ISOHostPath   = "/boot/host.img"
	ISOKernelPath = "/boot/vmlinuz"
	ISOInitrdPath = "/boot/initrd.img"

	// Files `make images` writes.
	LiveISOFile    = "metalshift-live.iso"
	LiveKernelFile = "metalshift-live.vmlinuz"
	LiveInitrdFile = "metalshift-live.initrd"

	// HostRegionSize is the size of ISOHostPath, and the most a host's
	// boot configuration may take as an initramfs: room for an InfraEnv's
	// ignitionConfigOverride, which upstream bounds at 256 KiB compressed.
	HostRegionSize = 1 << 20

	// regionMarker names the only file of the region's placeholder; the
	// server finds the region by it.
	regionMarker = "metalshift-host-region-v1"
)

// DeployISOLabel is the volume label of deploy ISOs.
const DeployISOLabel = "METALSHIFT_DEPLOY"

// HostInitrd returns the initramfs that carries cfg to the agent, at
// deployapi.BootConfigFile. The kernel unpacks it over the live initramfs.
func HostInitrd(cfg deployapi.BootConfig) ([]byte, error) {
	data, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	w := cpio.NewWriter(&buf)
	dir := strings.TrimPrefix(filepath.Dir(deployapi.BootConfigFile), "/")
	parts := strings.Split(dir, "/")
	for i := range parts {
		_ = w.Dir(strings.Join(parts[:i+1], "/"), 0o755)
	}
	_ = w.File(deployapi.BootConfigFile, 0o600, data)
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// HostRegion returns the bytes that replace ISOHostPath for cfg: its
// initramfs padded with zeros, which the kernel skips.
func HostRegion(cfg deployapi.BootConfig) ([]byte, error) {
	b, err := HostInitrd(cfg)
	if err != nil {
		return nil, err
	}
	if len(b) > HostRegionSize {
		return nil, fmt.Errorf("the boot configuration takes %d bytes, more than the %d of the live image's host region", len(b), HostRegionSize)
	}
	return append(b, make([]byte, HostRegionSize-len(b))...), nil
}

// PlaceholderRegion is what `make images` puts at ISOHostPath: a valid
// initramfs (a base ISO booted as is finds no configuration and says so)
// that marks the region.
func PlaceholderRegion() []byte {
	var buf bytes.Buffer
	w := cpio.NewWriter(&buf)
	_ = w.File(regionMarker, 0o644, []byte("The server replaces this region by the host's boot configuration.\n"))
	_ = w.Close()
	return append(buf.Bytes(), make([]byte, HostRegionSize-buf.Len())...)
}

// FindHostRegion returns the offset of the placeholder region in a base
// ISO. ISO 9660 starts every file on a 2048-byte sector, so only sector
// starts are compared; exactly one must match.
func FindHostRegion(r io.ReaderAt, size int64) (int64, error) {
	placeholder := PlaceholderRegion()
	want := placeholder[:128]
	buf := make([]byte, 1<<20)
	found := int64(-1)
	for base := int64(0); base < size; base += int64(len(buf)) {
		n, err := r.ReadAt(buf, base)
		if err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		}
		for off := 0; off+len(want) <= n; off += 2048 {
			if bytes.Equal(buf[off:off+len(want)], want) {
				if found >= 0 {
					return 0, fmt.Errorf("the image has two host regions (at %d and %d)", found, base+int64(off))
				}
				found = base + int64(off)
			}
		}
	}
	if found < 0 {
		return 0, errors.New("the image has no host region: it was not built by `make images`")
	}
	if found+HostRegionSize > size {
		return 0, errors.New("the image's host region is cut short")
	}
	// The whole region must be the placeholder: what is replaced is exactly the file.
	got := make([]byte, HostRegionSize)
	if _, err := r.ReadAt(got, found); err != nil && !errors.Is(err, io.EOF) {
		return 0, err
	}
	if !bytes.Equal(got, placeholder) {
		return 0, fmt.Errorf("the image's host region at %d is not the placeholder `make images` writes", found)
	}
	return found, nil
}

// ReadHostInitrd reads the boot configuration from a host initramfs, as
// the agent finds it after the kernel unpacked it.
func ReadHostInitrd(r io.Reader) (deployapi.BootConfig, error) {
	var cfg deployapi.BootConfig
	entries, err := cpio.Read(r, HostRegionSize)
	if err != nil {
		return cfg, err
	}
	for _, e := range entries {
		if "/"+e.Name == deployapi.BootConfigFile {
			if err := json.Unmarshal(e.Data, &cfg); err != nil {
				return cfg, fmt.Errorf("%s: %w", deployapi.BootConfigFile, err)
			}
			return cfg, nil
		}
	}
	return cfg, fmt.Errorf("the host initramfs has no %s: the image was not given a host's configuration", deployapi.BootConfigFile)
}

// ReadISOHostConfig reads the boot configuration from a deploy ISO as
// served to a host: GRUB's second initrd, ISOHostPath. Any image gets an
// answer: the ISO 9660 reader panics on some malformed directory records,
// which come back as an error.
func ReadISOHostConfig(iso io.ReaderAt) (cfg deployapi.BootConfig, err error) {
	defer func() {
		if r := recover(); r != nil {
			cfg, err = deployapi.BootConfig{}, fmt.Errorf("the ISO 9660 image is corrupt: %v", r)
		}
	}()
	img, err := iso9660.OpenImage(iso)
	if err != nil {
		return deployapi.BootConfig{}, fmt.Errorf("not an ISO 9660 image: %w", err)
	}
	f, err := img.RootDir()
	if err != nil {
		return deployapi.BootConfig{}, err
	}
	for _, part := range strings.Split(strings.Trim(ISOHostPath, "/"), "/") {
		if f, err = child(f, part); err != nil {
			return deployapi.BootConfig{}, err
		}
	}
	return ReadHostInitrd(f.Reader())
}

// child finds a directory entry by name; ISO 9660 names are upper case
// and may carry a ";1" version suffix. (GetChildren would drop "." and
// "..", which no name matches, and panics on a directory without them.)
func child(dir *iso9660.File, name string) (*iso9660.File, error) {
	children, err := dir.GetAllChildren()
	if err != nil {
		return nil, err
	}
	for _, c := range children {
		n := strings.TrimSuffix(c.Name(), ";1")
		if strings.EqualFold(n, name) || strings.EqualFold(strings.TrimSuffix(n, "."), name) {
			return c, nil
		}
	}
	return nil, fmt.Errorf("%s not found on the ISO", name)
}

// Images are what a deploy server streams: a base ISO whose host region it
// replaces per host, and the kernel and initramfs for iPXE.
type Images struct {
	// Live is false for the light images, which only the simulator boots.
	Live bool
	// Dir is where the live images were loaded from.
	Dir     string
	ModTime time.Time

	iso          io.ReaderAt
	isoSize      int64
	regionOffset int64
	kernel       io.ReaderAt
	kernelSize   int64
	initrd       io.ReaderAt
	initrdSize   int64
	closers      []io.Closer
}

// LoadImages opens the live images `make images` wrote to dir.
func LoadImages(dir string) (*Images, error) {
	im := &Images{Live: true, Dir: dir}
	open := func(name string) (io.ReaderAt, int64, error) {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			return nil, 0, err
		}
		st, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, 0, err
		}
		im.closers = append(im.closers, f)
		if st.ModTime().After(im.ModTime) {
			im.ModTime = st.ModTime()
		}
		return f, st.Size(), nil
	}
	var err error
	if im.iso, im.isoSize, err = open(LiveISOFile); err != nil {
		return nil, errors.Join(err, im.Close())
	}
	if im.kernel, im.kernelSize, err = open(LiveKernelFile); err != nil {
		return nil, errors.Join(err, im.Close())
	}
	if im.initrd, im.initrdSize, err = open(LiveInitrdFile); err != nil {
		return nil, errors.Join(err, im.Close())
	}
	if im.regionOffset, err = FindHostRegion(im.iso, im.isoSize); err != nil {
		return nil, errors.Join(fmt.Errorf("%s: %w", filepath.Join(dir, LiveISOFile), err), im.Close())
	}
	return im, nil
}

// LightImages returns images that only the simulator can boot: an ISO with
// the host region and no kernel, and a kernel and initrd that are
// placeholders. They let the simulated labs run without `make images`.
// They are built once per process and shared (they are only read).
func LightImages() (*Images, error) { return lightImages() }

var lightImages = sync.OnceValues(buildLightImages)

func buildLightImages() (*Images, error) {
	w, err := iso9660.NewWriter()
	if err != nil {
		return nil, err
	}
	defer w.Cleanup() //nolint:errcheck // removing the staging directory is best effort
	readme := "metalshift light deploy image: simulated machines boot it; build the live image for real ones (make images).\n"
	if err := w.AddFile(strings.NewReader(readme), "/README.TXT"); err != nil {
		return nil, err
	}
	if err := w.AddFile(bytes.NewReader(PlaceholderRegion()), ISOHostPath); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := w.WriteTo(&buf, DeployISOLabel); err != nil {
		return nil, err
	}
	iso := buf.Bytes()
	off, err := FindHostRegion(bytes.NewReader(iso), int64(len(iso)))
	if err != nil {
		return nil, err
	}
	art := []byte("metalshift light image placeholder: not a kernel; build the live image with `make images`\n")
	return &Images{iso: bytes.NewReader(iso), isoSize: int64(len(iso)), regionOffset: off,
		kernel: bytes.NewReader(art), kernelSize: int64(len(art)), initrd: bytes.NewReader(art), initrdSize: int64(len(art))}, nil
}

// Close closes the image files.
func (im *Images) Close() error {
	var errs []error
	for _, c := range im.closers {
		errs = append(errs, c.Close())
	}
	im.closers = nil
	return errors.Join(errs...)
}

// ISO returns the ISO for cfg: the base image with the host region
// replaced, read on demand (no copy), seekable for HTTP ranges.
func (im *Images) ISO(cfg deployapi.BootConfig) (*io.SectionReader, error) {
	region, err := HostRegion(cfg)
	if err != nil {
		return nil, err
	}
	return im.LazyISO(func() ([]byte, error) { return region, nil }), nil
}

// LazyISO is ISO with the region made by region, called once, and only
// when a read reaches the region: a BMC reading the ISO in ranges costs
// the caller one configuration per range that needs it, not per range.
func (im *Images) LazyISO(region func() ([]byte, error)) *io.SectionReader {
	o := &overlay{base: im.iso, off: im.regionOffset, size: HostRegionSize, make: region}
	return io.NewSectionReader(o, 0, im.isoSize)
}

// Kernel returns the live kernel.
func (im *Images) Kernel() *io.SectionReader { return io.NewSectionReader(im.kernel, 0, im.kernelSize) }

// Initrd returns the live initramfs (without a host's configuration).
func (im *Images) Initrd() *io.SectionReader { return io.NewSectionReader(im.initrd, 0, im.initrdSize) }

// overlay reads base with the region's bytes in place of the size bytes
// at off; the region is made on the first read that reaches it.
type overlay struct {
	base io.ReaderAt
	off  int64
	size int64
	make func() ([]byte, error)

	once sync.Once
	data []byte
	err  error
}

func (o *overlay) ReadAt(p []byte, off int64) (int, error) {
	n, err := o.base.ReadAt(p, off)
	// Copy the part of the region that falls into [off, off+n).
	lo, hi := max(off, o.off), min(off+int64(n), o.off+o.size)
	if lo < hi {
		o.once.Do(func() {
			o.data, o.err = o.make()
			if o.err == nil && int64(len(o.data)) != o.size {
				o.err = fmt.Errorf("the host region is %d bytes, not %d", len(o.data), o.size)
			}
		})
		if o.err != nil {
			return 0, o.err
		}
		copy(p[lo-off:hi-off], o.data[lo-o.off:hi-o.off])
	}
	return n, err
}

// IPXEBoot is what an iPXE script asks the firmware to load.
type IPXEBoot struct {
	KernelURL string
	// Initrds are loaded in order, by name.
	Initrds []IPXEInitrd
	Args    []string
}

// IPXEInitrd is an initrd an iPXE script loads.
type IPXEInitrd struct{ Name, URL string }

// KernelArgs are the live image's kernel arguments: the kernel's messages and the
// agent's log on the first serial port and the screen.
const KernelArgs = "console=tty0 console=ttyS0,115200n8"

// DeployIPXEScript returns an iPXE script that boots the live kernel with
// the live initramfs and the host's own (hostURL). The initrd= arguments
// name them for a UEFI kernel's stub loader; BIOS iPXE concatenates them.
func DeployIPXEScript(kernelURL, initrdURL, hostURL string) string {
	return fmt.Sprintf("#!ipxe\nkernel %s initrd=initrd.img initrd=host.img %s\ninitrd --name initrd.img %s\ninitrd --name host.img %s\nboot\n",
		kernelURL, KernelArgs, initrdURL, hostURL)
}

// ParseIPXEScript reads the kernel, initrds and kernel arguments from a
// script of the form DeployIPXEScript writes.
func ParseIPXEScript(script string) (IPXEBoot, error) {
	var b IPXEBoot
	lines := strings.Split(script, "\n")
	if len(lines) == 0 || strings.TrimSpace(lines[0]) != "#!ipxe" {
		return b, fmt.Errorf("not an iPXE script")
	}
	for _, line := range lines[1:] {
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		switch fields[0] {
		case "kernel":
			b.KernelURL = fields[1]
			b.Args = fields[2:]
		case "initrd":
			in := IPXEInitrd{URL: fields[len(fields)-1]}
			for i := 1; i < len(fields)-1; i++ {
				if fields[i] == "--name" || fields[i] == "-n" {
					in.Name = fields[i+1]
				}
			}
			b.Initrds = append(b.Initrds, in)
		}
	}
	if b.KernelURL == "" {
		return b, fmt.Errorf("the iPXE script loads no kernel")
	}
	return b, nil
}
