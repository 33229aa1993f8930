package imageservice

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/kdomanski/iso9660"

	"github.com/metalshift/metalshift/agent/configdrive"
	deployapi "github.com/metalshift/metalshift/api/deploy/v1"
)

// smallISO is an ISO 9660 image with files at the given paths, as `make
// images` lays out the live ISO's (without its size).
func smallISO(t testing.TB, files map[string][]byte) []byte {
	w, err := iso9660.NewWriter()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.Cleanup() }() // a staging directory
	for path, data := range files {
		if err := w.AddFile(bytes.NewReader(data), path); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if err := w.WriteTo(&buf, DeployISOLabel); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// withEmptyRoot is iso with a root directory without records, not even
// "." and "..": the ISO 9660 reader's GetChildren panicked on it.
func withEmptyRoot(t testing.TB, iso []byte) []byte {
	const pvd, rootRecord = 16 * 2048, 156
	if len(iso) < pvd+2048 || iso[pvd] != 1 {
		t.Fatal("no primary volume descriptor")
	}
	extent := int(binary.LittleEndian.Uint32(iso[pvd+rootRecord+2:]))
	out := bytes.Clone(iso)
	clear(out[extent*2048 : extent*2048+2048])
	return out
}

// allocated is the bytes fn allocates.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// FuzzReadISOHostConfig checks the ISO reader on any image, as the
// simulator's virtual media reads what a BMC was told to insert: it returns
// (no panic: the simulator runs in the hub's process), allocates at most a constant factor of the image whatever
// sizes its directory records claim, and reads an image the same way every
// time.
func FuzzReadISOHostConfig(f *testing.F) {
	initrd, err := HostInitrd(hostCfg)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(smallISO(f, map[string][]byte{"/boot/host.img": initrd, "/README.TXT": []byte("hello\n")}))
	f.Add(smallISO(f, map[string][]byte{"/boot/vmlinuz": []byte("kernel")}))
	f.Add(make([]byte, 18*2048))
	f.Add(withEmptyRoot(f, smallISO(f, map[string][]byte{"/boot/host.img": initrd})))
	// An image with Rock Ridge and Joliet records, as xorriso writes the
	// live ISO.
	rr, err := configdrive.Build(configdrive.Contents{UserData: initrd})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(rr)
	f.Fuzz(func(t *testing.T, image []byte) {
		var cfg deployapi.BootConfig
		var err error
		n := allocated(func() { cfg, err = ReadISOHostConfig(bytes.NewReader(image)) })
		if limit := uint64(64*len(image) + 4<<20); n > limit {
			t.Fatalf("reading an image of %d bytes allocates %d bytes, more than %d", len(image), n, limit)
		}
		again, err2 := ReadISOHostConfig(bytes.NewReader(image))
		if !reflect.DeepEqual(cfg, again) || (err == nil) != (err2 == nil) {
			t.Fatalf("the image reads as %+v (%v), then as %+v (%v)", cfg, err, again, err2)
		}
	})
}

// FuzzFindHostRegion checks FindHostRegion against a plain reading of its
// contract on images made of the fuzzer's bytes with the placeholder
// region at a sector (twice, or with a byte changed, when asked): it
// returns the offset of the one sector that starts with the placeholder's
// first 128 bytes, and only when the whole placeholder is there; any other
// image is refused.
func FuzzFindHostRegion(f *testing.F) {
	f.Add([]byte("CD001"), uint8(1), false, uint32(0))
	f.Add([]byte{}, uint8(0), false, uint32(0))
	f.Add(bytes.Repeat([]byte{0xff}, 5000), uint8(2), true, uint32(0))
	f.Add([]byte("x"), uint8(0), false, uint32(200))
	f.Add([]byte("x"), uint8(0), false, uint32(50))
	f.Add([]byte("x"), uint8(0), false, uint32(HostRegionSize-1))
	placeholder := PlaceholderRegion()
	f.Fuzz(func(t *testing.T, data []byte, at uint8, twice bool, flip uint32) {
		sectors := (len(data) + 2047) / 2048
		image := make([]byte, sectors*2048, (sectors+2)*2048+2*HostRegionSize)
		copy(image, data)
		cut := int(at) % (sectors + 1) * 2048
		image = append(image[:cut], append(bytes.Clone(placeholder), image[cut:]...)...)
		if flip != 0 {
			image[cut+int(flip%HostRegionSize)] ^= 0x5a
		}
		if twice {
			image = append(image, placeholder...)
		}
		if at%7 == 3 {
			image = image[:len(image)-int(at)] // cut short
		}
		want, wantErr := int64(-1), true
		var starts []int
		for s := 0; s+128 <= len(image); s += 2048 {
			if bytes.Equal(image[s:s+128], placeholder[:128]) {
				starts = append(starts, s)
			}
		}
		if len(starts) == 1 && starts[0]+HostRegionSize <= len(image) && bytes.Equal(image[starts[0]:starts[0]+HostRegionSize], placeholder) {
			want, wantErr = int64(starts[0]), false
		}
		got, err := FindHostRegion(bytes.NewReader(image), int64(len(image)))
		if (err != nil) != wantErr || (err == nil && got != want) {
			t.Fatalf("an image of %d bytes with region starts %v: got %d, %v; want %d (error %v)", len(image), starts, got, err, want, wantErr)
		}
	})
}

// FuzzOverlay checks what a BMC or a host reading a served ISO in ranges
// gets: every read returns what the base image would (count and error),
// with the region's bytes where the region lies; the region is made once,
// and only when a read reaches it.
func FuzzOverlay(f *testing.F) {
	f.Add([]byte("0123456789abcdefghij"), uint16(5), uint8(6), []byte{0, 20, 3, 4, 10, 1, 18, 9, 25, 1})
	f.Add([]byte("0123456789"), uint16(8), uint8(10), []byte{0, 5, 7, 255})
	f.Add([]byte{}, uint16(0), uint8(1), []byte{0, 1})
	f.Fuzz(func(t *testing.T, base []byte, off uint16, size uint8, reads []byte) {
		region := bytes.Repeat([]byte{'R'}, int(size))
		made := 0
		o := &overlay{base: bytes.NewReader(base), off: int64(off), size: int64(size), make: func() ([]byte, error) {
			made++
			return region, nil
		}}
		model := bytes.Clone(base)
		for i := int(off); i < min(int(off)+int(size), len(model)); i++ {
			model[i] = 'R'
		}
		reached := false
		for i := 0; i+1 < len(reads); i += 2 {
			at, n := int64(reads[i]), int(reads[i+1])
			p := make([]byte, n)
			got, err := o.ReadAt(p, at)
			wantN, wantErr := bytes.NewReader(base).ReadAt(make([]byte, n), at)
			if got != wantN || !errors.Is(err, wantErr) {
				t.Fatalf("ReadAt(%d bytes at %d) = %d, %v; the base gives %d, %v", n, at, got, err, wantN, wantErr)
			}
			if got > 0 && !bytes.Equal(p[:got], model[at:at+int64(got)]) {
				t.Fatalf("ReadAt(%d bytes at %d) = %q, want %q", n, at, p[:got], model[at:at+int64(got)])
			}
			reached = reached || max(at, int64(off)) < min(at+int64(got), int64(off)+int64(size))
		}
		if made > 1 || (made == 1) != reached {
			t.Fatalf("the region was made %d times; a read reached it: %v", made, reached)
		}
	})
}

// FuzzHostRegion checks a host's boot configuration through the host
// region: a configuration (strings as the API server keeps them: UTF-8)
// is refused only when its initramfs does not fit the region, and
// otherwise reads back from the region as it was, whatever its strings
// hold: an Ignition override, nmstate YAML, a CA.
func FuzzHostRegion(f *testing.F) {
	f.Add("http://10.0.2.2:6180", "ns~h~abc", "123.sig", "interfaces: [{name: eth0}]\n", `{"ignition":{"version":"3.2.0"}}`, uint16(1))
	f.Add("", "", "", "", "\x00\"\\</script>\u2028", uint16(0))
	f.Add("https://[fd00::1]:6180", "a~b~c", "t", "", "TRAILER!!!", uint16(40000))
	f.Add("u", "h", "t", "", strings.Repeat("0123456789abcdef", 64), uint16(1100))
	f.Fuzz(func(t *testing.T, engine, host, token, network, override string, repeat uint16) {
		for _, s := range []string{engine, host, token, network, override} {
			if !utf8.ValidString(s) {
				return
			}
		}
		cfg := deployapi.BootConfig{EngineURL: engine, HostID: host, Ticket: token, NetworkData: network,
			Discovery: &deployapi.Discovery{ServiceURL: engine, Token: token, IgnitionConfigOverride: strings.Repeat(override, int(repeat)),
				StaticNetwork: []deployapi.StaticNetworkHost{{NetworkYAML: network, MACInterfaceMap: []deployapi.MACInterface{{MACAddress: host, LogicalNICName: token}}}}}}
		region, err := HostRegion(cfg)
		if err != nil {
			initrd, ierr := HostInitrd(cfg)
			if ierr != nil || len(initrd) <= HostRegionSize {
				t.Fatalf("a configuration whose initramfs is %d bytes (%v) is refused: %v", len(initrd), ierr, err)
			}
			return
		}
		if len(region) != HostRegionSize {
			t.Fatalf("the region is %d bytes", len(region))
		}
		got, err := ReadHostInitrd(bytes.NewReader(region))
		if err != nil {
			t.Fatalf("the region does not read back: %v", err)
		}
		if a, b := mustJSON(t, got), mustJSON(t, cfg); a != b {
			t.Fatalf("the region reads back as %s, not %s", a, b)
		}
	})
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
