package deploy

import (
	"context"
	"crypto/md5" //nolint:gosec // md5 is a checksum type users choose for images, not for security
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"sort"
	"strings"

	"github.com/metalshift/metalshift/agent/configdrive"
	deployapi "github.com/metalshift/metalshift/api/deploy/v1"
)

const minRootSize = 4 << 30

// chooseDevice returns the device matching every hint; without hints, the
// smallest disk of at least 4 GiB, as operators expect from Ironic.
func chooseDevice(devs []BlockDevice, hints *deployapi.RootDeviceHints) (BlockDevice, error) {
	var matches []BlockDevice
	for _, d := range devs {
		if matchesHints(d.Info(), hints) {
			matches = append(matches, d)
		}
	}
	if len(matches) == 0 {
		return nil, errNoDisk
	}
	sort.SliceStable(matches, func(i, j int) bool { return matches[i].Info().SizeBytes < matches[j].Info().SizeBytes })
	return matches[0], nil
}

func matchesHints(info DeviceInfo, h *deployapi.RootDeviceHints) bool {
	if h == nil {
		return info.SizeBytes >= minRootSize
	}
	switch {
	case h.DeviceName != "" && h.DeviceName != info.Name,
		h.HCTL != "" && h.HCTL != info.HCTL,
		h.Model != "" && !strings.Contains(info.Model, h.Model),
		h.Vendor != "" && !strings.Contains(info.Vendor, h.Vendor),
		h.SerialNumber != "" && h.SerialNumber != info.SerialNumber,
		h.WWN != "" && h.WWN != info.WWN,
		h.MinSizeGigabytes > 0 && info.SizeBytes < int64(h.MinSizeGigabytes)*1000*1000*1000,
		h.Rotational != nil && *h.Rotational != info.Rotational:
		return false
	}
	return true
}

func newHash(kind, checksum string) (hash.Hash, error) {
	if kind == "" || kind == "auto" {
		switch len(checksum) {
		case 32:
			kind = "md5"
		case 64:
			kind = "sha256"
		case 128:
			kind = "sha512"
		default:
			return nil, fmt.Errorf("cannot tell the algorithm of checksum %q: set checksumType", checksum)
		}
	}
	switch kind {
	case "md5":
		return md5.New(), nil //nolint:gosec // see import
	case "sha256":
		return sha256.New(), nil
	case "sha512":
		return sha512.New(), nil
	}
	return nil, fmt.Errorf("unsupported checksumType %q: use md5, sha256, sha512 or auto", kind)
}

// deploy streams the image to the chosen disk, verifies it, and writes the
// config drive.
func (a *agent) deploy(ctx context.Context, ins *deployapi.Instructions) (string, int64, error) {
	if ins.Image == nil || ins.Image.URL == "" {
		return "", 0, fmt.Errorf("no image to deploy")
	}
	dev, err := chooseDevice(a.opts.Devices, ins.RootDeviceHints)
	if err != nil {
		return "", 0, err
	}
	info := dev.Info()
	a.opts.Logf("Writing %s to %s for request %s", ins.Image.URL, info.Name, ins.Generation)
	n, err := WriteImage(ctx, a.opts.HTTP, dev, *ins.Image)
	if err != nil {
		return info.Name, n, err
	}
	cd := configdrive.Contents{UserData: ins.UserData, NetworkData: ins.NetworkData, MetaData: ins.MetaData}
	if err := WriteConfigDrive(dev, cd, a.opts.Logf); err != nil {
		return info.Name, n, err
	}
	// A real disk: what was written is on it before the agent says done
	// (and the host is rebooted).
	return info.Name, n, Flush(dev)
}

// WriteImage streams the raw image img from its URL to the start of dev,
// leaving room for a config drive at the end, and verifies its checksum
// (img.ChecksumType md5, sha256, sha512, or "" / "auto" to tell by the
// checksum's length). It returns the bytes written.
func WriteImage(ctx context.Context, client *http.Client, dev BlockDevice, img deployapi.Image) (int64, error) {
	if img.URL == "" {
		return 0, errors.New("no image URL")
	}
	if f := img.Format; f != "" && f != "raw" {
		return 0, fmt.Errorf("image format %q is not supported by the metalshift deploy agent: use a raw image", f)
	}
	info := dev.Info()
	h, err := newHash(img.ChecksumType, img.Checksum)
	if err != nil {
		return 0, err
	}
	if client == nil {
		client = http.DefaultClient
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, img.URL, nil)
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("downloading the image: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("downloading the image %s: %s", img.URL, resp.Status)
	}
	limit := info.SizeBytes - configdrive.Reserved
	n, err := copyToDevice(dev, io.TeeReader(resp.Body, h), limit)
	if err != nil {
		return n, err
	}
	if got := hex.EncodeToString(h.Sum(nil)); !strings.EqualFold(got, img.Checksum) {
		return n, fmt.Errorf("image checksum mismatch: got %s, want %s", got, img.Checksum)
	}
	return n, nil
}

// Flush makes what was written to dev durable when the device can tell
// (a real disk's Sync); other devices need nothing.
func Flush(dev BlockDevice) error {
	if s, ok := dev.(interface{ Sync() error }); ok {
		if err := s.Sync(); err != nil {
			return fmt.Errorf("flushing %s: %w", dev.Info().Name, err)
		}
	}
	return nil
}

func copyToDevice(dev BlockDevice, r io.Reader, limit int64) (int64, error) {
	buf := make([]byte, 1<<20)
	var off int64
	for {
		n, err := io.ReadFull(r, buf)
		if n > 0 {
			if off+int64(n) > limit {
				return off, fmt.Errorf("the image is larger than the disk %s (%d bytes available)", dev.Info().Name, limit)
			}
			if _, werr := dev.WriteAt(buf[:n], off); werr != nil {
				return off, fmt.Errorf("writing %s: %w", dev.Info().Name, werr)
			}
			off += int64(n)
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return off, nil
		}
		if err != nil {
			return off, fmt.Errorf("downloading the image: %w", err)
		}
	}
}

// UnpartitionedConfigDrive is a BlockDevice that takes the config drive of
// an image without a partition table at its end without a partition
// (configdrive.WriteUnpartitioned), where Ironic, and the agent on other
// devices, fails the deploy. First-boot software would not find it there:
// only the simulator's disks do this, for its synthetic test images.
type UnpartitionedConfigDrive interface {
	UnpartitionedConfigDrive() bool
}

// WriteConfigDrive puts the config drive in a partition at the end of the
// disk, as Ironic does; see package configdrive. A device that is an
// UnpartitionedConfigDrive takes it without a partition when the image has
// no partition table (said through logf, which may be nil).
func WriteConfigDrive(dev BlockDevice, cd configdrive.Contents, logf func(format string, args ...any)) error {
	info := dev.Info()
	err := configdrive.Write(dev, info.SizeBytes, cd)
	if u, ok := dev.(UnpartitionedConfigDrive); ok && u.UnpartitionedConfigDrive() && errors.Is(err, configdrive.ErrNoPartitionTable) {
		if logf != nil {
			logf("The image on %s has no partition table: writing the config drive to the end of the disk without a partition", info.Name)
		}
		err = configdrive.WriteUnpartitioned(dev, info.SizeBytes, cd)
	}
	if err != nil {
		return fmt.Errorf("writing the config drive to %s: %w", info.Name, err)
	}
	return nil
}

// clean wipes every disk's partition tables (MBR, primary and backup GPT),
// the first MiB of every partition (filesystem signatures, the config
// drive) and the first and last MiB of the disk, as metadata cleaning does.
func (a *agent) clean() error {
	for _, d := range a.opts.Devices {
		info := d.Info()
		if err := configdrive.Wipe(d, info.SizeBytes); err != nil {
			return fmt.Errorf("cleaning %s: %w", info.Name, err)
		}
		// On the disk before done is reported (and the host powered off).
		if err := Flush(d); err != nil {
			return err
		}
	}
	return nil
}
