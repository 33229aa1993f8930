// Package cpio writes and reads the "newc" cpio archives that Linux
// unpacks as its initramfs. The kernel unpacks archives one after the
// other and skips zero bytes between them, so archives can be
// concatenated and padded: the live image relies on both.
package cpio

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

const (
	magic     = "070701"
	trailer   = "TRAILER!!!"
	headerLen = 110
)

// File modes of entries.
const (
	ModeDir     = 0o040000
	ModeRegular = 0o100000
	ModeSymlink = 0o120000
	ModeCharDev = 0o020000
)

// Writer writes a newc archive. Entries get no owner (root) and mtime 0,
// so the same input makes the same bytes.
type Writer struct {
	w   io.Writer
	n   int64
	ino uint32
	err error
}

// NewWriter returns a Writer to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w, ino: 1} }

// Dir adds a directory.
func (w *Writer) Dir(name string, perm uint32) error {
	return w.entry(name, ModeDir|perm, 0, 0, nil)
}

// File adds a regular file.
func (w *Writer) File(name string, perm uint32, data []byte) error {
	return w.entry(name, ModeRegular|perm, 0, 0, data)
}

// Symlink adds a symbolic link.
func (w *Writer) Symlink(name, target string) error {
	return w.entry(name, ModeSymlink|0o777, 0, 0, []byte(target))
}

// CharDev adds a character device node, e.g. dev/console (5, 1).
func (w *Writer) CharDev(name string, perm, major, minor uint32) error {
	return w.entry(name, ModeCharDev|perm, major, minor, nil)
}

// Close writes the trailer. It does not close the underlying writer.
func (w *Writer) Close() error {
	return w.entry(trailer, 0, 0, 0, nil)
}

// Len is the number of bytes written so far.
func (w *Writer) Len() int64 { return w.n }

func (w *Writer) entry(name string, mode, rmajor, rminor uint32, data []byte) error {
	if w.err != nil {
		return w.err
	}
	name = strings.TrimPrefix(name, "/")
	nlink := uint32(1)
	if mode&0o170000 == ModeDir {
		nlink = 2
	}
	ino := w.ino
	if name == trailer {
		ino = 0
	}
	w.ino++
	if len(data) > 1<<32-1 {
		w.err = fmt.Errorf("%s: %d bytes is too large for a newc archive", name, len(data))
		return w.err
	}
	fields := []uint32{ino, mode, 0, 0, nlink, 0, uint32(len(data)), 0, 0, rmajor, rminor, uint32(len(name) + 1), 0} //nolint:gosec // checked above; names are short
	var b strings.Builder
	b.WriteString(magic)
	for _, f := range fields {
		fmt.Fprintf(&b, "%08x", f)
	}
	b.WriteString(name)
	b.WriteByte(0)
	w.write([]byte(b.String()))
	w.pad()
	w.write(data)
	w.pad()
	return w.err
}

func (w *Writer) write(p []byte) {
	if w.err != nil || len(p) == 0 {
		return
	}
	n, err := w.w.Write(p)
	w.n += int64(n)
	w.err = err
}

func (w *Writer) pad() {
	if r := w.n % 4; r != 0 {
		w.write(make([]byte, 4-r))
	}
}

// Entry is a file of an archive read by Read.
type Entry struct {
	Name string
	Mode uint32
	Data []byte
}

// Read reads the entries of one archive up to its trailer, skipping
// leading zero padding as the kernel does. Files larger than maxFile are
// refused.
func Read(r io.Reader, maxFile int64) ([]Entry, error) {
	br := bufio.NewReader(r)
	var out []Entry
	var off int64
	for {
		// Skip padding between archives.
		for {
			b, err := br.Peek(1)
			if err != nil {
				if err == io.EOF && len(out) > 0 {
					return out, nil
				}
				return out, fmt.Errorf("reading a cpio header at offset %d: %w", off, err)
			}
			if b[0] != 0 {
				break
			}
			_, _ = br.Discard(1)
			off++
		}
		hdr := make([]byte, headerLen)
		if _, err := io.ReadFull(br, hdr); err != nil {
			return out, fmt.Errorf("reading a cpio header at offset %d: %w", off, err)
		}
		if string(hdr[:6]) != magic {
			return out, fmt.Errorf("no cpio newc header at offset %d", off)
		}
		field := func(i int) (uint32, error) {
			v, err := strconv.ParseUint(string(hdr[6+8*i:14+8*i]), 16, 32)
			return uint32(v), err
		}
		mode, err1 := field(1)
		size, err2 := field(6)
		nameSize, err3 := field(11)
		if err := errors.Join(err1, err2, err3); err != nil {
			return out, fmt.Errorf("a cpio header at offset %d is corrupt: %w", off, err)
		}
		if nameSize == 0 || nameSize > 4096 || int64(size) > maxFile {
			return out, fmt.Errorf("a cpio entry at offset %d is too large (name %d, data %d bytes)", off, nameSize, size)
		}
		name := make([]byte, nameSize)
		if _, err := io.ReadFull(br, name); err != nil {
			return out, err
		}
		off += headerLen + int64(nameSize)
		if err := skipPad(br, &off); err != nil {
			return out, err
		}
		data := make([]byte, size)
		if _, err := io.ReadFull(br, data); err != nil {
			return out, err
		}
		off += int64(size)
		if err := skipPad(br, &off); err != nil {
			return out, err
		}
		n := strings.TrimRight(string(name), "\x00")
		if n == trailer {
			return out, nil
		}
		out = append(out, Entry{Name: n, Mode: mode, Data: data})
	}
}

func skipPad(br *bufio.Reader, off *int64) error {
	if r := *off % 4; r != 0 {
		if _, err := br.Discard(int(4 - r)); err != nil {
			return err
		}
		*off += 4 - r
	}
	return nil
}
