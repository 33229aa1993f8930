package configdrive

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"time"

	"github.com/diskfs/go-diskfs/backend"
	"github.com/diskfs/go-diskfs/filesystem/iso9660"

	deployapi "github.com/metalshift/metalshift/api/deploy/v1"
)

// Contents are the files of a config drive.
type Contents struct {
	// UserData is openstack/latest/user_data: an Ignition config or a
	// cloud-init file, as the BareMetalHost's userData Secret holds it.
	UserData []byte
	// MetaData is openstack/latest/meta_data.json. Build writes {} when it
	// is empty: cloud-init needs the file.
	MetaData []byte
	// NetworkData is openstack/latest/network_data.json.
	NetworkData []byte
}

const (
	// Label is the volume label first-boot software looks for.
	Label = deployapi.ConfigDriveLabel
	// Size is the size of the partition Write adds, Ironic's 64 MiB, and
	// the most Build makes.
	Size = deployapi.ConfigDriveSize
	// Reserved is what Write needs at the end of a disk after the image:
	// the partition, its alignment and the backup GPT.
	Reserved = Size + 2<<20
)

// versions are the metadata versions Ironic writes (openstacksdk's default).
var versions = []string{"2012-08-10", "latest"}

const (
	userDataFile    = "user_data"
	metaDataFile    = "meta_data.json"
	networkDataFile = "network_data.json"
	// isoBlock is the ISO 9660 logical block; the primary volume
	// descriptor is block 16.
	isoBlock  = 2048
	pvdOffset = 16 * isoBlock
)

// Build returns the config drive's ISO 9660 filesystem.
func Build(cd Contents) ([]byte, error) {
	files := map[string][]byte{metaDataFile: cd.MetaData}
	if len(cd.MetaData) == 0 {
		files[metaDataFile] = []byte("{}")
	}
	if len(cd.UserData) > 0 {
		files[userDataFile] = cd.UserData
	}
	if len(cd.NetworkData) > 0 {
		files[networkDataFile] = cd.NetworkData
	}
	total := 0
	for _, data := range files {
		total += len(data) * len(versions)
	}
	if total > Size {
		return nil, fmt.Errorf("the config drive data is %d bytes (%d versions of user data, metadata and network data), more than the %d of a config drive", total, len(versions), Size)
	}
	img := &memFile{}
	fsys, err := iso9660.Create(img, 0, 0, 0, "")
	if err != nil {
		return nil, fmt.Errorf("creating the config drive filesystem: %w", err)
	}
	defer func() { _ = fsys.Close() }() // the workspace; Finalize removed it
	for _, v := range versions {
		if err := addFiles(fsys, path.Join("/openstack", v), files); err != nil {
			return nil, err
		}
	}
	// ECMA-119 pads the volume identifier with spaces; go-diskfs pads
	// with NULs, which readers that trim spaces keep.
	volumeID := fmt.Sprintf("%-32s", Label)
	if err := fsys.Finalize(iso9660.FinalizeOptions{RockRidge: true, Joliet: true, VolumeIdentifier: volumeID, PublisherIdentifier: "metalshift"}); err != nil {
		return nil, fmt.Errorf("writing the config drive filesystem: %w", err)
	}
	if len(img.b) > Size {
		return nil, fmt.Errorf("the config drive filesystem is %d bytes, more than %d", len(img.b), Size)
	}
	return img.b, nil
}

func addFiles(fsys *iso9660.FileSystem, dir string, files map[string][]byte) error {
	if err := fsys.Mkdir(dir); err != nil {
		return fmt.Errorf("creating %s on the config drive: %w", dir, err)
	}
	for name, data := range files {
		f, err := fsys.OpenFile(path.Join(dir, name), os.O_CREATE|os.O_RDWR)
		if err != nil {
			return fmt.Errorf("creating %s on the config drive: %w", path.Join(dir, name), err)
		}
		_, err = f.Write(data)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("writing %s on the config drive: %w", path.Join(dir, name), err)
		}
	}
	return nil
}

// isConfigDrive says whether an ISO 9660 filesystem labelled config-2 (in
// any case, as lsblk's label match in Ironic) starts at off.
func isConfigDrive(r io.ReaderAt, off, size int64) (bool, error) {
	if off < 0 || size < pvdOffset+isoBlock {
		return false, nil
	}
	pvd := make([]byte, isoBlock)
	if _, err := r.ReadAt(pvd, off+pvdOffset); err != nil {
		if errors.Is(err, io.EOF) {
			return false, nil
		}
		return false, fmt.Errorf("reading at offset %d: %w", off+pvdOffset, err)
	}
	if pvd[0] != 1 || string(pvd[1:6]) != "CD001" {
		return false, nil
	}
	return strings.EqualFold(strings.TrimRight(string(pvd[40:72]), " \x00"), Label), nil
}

// memFile is the in-memory image go-diskfs writes the filesystem to.
type memFile struct {
	b   []byte
	off int64
}

var _ backend.Storage = &memFile{}

func (m *memFile) Stat() (fs.FileInfo, error) { return fileInfo{int64(len(m.b))}, nil }
func (m *memFile) Close() error               { return nil }
func (m *memFile) Path() string               { return "" }
func (m *memFile) Sys() (*os.File, error)     { return nil, errors.New("an in-memory image has no file") }
func (m *memFile) Writable() (backend.WritableFile, error) {
	return m, nil
}

func (m *memFile) Read(p []byte) (int, error) {
	n, err := m.ReadAt(p, m.off)
	m.off += int64(n)
	return n, err
}

func (m *memFile) ReadAt(p []byte, off int64) (int, error) {
	if off >= int64(len(m.b)) {
		return 0, io.EOF
	}
	n := copy(p, m.b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (m *memFile) WriteAt(p []byte, off int64) (int, error) {
	if off < 0 || off+int64(len(p)) > Size {
		return 0, fmt.Errorf("writing %d bytes at offset %d: a config drive is at most %d bytes", len(p), off, Size)
	}
	if end := off + int64(len(p)); end > int64(len(m.b)) {
		m.b = append(m.b, make([]byte, end-int64(len(m.b)))...)
	}
	return copy(m.b[off:], p), nil
}

func (m *memFile) Seek(off int64, whence int) (int64, error) {
	switch whence {
	case io.SeekCurrent:
		off += m.off
	case io.SeekEnd:
		off += int64(len(m.b))
	}
	if off < 0 {
		return m.off, fmt.Errorf("seeking to offset %d", off)
	}
	m.off = off
	return off, nil
}

type fileInfo struct{ size int64 }

func (i fileInfo) Name() string       { return Label }
func (i fileInfo) Size() int64        { return i.size }
func (i fileInfo) Mode() fs.FileMode  { return 0o644 }
func (i fileInfo) ModTime() time.Time { return time.Time{} }
func (i fileInfo) IsDir() bool        { return false }
func (i fileInfo) Sys() any           { return nil }
