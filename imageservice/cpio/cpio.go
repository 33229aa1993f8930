// Package cpio writes and reads the "newc" cpio archives that Linux
// unpacks as its initramfs. The kernel unpacks archives one after the
// other and skips zero bytes between them, so archives can be
// concatenated and padded: the live image relies on both.
package cpio

import (
	"bufio"
	"bytes"
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

// Entry names are relative paths: leading slashes are dropped. Names the
// kernel or Read would read otherwise are refused: an empty name, one with
// a NUL byte (the name ends there), the trailer's name (the archive ends
// there) and names of MaxName bytes or more; so are permission bits
// beyond 0o7777 (they would change the entry's type). As with a write
// error, the Writer then refuses everything, Close included: an archive is
// whole or not made.

// MaxName is the longest entry name Read accepts, its NUL included.
const MaxName = 4096

// Dir adds a directory.
func (w *Writer) Dir(name string, perm uint32) error {
	return w.add(name, ModeDir, perm, 0, 0, nil)
}

// File adds a regular file.
func (w *Writer) File(name string, perm uint32, data []byte) error {
	return w.add(name, ModeRegular, perm, 0, 0, data)
}

// Symlink adds a symbolic link.
func (w *Writer) Symlink(name, target string) error {
	return w.add(name, ModeSymlink, 0o777, 0, 0, []byte(target))
}

// CharDev adds a character device node, e.g. dev/console (5, 1).
func (w *Writer) CharDev(name string, perm, major, minor uint32) error {
	return w.add(name, ModeCharDev, perm, major, minor, nil)
}

// add checks an entry and writes it.
func (w *Writer) add(name string, typ, perm, rmajor, rminor uint32, data []byte) error {
	if w.err != nil {
		return w.err
	}
	name = strings.TrimLeft(name, "/")
	switch {
	case name == "" || name == trailer || strings.IndexByte(name, 0) >= 0 || len(name) >= MaxName:
		w.err = fmt.Errorf("%q cannot name a cpio entry: names are 1 to %d bytes without NUL, not %s", name, MaxName-1, trailer)
	case perm&^0o7777 != 0:
		w.err = fmt.Errorf("%s: permissions %#o have bits beyond 0o7777", name, perm)
	}
	if w.err != nil {
		return w.err
	}
	return w.entry(name, typ|perm, rmajor, rminor, data)
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
// leading zero padding as the kernel does (a header starts on a multiple of
// 4 bytes). Files larger than maxFile are refused. It allocates about what
// it read, whatever the headers claim.
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
		// The kernel reads a header only at a multiple of 4 bytes (after
		// zeros, a byte elsewhere starts a compressed archive).
		if off%4 != 0 {
			return out, fmt.Errorf("no cpio newc header at offset %d: headers start at multiples of 4 bytes", off)
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
		switch {
		case nameSize == 0 || nameSize > MaxName:
			return out, fmt.Errorf("a cpio entry at offset %d has a name of %d bytes, not 1 to %d", off, nameSize, MaxName)
		case int64(size) > maxFile:
			return out, fmt.Errorf("a cpio entry at offset %d has %d bytes of data, more than %d", off, size, maxFile)
		}
		name := make([]byte, nameSize)
		if _, err := io.ReadFull(br, name); err != nil {
			return out, fmt.Errorf("reading a cpio entry name at offset %d: %w", off, err)
		}
		// The kernel reads the name as a C string, and refuses one
		// without its NUL.
		if name[nameSize-1] != 0 {
			return out, fmt.Errorf("the cpio entry name at offset %d does not end with NUL", off)
		}
		end := bytes.IndexByte(name, 0)
		off += headerLen + int64(nameSize)
		if err := skipPad(br, &off); err != nil {
			return out, err
		}
		// Grown as it is read: a header claiming maxFile bytes in a short
		// input costs what the input holds.
		var data bytes.Buffer
		if n, err := io.CopyN(&data, br, int64(size)); err != nil {
			return out, fmt.Errorf("reading %d bytes of cpio entry data at offset %d: %d there: %w", size, off, n, io.ErrUnexpectedEOF)
		}
		off += int64(size)
		if err := skipPad(br, &off); err != nil {
			return out, err
		}
		n := string(name[:end])
		if n == trailer {
			return out, nil
		}
		out = append(out, Entry{Name: n, Mode: mode, Data: data.Bytes()})
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
