package cpio

import (
	"bytes"
	"runtime"
	"strings"
	"testing"
)

// archive is the archive build writes.
func archive(t testing.TB, build func(w *Writer)) []byte {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	build(w)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// allocated is the bytes fn allocates.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// FuzzRead checks Read on any input, as the simulator reads a host's
// initramfs from the network: it returns no more than the input holds
// (each entry costs its header, name and data), allocates at most a
// constant factor of the input whatever sizes the headers claim, reads the
// same entries the second time, and reads an archive padded with zeros (a
// host region) as the archive.
func FuzzRead(f *testing.F) {
	f.Add(archive(f, func(w *Writer) {
		_ = w.Dir("etc", 0o755)
		_ = w.Dir("etc/metalshift", 0o755)
		_ = w.File("/etc/metalshift/boot.json", 0o600, []byte(`{"discovery":{}}`))
		_ = w.Symlink("init", "/bin/agent")
		_ = w.CharDev("dev/console", 0o600, 5, 1)
	}))
	f.Add(append(make([]byte, 8), archive(f, func(w *Writer) { _ = w.File("a", 0o644, []byte("abc")) })...))
	f.Add([]byte(magic + strings.Repeat("0", 8*6) + "000fffff" + strings.Repeat("0", 8*4) + "00000002" + "00000000" + "a\x00"))
	f.Add([]byte(magic + strings.Repeat("0", 8*11) + "ffffffff" + "00000000"))
	f.Add([]byte(magic + strings.Repeat("0", 8*11) + "00000004" + "00000000" + "a\x00b\x00"))
	f.Add([]byte("\x00\x00\x00" + magic))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		const maxFile = 1 << 20
		var entries []Entry
		var err error
		n := allocated(func() { entries, err = Read(bytes.NewReader(data), maxFile) })
		if limit := uint64(64*len(data) + 64<<10); n > limit {
			t.Fatalf("reading %d bytes allocates %d bytes, more than %d", len(data), n, limit)
		}
		size := 0
		for _, e := range entries {
			size += headerLen + len(e.Name) + 1 + len(e.Data)
			if strings.IndexByte(e.Name, 0) >= 0 || e.Name == trailer {
				t.Fatalf("an entry is named %q", e.Name)
			}
		}
		if size > len(data) {
			t.Fatalf("%d bytes read as entries of %d bytes", len(data), size)
		}
		again, err2 := Read(bytes.NewReader(data), maxFile)
		if !sameEntries(entries, again) || (err == nil) != (err2 == nil) {
			t.Fatalf("%q reads as %v (%v), then as %v (%v)", data, entries, err, again, err2)
		}
		if err == nil {
			padded, err := Read(bytes.NewReader(append(bytes.Clone(data), make([]byte, 64)...)), maxFile)
			if err != nil || !sameEntries(entries, padded) {
				t.Fatalf("%q padded with zeros reads as %v (%v), not %v", data, padded, err, entries)
			}
		}
	})
}

func sameEntries(a, b []Entry) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || a[i].Mode != b[i].Mode || !bytes.Equal(a[i].Data, b[i].Data) {
			return false
		}
	}
	return true
}

// FuzzWriteRead checks that what the Writer accepts, Read (and the kernel,
// whose rules Read follows) reads back as written: entries named by names
// (split at "|", leading slashes dropped), of the types kinds picks, with
// the data contents holds (split at "|") and permissions perm, in order;
// an entry it refuses it says why, and the archive then does not close.
func FuzzWriteRead(f *testing.F) {
	f.Add("etc|etc/metalshift|/etc/metalshift/boot.json|init|dev/console", []byte(`||{"a":1}|/bin/agent|`), uint16(0b_11_10_00_01_01), uint32(0o755))
	f.Add("a|//b|TRAILER!!!|c", []byte("1|2|3|4"), uint16(0), uint32(0o644))
	f.Add("a\x00b|/|", []byte("x"), uint16(0), uint32(0o644))
	f.Add("a", []byte("x"), uint16(0), uint32(0o170777))
	f.Add(strings.Repeat("n", 4095)+"|"+strings.Repeat("n", 4096), []byte("x|y"), uint16(0), uint32(0o600))
	f.Fuzz(func(t *testing.T, names string, contents []byte, kinds uint16, perm uint32) {
		datas := bytes.Split(contents, []byte("|"))
		var buf bytes.Buffer
		w := NewWriter(&buf)
		var want []Entry
		for i, name := range strings.Split(names, "|") {
			var data []byte
			if i < len(datas) {
				data = datas[i]
			}
			var err error
			e := Entry{Name: strings.TrimLeft(name, "/")}
			switch (kinds >> (2 * (i % 8))) & 3 {
			case 0:
				err, e.Mode, e.Data = w.File(name, perm, data), ModeRegular|perm, data
			case 1:
				err, e.Mode = w.Dir(name, perm), ModeDir|perm
			case 2:
				err, e.Mode, e.Data = w.Symlink(name, string(data)), ModeSymlink|0o777, data
			case 3:
				err, e.Mode = w.CharDev(name, perm, 5, 1), ModeCharDev|perm
			}
			if err != nil {
				if err.Error() == "" {
					t.Fatalf("entry %q is refused without saying why", name)
				}
				if cerr := w.Close(); cerr == nil {
					t.Fatalf("entry %q is refused (%v), but the archive closes", name, err)
				}
				return
			}
			want = append(want, e)
		}
		if err := w.Close(); err != nil {
			t.Fatalf("closing: %v", err)
		}
		if w.Len() != int64(buf.Len()) || buf.Len()%4 != 0 {
			t.Fatalf("the writer says %d bytes, wrote %d", w.Len(), buf.Len())
		}
		got, err := Read(bytes.NewReader(buf.Bytes()), 1<<20)
		if err != nil {
			t.Fatalf("the archive of %v does not read: %v", want, err)
		}
		if !sameEntries(got, want) {
			t.Fatalf("wrote %v, read %v", want, got)
		}
	})
}
