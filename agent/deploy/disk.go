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
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/metalshift/metalshift/agent/configdrive"
	deployapi "github.com/metalshift/metalshift/api/deploy/v1"
)

const minRootSize = 4 << 30

// ChooseDevice returns the device matching every hint; without hints (nil),
// the smallest disk of at least 4 GiB, as operators expect from Ironic.
// Installers other than the deploy agent's deploy (a metal cloud's) pick
// their disk with it too, so that every image lands where the same rules
// say.
func ChooseDevice(devs []BlockDevice, hints *deployapi.RootDeviceHints) (BlockDevice, error) {
	return chooseDevice(devs, hints)
}

// chooseDevice is ChooseDevice.
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
	var progress atomic.Int64
	stop := a.heartbeat(ctx, ins, &progress)
	n, err := writeImage(ctx, a.opts.HTTP, dev, *ins.Image, imageWrite{retryPause: a.opts.PollInterval, progress: &progress, logf: a.opts.Logf})
	stop()
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
// checksum's length). It returns the bytes written. A download that
// breaks off is an error here: the caller tries again as it sees fit (the
// deploy agent's own writes resume it, see ImageRetries).
func WriteImage(ctx context.Context, client *http.Client, dev BlockDevice, img deployapi.Image) (int64, error) {
	return writeImage(ctx, client, dev, img, imageWrite{retries: -1})
}

// ImageRetries is how many times in a row the deploy agent resumes a
// broken image download (the network dropped, the server failed with a
// 5xx) without a byte of progress before the deploy fails; the pauses
// between them double from the agent's poll interval up to 30 seconds
// (about 3 minutes in all with the default 2 s). A download is resumed
// where it stopped with an HTTP Range request, or started again from the
// first byte when the server ignores ranges.
const ImageRetries = 8

// imageWrite are the knobs of an image write.
type imageWrite struct {
	// retries is how many times in a row a broken download is resumed
	// without progress; 0 means ImageRetries, -1 none.
	retries int
	// retryPause is the first pause before resuming a download; 0 means 2s.
	retryPause time.Duration
	// progress, when set, is updated with the bytes written so far.
	progress *atomic.Int64
	// logf, when set, is told about resumed downloads.
	logf func(format string, args ...any)
}

// errRetryable marks an error of the download (not of the disk) after
// which the download can be resumed.
type errRetryable struct{ err error }

func (e *errRetryable) Error() string { return e.err.Error() }
func (e *errRetryable) Unwrap() error { return e.err }

func writeImage(ctx context.Context, client *http.Client, dev BlockDevice, img deployapi.Image, w imageWrite) (int64, error) {
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
	if w.retryPause == 0 {
		w.retryPause = 2 * time.Second
	}
	switch w.retries {
	case 0:
		w.retries = ImageRetries
	case -1:
		w.retries = 0
	}
	limit := info.SizeBytes - configdrive.Reserved
	var off int64
	validator := "" // the ETag or Last-Modified of the first answer, for If-Range
	pause := w.retryPause
	for failures := 0; ; {
		start := off
		n, v, err := downloadFrom(ctx, client, dev, img.URL, h, off, validator, limit, w.progress)
		if v != "" {
			validator = v
		}
		off = n
		if err == nil {
			break
		}
		var re *errRetryable
		if !errors.As(err, &re) || ctx.Err() != nil {
			return off, err
		}
		if off > start {
			failures, pause = 0, w.retryPause
		}
		failures++
		if failures > w.retries {
			if w.retries == 0 {
				return off, err
			}
			return off, fmt.Errorf("%w (gave up after %d attempts without progress)", err, w.retries+1)
		}
		if w.logf != nil {
			w.logf("The image download broke off after %d bytes: %v; resuming in %s", off, err, pause)
		}
		select {
		case <-ctx.Done():
			return off, ctx.Err()
		case <-time.After(pause):
		}
		pause = min(2*pause, 30*time.Second)
	}
	if got := hex.EncodeToString(h.Sum(nil)); !strings.EqualFold(got, img.Checksum) {
		return off, fmt.Errorf("image checksum mismatch: got %s, want %s", got, img.Checksum)
	}
	return off, nil
}

// downloadFrom downloads url from byte off on (the bytes before it are on
// dev and in h already), writing to dev and hashing into h; validator,
// when set, is sent as If-Range so that a changed image comes whole. A
// server that answers a range with the whole image makes the write start
// over (h is reset). It returns the offset reached, the answer's
// validator, and an error; errRetryable ones are the network's or the
// server's, worth resuming after.
func downloadFrom(ctx context.Context, client *http.Client, dev BlockDevice, url string, h hash.Hash, off int64, validator string, limit int64, progress *atomic.Int64) (int64, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return off, "", err
	}
	if off > 0 {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", off))
		if validator != "" {
			req.Header.Set("If-Range", validator)
		}
	}
	resp, err := client.Do(req)
	if err != nil {
		return off, "", &errRetryable{fmt.Errorf("downloading the image: %w", err)}
	}
	defer resp.Body.Close()
	v := resp.Header.Get("ETag")
	if v == "" || strings.HasPrefix(v, "W/") {
		v = resp.Header.Get("Last-Modified")
	}
	switch {
	case resp.StatusCode == http.StatusOK:
		if off > 0 {
			// No range: the whole image again, from the first byte.
			off = 0
			h.Reset()
		}
	case resp.StatusCode == http.StatusPartialContent && off > 0:
		if got := contentRangeStart(resp.Header.Get("Content-Range")); got != off {
			return off, v, fmt.Errorf("downloading the image %s: asked for bytes from %d, got Content-Range %q", url, off, resp.Header.Get("Content-Range"))
		}
	case resp.StatusCode >= 500, resp.StatusCode == http.StatusRequestTimeout, resp.StatusCode == http.StatusTooManyRequests:
		return off, v, &errRetryable{fmt.Errorf("downloading the image %s: %s", url, resp.Status)}
	default:
		return off, v, fmt.Errorf("downloading the image %s: %s", url, resp.Status)
	}
	n, err := copyToDevice(dev, io.TeeReader(resp.Body, h), off, limit, progress)
	return n, v, err
}

// contentRangeStart is the first byte of a Content-Range "bytes a-b/n"; -1
// when it is not one.
func contentRangeStart(cr string) int64 {
	rest, ok := strings.CutPrefix(cr, "bytes ")
	if !ok {
		return -1
	}
	a, _, ok := strings.Cut(rest, "-")
	if !ok {
		return -1
	}
	n, err := strconv.ParseInt(a, 10, 64)
	if err != nil {
		return -1
	}
	return n
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

// copyToDevice writes r to dev from off on, up to limit, and returns the
// offset reached. Every byte read is written before an error is returned,
// so a download resumed from the offset has the hash of what came before;
// read errors are errRetryable. progress, when set, follows the offset.
func copyToDevice(dev BlockDevice, r io.Reader, off, limit int64, progress *atomic.Int64) (int64, error) {
	buf := make([]byte, 1<<20)
	for {
		n, err := fill(r, buf)
		if n > 0 {
			if off+int64(n) > limit {
				return off, fmt.Errorf("the image is larger than the disk %s (%d bytes available)", dev.Info().Name, limit)
			}
			if _, werr := dev.WriteAt(buf[:n], off); werr != nil {
				return off, fmt.Errorf("writing %s: %w", dev.Info().Name, werr)
			}
			off += int64(n)
			if progress != nil {
				progress.Store(off)
			}
		}
		if err == io.EOF {
			return off, nil
		}
		if err != nil {
			return off, &errRetryable{fmt.Errorf("downloading the image: %w", err)}
		}
	}
}

// fill reads into buf until it is full or r fails; unlike io.ReadFull it
// returns r's own error, so that a body cut short (io.ErrUnexpectedEOF from
// the HTTP client) is not taken for the image's end.
func fill(r io.Reader, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := r.Read(buf[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
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
