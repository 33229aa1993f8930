package hostengine

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
	"github.com/metalshift/metalshift/sim"
	"github.com/metalshift/metalshift/sim/fault"
)

// provisionUnder provisions one virtual-media host whose lab follows the
// fault plan, and checks that the image is on its disk and the installed
// OS booted.
func provisionUnder(t *testing.T, plan *fault.Plan) {
	t.Helper()
	g := NewWithT(t)
	ns := env.Namespace(t)
	e := startEngine(t, "", nil, nil)
	lab := startLab(t, e, 1)
	// Set before any host exists: no machine has booted, no BMC was asked.
	lab.BMC.SetPlan(plan)
	lab.Firmware.Faults = plan
	t.Logf("fault plan: %s", plan)
	m := lab.Machines[0]
	img := newImageServer(t, 1<<20, false)

	host := createHost(t, lab, 0, ns, true, nil)
	waitState(t, host, metal3v1.StateAvailable)
	update(t, host, func(h *metal3v1.BareMetalHost) { h.Spec.Image = img.Image(); h.Spec.Online = true })
	waitState(t, host, metal3v1.StateProvisioned)
	g.Eventually(m.BootedOS, 30*time.Second).Should(Equal(sim.OSDisk))
	written := make([]byte, len(img.Data))
	_, _ = m.DiskByName("/dev/sda").ReadAt(written, 0)
	g.Expect(written).To(Equal(img.Data))
	expectNoCanary(t, e, ns, host)
}

// TestProvisionUnderRedfish5xx: the engine provisions a host through a BMC
// that answers a fifth of its requests with 500.
func TestProvisionUnderRedfish5xx(t *testing.T) {
	plan := fault.MustParse("seed=20,redfish.5xx=20%")
	provisionUnder(t, plan)
	NewWithT(t).Expect(plan.Fired(fault.Redfish5xx)).To(BeNumerically(">", 0), "the BMC did fail requests")
}

// TestProvisionUnderMixedFaults: the engine provisions a host whose BMC
// resets connections, fails requests, changes power late and fails the
// first virtual-media insert, and whose network drops for a few seconds
// while its agent runs.
func TestProvisionUnderMixedFaults(t *testing.T) {
	plan := fault.MustParse("seed=3,redfish.5xx=10%,redfish.reset=5%,redfish.slowpower=@1:2s,redfish.media=@1,machine.netdrop=@3:5s")
	provisionUnder(t, plan)
	g := NewWithT(t)
	for _, k := range []fault.Kind{fault.Redfish5xx, fault.RedfishReset, fault.RedfishSlowPower, fault.RedfishMedia, fault.MachineNetDrop} {
		g.Expect(plan.Fired(k)).To(BeNumerically(">", 0), "%s fired", k)
	}
}
