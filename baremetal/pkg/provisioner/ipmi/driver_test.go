package ipmi

import (
	"context"
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/metalshift/metalshift/baremetal/pkg/provisioner"
	simipmi "github.com/metalshift/metalshift/sim/ipmi"
	"github.com/metalshift/metalshift/sim/machine"
)

// TestDriverAgainstIPMISim drives a simulated machine through OpenIPMI's
// ipmi_sim with the driver the engine uses for ipmi:// hosts.
func TestDriverAgainstIPMISim(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	m := machine.New("ipmi-1", "0c6b3e9a-0000-4000-8000-000000000002", machine.Hardware{})
	bmc, err := simipmi.Start(m, t.TempDir(), "admin", "Canary-IPMI-Pa55")
	g.Expect(err).NotTo(HaveOccurred())
	defer bmc.Close()

	addr, err := provisioner.ParseAddress("ipmi://" + bmc.Addr)
	g.Expect(err).NotTo(HaveOccurred())
	d, err := New(addr, provisioner.Credentials{Username: "admin", Password: "Canary-IPMI-Pa55"}, 20*time.Second)
	g.Expect(err).NotTo(HaveOccurred())

	g.Expect(d.Register(ctx)).To(Succeed())
	g.Expect(d.PowerOn(ctx)).To(Equal(provisioner.Done))
	g.Expect(m.PoweredOn()).To(BeTrue())
	on, err := d.PowerState(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(on).To(BeTrue())

	boots := m.Boots()
	g.Expect(d.BootDeployImage(ctx, provisioner.DeployImage{}, true)).To(Equal(provisioner.Done))
	g.Expect(m.Boots()).To(Equal(boots+1), "set PXE, then reset")
	g.Expect(d.PowerOff(ctx)).To(Equal(provisioner.Done))
	g.Expect(m.PoweredOn()).To(BeFalse())

	_, err = d.Inspect(ctx)
	g.Expect(errors.Is(err, provisioner.ErrNotSupported)).To(BeTrue())

	bad, _ := New(addr, provisioner.Credentials{Username: "admin", Password: "wrong"}, 10*time.Second)
	err = bad.Register(ctx)
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).NotTo(ContainSubstring("Canary-IPMI-Pa55"))
	g.Expect(errors.Is(err, provisioner.ErrCredentials) || errors.Is(err, provisioner.ErrUnreachable)).To(BeTrue(), "got %v", err)
}
