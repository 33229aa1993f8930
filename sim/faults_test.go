package sim

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/metalshift/metalshift/sim/fault"
	"github.com/metalshift/metalshift/sim/machine"
)

// TestPlannedNetworkDrop: a machine's calls fail while the planned drop
// lasts, from the call it fired on; other machines keep their network.
func TestPlannedNetworkDrop(t *testing.T) {
	g := NewWithT(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }))
	defer srv.Close()
	f := &Firmware{HTTP: srv.Client(), Faults: fault.MustParse("machine.netdrop=@2:1s")}
	m0, m1 := NewMachine("net", 0, "192.0.2", 1, 1<<30), NewMachine("net", 1, "192.0.2", 1, 1<<30)
	hc0, hc1 := f.machineHTTP(m0, f.HTTP), f.machineHTTP(m1, f.HTTP)
	get := func(hc *http.Client) error {
		resp, err := hc.Get(srv.URL)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	g.Expect(get(hc0)).To(Succeed())
	start := time.Now()
	err := get(hc0)
	g.Expect(errors.Is(err, syscall.ENETUNREACH)).To(BeTrue(), "got %v", err)
	err = get(hc0)
	if time.Since(start) < time.Second {
		g.Expect(errors.Is(err, syscall.ENETUNREACH)).To(BeTrue(), "still down: %v", err)
	}
	g.Expect(get(hc1)).To(Succeed(), "another machine's network")
	g.Expect(get(hc1)).To(MatchError(ContainSubstring("network is unreachable")), "it has its own decisions: its @2 fires now")
	g.Eventually(func() error { return get(hc0) }, 5*time.Second, 50*time.Millisecond).Should(Succeed())
	g.Expect(time.Since(start)).To(BeNumerically(">=", time.Second))
	g.Expect(f.Log(m0.ID)).To(ContainElement(ContainSubstring("Network down for 1s")))
}

// TestPlannedPowerLoss: the planned image write stops at the fault's
// bytes and the machine is off; the next image write, in a new boot, is
// whole.
func TestPlannedPowerLoss(t *testing.T) {
	g := NewWithT(t)
	f := &Firmware{Faults: fault.MustParse("machine.powerloss=@1:512KiB")}
	m := NewMachine("power", 0, "192.0.2", 1, 1<<30)
	boots := make(chan context.Context, 2)
	m.SetFirmware(machine.FirmwareFunc(func(ctx context.Context, _ *machine.Machine, _ machine.BootTarget) { boots <- ctx }))
	image := make([]byte, 2<<20)
	for i := range image {
		image[i] = byte(i%251 + 1)
	}
	write := func(ctx context.Context) (int64, error) {
		dev := f.devices(m, f.powerCut(ctx, m))[0]
		var off int64
		for off < int64(len(image)) {
			n, err := dev.WriteAt(image[off:off+1<<20], off)
			off += int64(n)
			if err != nil {
				return off, err
			}
		}
		return off, nil
	}

	m.PowerOn()
	ctx := <-boots
	n, err := write(ctx)
	g.Expect(err).To(MatchError(errPowerLost))
	g.Expect(n).To(Equal(int64(512 << 10)))
	g.Expect(m.PoweredOn()).To(BeFalse())
	g.Expect(ctx.Err()).To(HaveOccurred(), "the boot is over")
	disk := m.DiskByName("/dev/sda")
	got := make([]byte, len(image))
	_, _ = disk.ReadAt(got, 0)
	g.Expect(got[:512<<10]).To(Equal(image[:512<<10]))
	g.Expect(got[512<<10:]).To(Equal(make([]byte, len(image)-512<<10)), "nothing after the cut")

	m.PowerOn()
	n, err = write(<-boots)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n).To(Equal(int64(len(image))))
	_, _ = disk.ReadAt(got, 0)
	g.Expect(got).To(Equal(image))
	g.Expect(m.PoweredOn()).To(BeTrue())
}

// TestPlannedDownloadDrop: the planned drop breaks the first answer of 2
// MiB or more after its first MiB, whatever calls came before; small
// answers are not decisions. While it lasts the machine's calls fail.
func TestPlannedDownloadDrop(t *testing.T) {
	g := NewWithT(t)
	big := make([]byte, 3<<20)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/small" {
			_, _ = io.WriteString(w, "ok")
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(big)))
		_, _ = w.Write(big)
	}))
	defer srv.Close()
	f := &Firmware{HTTP: srv.Client(), Faults: fault.MustParse("machine.downloaddrop=@1:1h")}
	m := NewMachine("dl", 0, "192.0.2", 1, 1<<30)
	hc := f.machineHTTP(m, f.HTTP)
	for range 3 {
		resp, err := hc.Get(srv.URL + "/small")
		g.Expect(err).NotTo(HaveOccurred())
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	resp, err := hc.Get(srv.URL + "/image")
	g.Expect(err).NotTo(HaveOccurred())
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	g.Expect(errors.Is(err, syscall.ENETUNREACH)).To(BeTrue(), "got %v", err)
	g.Expect(n).To(Equal(int64(1 << 20)))
	resp, err = hc.Get(srv.URL + "/small")
	if err == nil {
		resp.Body.Close()
	}
	g.Expect(errors.Is(err, syscall.ENETUNREACH)).To(BeTrue(), "the network is down: %v", err)
	g.Expect(f.Faults.Fired(fault.MachineDownloadDrop)).To(Equal(1))
	g.Expect(f.Log(m.ID)).To(ContainElement("Network down for 1h0m0s, 1048576 bytes into a download (injected fault)"))
}
