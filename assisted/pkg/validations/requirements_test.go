package validations

import "testing"

func TestRequirementsFor(t *testing.T) {
	for _, tc := range []struct {
		role    string
		sno     bool
		version string
		want    Requirements
	}{
		{"master", false, "4.20", Requirements{4, 16384, 100, 10, 100, 0}},
		{"bootstrap", false, "4.20", Requirements{4, 16384, 100, 10, 100, 0}},
		{"worker", false, "4.20", Requirements{2, 8192, 100, 10, 1000, 10}},
		{"arbiter", false, "4.20", Requirements{2, 8192, 50, 10, 1000, 0}},
		{"", false, "4.20", Requirements{2, 8192, 100, 10, 1000, 10}},
		{"auto-assign", false, "4.20", Requirements{2, 8192, 100, 10, 1000, 10}},
		{"master", true, "4.21", Requirements{8, 16384, 100, 10, 0, 0}},
		{"master", true, "4.21.9", Requirements{8, 16384, 100, 10, 0, 0}},
		{"master", true, "4.22", Requirements{4, 16384, 100, 10, 0, 0}},
		{"master", true, "4.22.0-rc.1", Requirements{4, 16384, 100, 10, 0, 0}},
		{"master", true, "v4.23.1", Requirements{4, 16384, 100, 10, 0, 0}},
		{"master", true, "5.0", Requirements{4, 16384, 100, 10, 0, 0}},
		{"master", true, "", Requirements{8, 16384, 100, 10, 0, 0}},
		{"worker", true, "4.22", Requirements{2, 8192, 100, 10, 1000, 10}},
		{"", true, "4.21", Requirements{2, 8192, 100, 10, 1000, 10}},
	} {
		if got := RequirementsFor(tc.role, tc.sno, tc.version); got != tc.want {
			t.Errorf("RequirementsFor(%q, %v, %q) = %+v, want %+v", tc.role, tc.sno, tc.version, got, tc.want)
		}
	}
}

func TestBytesString(t *testing.T) {
	for b, want := range map[int64]string{
		16 * gib: "16.00 GiB", 8*gib + gib/2: "8.50 GiB", 512 * mib: "512 MiB", 3 * kib: "3 KiB", 10: "10 bytes", 2 * tib: "2.00 TiB",
	} {
		if got := bytesString(b); got != want {
			t.Errorf("bytesString(%d) = %q, want %q", b, got, want)
		}
	}
}
