package ipmi

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/metalshift/metalshift/sim/fault"
	"github.com/metalshift/metalshift/sim/machine"
)

func ipmitool(t *testing.T, addr, password string, args ...string) (string, error) {
	t.Helper()
	host, port, _ := strings.Cut(addr, ":")
	base := []string{"-I", "lanplus", "-H", host, "-p", port, "-U", "admin", "-P", password, "-C", "3", "-N", "1", "-R", "2"}
	out, err := exec.Command("/usr/bin/ipmitool", append(base, args...)...).CombinedOutput()
	return string(out), err
}

// TestIpmitoolDrivesTheMachine: Debian's ipmitool, through OpenIPMI's
// ipmi_sim, powers a simulated machine on, resets it, sets PXE and powers it off.
func TestIpmitoolDrivesTheMachine(t *testing.T) {
	g := NewWithT(t)
	m := machine.New("ipmi-0", "0c6b3e9a-0000-4000-8000-000000000001", machine.Hardware{})
	bmc, err := Start(m, t.TempDir(), "admin", "Canary-IPMI-Pa55")
	g.Expect(err).NotTo(HaveOccurred())
	defer bmc.Close()

	out, err := ipmitool(t, bmc.Addr, "Canary-IPMI-Pa55", "power", "status")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("Chassis Power is off"))

	out, err = ipmitool(t, bmc.Addr, "Canary-IPMI-Pa55", "power", "on")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(m.PoweredOn()).To(BeTrue())
	out, err = ipmitool(t, bmc.Addr, "Canary-IPMI-Pa55", "power", "status")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("Chassis Power is on"))

	out, _ = ipmitool(t, bmc.Addr, "Canary-IPMI-Pa55", "chassis", "bootdev", "pxe")
	g.Expect(out).To(ContainSubstring("Set Boot Device to pxe"))
	g.Expect(m.Override().Target).To(Equal(machine.BootPxe))

	boots := m.Boots()
	out, err = ipmitool(t, bmc.Addr, "Canary-IPMI-Pa55", "power", "reset")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(m.Boots()).To(Equal(boots + 1))
	g.Expect(m.Override().Target).To(Equal(machine.BootNone), "a one-time PXE override is used by the reset")

	out, err = ipmitool(t, bmc.Addr, "Canary-IPMI-Pa55", "power", "off")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(m.PoweredOn()).To(BeFalse())

	_, err = ipmitool(t, bmc.Addr, "wrong", "power", "status")
	g.Expect(err).To(HaveOccurred(), "wrong credentials are refused")
}

// TestPlannedFaults: through ipmi_sim, ipmitool sees a planned failure as
// an error completion code, and a dropped reply as no answer; neither
// command is carried out, and the next ones are.
func TestPlannedFaults(t *testing.T) {
	g := NewWithT(t)
	m := machine.New("ipmi-1", "0c6b3e9a-0000-4000-8000-000000000002", machine.Hardware{})
	bmc, err := Start(m, t.TempDir(), "admin", "Canary-IPMI-Pa55")
	g.Expect(err).NotTo(HaveOccurred())
	defer bmc.Close()
	bmc.SetFaults(fault.MustParse("ipmi.fail=@1,ipmi.drop=@3").For(m.ID))

	out, err := ipmitool(t, bmc.Addr, "Canary-IPMI-Pa55", "power", "on")
	t.Logf("failed: %s", out)
	g.Expect(err).To(HaveOccurred(), out)
	g.Expect(m.PoweredOn()).To(BeFalse())
	out, err = ipmitool(t, bmc.Addr, "Canary-IPMI-Pa55", "power", "on")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(m.PoweredOn()).To(BeTrue())
	out, err = ipmitool(t, bmc.Addr, "Canary-IPMI-Pa55", "power", "off")
	t.Logf("dropped: %s", out)
	g.Expect(err).To(HaveOccurred(), out)
	g.Expect(m.PoweredOn()).To(BeTrue())
}

// TestFaultAnswerIsNotARequest: the answer the BMC leaves for a failed
// command's control script (request.<pid>.fail) is the script's to read,
// not a new request: were it taken for one, it would be gone before the
// script looked (ipmi_sim would answer the failed command as done, which
// a loaded machine made happen about one run in three) and it would use
// up the next fault decision.
func TestFaultAnswerIsNotARequest(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	m := machine.New("ipmi-2", "0c6b3e9a-0000-4000-8000-000000000003", machine.Hardware{})
	b := &BMC{m: m, dir: dir}
	plan := fault.MustParse("ipmi.fail=@1,ipmi.drop=@2")
	b.SetFaults(plan.For(m.ID))
	write := func(name, content string) {
		g.Expect(os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600)).To(Succeed())
	}

	write("request.41", "power 1\n")
	b.poll()
	g.Expect(filepath.Join(dir, "request.41")).NotTo(BeAnExistingFile())
	g.Expect(filepath.Join(dir, "request.41.fail")).To(BeAnExistingFile())
	g.Expect(m.PoweredOn()).To(BeFalse())

	write("request.42.tmp", "power 1\n")
	b.poll()
	g.Expect(filepath.Join(dir, "request.41.fail")).To(BeAnExistingFile(), "left for the script")
	g.Expect(filepath.Join(dir, "request.42.tmp")).To(BeAnExistingFile(), "still being written")
	g.Expect(plan.Fired(fault.IPMIFail)).To(Equal(1))
	g.Expect(plan.Fired(fault.IPMIDrop)).To(Equal(0), "no decision for what is not a request")

	write("request.43", "power 1\n")
	b.poll()
	g.Expect(filepath.Join(dir, "request.43.drop")).To(BeAnExistingFile(), "the second command is the second decision")
	g.Expect(m.PoweredOn()).To(BeFalse())
	write("request.44", "power 1\n")
	b.poll()
	g.Expect(m.PoweredOn()).To(BeTrue())
}
