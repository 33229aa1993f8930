package ipmi

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/metalshift/metalshift/hostengine/pkg/egress"
	"github.com/metalshift/metalshift/hostengine/pkg/provisioner"
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
	lab := Options{Timeout: 20 * time.Second, Egress: egress.Policy{AllowLoopback: true}} // ipmi_sim listens on loopback
	d, err := New(addr, provisioner.Credentials{Username: "admin", Password: "Canary-IPMI-Pa55"}, lab)
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

	lab.Timeout = 10 * time.Second
	bad, _ := New(addr, provisioner.Credentials{Username: "admin", Password: "wrong"}, lab)
	err = bad.Register(ctx)
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).NotTo(ContainSubstring("Canary-IPMI-Pa55"))
	g.Expect(errors.Is(err, provisioner.ErrCredentials) || errors.Is(err, provisioner.ErrUnreachable)).To(BeTrue(), "got %v", err)
}

// TestEgressPolicyRefusesBeforeAnyDatagram: with the production policy, a
// BMC on loopback (by address or by a name resolving there) gets no
// datagram, so nothing of the login: the first datagram the "BMC" reads
// is one sent after the refusals.
func TestEgressPolicyRefusesBeforeAnyDatagram(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	bmc, err := net.ListenPacket("udp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	defer bmc.Close()
	_, port, _ := net.SplitHostPort(bmc.LocalAddr().String())
	for _, address := range []string{"ipmi://" + bmc.LocalAddr().String(), "ipmi://localhost:" + port} {
		addr, err := provisioner.ParseAddress(address)
		g.Expect(err).NotTo(HaveOccurred())
		d, err := New(addr, provisioner.Credentials{Username: "admin", Password: "Canary-IPMI-Pa55"}, Options{Timeout: 5 * time.Second})
		g.Expect(err).NotTo(HaveOccurred())
		err = d.Register(ctx)
		g.Expect(errors.Is(err, provisioner.ErrAddressRefused)).To(BeTrue(), "%s: got %v", address, err)
		g.Expect(err.Error()).To(ContainSubstring("is a loopback address"))
		g.Expect(err.Error()).NotTo(ContainSubstring("Canary-IPMI-Pa55"))
	}

	probe, err := net.Dial("udp", bmc.LocalAddr().String())
	g.Expect(err).NotTo(HaveOccurred())
	defer probe.Close()
	_, err = probe.Write([]byte("probe"))
	g.Expect(err).NotTo(HaveOccurred())
	buf := make([]byte, 512)
	g.Expect(bmc.SetReadDeadline(time.Now().Add(5 * time.Second))).To(Succeed())
	n, from, err := bmc.ReadFrom(buf)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(from.String()).To(Equal(probe.LocalAddr().String()), "the first datagram is the probe's")
	g.Expect(string(buf[:n])).To(Equal("probe"))
}
