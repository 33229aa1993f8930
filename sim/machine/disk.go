package machine

import (
	"errors"
	"io"
	"sync"
)

// Disk is a simulated block device. It stores only the bytes written to
// it, in chunks, so a 500 GB disk costs what is written, and counts writes
// so tests can tell whether an image was written twice.
type Disk struct {
	Name         string
	Model        string
	Vendor       string
	SerialNumber string
	WWN          string
	HCTL         string
	SizeBytes    int64
	Rotational   bool
	Type         string // HDD, SSD, NVME

	mu     sync.Mutex
	chunks map[int64][]byte
	writes int
	// bad is a range of bad blocks [bad[0], bad[1]) that writes fail on.
	bad [2]int64
}

const chunkSize = 64 << 10

// ErrOutOfRange is returned for reads and writes beyond the end of the disk.
var ErrOutOfRange = errors.New("beyond the end of the disk")

// ErrIO is returned by writes to bad blocks (SetBadBlocks).
var ErrIO = errors.New("input/output error")

// SetBadBlocks makes writes that touch n bytes from off fail with ErrIO, as
// a disk with bad sectors there does; n == 0 heals the disk.
func (d *Disk) SetBadBlocks(off, n int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.bad = [2]int64{off, off + n}
}

// Size returns the size of the disk in bytes.
func (d *Disk) Size() int64 { return d.SizeBytes }

// WriteAt writes p at off.
func (d *Disk) WriteAt(p []byte, off int64) (int, error) {
	if off < 0 || off+int64(len(p)) > d.SizeBytes {
		return 0, ErrOutOfRange
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if off < d.bad[1] && off+int64(len(p)) > d.bad[0] {
		return 0, ErrIO
	}
	if d.chunks == nil {
		d.chunks = map[int64][]byte{}
	}
	d.writes++
	n := 0
	for n < len(p) {
		pos := off + int64(n)
		idx, within := pos/chunkSize, pos%chunkSize
		c := d.chunks[idx]
		if c == nil {
			c = make([]byte, chunkSize)
			d.chunks[idx] = c
		}
		n += copy(c[within:], p[n:])
	}
	return n, nil
}

// ReadAt reads len(p) bytes at off; unwritten bytes read as zero.
func (d *Disk) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off >= d.SizeBytes {
		return 0, io.EOF
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for n < len(p) && off+int64(n) < d.SizeBytes {
		pos := off + int64(n)
		idx, within := pos/chunkSize, pos%chunkSize
		end := min(int64(len(p)-n), chunkSize-within, d.SizeBytes-pos)
		if c := d.chunks[idx]; c != nil {
			copy(p[n:int64(n)+end], c[within:within+end])
		} else {
			clear(p[n : int64(n)+end])
		}
		n += int(end)
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// Writes counts WriteAt calls since the disk was created.
func (d *Disk) Writes() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.writes
}

// Wipe discards the disk's contents (as metadata cleaning does).
func (d *Disk) Wipe() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.chunks = nil
}
