package qemu

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/metalshift/metalshift/sim/ipmi"
	"github.com/metalshift/metalshift/sim/machine"
	"github.com/metalshift/metalshift/sim/redfish"
)

// These tests run real VMs, one at a time, under TCG. Times are generous:
// the host may be busy.
const (
	bootTimeout = 3 * time.Minute
	stopTimeout = 30 * time.Second
	password    = "Canary-QEMU-Pa55"
)

func requireQEMU(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath(DefaultQEMU); err != nil {
		t.Skipf("%s is missing (Debian: qemu-system-x86, ovmf, ipxe-qemu): the QEMU VM tests need it", DefaultQEMU)
	}
}

// vmLab is one machine with the QEMU backend behind the Redfish emulator.
type vmLab struct {
	t   *testing.T
	fw  *Firmware
	m   *machine.Machine
	bmc *httptest.Server
}

func newVMLab(t *testing.T, uefi bool, bootURL string) *vmLab {
	t.Helper()
	requireQEMU(t)
	fw := New(Options{StateDir: t.TempDir(), BootURL: bootURL})
	if err := fw.Check(); err != nil {
		t.Fatal(err)
	}
	m := machine.New("vm-0", "6d657461-6c73-4869-8674-0000000000a0", SmallHardware(0xa0, 0x6d, 64<<20))
	m.SetOverride(machine.BootOverride{Target: machine.BootNone, UEFI: uefi})
	m.SetFirmware(fw)
	rf := redfish.New("admin", password)
	rf.Add(m)
	bmc := httptest.NewServer(rf.Handler())
	l := &vmLab{t: t, fw: fw, m: m, bmc: bmc}
	t.Cleanup(func() {
		bmc.Close()
		m.PowerOff()
		fw.Close()
		if t.Failed() {
			t.Logf("Console of %s:\n%s", m.ID, l.console())
			if data, err := os.ReadFile(filepath.Join(fw.Dir(m.ID), "bmc.log")); err == nil {
				t.Logf("BMC log:\n%s", data)
			}
		}
	})
	return l
}

// redfish sends a request to the machine's system (or manager, for paths
// starting with Managers) and checks the status.
func (l *vmLab) redfish(method, path string, body any, want int) {
	l.t.Helper()
	data, _ := json.Marshal(body)
	url := l.bmc.URL + "/redfish/v1/Systems/" + l.m.ID + path
	if strings.HasPrefix(path, "Managers") {
		url = l.bmc.URL + "/redfish/v1/Managers/BMC-" + l.m.ID + strings.TrimPrefix(path, "Managers")
	}
	req, err := http.NewRequest(method, url, bytes.NewReader(data))
	if err != nil {
		l.t.Fatal(err)
	}
	req.SetBasicAuth("admin", password)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		l.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != want {
		msg, _ := io.ReadAll(resp.Body)
		l.t.Fatalf("%s %s: %s %s", method, path, resp.Status, msg)
	}
}

// powerOn sets a one-time boot override and powers on, as the host engine does.
func (l *vmLab) powerOn(target machine.BootTarget, uefi bool) time.Time {
	mode := "Legacy"
	if uefi {
		mode = "UEFI"
	}
	l.redfish(http.MethodPatch, "", map[string]any{"Boot": map[string]any{
		"BootSourceOverrideTarget": target, "BootSourceOverrideEnabled": "Once", "BootSourceOverrideMode": mode}}, http.StatusNoContent)
	start := time.Now()
	l.redfish(http.MethodPost, "/Actions/ComputerSystem.Reset", map[string]any{"ResetType": "On"}, http.StatusNoContent)
	return start
}

// console is what the VM printed on its serial console, without control
// sequences.
func (l *vmLab) console() string {
	data, _ := os.ReadFile(l.fw.ConsoleLog(l.m.ID))
	var lines []string
	for _, line := range strings.Split(string(data), "\n") {
		if line = cleanConsoleLine(line); line != "" {
			lines = append(lines, line)
		}
	}
	return strings.Join(lines, "\n")
}

// pid waits for QEMU to start and returns its process ID.
func (l *vmLab) pid(g *WithT) int {
	l.t.Helper()
	g.Eventually(func() int { return l.fw.PID(l.m.ID) }, stopTimeout, 10*time.Millisecond).ShouldNot(BeZero())
	return l.fw.PID(l.m.ID)
}

// expectStopped checks that QEMU is gone and the machine off.
func (l *vmLab) expectStopped(g *WithT, pid int) {
	l.t.Helper()
	g.Eventually(func() int { return l.fw.PID(l.m.ID) }, stopTimeout, 50*time.Millisecond).Should(BeZero())
	g.Expect(syscall.Kill(pid, 0)).To(MatchError(syscall.ESRCH), "QEMU (pid %d) has exited", pid)
	g.Expect(l.m.PoweredOn()).To(BeFalse())
}

// bootServer answers /boot/by-mac/<mac> with an iPXE script that prints a
// line and waits at iPXE's shell, and records when each request came.
type bootServer struct {
	*httptest.Server
	mu       sync.Mutex
	requests map[string]time.Time
}

func newBootServer(t *testing.T) *bootServer {
	b := &bootServer{requests: map[string]time.Time{}}
	b.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		if _, ok := b.requests[r.URL.Path]; !ok {
			b.requests[r.URL.Path] = time.Now()
		}
		b.mu.Unlock()
		if !strings.HasPrefix(r.URL.Path, "/boot/by-mac/") {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintf(w, "#!ipxe\necho metalshift-pxe-script for %s\nshell\n", strings.TrimPrefix(r.URL.Path, "/boot/by-mac/"))
	}))
	t.Cleanup(b.Close)
	return b
}

func (b *bootServer) requested(path string) time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.requests[path]
}

// TestNetworkBootThroughRedfish: a PXE override and power on through the
// Redfish emulator start a VM whose DHCP answer makes iPXE fetch the boot
// server's script for its MAC over HTTP (from 127.0.0.1, as 10.0.2.2 in the
// guest) and run it; power off ends QEMU.
func TestNetworkBootThroughRedfish(t *testing.T) {
	for _, uefi := range []bool{true, false} {
		t.Run(map[bool]string{true: "UEFI", false: "BIOS"}[uefi], func(t *testing.T) {
			g := NewWithT(t)
			boot := newBootServer(t)
			l := newVMLab(t, uefi, boot.URL)
			mac := l.m.Hardware.NICs[0].MAC
			start := l.powerOn(machine.BootPxe, uefi)
			pid := l.pid(g)

			path := "/boot/by-mac/" + mac
			g.Eventually(func() time.Time { return boot.requested(path) }, bootTimeout, 100*time.Millisecond).ShouldNot(BeZero(),
				"iPXE asks the boot server for %s", path)
			t.Logf("%s: iPXE's HTTP request for its script came %.1fs after power on", t.Name(), boot.requested(path).Sub(start).Seconds())
			g.Eventually(l.console, bootTimeout, 200*time.Millisecond).Should(ContainSubstring("metalshift-pxe-script for " + mac))
			firmware := "SeaBIOS"
			if uefi {
				firmware = "Features: DNS HTTP iSCSI NFS TFTP AoE EFI" // iPXE's EFI build
			}
			g.Expect(l.console()).To(ContainSubstring(firmware))
			g.Expect(l.m.Override().Target).To(Equal(machine.BootNone), "the one-time override is used")

			l.redfish(http.MethodPost, "/Actions/ComputerSystem.Reset", map[string]any{"ResetType": "ForceOff"}, http.StatusNoContent)
			l.expectStopped(g, pid)
		})
	}
}

// grubISO makes a boot CD (BIOS and UEFI) whose GRUB prints on the serial
// console what SMBIOS says and then runs final (halt, reboot).
func grubISO(t *testing.T, final string) []byte {
	t.Helper()
	if _, err := exec.LookPath("grub-mkrescue"); err != nil {
		t.Fatalf("grub-mkrescue is missing (Debian: grub-pc-bin, grub-efi-amd64-bin, xorriso, mtools): %v", err)
	}
	dir := t.TempDir()
	cfg := `serial --unit=0 --speed=115200
terminal_input serial
terminal_output serial
echo "metalshift-cd: booted"
smbios --type 1 --get-string 4 --set manufacturer
smbios --type 1 --get-string 7 --set serial
smbios --type 1 --get-uuid 8 --set uuid
smbios --type 0 --get-string 4 --set biosvendor
echo "manufacturer=$manufacturer"
echo "serial=$serial"
echo "uuid=$uuid"
echo "biosvendor=$biosvendor"
` + final + "\n"
	if err := os.MkdirAll(filepath.Join(dir, "root", "boot", "grub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "root", "boot", "grub", "grub.cfg"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	iso := filepath.Join(dir, "cd.iso")
	if out, err := exec.Command("grub-mkrescue", "-o", iso, filepath.Join(dir, "root")).CombinedOutput(); err != nil {
		t.Fatalf("grub-mkrescue: %v\n%s", err, out)
	}
	data, err := os.ReadFile(iso)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// mediaServer serves images on 127.0.0.1; imageURL is how a guest would
// name them (10.0.2.2), which the BMC maps back to 127.0.0.1.
func mediaServer(t *testing.T, images map[string][]byte) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, ok := images[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		http.ServeContent(w, r, r.URL.Path, time.Time{}, bytes.NewReader(data))
	}))
	t.Cleanup(s.Close)
	return s
}

func imageURL(s *httptest.Server, path string) string {
	return strings.Replace(s.URL, "127.0.0.1", DefaultGuestHostAlias, 1) + path
}

// TestCDBootThroughRedfish: virtual media inserted through the Redfish
// emulator is downloaded by the BMC and booted by the VM's firmware; the
// guest sees the machine's SMBIOS identity; when it halts, the machine is
// off and QEMU gone.
func TestCDBootThroughRedfish(t *testing.T) {
	iso := grubISO(t, "halt")
	for _, uefi := range []bool{true, false} {
		t.Run(map[bool]string{true: "UEFI", false: "BIOS"}[uefi], func(t *testing.T) {
			g := NewWithT(t)
			media := mediaServer(t, map[string][]byte{"/images/boot.iso": iso})
			l := newVMLab(t, uefi, "")
			l.redfish(http.MethodPost, "Managers/VirtualMedia/Cd/Actions/VirtualMedia.InsertMedia",
				map[string]any{"Image": imageURL(media, "/images/boot.iso")}, http.StatusNoContent)
			start := l.powerOn(machine.BootCd, uefi)
			pid := l.pid(g)

			hw := l.m.Hardware
			g.Eventually(l.console, bootTimeout, 200*time.Millisecond).Should(ContainSubstring(fmt.Sprintf(
				"manufacturer=%s\nserial=%s\nuuid=%s\nbiosvendor=%s", hw.Manufacturer, hw.SerialNumber, l.m.UUID, hw.BIOSVendor)))
			t.Logf("%s: GRUB ran from the CD %.1fs after power on", t.Name(), time.Since(start).Seconds())
			if uefi {
				g.Expect(l.console()).To(MatchRegexp(`BdsDxe: loading Boot\d+ "UEFI QEMU DVD-ROM`))
			} else {
				g.Expect(l.console()).To(And(ContainSubstring("SeaBIOS"), ContainSubstring("Booting from DVD/CD")))
			}
			l.expectStopped(g, pid) // GRUB's halt powers the VM off
		})
	}
}

// TestVirtualMediaWhileRunning: inserting and ejecting media through the
// Redfish emulator while the VM runs changes its CD drive through QMP.
func TestVirtualMediaWhileRunning(t *testing.T) {
	g := NewWithT(t)
	one, two := bytes.Repeat([]byte("metalshift 1 "), 4096), bytes.Repeat([]byte("metalshift 2 "), 8192)
	media := mediaServer(t, map[string][]byte{"/one.iso": one, "/two.iso": two})
	l := newVMLab(t, false, "")
	l.powerOn(machine.BootHdd, false)
	pid := l.pid(g)
	ctx := context.Background()
	cd := func() (string, error) { return l.fw.QueryCD(ctx, l.m.ID) }
	g.Expect(cd()).To(BeEmpty())

	insert := func(path string, want []byte) {
		t.Helper()
		l.redfish(http.MethodPost, "Managers/VirtualMedia/Cd/Actions/VirtualMedia.InsertMedia",
			map[string]any{"Image": imageURL(media, path)}, http.StatusNoContent)
		g.Eventually(cd, stopTimeout, 50*time.Millisecond).Should(HavePrefix(l.fw.Dir(l.m.ID) + "/cd-"))
		file, _ := cd()
		g.Expect(os.ReadFile(file)).To(Equal(want), "the VM's CD holds the image the BMC downloaded")
	}
	eject := func() {
		t.Helper()
		l.redfish(http.MethodPost, "Managers/VirtualMedia/Cd/Actions/VirtualMedia.EjectMedia", map[string]any{}, http.StatusNoContent)
		g.Eventually(cd, stopTimeout, 50*time.Millisecond).Should(BeEmpty())
	}
	insert("/one.iso", one)
	eject()
	insert("/two.iso", two)
	g.Expect(l.fw.PID(l.m.ID)).To(Equal(pid), "the same VM ran throughout")

	l.redfish(http.MethodPost, "/Actions/ComputerSystem.Reset", map[string]any{"ResetType": "ForceOff"}, http.StatusNoContent)
	l.expectStopped(g, pid)
	_, err := cd()
	g.Expect(errors.Is(err, ErrNotRunning)).To(BeTrue())
}

// TestGuestRebootBootsAgain: a guest that reboots resets the machine; the
// next boot follows the boot order without the one-time override.
func TestGuestRebootBootsAgain(t *testing.T) {
	g := NewWithT(t)
	media := mediaServer(t, map[string][]byte{"/boot.iso": grubISO(t, "reboot")})
	l := newVMLab(t, false, "")
	l.redfish(http.MethodPost, "Managers/VirtualMedia/Cd/Actions/VirtualMedia.InsertMedia",
		map[string]any{"Image": imageURL(media, "/boot.iso")}, http.StatusNoContent)
	l.powerOn(machine.BootCd, false)
	// The empty disk comes first after the override, then the CD, so
	// GRUB reboots the machine again and again.
	g.Eventually(l.m.Boots, bootTimeout, 100*time.Millisecond).Should(BeNumerically(">=", 3))
	g.Expect(l.m.PoweredOn()).To(BeTrue())
	g.Expect(l.m.Override().Target).To(Equal(machine.BootNone))
	g.Expect(strings.Count(l.console(), "metalshift-cd: booted")).To(BeNumerically(">=", 2))
	g.Expect(l.console()).To(ContainSubstring("Booting from Hard Disk"), "a later boot tried the disk first")
	pid := l.fw.PID(l.m.ID)
	l.m.PowerOff()
	if pid != 0 {
		l.expectStopped(g, pid)
	}
	g.Eventually(func() int { return l.fw.PID(l.m.ID) }, stopTimeout).Should(BeZero())
}

// TestIPMIBootdevPXE: ipmitool, through ipmi_sim, sets PXE and powers the
// machine on: the VM network-boots.
func TestIPMIBootdevPXE(t *testing.T) {
	g := NewWithT(t)
	boot := newBootServer(t)
	l := newVMLab(t, false, boot.URL)
	bmc, err := ipmi.Start(l.m, t.TempDir(), "admin", password)
	g.Expect(err).NotTo(HaveOccurred())
	defer bmc.Close()
	ipmitool := func(args ...string) string {
		t.Helper()
		host, port, _ := strings.Cut(bmc.Addr, ":")
		base := []string{"-I", "lanplus", "-H", host, "-p", port, "-U", "admin", "-P", password, "-C", "3", "-N", "1", "-R", "2"}
		out, err := exec.Command("ipmitool", append(base, args...)...).CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), string(out))
		return string(out)
	}
	g.Expect(ipmitool("chassis", "bootdev", "pxe")).To(ContainSubstring("Set Boot Device to pxe"))
	ipmitool("power", "on")
	pid := l.pid(g)
	g.Eventually(func() time.Time { return boot.requested("/boot/by-mac/" + l.m.Hardware.NICs[0].MAC) }, bootTimeout, 100*time.Millisecond).
		ShouldNot(BeZero())
	g.Expect(ipmitool("power", "status")).To(ContainSubstring("Chassis Power is on"))
	ipmitool("power", "off")
	l.expectStopped(g, pid)
}
