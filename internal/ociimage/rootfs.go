package ociimage

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
	"time"
)

// NonRoot is the user and group images run as: not root, and the number
// the distroless images made usual, so that a pod's runAsUser and
// fsGroup can name it.
const NonRoot = 65532

// File is an entry of an image's root file system.
type File struct {
	// Path is where it is in the image, relative to / ("etc/passwd").
	Path string
	// Mode holds the permission bits, and fs.ModeDir for a directory;
	// with no permission bits, 0644 for a file and 0755 for a directory.
	Mode fs.FileMode
	// UID and GID own it.
	UID, GID int
	// Data is a file's content.
	Data []byte
}

// Base is the root file system of an image whose one static binary runs as
// NonRoot: /etc/passwd and /etc/group naming root and nonroot, nonroot's
// home, a world-writable /tmp, and caBundle (PEM, the system's trusted
// certificate authorities) where Go's crypto/x509 and most TLS stacks look
// on Linux, /etc/ssl/certs/ca-certificates.crt.
func Base(caBundle []byte) []File {
	return []File{
		{Path: "etc/passwd", Data: []byte("root:x:0:0:root:/root:/sbin/nologin\n" +
			fmt.Sprintf("nonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", NonRoot, NonRoot))},
		{Path: "etc/group", Data: []byte("root:x:0:\n" + fmt.Sprintf("nonroot:x:%d:\n", NonRoot))},
		{Path: "etc/ssl/certs/ca-certificates.crt", Data: caBundle},
		{Path: "home/nonroot", Mode: fs.ModeDir | 0o700, UID: NonRoot, GID: NonRoot},
		{Path: "root", Mode: fs.ModeDir | 0o700},
		{Path: "tmp", Mode: fs.ModeDir | fs.ModeSticky | 0o777},
	}
}

// layerTar writes files as a tar archive: each parent directory first
// (root's, 0755, unless files has it), entries sorted by path, every time
// stamp mtime, numeric owners only.
func layerTar(files []File, mtime time.Time) ([]byte, error) {
	entries := map[string]File{}
	for _, f := range files {
		p := path.Clean(strings.TrimPrefix(f.Path, "/"))
		if p == "." || strings.HasPrefix(p, "../") || p == ".." {
			return nil, fmt.Errorf("image file %q: not a path under /", f.Path)
		}
		if _, dup := entries[p]; dup {
			return nil, fmt.Errorf("image file %q: given twice", f.Path)
		}
		f.Path = p
		entries[p] = f
	}
	for p := range entries {
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			if e, ok := entries[d]; ok {
				if !e.Mode.IsDir() {
					return nil, fmt.Errorf("image file %q: %s is not a directory", p, d)
				}
				continue
			}
			entries[d] = File{Path: d, Mode: fs.ModeDir | 0o755}
		}
	}
	paths := make([]string, 0, len(entries))
	for p := range entries {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range paths {
		if err := writeEntry(tw, entries[p], mtime); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func writeEntry(tw *tar.Writer, f File, mtime time.Time) error {
	hdr := &tar.Header{
		Name:    f.Path,
		Uid:     f.UID,
		Gid:     f.GID,
		ModTime: mtime.UTC().Truncate(time.Second),
		Format:  tar.FormatUSTAR,
	}
	perm := f.Mode.Perm()
	switch {
	case f.Mode.IsDir():
		if perm == 0 {
			perm = 0o755
		}
		hdr.Typeflag, hdr.Name = tar.TypeDir, f.Path+"/"
	case f.Mode.IsRegular():
		if perm == 0 {
			perm = 0o644
		}
		hdr.Typeflag, hdr.Size = tar.TypeReg, int64(len(f.Data))
	default:
		return fmt.Errorf("image file %q: only files and directories are supported", f.Path)
	}
	hdr.Mode = int64(perm)
	if f.Mode&fs.ModeSticky != 0 {
		hdr.Mode |= 0o1000
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("image file %q: %w", f.Path, err)
	}
	_, err := tw.Write(f.Data)
	return err
}

// gzipped compresses data the same way every time: no name, no time stamp
// in the header.
func gzipped(data []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.DefaultCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(data); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
