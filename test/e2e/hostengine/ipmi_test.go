package hostengine

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
	"github.com/metalshift/metalshift/sim"
	simipmi "github.com/metalshift/metalshift/sim/ipmi"
)

// TestIPMIHost provisions an ipmi:// host: OpenIPMI's ipmi_sim drives the
// simulated machine's power and boot device, the machine network-boots the
// deploy agent, and IPMI's missing inventory is covered by the
// hardwaredetails annotation.
func TestIPMIHost(t *testing.T) {
	g := NewWithT(t)
	ns := env.Namespace(t)
	e, lab, bmc := startIPMILab(t)
	m := lab.Machines[0]
	img := newImageServer(t, 1<<20, false)

	host := createHost(t, lab, 0, ns, false, func(h *metal3v1.BareMetalHost) {
		h.Spec.BMC.Address = "ipmi://" + bmc.Addr
		h.Annotations = map[string]string{
			metal3v1.InspectAnnotation:         metal3v1.InspectAnnotationValueDisabled,
			metal3v1.HardwareDetailsAnnotation: `{"cpu":{"arch":"x86_64","count":32},"ramMebibytes":131072}`,
		}
	})
	waitState(t, host, metal3v1.StateAvailable)
	g.Expect(host.Status.HardwareDetails.CPU.Count).To(Equal(32), "from the annotation")

	update(t, host, func(h *metal3v1.BareMetalHost) { h.Spec.Image = img.Image(); h.Spec.Online = true })
	waitState(t, host, metal3v1.StateProvisioned)
	g.Eventually(m.BootedOS).Should(Equal(sim.OSDisk))
	written := make([]byte, len(img.Data))
	_, _ = m.DiskByName("/dev/sda").ReadAt(written, 0)
	g.Expect(written).To(Equal(img.Data))
	expectNoCanary(t, e, ns, host)
}

// TestIPMIInBandInspection: an ipmi:// host without the hardwaredetails
// annotation is inspected in-band, as Ironic does: the engine boots the
// agent, which reports the machine's inventory; the host is then powered
// off (online: false) and its details are the machine's.
func TestIPMIInBandInspection(t *testing.T) {
	g := NewWithT(t)
	ns := env.Namespace(t)
	e, lab, bmc := startIPMILab(t)
	m := lab.Machines[0]

	host := createHost(t, lab, 0, ns, false, func(h *metal3v1.BareMetalHost) { h.Spec.BMC.Address = "ipmi://" + bmc.Addr })
	waitState(t, host, metal3v1.StateAvailable)
	hw := host.Status.HardwareDetails
	g.Expect(hw).NotTo(BeNil())
	g.Expect(hw.CPU.Count).To(Equal(m.Hardware.CPUCount))
	g.Expect(hw.CPU.Arch).To(Equal("x86_64"))
	g.Expect(hw.RAMMebibytes).To(Equal(m.Hardware.RAMMiB))
	g.Expect(hw.NIC).To(ContainElement(HaveField("MAC", m.Hardware.NICs[0].MAC)))
	g.Expect(hw.Storage).To(ContainElement(And(HaveField("Name", "/dev/sda"), HaveField("SizeBytes", metal3v1.Capacity(64<<30)), HaveField("Type", metal3v1.DiskType("SSD")))))
	g.Expect(hw.Storage).To(ContainElement(And(HaveField("Name", "/dev/sdb"), HaveField("Rotational", true), HaveField("Type", metal3v1.DiskType("HDD")))))
	g.Expect(hw.SystemVendor.Manufacturer).To(Equal("Metalshift Sim"))
	g.Expect(host.Spec.Architecture).To(Equal("x86_64"))
	g.Expect(host.Status.DeployAgent).To(BeNil())
	g.Eventually(m.PoweredOn, 30*time.Second).Should(BeFalse(), "online: false powers the host off after inspection")
	expectNoCanary(t, e, ns, host)
}

// startIPMILab starts an engine and one simulated machine behind ipmi_sim.
func startIPMILab(t *testing.T) (*engine, *sim.Lab, *simipmi.BMC) {
	t.Helper()
	e := startEngine(t, "", nil, nil)
	lab := startLab(t, e, 1)
	bmc, err := simipmi.Start(lab.Machines[0], t.TempDir(), "admin", canary)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bmc.Close)
	return e, lab, bmc
}
