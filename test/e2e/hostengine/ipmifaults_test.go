package hostengine

import (
	"net"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
	"github.com/metalshift/metalshift/sim"
	"github.com/metalshift/metalshift/sim/fault"
)

// TestIPMIHostUnderFailedCommands provisions an ipmi:// host whose
// ipmi_sim fails the second and third chassis control commands with an
// error completion code (neither is carried out): the engine tries again.
// On a loaded machine it used to end, about one run in three, with the
// engine waiting for a deploy agent that never called: the simulator took
// the answer it left for a failed command's control script for a new
// request, so ipmi_sim answered the failed command as done, and the driver
// trusted the answer (it now reads the boot device back).
func TestIPMIHostUnderFailedCommands(t *testing.T) {
	g := NewWithT(t)
	ns := env.Namespace(t)
	e, lab, bmc := startIPMILab(t)
	plan := fault.MustParse("seed=1,ipmi.fail=2-3")
	m := lab.Machines[0]
	bmc.SetFaults(plan.For(m.ID))
	t.Cleanup(func() { // what happened, for a failure
		if t.Failed() {
			t.Logf("console of %s:\n%s", m.ID, strings.Join(lab.Firmware.Log(m.ID), "\n"))
			t.Logf("engine log:\n%s", e.Logs.String())
		}
	})
	img := newImageServer(t, 1<<20, false)
	host := createHost(t, lab, 0, ns, false, func(h *metal3v1.BareMetalHost) {
		h.Spec.BMC.Address = "ipmi://" + bmc.Addr
		h.Annotations = map[string]string{
			metal3v1.InspectAnnotation:         metal3v1.InspectAnnotationValueDisabled,
			metal3v1.HardwareDetailsAnnotation: `{"cpu":{"arch":"x86_64","count":32},"ramMebibytes":131072}`,
		}
	})
	waitState(t, host, metal3v1.StateAvailable)
	update(t, host, func(h *metal3v1.BareMetalHost) { h.Spec.Image = img.Image(); h.Spec.Online = true })
	waitState(t, host, metal3v1.StateProvisioned)
	g.Eventually(m.BootedOS, 30*time.Second).Should(Equal(sim.OSDisk))
	g.Expect(plan.Fired(fault.IPMIFail)).To(Equal(2))
	expectNoCanary(t, e, ns, host)
}

// TestIPMIHostWithSilentBMC: an ipmi:// host whose BMC never answers is in
// a registration error that says the BMC did not answer, in its error
// message and its Manageable condition, not that it refused the
// credentials (go-ipmi's timeout of the session setup names its
// "Authentication Capabilities" step, which read as a refusal).
func TestIPMIHostWithSilentBMC(t *testing.T) {
	ns := env.Namespace(t)
	_, lab, _ := startIPMILab(t)
	silent, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = silent.Close() })
	host := createHost(t, lab, 0, ns, false, func(h *metal3v1.BareMetalHost) { h.Spec.BMC.Address = "ipmi://" + silent.LocalAddr().String() })
	NewWithT(t).Eventually(func(g Gomega) {
		h := get(g, host)
		g.Expect(h.Status.ErrorType).To(Equal(metal3v1.RegistrationError))
		g.Expect(h.Status.ErrorMessage).To(ContainSubstring("did not answer"))
		g.Expect(h.Status.ErrorMessage).NotTo(ContainSubstring("refused the credentials"))
		c := meta.FindStatusCondition(h.Status.Conditions, "Manageable")
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Message).To(ContainSubstring("did not answer"))
	}, 60*time.Second).Should(Succeed())
}

// TestIPMIHostUnderDroppedReply provisions an ipmi:// host whose ipmi_sim
// drops the reply to the second chassis control command (the power-on of
// the deploy boot): the command is not carried out and ipmi_sim answers
// nothing for a while, then works through what queued up. The engine
// retries once the BMC answers again and the host is provisioned, booted
// once for the deploy and once from its disk: nothing queued powered the
// machine on behind the engine's back (the driver's own check of that is
// TestLateReplyIsNotActedOn).
func TestIPMIHostUnderDroppedReply(t *testing.T) {
	g := NewWithT(t)
	ns := env.Namespace(t)
	e, lab, bmc := startIPMILab(t)
	plan := fault.MustParse("seed=1,ipmi.drop=@2")
	m := lab.Machines[0]
	bmc.SetFaults(plan.For(m.ID))
	img := newImageServer(t, 1<<20, false)
	host := createHost(t, lab, 0, ns, false, func(h *metal3v1.BareMetalHost) {
		h.Spec.BMC.Address = "ipmi://" + bmc.Addr
		h.Annotations = map[string]string{
			metal3v1.InspectAnnotation:         metal3v1.InspectAnnotationValueDisabled,
			metal3v1.HardwareDetailsAnnotation: `{"cpu":{"arch":"x86_64","count":32},"ramMebibytes":131072}`,
		}
	})
	waitState(t, host, metal3v1.StateAvailable)
	boots := m.Boots()
	update(t, host, func(h *metal3v1.BareMetalHost) { h.Spec.Image = img.Image(); h.Spec.Online = true })
	g.Eventually(func(g Gomega) {
		h := get(g, host)
		g.Expect(h.Status.Provisioning.State).To(Equal(metal3v1.StateProvisioned), "errorMessage: %s", h.Status.ErrorMessage)
	}, 2*time.Minute).Should(Succeed())
	g.Eventually(m.BootedOS, 30*time.Second).Should(Equal(sim.OSDisk))
	g.Expect(plan.Fired(fault.IPMIDrop)).To(Equal(1))
	g.Expect(m.Boots()-boots).To(Equal(2), "one deploy boot and one disk boot: the dropped power-on was not carried out late")
	expectNoCanary(t, e, ns, host)
}
