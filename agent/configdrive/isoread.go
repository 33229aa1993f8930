package configdrive

import (
	"bytes"
	"fmt"
	"io"
	"path"
	"strings"
)

// The config drive is read with this small ISO 9660 reader rather than
// with go-diskfs: go-diskfs allocates whatever sizes a filesystem declares
// (4 GiB for a damaged directory or path table, found by FuzzRead), and
// Read runs on whatever a disk holds. Here every read is bounded by the
// filesystem's size and a directory by maxDirSize. It reads what Read
// needs: directories, Rock Ridge names (NM, with continuation areas), file
// extents.

const (
	// maxDirSize bounds a directory's extent.
	maxDirSize = 1 << 20
	// maxContinuations bounds the Rock Ridge continuation areas of a
	// directory record.
	maxContinuations = 16
)

// isoFS is an ISO 9660 filesystem of size bytes at off on a disk.
type isoFS struct {
	r         io.ReaderAt
	off, size int64
	// skip is the number of bytes of every System Use area before its
	// SUSP entries (the root's SP entry).
	skip int
}

// isoEntry is a directory record.
type isoEntry struct {
	name           string
	dir            bool
	extent, length int64 // in bytes from the filesystem's start
	systemUse      []byte
}

// readISO reads the openstack/latest files of the config drive whose
// filesystem is the size bytes at off.
func readISO(r io.ReaderAt, off, size int64) (Contents, error) {
	var cd Contents
	fsys := &isoFS{r: r, off: off, size: size}
	dir, err := fsys.lookup("openstack/latest")
	if err != nil {
		return cd, fmt.Errorf("the config drive at offset %d: %w", off, err)
	}
	entries, err := fsys.list(dir)
	if err != nil {
		return cd, fmt.Errorf("the config drive at offset %d: openstack/latest: %w", off, err)
	}
	for _, e := range entries {
		var dst *[]byte
		switch e.name {
		case userDataFile:
			dst = &cd.UserData
		case metaDataFile:
			dst = &cd.MetaData
		case networkDataFile:
			dst = &cd.NetworkData
		default:
			continue
		}
		if e.dir || e.length > Size {
			return cd, fmt.Errorf("the config drive at offset %d: openstack/latest/%s is not a file of at most %d bytes", off, e.name, Size)
		}
		if *dst, err = fsys.read(e.extent, e.length); err != nil {
			return cd, fmt.Errorf("the config drive at offset %d: openstack/latest/%s: %w", off, e.name, err)
		}
	}
	return cd, nil
}

// read reads n bytes at off in the filesystem.
func (fsys *isoFS) read(off, n int64) ([]byte, error) {
	if off < 0 || n < 0 || off+n > fsys.size {
		return nil, fmt.Errorf("%d bytes at offset %d are outside the filesystem (%d bytes)", n, off, fsys.size)
	}
	b := make([]byte, n)
	if err := readAt(fsys.r, b, fsys.off+off); err != nil {
		return nil, err
	}
	return b, nil
}

// lookup finds a directory from the root.
func (fsys *isoFS) lookup(p string) (isoEntry, error) {
	pvd, err := fsys.read(pvdOffset, isoBlock)
	if err != nil {
		return isoEntry{}, err
	}
	dir, _, err := parseRecord(pvd[156:190])
	if err != nil {
		return isoEntry{}, fmt.Errorf("the root directory record: %w", err)
	}
	if err := fsys.readSkip(dir); err != nil {
		return isoEntry{}, err
	}
	at := "/"
	for _, name := range strings.Split(p, "/") {
		entries, err := fsys.list(dir)
		if err != nil {
			return dir, fmt.Errorf("the directory %s: %w", at, err)
		}
		at = path.Join(at, name)
		found := false
		for _, e := range entries {
			if e.name == name && e.dir {
				dir, found = e, true
				break
			}
		}
		if !found {
			return dir, fmt.Errorf("no directory %s", p)
		}
	}
	return dir, nil
}

// readSkip reads the SP entry of the root directory's "." record.
func (fsys *isoFS) readSkip(root isoEntry) error {
	b, err := fsys.read(root.extent, min(root.length, isoBlock))
	if err != nil {
		return fmt.Errorf("the root directory: %w", err)
	}
	if len(b) == 0 || int(b[0]) > len(b) {
		return fmt.Errorf("the root directory has no records")
	}
	dot, _, err := parseRecord(b[:b[0]])
	if err != nil {
		return fmt.Errorf("the root directory: %w", err)
	}
	if su := dot.systemUse; len(su) >= 7 && string(su[:2]) == "SP" && su[4] == 0xbe && su[5] == 0xef {
		fsys.skip = int(su[6])
	}
	return nil
}

// list returns a directory's records, but "." and "..", with their Rock
// Ridge names, else their ISO 9660 names in lower case without version.
func (fsys *isoFS) list(dir isoEntry) ([]isoEntry, error) {
	if dir.length > maxDirSize {
		return nil, fmt.Errorf("a directory of %d bytes", dir.length)
	}
	b, err := fsys.read(dir.extent, dir.length)
	if err != nil {
		return nil, err
	}
	var entries []isoEntry
	for i := 0; i < len(b); {
		if b[i] == 0 { // records do not cross blocks: the rest of this one is padding
			i = (i/isoBlock + 1) * isoBlock
			continue
		}
		e, isoName, err := parseRecord(b[i:min(i+int(b[i]), len(b))])
		if err != nil {
			return nil, fmt.Errorf("the record at byte %d: %w", i, err)
		}
		i += int(b[i])
		if isoName == "\x00" || isoName == "\x01" {
			continue
		}
		if e.name, err = fsys.rockRidgeName(e.systemUse); err != nil {
			return nil, fmt.Errorf("%q: %w", isoName, err)
		}
		if e.name == "" {
			e.name = strings.TrimSuffix(strings.ToLower(strings.SplitN(isoName, ";", 2)[0]), ".")
		}
		entries = append(entries, e)
	}
	return entries, nil
}

// parseRecord parses a directory record (ECMA-119 9.1).
func parseRecord(b []byte) (isoEntry, string, error) {
	if len(b) < 34 || int(b[0]) != len(b) || 33+int(b[32]) > len(b) {
		return isoEntry{}, "", fmt.Errorf("a directory record of %d bytes", len(b))
	}
	nameLen := int(b[32])
	su := 33 + nameLen
	if nameLen%2 == 0 {
		su++ // the padding byte
	}
	e := isoEntry{
		dir:    b[25]&0x02 != 0,
		extent: int64(le.Uint32(b[2:6])) * isoBlock,
		length: int64(le.Uint32(b[10:14])),
	}
	if su < len(b) {
		e.systemUse = b[su:]
	}
	return e, string(b[33 : 33+nameLen]), nil
}

// rockRidgeName returns the name in a System Use area's NM entries,
// following continuation areas (CE); "" when there is none.
func (fsys *isoFS) rockRidgeName(su []byte) (string, error) {
	if fsys.skip > len(su) {
		return "", nil
	}
	su = su[fsys.skip:]
	var name bytes.Buffer
	for hops := 0; ; hops++ {
		var next []byte
		for j := 0; j+4 <= len(su); {
			sig, n := string(su[j:j+2]), int(su[j+2])
			if n < 4 || j+n > len(su) || sig == "ST" {
				break
			}
			switch {
			case sig == "NM" && n >= 5 && su[j+4]&0x06 == 0: // not "." or ".."
				name.Write(su[j+5 : j+n])
			case sig == "CE" && n >= 28:
				ce := su[j:]
				area, err := fsys.read(int64(le.Uint32(ce[4:8]))*isoBlock+int64(le.Uint32(ce[12:16])), int64(min(le.Uint32(ce[20:24]), isoBlock)))
				if err != nil {
					return "", fmt.Errorf("a Rock Ridge continuation area: %w", err)
				}
				next = area
			}
			j += n
		}
		if next == nil || hops == maxContinuations {
			return name.String(), nil
		}
		su = next
	}
}
