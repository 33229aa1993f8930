package configdrive

import (
	"errors"
	"fmt"
	"io"
)

// ReadWriterAt is a disk: a deploy agent's block device, a file.
type ReadWriterAt interface {
	io.ReaderAt
	io.WriterAt
}

// ErrNoPartitionTable is returned by Write for a disk that has neither a GPT
// nor an MBR after the image was written.
var ErrNoPartitionTable = errors.New("the image has no partition table (neither GPT nor MBR) to add the config drive partition to")

// mib is the alignment of the partitions Write adds and the most Wipe
// zeroes in a place.
const mib = 1 << 20

// Write puts the config drive in a partition at the end of a disk of size
// bytes that an image was written to, as Ironic does (see the package
// documentation). It returns ErrNoPartitionTable when the disk has no
// partition table.
func Write(dev ReadWriterAt, size int64, cd Contents) error {
	img, err := Build(cd)
	if err != nil {
		return err
	}
	g, err := readGPT(dev, size, true)
	if err != nil {
		return fmt.Errorf("the image's partition table: %w", err)
	}
	if g != nil {
		return writeGPT(dev, size, g, img)
	}
	m, err := readMBR(dev)
	switch {
	case err != nil:
		return err
	case m == nil:
		return ErrNoPartitionTable
	case m.protective():
		return errors.New("the image has a protective MBR but no valid GPT")
	}
	return writeMBR(dev, size, m, img)
}

// WriteUnpartitioned writes the config drive's filesystem to the last
// 64 MiB of a disk (aligned down to 1 MiB) without a partition. Read finds
// it there; cloud-init and Ignition do not.
func WriteUnpartitioned(dev ReadWriterAt, size int64, cd Contents) error {
	if size < Reserved {
		return fmt.Errorf("the disk (%d bytes) is smaller than a config drive", size)
	}
	img, err := Build(cd)
	if err != nil {
		return err
	}
	return writeAt(dev, img, unpartitionedOffset(size))
}

func unpartitionedOffset(size int64) int64 { return (size - Size) / mib * mib }

// Read finds the config drive of a disk of size bytes as first-boot
// software would (see the package documentation) and reads its
// openstack/latest files. ok is false when there is none.
func Read(dev io.ReaderAt, size int64) (cd Contents, ok bool, err error) {
	parts, tableErr := findPartitions(dev, size)
	places := make([]partition, 0, len(parts)+2)
	places = append(places, parts...)
	places = append(places, partition{start: 0, size: size}, partition{start: unpartitionedOffset(size), size: size - unpartitionedOffset(size)})
	for _, p := range places {
		found, err := isConfigDrive(dev, p.start, p.size)
		if err != nil {
			return cd, false, err
		}
		if found {
			cd, err := readISO(dev, p.start, p.size)
			return cd, true, err
		}
	}
	if tableErr != nil {
		return cd, false, fmt.Errorf("no config drive found; the disk's partition table is damaged: %w", tableErr)
	}
	return cd, false, nil
}

// findPartitions lists the partitions of the primary GPT, else of the
// backup GPT, else of the MBR.
func findPartitions(r io.ReaderAt, size int64) ([]partition, error) {
	g, err := readGPT(r, size, true)
	if g == nil {
		var backupErr error
		g, backupErr = readGPT(r, size, false)
		if err == nil {
			err = backupErr
		}
	}
	if g != nil {
		return g.partitions(), nil
	}
	if err != nil || size < mbrSector {
		return nil, err
	}
	m, err := readMBR(r)
	if err != nil || m == nil || m.protective() {
		return nil, err
	}
	return m.partitions(r, size), nil
}

// Wipe removes the config drive and the disk's metadata: it zeroes the
// first MiB of every partition that the GPTs (primary and backup) and the
// MBR list, the first and last MiB of the disk, the backup GPT where the
// primary header says it is, and the first MiB of the unpartitioned config
// drive.
func Wipe(dev ReadWriterAt, size int64) error {
	type region struct{ off, n int64 }
	regions := []region{{0, mib}, {size - mib, mib}, {unpartitionedOffset(size), mib}}
	var parts []partition
	for _, primary := range []bool{true, false} {
		if g, _ := readGPT(dev, size, primary); g != nil {
			parts = append(parts, g.partitions()...)
			if backup := g.altLBA - min(g.altLBA, g.entrySectors()); backup > 1 {
				regions = append(regions, region{g.offset(backup), g.offset(g.altLBA+1) - g.offset(backup)})
			}
		}
	}
	if m, _ := readMBR(dev); m != nil {
		parts = append(parts, m.partitions(dev, size)...)
	}
	for _, p := range parts {
		regions = append(regions, region{p.start, min(p.size, mib)})
	}
	zero := make([]byte, mib)
	for _, r := range regions {
		off, end := max(r.off, 0), min(r.off+r.n, size)
		for ; off < end; off += mib {
			if err := writeAt(dev, zero[:min(end-off, mib)], off); err != nil {
				return fmt.Errorf("wiping: %w", err)
			}
		}
	}
	return nil
}

// existing returns the partition whose filesystem is labelled config-2,
// if there is one.
func existing(r io.ReaderAt, parts []partition) (*partition, error) {
	var found []partition
	for _, p := range parts {
		ok, err := isConfigDrive(r, p.start, p.size)
		if err != nil {
			return nil, err
		}
		if ok {
			found = append(found, p)
		}
	}
	switch len(found) {
	case 0:
		return nil, nil
	case 1:
		return &found[0], nil
	}
	return nil, fmt.Errorf("more than one partition is labelled %s: %d and %d", Label, found[0].number, found[1].number)
}

// writeInto writes the config drive into a partition that has one.
func writeInto(w io.WriterAt, p *partition, img []byte) error {
	if int64(len(img)) > p.size {
		return fmt.Errorf("the config drive (%d bytes) does not fit the image's partition %d labelled %s (%d bytes)", len(img), p.number, Label, p.size)
	}
	return writeAt(w, img, p.start)
}

func writeGPT(dev ReadWriterAt, size int64, g *gpt, img []byte) error {
	ss := toU(g.sectorSize)
	n := g.lba(size)
	last := g.lastUsableFor(n)
	parts := g.partitions()
	var end uint64 // the LBA after the image's last partition
	for _, p := range parts {
		end = max(end, g.lba(p.start+p.size))
	}
	if end > last+1 {
		return fmt.Errorf("the image's partitions end at LBA %d, past the disk's last usable LBA %d", end-1, last)
	}
	target, err := existing(dev, parts)
	if err != nil {
		return err
	}
	if target == nil {
		first := (max(last, Size/ss) - Size/ss) / (mib / ss) * (mib / ss)
		if first < end || first < le.Uint64(g.header[40:48]) {
			return fmt.Errorf("no room for the %d MiB config drive partition at the end of the disk: the image's partitions end at LBA %d", Size/mib, end-1)
		}
		num, err := g.addPartition(first, last)
		if err != nil {
			return err
		}
		target = &partition{number: num, start: g.offset(first), size: g.offset(last+1) - g.offset(first)}
	}
	// The image's backup GPT, at the end of the image, describes no disk.
	if old := g.altLBA; old >= end && old > 1 && old < n-1 {
		if err := writeAt(dev, make([]byte, ss), g.offset(old)); err != nil {
			return err
		}
	}
	if err := writeInto(dev, target, img); err != nil {
		return err
	}
	if err := g.write(dev, n); err != nil {
		return err
	}
	return coverDisk(dev, n)
}

// coverDisk makes a protective MBR cover a disk of n sectors, as sgdisk
// does when it moves the backup GPT; a hybrid MBR is left as it is.
func coverDisk(dev ReadWriterAt, n uint64) error {
	m, err := readMBR(dev)
	if err != nil || m == nil {
		return err
	}
	slot := -1
	for i, e := range m.entries {
		switch {
		case e.typ == typeProtected && e.start == 1:
			slot = i
		case !e.empty():
			return nil
		}
	}
	if slot < 0 {
		return nil
	}
	e := m.entries[slot]
	e.sectors = uint32(min(n-1, 1<<32-1))
	m.setEntry(slot, e)
	return writeAt(dev, m.sector, 0)
}

func writeMBR(dev ReadWriterAt, size int64, m *mbr, img []byte) error {
	target, err := existing(dev, m.partitions(dev, size))
	if err != nil {
		return err
	}
	if target != nil {
		return writeInto(dev, target, img)
	}
	slot := -1      // the first free entry
	var used uint64 // the sector after the image's last partition
	for i, e := range m.entries {
		switch {
		case !e.empty():
			used = max(used, uint64(e.start)+uint64(e.sectors))
		case slot < 0:
			slot = i
		}
	}
	if slot < 0 {
		return errors.New("the image's MBR has 4 primary partitions already: no room for the config drive partition")
	}
	end := toU(size) / mbrSector // the sector after the disk
	if end > 1<<32 {
		// MBR addresses 2 TiB: Ironic puts the config drive below.
		end = 1<<32 - mib/mbrSector
	}
	start := (max(end, Size/mbrSector) - Size/mbrSector) / (mib / mbrSector) * (mib / mbrSector)
	if start < used || start == 0 {
		return fmt.Errorf("no room for the %d MiB config drive partition at the end of the disk: the image's partitions end at sector %d", Size/mib, used-1)
	}
	if err := writeAt(dev, img, toI(start*mbrSector)); err != nil {
		return err
	}
	m.setEntry(slot, mbrEntry{typ: typeFAT32LBA, start: uint32(start), sectors: uint32(end - start)})
	return writeAt(dev, m.sector, 0)
}
