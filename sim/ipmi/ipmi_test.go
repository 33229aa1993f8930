package ipmi

import (
	"os/exec"
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
