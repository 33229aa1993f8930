package ipmi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	ipmiclient "github.com/bougou/go-ipmi/pkg/client"
	ipmitypes "github.com/bougou/go-ipmi/pkg/types"

	. "github.com/onsi/gomega"

	"github.com/metalshift/metalshift/hostengine/pkg/egress"
	"github.com/metalshift/metalshift/hostengine/pkg/provisioner"
	"github.com/metalshift/metalshift/sim/fault"
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
	g.Expect(errors.Is(err, provisioner.ErrCredentials)).To(BeTrue(), "got %v", err)
	g.Expect(errors.Is(err, provisioner.ErrUnreachable)).To(BeFalse(), "got %v", err)
}

// TestSilentBMCIsUnreachable: a BMC that never answers, or whose port is
// closed, did not answer; it did not refuse the credentials (go-ipmi's
// message for a session setup that timed out names "Authentication
// Capabilities" or "rakp1", which read as a refusal before).
func TestSilentBMCIsUnreachable(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	silent, err := net.ListenPacket("udp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	defer silent.Close()
	closed, err := net.ListenPacket("udp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	closedAddr := closed.LocalAddr().String()
	g.Expect(closed.Close()).To(Succeed())

	for _, bmc := range []string{silent.LocalAddr().String(), closedAddr} {
		addr, err := provisioner.ParseAddress("ipmi://" + bmc)
		g.Expect(err).NotTo(HaveOccurred())
		d, err := New(addr, provisioner.Credentials{Username: "admin", Password: "Canary-IPMI-Pa55"}, Options{Timeout: 4 * time.Second, Egress: egress.Policy{AllowLoopback: true}})
		g.Expect(err).NotTo(HaveOccurred())
		err = d.Register(ctx)
		g.Expect(errors.Is(err, provisioner.ErrUnreachable)).To(BeTrue(), "%s: got %v", bmc, err)
		g.Expect(errors.Is(err, provisioner.ErrCredentials)).To(BeFalse(), "%s: got %v", bmc, err)
		g.Expect(err.Error()).To(HavePrefix(provisioner.ErrUnreachable.Error()))
	}
}

// TestTranslate: the BMC not answering wins over the words of the step
// that waited for it; only the BMC's refusals are about the credentials.
func TestTranslate(t *testing.T) {
	timeout := &net.OpError{Op: "read", Net: "udp", Err: os.ErrDeadlineExceeded}
	for _, c := range []struct {
		err  error
		want error
	}{
		{fmt.Errorf("cmd: Get Channel Authentication Capabilities failed, err: %w", timeout), provisioner.ErrUnreachable},
		{errors.New("connect20 failed after try all cipher suite ids ([3]), errs: \ncmd: rakp1 failed with cipher suite id (3), err: IPMI LAN: UDP read timed out waiting for BMC response after 3 attempt(s): read udp: i/o timeout"), provisioner.ErrUnreachable},
		{fmt.Errorf("read udp: %w", syscall.ECONNREFUSED), provisioner.ErrUnreachable},
		{fmt.Errorf("validate rakp2 message failed, err: RAKP2 authentication code mismatch: %w", ipmiclient.ErrRAKPAuthentication), provisioner.ErrCredentials},
		{errors.New("connect20 failed after try all cipher suite ids ([3]), errs: \ncmd: rakp1 failed with cipher suite id (3), err: validate rakp2 message failed, err: RMCP+ status 0x0d: Unauthorized name"), provisioner.ErrCredentials},
		{ipmitypes.NewRmcpStatusError(ipmitypes.RmcpStatusCodeUnauthorizedName), provisioner.ErrCredentials},
	} {
		got := translate(c.err)
		if !errors.Is(got, c.want) {
			t.Errorf("translate(%q) = %v, want %v", c.err, got, c.want)
		}
	}
	if err := errors.New("cc: 0xff, description: Unspecified error"); translate(err) != err {
		t.Errorf("an error completion code is neither: got %v", translate(err))
	}
}

// TestLateReplyIsNotActedOn: a chassis control whose reply the BMC drops
// (ipmi_sim holds it, answering nothing, then works through what queued
// up) fails as unreachable, and the driver sent it once: no copy of it is
// left queued for the BMC to carry out after the driver gave up. The next
// call reads the state before it acts.
func TestLateReplyIsNotActedOn(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	m := machine.New("ipmi-3", "0c6b3e9a-0000-4000-8000-000000000004", machine.Hardware{})
	bmc, err := simipmi.Start(m, t.TempDir(), "admin", "Canary-IPMI-Pa55")
	g.Expect(err).NotTo(HaveOccurred())
	defer bmc.Close()
	plan := fault.MustParse("ipmi.drop=@1")
	bmc.SetFaults(plan.For(m.ID))
	addr, err := provisioner.ParseAddress("ipmi://" + bmc.Addr)
	g.Expect(err).NotTo(HaveOccurred())
	d, err := New(addr, provisioner.Credentials{Username: "admin", Password: "Canary-IPMI-Pa55"}, Options{Timeout: 20 * time.Second, Egress: egress.Policy{AllowLoopback: true}})
	g.Expect(err).NotTo(HaveOccurred())

	_, err = d.PowerOn(ctx)
	g.Expect(errors.Is(err, provisioner.ErrUnreachable)).To(BeTrue(), "got %v", err)
	g.Expect(plan.Fired(fault.IPMIDrop)).To(Equal(1))
	// Once the BMC answers again, it has worked through what queued up.
	g.Eventually(func() error { _, err := d.PowerState(ctx); return err }, 2*simipmi.DropFor, time.Second).Should(Succeed())
	g.Expect(m.PoweredOn()).To(BeFalse(), "no second copy of the dropped power-on was carried out")

	g.Expect(d.PowerOn(ctx)).To(Equal(provisioner.Done))
	g.Expect(m.PoweredOn()).To(BeTrue())
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

// TestUnappliedCommandsAreNotDone: a BMC that acknowledges a command
// without carrying it out (fault.IPMIIgnore) does not make the driver
// report it done: a boot device that did not stick fails the deploy boot
// before the machine is restarted (it would boot its disk, and the deploy
// agent would never call), and a power-on that did not happen stays in
// progress; called again, each goes through.
func TestUnappliedCommandsAreNotDone(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	m := machine.New("ipmi-4", "0c6b3e9a-0000-4000-8000-000000000005", machine.Hardware{})
	bmc, err := simipmi.Start(m, t.TempDir(), "admin", "Canary-IPMI-Pa55")
	g.Expect(err).NotTo(HaveOccurred())
	defer bmc.Close()
	plan := fault.MustParse("ipmi.ignore=1-2")
	bmc.SetFaults(plan.For(m.ID))
	addr, err := provisioner.ParseAddress("ipmi://" + bmc.Addr)
	g.Expect(err).NotTo(HaveOccurred())
	d, err := New(addr, provisioner.Credentials{Username: "admin", Password: "Canary-IPMI-Pa55"}, Options{Timeout: 20 * time.Second, Egress: egress.Policy{AllowLoopback: true}})
	g.Expect(err).NotTo(HaveOccurred())

	_, err = d.BootDeployImage(ctx, provisioner.DeployImage{}, true)
	g.Expect(err).To(MatchError(ContainSubstring("the BMC accepted boot device")))
	g.Expect(m.Boots()).To(BeZero(), "not restarted")

	res, err := d.PowerOn(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Dirty).To(BeTrue(), "acknowledged, still off")
	g.Expect(m.PoweredOn()).To(BeFalse())
	g.Expect(plan.Fired(fault.IPMIIgnore)).To(Equal(2))

	g.Expect(d.PowerOn(ctx)).To(Equal(provisioner.Done), "asked again")
	g.Expect(m.PoweredOn()).To(BeTrue())
	boots := m.Boots()
	g.Expect(d.BootDeployImage(ctx, provisioner.DeployImage{}, true)).To(Equal(provisioner.Done))
	g.Expect(m.Boots()).To(Equal(boots+1), "set PXE, read it back, then reset")
	g.Expect(m.Override().Target).To(Equal(machine.BootNone), "the one-time PXE boot was used")
}
