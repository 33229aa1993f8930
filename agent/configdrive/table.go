package configdrive

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"unicode/utf16"
)

// partition is a partition found in a partition table, in bytes.
type partition struct {
	// number is the partition's number, as Linux names it (sda<number>).
	number      int
	start, size int64
}

var le = binary.LittleEndian

// readAt reads len(p) bytes at off; a short read at the end of the disk
// is an error.
func readAt(r io.ReaderAt, p []byte, off int64) error {
	n, err := r.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("reading %d bytes at offset %d: %w", len(p), off, err)
}

func writeAt(w io.WriterAt, p []byte, off int64) error {
	if _, err := w.WriteAt(p, off); err != nil {
		return fmt.Errorf("writing %d bytes at offset %d: %w", len(p), off, err)
	}
	return nil
}

// GPT (UEFI specification, 5.3).

const (
	gptSignature = "EFI PART"
	// maxGPTEntriesBytes bounds the partition entry array read from a disk.
	maxGPTEntriesBytes = 1 << 20
)

// linuxFilesystemGUID is the partition type sgdisk gives by default (8300),
// in the on-disk byte order.
var linuxFilesystemGUID = [16]byte{0xaf, 0x3d, 0xc6, 0x0f, 0x83, 0x84, 0x72, 0x47, 0x8e, 0x79, 0x3d, 0x69, 0xd8, 0x47, 0x7d, 0xe4}

// gpt is a GPT header and its partition entry array, as read from a disk.
type gpt struct {
	sectorSize int64
	// header is the header's sector, kept to write back what is not
	// changed.
	header  []byte
	entries []byte
	myLBA   uint64
	altLBA  uint64
	// lastUsable and entriesLBA are those of the header read.
	lastUsable uint64
	entriesLBA uint64
	entrySize  uint32
}

// readGPT reads the primary GPT (at LBA 1 for 512- or 4096-byte sectors),
// or, when primary is false, the backup GPT in the disk's last sector. It
// returns nil without an error when there is no GPT signature, and an
// error when there is one but the GPT is not valid.
func readGPT(r io.ReaderAt, size int64, primary bool) (*gpt, error) {
	for _, ss := range []int64{512, 4096} {
		lba := uint64(1)
		if !primary {
			lba = toU(size/ss) - 1
		}
		if size < 3*ss {
			continue
		}
		b := make([]byte, ss)
		if err := readAt(r, b, int64(lba)*ss); err != nil {
			return nil, err
		}
		if string(b[:8]) != gptSignature {
			continue
		}
		g, err := parseGPTHeader(b, ss, lba, size)
		if err != nil {
			return nil, fmt.Errorf("the GPT header at LBA %d (%d-byte sectors): %w", lba, ss, err)
		}
		if err := g.readEntries(r, size); err != nil {
			return nil, fmt.Errorf("the GPT at LBA %d (%d-byte sectors): %w", lba, ss, err)
		}
		return g, nil
	}
	return nil, nil
}

func parseGPTHeader(b []byte, ss int64, lba uint64, size int64) (*gpt, error) {
	hsize := le.Uint32(b[12:16])
	if hsize < 92 || int64(hsize) > ss {
		return nil, fmt.Errorf("header size %d", hsize)
	}
	if want := le.Uint32(b[16:20]); headerCRC(b) != want {
		return nil, fmt.Errorf("header CRC32 %08x, want %08x", headerCRC(b), want)
	}
	g := &gpt{
		sectorSize: ss, header: b, myLBA: le.Uint64(b[24:32]), altLBA: le.Uint64(b[32:40]),
		lastUsable: le.Uint64(b[48:56]), entriesLBA: le.Uint64(b[72:80]), entrySize: le.Uint32(b[84:88]),
	}
	n := uint64(le.Uint32(b[80:84]))
	switch {
	case g.myLBA != lba:
		return nil, fmt.Errorf("it says it is at LBA %d", g.myLBA)
	case g.entrySize < 128 || g.entrySize%8 != 0:
		return nil, fmt.Errorf("partition entry size %d", g.entrySize)
	case n*uint64(g.entrySize) > maxGPTEntriesBytes:
		return nil, fmt.Errorf("%d partition entries of %d bytes", n, g.entrySize)
	case g.entriesLBA >= g.lba(size) || g.entriesLBA*toU(ss)+n*uint64(g.entrySize) > toU(size):
		return nil, fmt.Errorf("the partition entries at LBA %d are past the end of the disk", g.entriesLBA)
	}
	g.entries = make([]byte, n*uint64(g.entrySize))
	return g, nil
}

func (g *gpt) readEntries(r io.ReaderAt, size int64) error {
	if err := readAt(r, g.entries, g.offset(g.entriesLBA)); err != nil {
		return err
	}
	if got, want := crc32.ChecksumIEEE(g.entries), le.Uint32(g.header[88:92]); got != want {
		return fmt.Errorf("partition entries CRC32 %08x, want %08x", got, want)
	}
	for _, p := range g.partitions() {
		if p.start+p.size > size {
			return fmt.Errorf("partition %d ends past the end of the disk", p.number)
		}
	}
	return nil
}

// headerCRC is the CRC32 of a header sector's header, its CRC field zeroed.
func headerCRC(b []byte) uint32 {
	h := bytes.Clone(b[:le.Uint32(b[12:16])])
	clear(h[16:20])
	return crc32.ChecksumIEEE(h)
}

func (g *gpt) entry(i int) []byte {
	return g.entries[i*int(g.entrySize) : (i+1)*int(g.entrySize)]
}

func (g *gpt) numEntries() int { return len(g.entries) / int(g.entrySize) }

func (g *gpt) partitions() []partition {
	var parts []partition
	for i := range g.numEntries() {
		e := g.entry(i)
		first, last := le.Uint64(e[32:40]), le.Uint64(e[40:48])
		if bytes.Equal(e[:16], make([]byte, 16)) || last < first || last >= 1<<48 {
			continue
		}
		parts = append(parts, partition{number: i + 1, start: g.offset(first), size: g.offset(last+1) - g.offset(first)})
	}
	return parts
}

// lba is the number of whole sectors in n bytes.
func (g *gpt) lba(n int64) uint64 { return toU(n) / toU(g.sectorSize) }

// offset is the byte offset of an LBA, at most math.MaxInt64.
func (g *gpt) offset(lba uint64) int64 {
	if lba > math.MaxInt64/toU(g.sectorSize) {
		return math.MaxInt64
	}
	return toI(lba * toU(g.sectorSize))
}

// toU is n as a uint64, 0 when negative.
func toU(n int64) uint64 {
	if n < 0 {
		return 0
	}
	return uint64(n)
}

// toI is n as an int64, math.MaxInt64 when larger.
func toI(n uint64) int64 {
	if n > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(n)
}

func (g *gpt) entrySectors() uint64 {
	return (uint64(len(g.entries)) + toU(g.sectorSize) - 1) / toU(g.sectorSize)
}

// addPartition fills the first free entry with a config-2 partition from
// first to last (LBAs).
func (g *gpt) addPartition(first, last uint64) (int, error) {
	for i := range g.numEntries() {
		e := g.entry(i)
		if !bytes.Equal(e[:16], make([]byte, 16)) {
			continue
		}
		clear(e)
		copy(e[:16], linuxFilesystemGUID[:])
		if _, err := rand.Read(e[16:32]); err != nil {
			return 0, err
		}
		e[16+7] = e[16+7]&0x0f | 0x40 // a version 4 GUID
		e[16+8] = e[16+8]&0x3f | 0x80
		le.PutUint64(e[32:40], first)
		le.PutUint64(e[40:48], last)
		for j, u := range utf16.Encode([]rune(Label)) {
			le.PutUint16(e[56+2*j:], u)
		}
		return i + 1, nil
	}
	return 0, fmt.Errorf("all %d GPT partition entries are in use", g.numEntries())
}

// write writes the partition entries and headers, primary at LBA 1 and
// backup in the disk's last sector, for a disk of n sectors.
func (g *gpt) write(w io.WriterAt, n uint64) error {
	backupEntries := n - 1 - g.entrySectors()
	entries := make([]byte, g.entrySectors()*toU(g.sectorSize))
	copy(entries, g.entries)
	backup := g.headerSector(n-1, 1, backupEntries, n)
	primary := g.headerSector(1, n-1, g.entriesLBA, n)
	for _, s := range []struct {
		b   []byte
		lba uint64
	}{{entries, backupEntries}, {backup, n - 1}, {entries, g.entriesLBA}, {primary, 1}} {
		if err := writeAt(w, s.b, g.offset(s.lba)); err != nil {
			return err
		}
	}
	return nil
}

// headerSector is the header for a disk of n sectors, at myLBA.
func (g *gpt) headerSector(myLBA, altLBA, entriesLBA, n uint64) []byte {
	b := bytes.Clone(g.header)
	le.PutUint64(b[24:32], myLBA)
	le.PutUint64(b[32:40], altLBA)
	le.PutUint64(b[48:56], g.lastUsableFor(n))
	le.PutUint64(b[72:80], entriesLBA)
	le.PutUint32(b[88:92], crc32.ChecksumIEEE(g.entries))
	le.PutUint32(b[16:20], headerCRC(b))
	return b
}

// lastUsableFor is the last usable LBA of a disk of n sectors whose backup
// GPT is at its end.
func (g *gpt) lastUsableFor(n uint64) uint64 { return n - 2 - g.entrySectors() }

// MBR.

const (
	mbrEntries    = 446
	mbrSector     = 512
	typeProtected = 0xee
	// typeFAT32LBA is what parted's mkpart primary fat32 writes.
	typeFAT32LBA = 0x0c
	// maxLogical bounds the chain of extended boot records followed.
	maxLogical = 128
)

// mbrEntry is one of the four entries of an MBR or an EBR.
type mbrEntry struct {
	status, typ    byte
	start, sectors uint32
}

func (e mbrEntry) empty() bool    { return e.typ == 0 }
func (e mbrEntry) extended() bool { return e.typ == 0x05 || e.typ == 0x0f || e.typ == 0x85 }

// mbr is a master boot record.
type mbr struct {
	sector  []byte
	entries [4]mbrEntry
}

// parseMBR returns the MBR in a disk's first sector, or nil when it holds
// none: no boot signature, an entry that is not one (status other than 0
// and 0x80, an empty extent), or a FAT or NTFS boot sector (a filesystem on
// the whole disk).
func parseMBR(b []byte) *mbr {
	if len(b) < mbrSector || b[510] != 0x55 || b[511] != 0xaa {
		return nil
	}
	if string(b[3:11]) == "NTFS    " || string(b[54:59]) == "FAT12" || string(b[54:59]) == "FAT16" || string(b[82:87]) == "FAT32" {
		return nil
	}
	m := &mbr{sector: b[:mbrSector]}
	for i := range m.entries {
		e := b[mbrEntries+16*i:]
		m.entries[i] = mbrEntry{status: e[0], typ: e[4], start: le.Uint32(e[8:12]), sectors: le.Uint32(e[12:16])}
		if en := m.entries[i]; (en.status != 0 && en.status != 0x80) || (!en.empty() && (en.start == 0 || en.sectors == 0)) {
			return nil
		}
	}
	return m
}

func readMBR(r io.ReaderAt) (*mbr, error) {
	b := make([]byte, mbrSector)
	if err := readAt(r, b, 0); err != nil {
		return nil, err
	}
	return parseMBR(b), nil
}

// protective says whether the MBR is a GPT's protective (or hybrid) MBR.
func (m *mbr) protective() bool {
	for _, e := range m.entries {
		if e.typ == typeProtected {
			return true
		}
	}
	return false
}

// partitions returns the primary partitions, extended ones included, and
// the logical partitions of the extended partition.
func (m *mbr) partitions(r io.ReaderAt, size int64) []partition {
	var parts []partition
	for i, e := range m.entries {
		if e.empty() {
			continue
		}
		parts = append(parts, partition{number: i + 1, start: int64(e.start) * mbrSector, size: int64(e.sectors) * mbrSector})
		if e.extended() {
			parts = append(parts, logicalPartitions(r, size, uint64(e.start))...)
		}
	}
	return parts
}

// logicalPartitions follows the chain of extended boot records from the
// extended partition at base; it stops at the first that is not one.
func logicalPartitions(r io.ReaderAt, size int64, base uint64) []partition {
	var parts []partition
	ebr := base
	for n := 5; n < 5+maxLogical; n++ {
		b := make([]byte, mbrSector)
		if ebr >= toU(size)/mbrSector || readAt(r, b, toI(ebr*mbrSector)) != nil || b[510] != 0x55 || b[511] != 0xaa {
			break
		}
		logical, next := b[mbrEntries:], b[mbrEntries+16:]
		if logical[4] != 0 {
			start := ebr + uint64(le.Uint32(logical[8:12]))
			parts = append(parts, partition{number: n, start: toI(start * mbrSector), size: int64(le.Uint32(logical[12:16])) * mbrSector})
		}
		rel := le.Uint32(next[8:12])
		if next[4] == 0 || rel == 0 {
			break
		}
		ebr = base + uint64(rel)
	}
	return parts
}

// setEntry sets the entry in slot i of the sector.
func (m *mbr) setEntry(i int, e mbrEntry) {
	b := m.sector[mbrEntries+16*i : mbrEntries+16*(i+1)]
	b[0], b[4] = e.status, e.typ
	startCHS, endCHS := chs(uint64(e.start)), chs(uint64(e.start)+uint64(e.sectors)-1)
	copy(b[1:4], startCHS[:])
	copy(b[5:8], endCHS[:])
	le.PutUint32(b[8:12], e.start)
	le.PutUint32(b[12:16], e.sectors)
	m.entries[i] = e
}

// chs is the cylinder-head-sector address of an LBA for the usual 255
// heads and 63 sectors a track, or the largest one when it is beyond.
func chs(lba uint64) [3]byte {
	const heads, sectors = 255, 63
	c := lba / (heads * sectors)
	if c > 1023 {
		return [3]byte{0xfe, 0xff, 0xff}
	}
	h, s := lba/sectors%heads, lba%sectors+1
	cylLow, cylHigh := byte(c&0xff), byte(c>>8&0x03)
	return [3]byte{byte(h & 0xff), byte(s&0x3f) | cylHigh<<6, cylLow}
}
