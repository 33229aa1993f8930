package qemu

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/metalshift/metalshift/sim/lan"
	"github.com/metalshift/metalshift/sim/machine"
)

// requireLiveImage skips the test unless QEMU, OVMF and the live image of
// `make images` are there, and returns the live ISO's path.
func requireLiveImage(t *testing.T) string {
	t.Helper()
	images := os.Getenv("METALSHIFT_IMAGES_DIR")
	if images == "" {
		t.Skip("METALSHIFT_IMAGES_DIR is not set: `make test` builds the live images and sets it")
	}
	iso := filepath.Join(images, "metalshift-live.iso")
	if _, err := os.Stat(iso); err != nil {
		t.Skipf("no live image in %s: run `make images`", images)
	}
	if err := New(Options{StateDir: t.TempDir()}).Check(); err != nil {
		t.Skipf("%v: the real-boot test needs it", err)
	}
	return iso
}

// TestQEMULeaseRenewal boots metalshift's live image (BIOS, from the CD)
// in a VM whose second NIC is on a simulated segment (sim/lan) whose DHCP
// server gives 20-second leases. The live image, which runs DHCP on every
// NIC with a link and keeps the leases, gets an address there and has its
// lease extended again and again by the same MAC, keeping the address; the
// agent logs each renewal on the serial console. (QEMU's user networking,
// on the first NIC, gives leases of a day: no renewal is seen there.) The
// live image has no host's configuration: the agent waits for one, and the
// machine keeps its network meanwhile.
func TestQEMULeaseRenewal(t *testing.T) {
	iso := requireLiveImage(t)
	g := NewWithT(t)
	const leaseTime = 20 * time.Second
	segment, err := lan.New(lan.Options{Dir: t.TempDir(),
		DHCP: &lan.DHCPOptions{Subnet: netip.MustParsePrefix("10.99.0.0/24"), Lease: leaseTime}})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(segment.Close)
	// The segment's socket is bound before QEMU starts.
	port, err := segment.Attach("vm-0.1")
	g.Expect(err).NotTo(HaveOccurred())
	media := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.ServeFile(w, r, iso) }))
	t.Cleanup(media.Close)

	fw := New(Options{StateDir: t.TempDir(), Segments: func(string) map[int]Dgram {
		return map[int]Dgram{1: {Local: port.VM, Remote: port.LAN}}
	}})
	hw := SmallHardware(0xa1, 0x6d, 64<<20)
	hw.NICs = append(hw.NICs, machine.NIC{Name: "enp0s3", MAC: "52:54:01:6d:00:a1", SpeedGbps: 1})
	mac := hw.NICs[1].MAC
	m := machine.New("vm-0", "6d657461-6c73-4869-8674-0000000000a1", hw)
	m.SetFirmware(fw)
	console := func() string {
		data, _ := os.ReadFile(fw.ConsoleLog(m.ID))
		return string(data)
	}
	ofNIC := func() []lan.LeaseEvent {
		var out []lan.LeaseEvent
		for _, e := range segment.Leases() {
			if e.MAC == mac {
				out = append(out, e)
			}
		}
		return out
	}
	t.Cleanup(func() {
		m.PowerOff()
		fw.Close()
		if t.Failed() {
			out := console()
			if len(out) > 8000 {
				out = out[len(out)-8000:]
			}
			t.Logf("console of %s (tail):\n%s", m.ID, out)
			t.Logf("lease events: %v", segment.Leases())
		}
	})
	g.Expect(m.InsertMedia(media.URL + "/metalshift-live.iso")).To(Succeed())
	m.SetOverride(machine.BootOverride{Target: machine.BootCd})
	start := time.Now()
	m.PowerOn()

	g.Eventually(ofNIC, bootTimeout, 200*time.Millisecond).ShouldNot(BeEmpty(), "the live image asks for a lease on its second NIC")
	first := ofNIC()[0]
	t.Logf("%s got %s %.0fs after power on", mac, first.Addr, first.Time.Sub(start).Seconds())
	g.Expect(first.Kind).To(Equal(lan.LeaseNew))
	extended := func() int {
		n := 0
		for _, e := range ofNIC()[1:] {
			if e.Kind == lan.LeaseRenewed || e.Kind == lan.LeaseRebound {
				n++
			}
		}
		return n
	}
	// T1 is 10 s: two renewals take some 20 s; the bound is for a busy host.
	g.Eventually(extended, 3*time.Minute, 200*time.Millisecond).Should(BeNumerically(">=", 2),
		"the server sees the lease extended twice (events %v)", ofNIC())
	evs := ofNIC()
	for i, e := range evs[1:] {
		g.Expect(e.Kind).To(BeElementOf(lan.LeaseRenewed, lan.LeaseRebound), "event %d: %v", i+1, e)
		g.Expect(e.Addr).To(Equal(first.Addr), "the NIC keeps its address: %v", e)
		t.Logf("%s: %s %.1fs after the previous event", e.MAC, e.Kind, e.Time.Sub(evs[i].Time).Seconds())
	}

	// The agent says so on the console: the lease it got, then each
	// renewal (the live image's client broadcasts them: rebound).
	g.Expect(console()).To(MatchRegexp(`\(%s\): %s/24, lease 20s`, regexp.QuoteMeta(mac), regexp.QuoteMeta(first.Addr.String())))
	renewal := fmt.Sprintf("Renewed the DHCP lease of %s for 20s", first.Addr)
	g.Eventually(func() int { return strings.Count(console(), renewal) }, 30*time.Second, 200*time.Millisecond).
		Should(BeNumerically(">=", 2))
	g.Expect(m.PoweredOn()).To(BeTrue(), "the live image runs on")
}
