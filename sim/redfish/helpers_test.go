package redfish

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/metalshift/metalshift/sim/machine"
)

// newTestMachine returns a machine with plausible hardware.
func newTestMachine(id string) *machine.Machine {
	return machine.New(id, "0c6b3e9a-0000-4000-8000-00000000000"+id[len(id)-1:], machine.Hardware{
		Manufacturer: "Metalshift", Model: "SimServer 1000", SerialNumber: "SN-" + id,
		BIOSVersion: "2.1.0", BIOSVendor: "SimBIOS", BIOSDate: "2026-01-01",
		CPUArch: "x86_64", CPUModel: "Sim CPU", CPUCount: 16, CPUMHz: 2400, RAMMiB: 65536,
		NICs: []machine.NIC{{Name: "eno1", MAC: "52:54:00:00:00:0" + id[len(id)-1:], SpeedGbps: 10}},
		Disks: []*machine.Disk{{Name: "/dev/sda", Model: "SimDisk", Vendor: "SimCo", SerialNumber: "D-" + id,
			WWN: "0x5000c500a0b1c2d" + id[len(id)-1:], HCTL: "0:0:0:0", SizeBytes: 480 << 30, Type: "SSD"}},
	})
}

// startServer serves an emulator with n machines (sys-1 .. sys-n).
func startServer(t *testing.T, n int) (*Server, *httptest.Server) {
	t.Helper()
	s := New("admin", "s3cret-canary")
	for i := 1; i <= n; i++ {
		s.Add(newTestMachine(fmt.Sprintf("sys-%d", i)))
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return s, ts
}

func hostPort(ts *httptest.Server) string { return strings.TrimPrefix(ts.URL, "http://") }
