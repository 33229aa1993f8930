package redfish

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/metalshift/metalshift/hostengine/pkg/egress"
	"github.com/metalshift/metalshift/hostengine/pkg/provisioner"
	rf "github.com/metalshift/metalshift/hostengine/pkg/redfish"
	"github.com/metalshift/metalshift/sim/fault"
	"github.com/metalshift/metalshift/sim/machine"
	simredfish "github.com/metalshift/metalshift/sim/redfish"
)

func newDriver(t *testing.T, virtualMedia bool) (*Driver, *machine.Machine) {
	t.Helper()
	s := simredfish.New("admin", "pw-canary")
	m := machine.New("node-0", "uuid-0", machine.Hardware{CPUArch: "x86_64", CPUCount: 2, RAMMiB: 4096,
		NICs: []machine.NIC{{Name: "eno1", MAC: "52:54:00:aa:bb:01"}}, Disks: []*machine.Disk{{Name: "/dev/sda", SizeBytes: 1 << 30}}})
	s.Add(m)
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	scheme := "redfish+http"
	if virtualMedia {
		scheme = "redfish-virtualmedia+http"
	}
	addr, err := provisioner.ParseAddress(scheme + "://" + strings.TrimPrefix(ts.URL, "http://") + "/redfish/v1/Systems/node-0")
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(addr, false, provisioner.Credentials{Username: "admin", Password: "pw-canary"}, Options{Timeout: 5 * time.Second, TaskPollInterval: 7 * time.Millisecond,
		Egress: egress.Policy{AllowLoopback: true}}) // the simulator listens on loopback
	if err != nil {
		t.Fatal(err)
	}
	return d, m
}

// untilDone calls op until it is no longer Dirty, as the engine does by
// requeueing, and returns how many calls answered Dirty.
func untilDone(g Gomega, op func() (provisioner.Result, error)) int {
	dirty := 0
	for {
		res, err := op()
		g.Expect(err).NotTo(HaveOccurred())
		if !res.Dirty {
			return dirty
		}
		g.Expect(res.RequeueAfter).To(Equal(7*time.Millisecond), "requeue after the task poll interval")
		dirty++
		g.Expect(dirty).To(BeNumerically("<", 10000), "the task never ended")
		time.Sleep(res.RequeueAfter)
	}
}

// TestOperationsBehindTasksReturnAtOnce: a BMC that runs resets as tasks
// (slow power) makes every operation return Dirty at once instead of
// waiting; calling it again polls the task and finishes the operation
// without starting it a second time.
func TestOperationsBehindTasksReturnAtOnce(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	d, m := newDriver(t, true)
	m.SetPowerLag(150 * time.Millisecond)

	res, err := d.PowerOn(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Dirty).To(BeTrue(), "the reset runs behind a task")
	g.Expect(m.PoweredOn()).To(BeFalse(), "returned before the BMC finished")
	g.Expect(untilDone(g, func() (provisioner.Result, error) { return d.PowerOn(ctx) })).To(BeNumerically(">", 0))
	g.Expect(m.PoweredOn()).To(BeTrue())
	g.Expect(d.PowerOn(ctx)).To(Equal(provisioner.Done), "already on: nothing to do")

	boots := m.Boots()
	g.Expect(untilDone(g, func() (provisioner.Result, error) { return d.Reboot(ctx, false) })).To(BeNumerically(">", 0))
	g.Expect(m.Boots()).To(Equal(boots+1), "one reboot, however often the engine called")

	boots = m.Boots()
	img := provisioner.DeployImage{ISOURL: "http://192.0.2.1/deploy.iso"}
	g.Expect(untilDone(g, func() (provisioner.Result, error) { return d.BootDeployImage(ctx, img, true) })).To(BeNumerically(">", 0))
	g.Expect(m.Boots()).To(Equal(boots+1), "one restart into the deploy image")
	g.Expect(m.Media()).To(Equal(img.ISOURL))

	boots = m.Boots()
	g.Expect(untilDone(g, func() (provisioner.Result, error) { return d.BootDisk(ctx, true, false) })).To(BeNumerically(">", 0))
	g.Expect(m.PoweredOn()).To(BeFalse())
	g.Expect(m.Media()).To(BeEmpty())
	g.Expect(m.Override().Target).To(Equal(machine.BootHdd))
	g.Expect(m.Boots()).To(Equal(boots))
}

// TestOperationsWithoutTasksAreDoneAtOnce: a BMC that answers at once
// makes every operation Done on its first call.
func TestOperationsWithoutTasksAreDoneAtOnce(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	d, m := newDriver(t, false)
	g.Expect(d.PowerOn(ctx)).To(Equal(provisioner.Done))
	g.Expect(m.PoweredOn()).To(BeTrue())
	boots := m.Boots()
	g.Expect(d.BootDeployImage(ctx, provisioner.DeployImage{}, false)).To(Equal(provisioner.Done))
	g.Expect(m.Boots()).To(Equal(boots + 1))
	g.Expect(d.BootDisk(ctx, false, true)).To(Equal(provisioner.Done))
	g.Expect(m.PoweredOn()).To(BeTrue())
	g.Expect(d.PowerOff(ctx)).To(Equal(provisioner.Done))
	g.Expect(m.PoweredOn()).To(BeFalse())
}

// TestRefusalsAreNotUnreachable: a refused address and an off-origin
// redirect are what they are, not "the BMC did not answer", which the
// engine would report as a reachability problem.
func TestRefusalsAreNotUnreachable(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := simredfish.New("admin", "pw-canary")
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	addr, err := provisioner.ParseAddress("redfish+http://" + strings.TrimPrefix(ts.URL, "http://") + "/redfish/v1/Systems/node-0")
	g.Expect(err).NotTo(HaveOccurred())
	d, err := New(addr, false, provisioner.Credentials{Username: "admin", Password: "pw-canary"}, Options{})
	g.Expect(err).NotTo(HaveOccurred())
	err = d.Register(ctx)
	g.Expect(errors.Is(err, provisioner.ErrAddressRefused)).To(BeTrue(), "got %v", err)
	g.Expect(errors.Is(err, provisioner.ErrUnreachable)).To(BeFalse())

	elsewhere := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(elsewhere.Close)
	redirecting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(redirecting.Close)
	addr, err = provisioner.ParseAddress("redfish+http://" + strings.TrimPrefix(redirecting.URL, "http://") + "/redfish/v1/Systems/node-0")
	g.Expect(err).NotTo(HaveOccurred())
	d, err = New(addr, false, provisioner.Credentials{Username: "admin", Password: "pw-canary"}, Options{Egress: egress.Policy{AllowLoopback: true}})
	g.Expect(err).NotTo(HaveOccurred())
	err = d.Register(ctx)
	g.Expect(errors.Is(err, rf.ErrOffOrigin)).To(BeTrue(), "got %v", err)
	g.Expect(errors.Is(err, provisioner.ErrUnreachable)).To(BeFalse())
}

// TestStuckTaskFailsTheStep: a task the BMC never finishes (it stays
// Running and never acts) is polled until the task timeout; then the
// operation fails, saying so, and the next call starts it over.
func TestStuckTaskFailsTheStep(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := simredfish.New("admin", "pw-canary")
	m := machine.New("node-0", "uuid-0", machine.Hardware{})
	s.Add(m)
	s.SetPlan(fault.MustParse("redfish.task=@1"))
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	addr, err := provisioner.ParseAddress("redfish+http://" + strings.TrimPrefix(ts.URL, "http://") + "/redfish/v1/Systems/node-0")
	g.Expect(err).NotTo(HaveOccurred())
	clk := clocktesting.NewFakePassiveClock(time.Now())
	d, err := New(addr, false, provisioner.Credentials{Username: "admin", Password: "pw-canary"}, Options{Timeout: 5 * time.Second, Clock: clk,
		Egress: egress.Policy{AllowLoopback: true}})
	g.Expect(err).NotTo(HaveOccurred())

	res, err := d.PowerOn(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Dirty).To(BeTrue(), "the power-on runs behind a task")
	clk.SetTime(clk.Now().Add(DefaultTaskTimeout - time.Second))
	res, err = d.PowerOn(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Dirty).To(BeTrue(), "still within the task timeout")
	res, err = d.PowerOff(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Dirty).To(BeTrue(), "another operation waits for the task too")

	clk.SetTime(clk.Now().Add(time.Second))
	_, err = d.PowerOn(ctx)
	g.Expect(err).To(MatchError(ContainSubstring("still runs 5m0s after it started (the limit is 5m0s)")))
	g.Expect(errors.Is(err, provisioner.ErrUnreachable)).To(BeFalse(), "the BMC answered")
	g.Expect(errors.Is(err, provisioner.ErrTaskStuck)).To(BeTrue())
	g.Expect(m.PoweredOn()).To(BeFalse(), "the stuck task did not act")

	g.Expect(d.PowerOn(ctx)).To(Equal(provisioner.Done), "started over: the second reset is not stuck")
	g.Expect(m.PoweredOn()).To(BeTrue())
}
