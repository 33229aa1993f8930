package baremetalhost

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"

	deployapi "github.com/metalshift/metalshift/api/deploy/v1"
	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
	"github.com/metalshift/metalshift/hostengine/deployserver"
	"github.com/metalshift/metalshift/hostengine/pkg/egress"
	"github.com/metalshift/metalshift/hostengine/pkg/provisioner"
	"github.com/metalshift/metalshift/hostengine/pkg/provisioner/fixture"
)

// testClock is the clock of the reconciler under test; scopes read it.
var testClock *clocktesting.FakeClock

func newTestReconciler(t *testing.T) (*Reconciler, *clocktesting.FakeClock) {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC))
	testClock = clk
	ds, err := deployserver.New(deployserver.Options{Key: []byte("0123456789abcdef0123"), BaseURL: "http://engine.example:6180", Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	return &Reconciler{Deploy: ds, Clock: clk, PowerPollInterval: time.Minute}, clk
}

func newTestHost(state metal3v1.ProvisioningState) *metal3v1.BareMetalHost {
	return &metal3v1.BareMetalHost{
		ObjectMeta: metav1.ObjectMeta{Name: "h", Namespace: "ns", UID: "0c6b3e9a-1234-4000-8000-000000000001"},
		Spec: metal3v1.BareMetalHostSpec{
			BMC: metal3v1.BMCDetails{Address: "redfish://bmc/redfish/v1/Systems/1", CredentialsName: "creds"},
		},
		Status: metal3v1.BareMetalHostStatus{Provisioning: metal3v1.ProvisionStatus{State: state}},
	}
}

func scopeFor(host *metal3v1.BareMetalHost, f *fixture.Fixture) *hostScope {
	return &hostScope{host: host, prov: f, now: testClock.Now, creds: &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: "ns", ResourceVersion: "7"}}}
}

func TestHandleRegistering(t *testing.T) {
	tests := []struct {
		name     string
		err      error
		mutate   func(*metal3v1.BareMetalHost)
		want     actionResult
		wantGood bool
	}{
		{name: "new host is inspected", want: actionComplete{next: metal3v1.StateInspecting}, wantGood: true},
		{name: "known hardware skips inspection", mutate: func(h *metal3v1.BareMetalHost) { h.Status.HardwareDetails = &metal3v1.HardwareDetails{} },
			want: actionComplete{next: metal3v1.StatePreparing}, wantGood: true},
		{name: "externally provisioned", mutate: func(h *metal3v1.BareMetalHost) { h.Spec.ExternallyProvisioned = true },
			want: actionComplete{next: metal3v1.StateExternallyProvisioned}, wantGood: true},
		{name: "wrong credentials", err: provisioner.ErrCredentials,
			want: actionError{errType: metal3v1.RegistrationError, msg: "The BMC at redfish://bmc/redfish/v1/Systems/1 refused the credentials in Secret creds: fix username and password there",
				bmc: ReasonBMCCredentialsRefused}},
		{name: "no BMC address", mutate: func(h *metal3v1.BareMetalHost) { h.Spec.BMC.Address = "" }, want: actionComplete{next: metal3v1.StateUnmanaged}},
		{name: "refused by the BMC egress policy", err: fmt.Errorf("connecting to 127.0.0.1:8000: %w", &egress.RefusedError{Addr: netip.MustParseAddr("127.0.0.1"), Class: "loopback"}),
			mutate: func(h *metal3v1.BareMetalHost) {
				h.Spec.BMC.Address = "redfish+http://127.0.0.1:8000/redfish/v1/Systems/1"
			},
			want: actionError{errType: metal3v1.RegistrationError, msg: "spec.bmc.address redfish+http://127.0.0.1:8000/redfish/v1/Systems/1 is refused, nothing was sent to it: " +
				"connecting to 127.0.0.1:8000: 127.0.0.1 is a loopback address, to which the hub's BMC egress policy allows no BMC connections (a hub allows them with --bmc-allow-loopback or --bmc-allowed-networks)"}},
		{name: "a password in the address, with / ? # @ (no webhook checked it)", err: provisioner.ErrUnreachable,
			mutate: func(h *metal3v1.BareMetalHost) {
				h.Spec.BMC.Address = "redfish://admin:Ca/na?ry#Pa@ss@bmc/redfish/v1/Systems/1"
			},
			want: actionError{errType: metal3v1.RegistrationError, msg: "The BMC at redfish://redacted@bmc/redfish/v1/Systems/1 did not answer: check the address and that it is reachable (the BMC did not answer)",
				bmc: ReasonBMCNotAnswering}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			r, _ := newTestReconciler(t)
			host := newTestHost(metal3v1.StateRegistering)
			if tt.mutate != nil {
				tt.mutate(host)
			}
			s := scopeFor(host, &fixture.Fixture{RegisterErr: tt.err})
			g.Expect(r.handleRegistering(context.Background(), s)).To(Equal(tt.want))
			g.Expect(host.Status.GoodCredentials.Reference != nil).To(Equal(tt.wantGood))
		})
	}
}

func TestHandleInspecting(t *testing.T) {
	g := NewWithT(t)
	r, _ := newTestReconciler(t)

	host := newTestHost(metal3v1.StateInspecting)
	s := scopeFor(host, &fixture.Fixture{Hardware: &metal3v1.HardwareDetails{CPU: metal3v1.CPU{Arch: "aarch64", Count: 8}}})
	g.Expect(r.handleInspecting(context.Background(), s)).To(Equal(actionComplete{next: metal3v1.StatePreparing}))
	g.Expect(host.Status.HardwareDetails.CPU.Count).To(Equal(8))
	g.Expect(s.archToSet).To(Equal("aarch64"))

	host = newTestHost(metal3v1.StateInspecting)
	host.Annotations = map[string]string{metal3v1.InspectAnnotation: "disabled", metal3v1.HardwareDetailsAnnotation: `{"ramMebibytes": 4096}`}
	f := &fixture.Fixture{InspectErr: errors.New("must not be called")}
	g.Expect(r.handleInspecting(context.Background(), scopeFor(host, f))).To(Equal(actionComplete{next: metal3v1.StatePreparing}))
	g.Expect(host.Status.HardwareDetails.RAMMebibytes).To(Equal(4096))

	host.Annotations[metal3v1.HardwareDetailsAnnotation] = "{not json"
	res := r.handleInspecting(context.Background(), scopeFor(host, f))
	g.Expect(res).To(BeAssignableToTypeOf(actionError{}))
	g.Expect(res.(actionError).msg).To(ContainSubstring("is not valid hardware details JSON"))

	// A driver without inventory: the agent inspects in-band. The engine
	// first records the request with the start of its boot, then boots the
	// agent, then takes what it reported.
	host = newTestHost(metal3v1.StateInspecting)
	f = &fixture.Fixture{InspectErr: provisioner.ErrNotSupported}
	g.Expect(r.handleInspecting(context.Background(), scopeFor(host, f))).To(BeAssignableToTypeOf(actionWait{}))
	req := host.Status.DeployAgent.Request
	g.Expect(req.Action).To(Equal(deployapi.ActionInspect))
	g.Expect(req.BootStartedAt).NotTo(BeNil(), "the start of the boot is written first")
	g.Expect(f.PoweredOn).To(BeFalse())
	g.Expect(r.handleInspecting(context.Background(), scopeFor(host, f))).To(BeAssignableToTypeOf(actionWait{}))
	g.Expect(req.BootedAt).NotTo(BeNil(), "the agent was booted")
	g.Expect(f.PoweredOn).To(BeTrue())
	host.Status.DeployAgent.Report = &metal3v1.DeployAgentReport{Generation: req.Generation, Phase: deployapi.PhaseDone, Session: "s",
		HardwareDetails: &metal3v1.HardwareDetails{RAMMebibytes: 2048, CPU: metal3v1.CPU{Arch: "x86_64", Count: 2}}}
	g.Expect(r.handleInspecting(context.Background(), scopeFor(host, f))).To(Equal(actionComplete{next: metal3v1.StatePreparing}))
	g.Expect(host.Status.HardwareDetails.RAMMebibytes).To(Equal(2048))
	g.Expect(host.Status.DeployAgent).To(BeNil())
	g.Expect(f.PoweredOn).To(BeFalse(), "the agent does not run on once its request is gone")
	g.Expect(host.Status.PoweredOn).To(BeFalse())
}

func TestHandleProvisioningBootsTheAgentOnce(t *testing.T) {
	g := NewWithT(t)
	r, clk := newTestReconciler(t)
	host := newTestHost(metal3v1.StateProvisioning)
	host.Spec.Online = true
	host.Spec.Image = &metal3v1.Image{URL: "http://images/os.raw", Checksum: "abc"}
	host.Status.OperationHistory.Provision.Start = metav1.NewTime(clk.Now())
	f := &fixture.Fixture{TaskCalls: 2}
	ctx := context.Background()

	// The request and the start of its boot are recorded (and written to
	// the API, in one patch) before anything is booted: a host booting
	// from the network gets its boot script from then on.
	g.Expect(r.handleProvisioning(ctx, scopeFor(host, f))).To(Equal(actionWait{after: time.Millisecond}))
	g.Expect(f.BootedDeploy).To(BeZero())
	g.Expect(f.PoweredOn).To(BeFalse())
	req := host.DeployAgentRequest()
	g.Expect(req).NotTo(BeNil())
	g.Expect(req.Action).To(Equal("deploy"))
	g.Expect(req.Generation).NotTo(BeEmpty())
	g.Expect(req.Image).To(Equal(host.Spec.Image))
	g.Expect(req.BootStartedAt).NotTo(BeNil())
	g.Expect(req.BootedAt).To(BeNil())

	// The BMC works on the boot in the background: the handler returns at
	// once, asking to be called again, and does not record it booted yet.
	for range 2 {
		g.Expect(r.handleProvisioning(ctx, scopeFor(host, f))).To(Equal(actionWait{after: time.Millisecond}))
		g.Expect(f.BootedDeploy).To(BeZero())
		g.Expect(req.BootedAt).To(BeNil())
	}
	g.Expect(r.handleProvisioning(ctx, scopeFor(host, f))).To(Equal(actionWait{after: agentPollInterval}))
	g.Expect(f.BootedDeploy).To(Equal(1))
	g.Expect(f.Media).To(HavePrefix("http://engine.example:6180/images/deploy.iso?host=ns~h~0c6b3e9a1234&gen=" + req.Generation + "&expires="))
	g.Expect(req.BootedAt).NotTo(BeNil())
	g.Expect(host.DeployAgentRequest().Generation).To(Equal(req.Generation), "the same request")

	// A later pass (or another replica, which reads the status) waits.
	clk.Step(10 * time.Minute)
	g.Expect(r.handleProvisioning(ctx, scopeFor(host, f))).To(Equal(actionWait{after: agentPollInterval}))
	g.Expect(f.BootedDeploy).To(Equal(1))

	// An agent that never reports is an error after the timeout, and the
	// next attempt is a new request.
	clk.Step(agentTimeout)
	res := r.handleProvisioning(ctx, scopeFor(host, f))
	g.Expect(res).To(BeAssignableToTypeOf(actionError{}))
	g.Expect(res.(actionError).msg).To(ContainSubstring("did not report"))
	g.Expect(host.Status.DeployAgent).To(BeNil())
	g.Expect(r.handleProvisioning(ctx, scopeFor(host, f))).To(Equal(actionWait{after: time.Millisecond}))
	g.Expect(host.DeployAgentRequest().Generation).NotTo(Equal(req.Generation))
}

// TestHandleProvisioningTakesOverABoot: a replica that finds the deploy
// image booting for the request (another replica died between booting it
// and recording the boot) and its token handed out records the boot and
// does not boot the machine again: the second boot's agent would be
// refused the token. A token asked for again whose holder never reports
// strands the request: after strandedTokenTimeout a new request is made.
func TestHandleProvisioningTakesOverABoot(t *testing.T) {
	g := NewWithT(t)
	r, clk := newTestReconciler(t)
	host := newTestHost(metal3v1.StateProvisioning)
	host.Spec.Online = true
	host.Spec.Image = &metal3v1.Image{URL: "http://images/os.raw", Checksum: "abc"}
	host.Status.OperationHistory.Provision.Start = metav1.NewTime(clk.Now())
	ctx := context.Background()
	died := &fixture.Fixture{TaskCalls: 5}
	for range 3 {
		g.Expect(r.handleProvisioning(ctx, scopeFor(host, died))).To(Equal(actionWait{after: time.Millisecond}))
	}
	req := host.DeployAgentRequest()
	g.Expect(req.BootStartedAt).NotTo(BeNil())
	g.Expect(req.BootedAt).To(BeNil(), "the replica died with the BMC's task running")

	// The machine booted anyway, and its agent got the token.
	issued := metav1.NewTime(clk.Now())
	host.Status.DeployAgent.Token = &metal3v1.DeployAgentToken{Generation: req.Generation, SHA256: strings.Repeat("0", 64), Session: "boot-1", Source: "192.0.2.10:4000", IssuedAt: issued}
	next := &fixture.Fixture{}
	g.Expect(r.handleProvisioning(ctx, scopeFor(host, next))).To(Equal(actionWait{after: agentPollInterval}))
	g.Expect(next.BootedDeploy).To(BeZero(), "not booted again")
	g.Expect(req.BootedAt).NotTo(BeNil())
	g.Expect(host.DeployAgentRequest().Generation).To(Equal(req.Generation))

	// The agent reports within a poll; one whose token was asked for again
	// by another boot and that never reports strands the request.
	host.Status.DeployAgent.Token.Refusals = 1
	host.Status.DeployAgent.Token.LastRefusalSource = "192.0.2.10:4001"
	clk.Step(strandedTokenTimeout - time.Second)
	g.Expect(r.handleProvisioning(ctx, scopeFor(host, next))).To(Equal(actionWait{after: agentPollInterval}))
	clk.Step(time.Second)
	res := r.handleProvisioning(ctx, scopeFor(host, next))
	g.Expect(res).To(BeAssignableToTypeOf(actionError{}))
	g.Expect(res.(actionError).msg).To(And(ContainSubstring("went to 192.0.2.10:4000"), ContainSubstring("asked for it from 192.0.2.10:4001"), ContainSubstring("new request")))
	g.Expect(host.Status.DeployAgent).To(BeNil())
	g.Expect(r.handleProvisioning(ctx, scopeFor(host, next))).To(Equal(actionWait{after: time.Millisecond}))
	g.Expect(host.DeployAgentRequest().Generation).NotTo(Equal(req.Generation))
}

func TestHandleProvisioningActsOnTheReportInTheStatus(t *testing.T) {
	g := NewWithT(t)
	r, clk := newTestReconciler(t)
	host := newTestHost(metal3v1.StateProvisioning)
	host.Spec.Online = true
	host.Spec.Image = &metal3v1.Image{URL: "http://images/os.raw", Checksum: "abc"}
	// The machine is on: the running agent's report below is of a boot a
	// replica that died started.
	f := &fixture.Fixture{PoweredOn: true}
	ctx := context.Background()
	g.Expect(r.handleProvisioning(ctx, scopeFor(host, f))).To(Equal(actionWait{after: time.Millisecond}))
	gen := host.DeployAgentRequest().Generation
	now := metav1.NewTime(clk.Now())

	// An engine that finds the request claimed by a running agent (it was
	// booted by a replica that died before recording it) never boots it
	// again: the disk is written once.
	host.Status.DeployAgent.Report = &metal3v1.DeployAgentReport{Generation: gen, Phase: "running", Session: "s1", Time: now}
	g.Expect(r.handleProvisioning(ctx, scopeFor(host, f))).To(Equal(actionWait{after: agentPollInterval}))
	g.Expect(f.BootedDeploy).To(BeZero())

	// A report about another request is not this request's.
	host.Status.DeployAgent.Report = &metal3v1.DeployAgentReport{Generation: "old", Phase: "done", Session: "s0", Time: now}
	g.Expect(r.handleProvisioning(ctx, scopeFor(host, f))).To(Equal(actionWait{after: agentPollInterval}))
	g.Expect(f.BootedDeploy).To(Equal(1))
	g.Expect(host.Status.Provisioning.Image.URL).To(BeEmpty())

	host.Status.DeployAgent.Report = &metal3v1.DeployAgentReport{Generation: gen, Phase: "done", RootDevice: "/dev/sda", Session: "s1", Time: now}
	g.Expect(r.handleProvisioning(ctx, scopeFor(host, f))).To(Equal(actionComplete{next: metal3v1.StateProvisioned}))
	g.Expect(f.BootedDisk).To(Equal(1))
	g.Expect(host.Status.Provisioning.Image).To(Equal(*host.Spec.Image))
	g.Expect(host.Status.DeployAgent).To(BeNil(), "the finished request is dropped")
}

// TestHandleProvisioningPowerLoss: a machine found off while the agent
// that claimed the request should be writing the image lost the request:
// the engine drops it at once (not after agentTimeout), says so, and
// makes a new one. A machine found off right after the boot, before its
// agent claimed the request, is given bootPowerGrace (a BMC reports the
// power late).
func TestHandleProvisioningPowerLoss(t *testing.T) {
	g := NewWithT(t)
	r, clk := newTestReconciler(t)
	host := newTestHost(metal3v1.StateProvisioning)
	host.Spec.Online = true
	host.Spec.Image = &metal3v1.Image{URL: "http://images/os.raw", Checksum: "abc"}
	f := &fixture.Fixture{}
	ctx := context.Background()
	g.Expect(r.handleProvisioning(ctx, scopeFor(host, f))).To(Equal(actionWait{after: time.Millisecond}), "the request and the start of its boot")
	g.Expect(r.handleProvisioning(ctx, scopeFor(host, f))).To(Equal(actionWait{after: agentPollInterval}))
	req := host.DeployAgentRequest()
	g.Expect(req.BootedAt).NotTo(BeNil())

	// Off before the agent claimed the request: within the grace it waits.
	f.PoweredOn = false
	clk.Step(bootPowerGrace - time.Second)
	g.Expect(r.handleProvisioning(ctx, scopeFor(host, f))).To(Equal(actionWait{after: agentPollInterval}))
	f.PoweredOn = true

	// The agent claimed the request and writes; the power goes.
	host.Status.DeployAgent.Report = &metal3v1.DeployAgentReport{Generation: req.Generation, Phase: deployapi.PhaseRunning, Session: "s1", Time: metav1.NewTime(clk.Now())}
	g.Expect(r.handleProvisioning(ctx, scopeFor(host, f))).To(Equal(actionWait{after: agentPollInterval}))
	f.PoweredOn = false
	clk.Step(agentPollInterval)
	res := r.handleProvisioning(ctx, scopeFor(host, f))
	g.Expect(res).To(BeAssignableToTypeOf(actionError{}))
	g.Expect(res.(actionError).msg).To(And(ContainSubstring("powered off"), ContainSubstring("request "+req.Generation), ContainSubstring("agent is lost"),
		ContainSubstring("(it claimed the request)"), ContainSubstring("writing the image again from the start")))
	g.Expect(host.Status.DeployAgent).To(BeNil(), "the lost request is dropped")
	c := meta.FindStatusCondition(host.Status.Conditions, DeployAgentBootedCondition)
	g.Expect(c.Reason).To(Equal("AgentLost"))
	g.Expect(host.Status.PoweredOn).To(BeFalse())

	// The next pass makes a new request and boots the agent for it.
	g.Expect(r.handleProvisioning(ctx, scopeFor(host, f))).To(Equal(actionWait{after: time.Millisecond}))
	g.Expect(host.DeployAgentRequest().Generation).NotTo(Equal(req.Generation))
	g.Expect(r.handleProvisioning(ctx, scopeFor(host, f))).To(Equal(actionWait{after: agentPollInterval}))
	g.Expect(f.BootedDeploy).To(Equal(2))

	// A machine that stays off after its boot, its agent never claiming
	// the request, is lost after the grace.
	f.PoweredOn = false
	clk.Step(bootPowerGrace)
	res = r.handleProvisioning(ctx, scopeFor(host, f))
	g.Expect(res).To(BeAssignableToTypeOf(actionError{}))
	g.Expect(res.(actionError).msg).To(ContainSubstring("(it was booted at 2026-11-21T12:"))

	// A BMC that does not answer is no evidence: the agent may run.
	host.Status.DeployAgent = nil
	f.PoweredOn = true
	g.Expect(r.handleProvisioning(ctx, scopeFor(host, f))).To(Equal(actionWait{after: time.Millisecond}))
	g.Expect(r.handleProvisioning(ctx, scopeFor(host, f))).To(Equal(actionWait{after: agentPollInterval}))
	req = host.DeployAgentRequest()
	host.Status.DeployAgent.Report = &metal3v1.DeployAgentReport{Generation: req.Generation, Phase: deployapi.PhaseRunning, Session: "s2", Time: metav1.NewTime(clk.Now())}
	f.PowerErr = errors.New("BMC unreachable")
	g.Expect(r.handleProvisioning(ctx, scopeFor(host, f))).To(Equal(actionWait{after: agentPollInterval}))
	g.Expect(host.DeployAgentRequest().Generation).To(Equal(req.Generation))
}

func TestHandleProvisioningRefusesSecretsOfAnotherNamespace(t *testing.T) {
	g := NewWithT(t)
	r, _ := newTestReconciler(t)
	host := newTestHost(metal3v1.StateProvisioning)
	host.Spec.Image = &metal3v1.Image{URL: "http://images/os.raw"}
	host.Spec.UserData = &corev1.SecretReference{Name: "loot", Namespace: "other"}
	f := &fixture.Fixture{}
	res := r.handleProvisioning(context.Background(), scopeFor(host, f))
	g.Expect(res).To(BeAssignableToTypeOf(actionError{}))
	g.Expect(res.(actionError).msg).To(ContainSubstring(`spec.userData.namespace: Forbidden: must be the BareMetalHost's namespace "ns"`))
	g.Expect(f.BootedDeploy).To(BeZero())
	g.Expect(host.Status.DeployAgent).To(BeNil())
}

func TestStableStates(t *testing.T) {
	tests := []struct {
		name      string
		state     metal3v1.ProvisioningState
		mutate    func(*metal3v1.BareMetalHost)
		poweredOn bool
		want      actionResult
		wantPower bool
	}{
		{name: "available host wanted online is powered on", state: metal3v1.StateAvailable,
			mutate: func(h *metal3v1.BareMetalHost) { h.Spec.Online = true }, want: actionWait{after: time.Minute}, wantPower: true},
		{name: "available host wanted offline is powered off", state: metal3v1.StateAvailable,
			poweredOn: true, want: actionWait{after: time.Minute}, wantPower: false},
		{name: "an image starts provisioning", state: metal3v1.StateAvailable,
			mutate: func(h *metal3v1.BareMetalHost) { h.Spec.Online = true; h.Spec.Image = &metal3v1.Image{URL: "u"} },
			want:   actionComplete{next: metal3v1.StateProvisioning}},
		{name: "provisioned host whose image changed is deprovisioned", state: metal3v1.StateProvisioned,
			mutate: func(h *metal3v1.BareMetalHost) {
				h.Spec.Image = &metal3v1.Image{URL: "new"}
				h.Status.Provisioning.Image = metal3v1.Image{URL: "old"}
			},
			want: actionComplete{next: metal3v1.StateDeprovisioning}},
		{name: "externally provisioned flag cleared", state: metal3v1.StateExternallyProvisioned,
			want: actionComplete{next: metal3v1.StatePreparing}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			r, _ := newTestReconciler(t)
			host := newTestHost(tt.state)
			if tt.mutate != nil {
				tt.mutate(host)
			}
			f := &fixture.Fixture{PoweredOn: tt.poweredOn}
			g.Expect(r.stateMachine()[tt.state](context.Background(), scopeFor(host, f))).To(Equal(tt.want))
			if _, isWait := tt.want.(actionWait); isWait {
				g.Expect(f.PoweredOn).To(Equal(tt.wantPower))
				g.Expect(host.Status.PoweredOn).To(Equal(tt.wantPower))
			}
		})
	}
}

func TestDeprovisioningWithoutCleaning(t *testing.T) {
	g := NewWithT(t)
	r, _ := newTestReconciler(t)
	host := newTestHost(metal3v1.StateDeprovisioning)
	host.Spec.AutomatedCleaningMode = metal3v1.CleaningModeDisabled
	host.Status.Provisioning.Image = metal3v1.Image{URL: "old"}
	f := &fixture.Fixture{PoweredOn: true}
	g.Expect(r.handleDeprovisioning(context.Background(), scopeFor(host, f))).To(Equal(actionComplete{next: metal3v1.StateAvailable}))
	g.Expect(f.BootedDeploy).To(BeZero(), "no agent without cleaning")
	g.Expect(f.PoweredOn).To(BeFalse())
	g.Expect(host.Status.Provisioning.Image.URL).To(BeEmpty())
}

func TestEveryStateHasAHandlerAndTransitions(t *testing.T) {
	g := NewWithT(t)
	r, _ := newTestReconciler(t)
	m := r.stateMachine()
	for state := range allowedTransitions {
		g.Expect(m).To(HaveKey(state))
	}
	g.Expect(checkTransition(metal3v1.StateAvailable, metal3v1.StateProvisioned)).To(MatchError(errIllegalTransition))
	g.Expect(checkTransition(metal3v1.StateProvisioned, metal3v1.StatePoweringOffBeforeDelete)).To(Succeed())
}

func TestBackoff(t *testing.T) {
	g := NewWithT(t)
	for count, want := range map[int]time.Duration{0: 2 * time.Second, 1: 2 * time.Second, 2: 4 * time.Second, 5: 32 * time.Second, 9: 5 * time.Minute, 100: 5 * time.Minute} {
		g.Expect(backoff(2*time.Second, 5*time.Minute, count)).To(Equal(want), "count %d", count)
	}
}

func TestSetConditions(t *testing.T) {
	tests := []struct {
		name       string
		status     metal3v1.BareMetalHostStatus
		manageable metav1.ConditionStatus
		reason     string
	}{
		{name: "registering", manageable: metav1.ConditionFalse, reason: ReasonRegistering},
		{name: "registration error", status: metal3v1.BareMetalHostStatus{ErrorType: metal3v1.RegistrationError, ErrorMessage: "fix it"},
			manageable: metav1.ConditionFalse, reason: ReasonRegistrationFailed},
		{name: "detached", status: metal3v1.BareMetalHostStatus{OperationalStatus: metal3v1.OperationalStatusDetached},
			manageable: metav1.ConditionFalse, reason: ReasonDetached},
		{name: "manageable", status: metal3v1.BareMetalHostStatus{GoodCredentials: metal3v1.CredentialsStatus{Reference: &corev1.SecretReference{Name: "c"}}},
			manageable: metav1.ConditionTrue, reason: ReasonManageable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			h := &metal3v1.BareMetalHost{Status: tt.status}
			setConditions(h)
			var got *metav1.Condition
			for i := range h.Status.Conditions {
				if h.Status.Conditions[i].Type == ManageableCondition {
					got = &h.Status.Conditions[i]
				}
			}
			g.Expect(got).NotTo(BeNil())
			g.Expect(got.Status).To(Equal(tt.manageable))
			g.Expect(got.Reason).To(Equal(tt.reason))
		})
	}
}

func TestFirstWithBootMAC(t *testing.T) {
	at := func(sec int64) metav1.Time { return metav1.NewTime(time.Unix(1_800_000_000+sec, 0)) }
	bmh := func(ns, name, uid, mac string, created metav1.Time) metal3v1.BareMetalHost {
		return metal3v1.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid), CreationTimestamp: created},
			Spec: metal3v1.BareMetalHostSpec{BootMACAddress: mac}}
	}
	tests := []struct {
		name  string
		host  metal3v1.BareMetalHost
		hosts []metal3v1.BareMetalHost
		want  string
	}{
		{name: "alone", host: bmh("a", "h", "1", "52:54:00:00:00:01", at(0)),
			hosts: []metal3v1.BareMetalHost{bmh("a", "h", "1", "52:54:00:00:00:01", at(0))}},
		{name: "another MAC", host: bmh("a", "h", "1", "52:54:00:00:00:01", at(5)),
			hosts: []metal3v1.BareMetalHost{bmh("b", "x", "2", "52:54:00:00:00:02", at(0))}},
		{name: "the older host wins", host: bmh("a", "h", "1", "52:54:00:00:00:01", at(5)),
			hosts: []metal3v1.BareMetalHost{bmh("b", "x", "2", "52:54:00:00:00:01", at(0))}, want: "b/x"},
		{name: "letter case does not matter", host: bmh("a", "h", "1", "52:54:00:00:00:0A", at(5)),
			hosts: []metal3v1.BareMetalHost{bmh("b", "x", "2", "52:54:00:00:00:0a", at(0))}, want: "b/x"},
		{name: "a newer host does not stop the first", host: bmh("a", "h", "1", "52:54:00:00:00:01", at(0)),
			hosts: []metal3v1.BareMetalHost{bmh("b", "x", "2", "52:54:00:00:00:01", at(5))}},
		{name: "the same second: namespace, then name", host: bmh("b", "h", "1", "52:54:00:00:00:01", at(0)),
			hosts: []metal3v1.BareMetalHost{bmh("a", "z", "2", "52:54:00:00:00:01", at(0)), bmh("a", "y", "3", "52:54:00:00:00:01", at(0))}, want: "a/y"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got := firstWithBootMAC(&tt.host, tt.hosts)
			if tt.want == "" {
				g.Expect(got).To(BeNil())
				return
			}
			g.Expect(got).NotTo(BeNil())
			g.Expect(got.Namespace + "/" + got.Name).To(Equal(tt.want))
		})
	}
}

func TestTokenCondition(t *testing.T) {
	issued := metav1.NewTime(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	withToken := func(tok *metal3v1.DeployAgentToken) metal3v1.BareMetalHostStatus {
		return metal3v1.BareMetalHostStatus{DeployAgent: &metal3v1.DeployAgentStatus{Request: &metal3v1.DeployAgentRequest{Action: "deploy", Generation: "g2"}, Token: tok}}
	}
	tests := []struct {
		name    string
		status  metal3v1.BareMetalHostStatus
		want    metav1.ConditionStatus
		reason  string
		message string
	}{
		{name: "no request: unchanged"},
		{name: "not asked for yet", status: withToken(nil), want: metav1.ConditionFalse, reason: ReasonTokenNotIssued,
			message: "The deploy agent of request g2 has not asked for its token yet"},
		{name: "another request's token", status: withToken(&metal3v1.DeployAgentToken{Generation: "g1", IssuedAt: issued}),
			want: metav1.ConditionFalse, reason: ReasonTokenNotIssued},
		{name: "handed out", status: withToken(&metal3v1.DeployAgentToken{Generation: "g2", Source: "192.0.2.7:4242", IssuedAt: issued}),
			want: metav1.ConditionTrue, reason: ReasonTokenIssued, message: "The agent token of request g2 was handed out to 192.0.2.7:4242 at 2030-01-02T03:04:05Z"},
		{name: "asked for again", status: withToken(&metal3v1.DeployAgentToken{Generation: "g2", Source: "192.0.2.7:4242", IssuedAt: issued,
			Refusals: 2, LastRefusalTime: &issued, LastRefusalSource: "198.51.100.9:1"}),
			want: metav1.ConditionFalse, reason: ReasonTokenAskedAgain,
			message: "The agent token of request g2 was handed out to 192.0.2.7:4242 at 2030-01-02T03:04:05Z and asked for again 2 times since, " +
				"last from 198.51.100.9:1 at 2030-01-02T03:04:05Z. Another machine has this request's ticket"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			h := &metal3v1.BareMetalHost{Status: tt.status}
			h.Status.Conditions = []metav1.Condition{{Type: DeployAgentTokenCondition, Status: metav1.ConditionFalse, Reason: "Earlier"}}
			setConditions(h)
			got := meta.FindStatusCondition(h.Status.Conditions, DeployAgentTokenCondition)
			g.Expect(got).NotTo(BeNil())
			if tt.reason == "" {
				g.Expect(got.Reason).To(Equal("Earlier"), "what it said about the last request")
				return
			}
			g.Expect(got.Status).To(Equal(tt.want))
			g.Expect(got.Reason).To(Equal(tt.reason))
			g.Expect(got.Message).To(HavePrefix(tt.message))
		})
	}
}

// TestStateChangedEvent: the state change of one reconcile, which its
// status write stores, is one StateChanged Event naming the state left
// and the state entered.
func TestStateChangedEvent(t *testing.T) {
	tests := []struct {
		name    string
		changed *transition
		want    []string
	}{
		{name: "no change, no Event"},
		{name: "a new host", changed: &transition{from: metal3v1.StateNone, to: metal3v1.StateRegistering},
			want: []string{`Normal StateChanged Host went from "new" to "registering"`}},
		{name: "one change", changed: &transition{from: metal3v1.StateProvisioning, to: metal3v1.StateProvisioned},
			want: []string{`Normal StateChanged Host went from "provisioning" to "provisioned"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			rec := events.NewFakeRecorder(10)
			s := &hostScope{host: newTestHost(metal3v1.StateAvailable), recorder: rec, changed: tt.changed}
			s.stateChangedEvent()
			close(rec.Events)
			var got []string
			for e := range rec.Events {
				got = append(got, e)
			}
			g.Expect(got).To(Equal(tt.want))
		})
	}
}
