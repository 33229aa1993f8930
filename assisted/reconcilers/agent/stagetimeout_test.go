package agent_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	assistedapi "github.com/metalshift/metalshift/api/assisted/v2"
	hiveextv1 "github.com/metalshift/metalshift/api/hiveext/v1beta1"
	"github.com/metalshift/metalshift/assisted/pkg/hoststate"
	"github.com/metalshift/metalshift/assisted/pkg/record"
	"github.com/metalshift/metalshift/assisted/reconcilers/agent"
)

// The timeouts of the reconciler these tests call: shorter than upstream's,
// which the running reconciler keeps, so that it never times a host out
// before the one under test does.
const (
	testStart = 5 * time.Minute
	testStage = 10 * time.Minute
)

// shortTimeouts limits the start to testStart and every stage to
// testStage.
func shortTimeouts() hoststate.Timeouts {
	stages := map[assistedapi.HostStage]time.Duration{}
	for _, s := range hoststate.Stages("master", true, true) {
		stages[s] = testStage
	}
	return hoststate.Timeouts{Start: testStart, Stages: stages}
}

// installing is a host of the single-node cluster sno in ns whose install
// began at the clock's now: its Agent's registration applied, the cluster
// installing and the host in state (at stage when given, reported now).
// It returns the Agent and a reconcile at the clock's time by a reconciler
// with shortTimeouts, which gives the Agent as written and the result.
func installing(t *testing.T, g Gomega, state string, stage assistedapi.HostStage) (*agentinstallv1.Agent, func() (*agentinstallv1.Agent, ctrl.Result)) {
	ctx := context.Background()
	ns := env.Namespace(t)
	newCluster(t, g, ns, "sno")
	aci := &hiveextv1.AgentClusterInstall{}
	g.Eventually(func() error {
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "sno"}, aci); err != nil {
			return err
		}
		aci.Status.DebugInfo.State = "installing"
		return env.Client.Status().Update(ctx, aci)
	}).Should(Succeed())
	ie := newInfraEnv(g, ns, &agentinstallv1.ClusterReference{Namespace: ns, Name: "sno"})
	a := register(g, ie, "9a000000-0000-4000-8000-000000000009", hostInventory("master-0", 8), func(a *agentinstallv1.Agent) {
		a.Spec.Role, a.Spec.Approved = agentinstallv1.HostRoleMaster, true
	})
	key := client.ObjectKeyFromObject(a)
	// The running reconciler applies the registration and makes the host
	// known (where its refresh stays); the host is then taken to state as
	// if its install had begun now.
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, key, a)).To(Succeed())
		g.Expect(record.PendingRegistration(a)).To(BeEmpty())
		g.Expect(a.Status.DebugInfo.State).To(Equal(hoststate.StatusKnown))
	}).Should(Succeed())
	update(g, a, func(a *agentinstallv1.Agent) { record.SetStateSince(a, clk.Now()) })
	g.Eventually(func() error {
		if err := env.Client.Get(ctx, key, a); err != nil {
			return err
		}
		a.Status.DebugInfo.State, a.Status.DebugInfo.StateInfo = state, ""
		if stage != "" {
			report(a, stage, "")
		}
		return env.Client.Status().Update(ctx, a)
	}).Should(Succeed())
	if stage != "" {
		// The running reconciler answers that write with the stage as
		// the state's info; wait for its patch, so that it cannot land
		// after the test's own reconcile and undo part of it.
		g.Eventually(func(g Gomega) {
			g.Expect(env.Client.Get(ctx, key, a)).To(Succeed())
			g.Expect(a.Status.DebugInfo.StateInfo).To(Equal(string(stage)))
		}).Should(Succeed())
	}

	// The manager's client (cached) lists the cluster's Agents through
	// its index; each reconcile waits for its cache to hold what the test
	// wrote.
	r := &agent.Reconciler{Client: env.Manager.GetClient(), Clock: clk, Timeouts: shortTimeouts()}
	cached(g, aci)
	return a, func() (*agentinstallv1.Agent, ctrl.Result) {
		cached(g, &agentinstallv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}})
		res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key})
		g.Expect(err).NotTo(HaveOccurred())
		got := &agentinstallv1.Agent{}
		g.Expect(env.Client.Get(ctx, key, got)).To(Succeed())
		return got, res
	}
}

// cached waits until the manager's cache holds obj as the API has it.
func cached[T client.Object](g Gomega, obj T) {
	ctx := context.Background()
	key := client.ObjectKeyFromObject(obj)
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, key, obj)).To(Succeed())
		want := obj.GetResourceVersion()
		g.Expect(env.Manager.GetClient().Get(ctx, key, obj)).To(Succeed())
		g.Expect(obj.GetResourceVersion()).To(Equal(want))
	}).Should(Succeed())
}

// report records a progress report at the clock's time, as the agent
// service does.
func report(a *agentinstallv1.Agent, stage assistedapi.HostStage, info string) {
	stages := hoststate.Stages("master", true, true)
	record.SetStage(a, stage, info, stages, hoststate.Percentage("master", true, true, stage), metav1.NewTime(clk.Now()))
}

// reportStage writes a progress report of the Agent at the clock's time.
func reportStage(g Gomega, a *agentinstallv1.Agent, stage assistedapi.HostStage, info string) {
	ctx := context.Background()
	g.Eventually(func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(a), a); err != nil {
			return err
		}
		report(a, stage, info)
		return env.Client.Status().Update(ctx, a)
	}).Should(Succeed())
}

// contactAt records a call of the agent at t, then sets the clock to t:
// the agent is never silent for the running reconciler in between.
func contactAt(g Gomega, a *agentinstallv1.Agent, t time.Time) {
	update(g, a, func(a *agentinstallv1.Agent) { record.SetLastContact(a, t) })
	clk.SetTime(t)
}

// TestStageTimeout: a host whose agent went silent in Writing image to
// disk stays installing until the stage's limit, the reconciler asking to
// look again when it passes; past it the host is in error, named stage and
// limit in its state info and its Installed condition.
func TestStageTimeout(t *testing.T) {
	g := NewWithT(t)
	a, reconcile := installing(t, g, hoststate.StatusInstallingInProgress, assistedapi.StageWritingImageToDisk)
	start := a.Status.Progress.StageUpdateTime.Time

	got, res := reconcile()
	g.Expect(got.Status.DebugInfo.State).To(Equal(hoststate.StatusInstallingInProgress))
	g.Expect(res.RequeueAfter).To(BeNumerically("<=", agentDisconnectedAfter+time.Second), "the disconnection comes first")

	clk.SetTime(start.Add(testStage - 30*time.Second))
	got, res = reconcile()
	g.Expect(got.Status.DebugInfo.State).To(Equal(hoststate.StatusInstallingInProgress), "30s before the limit")
	g.Expect(res.RequeueAfter).To(Equal(31*time.Second), "the reconciler looks again just past the limit, without any other event")

	clk.Step(res.RequeueAfter)
	got, res = reconcile()
	const info = "Host failed to install because its installation stage Writing image to disk did not sufficiently progress in the last 10m0s."
	g.Expect(got.Status.DebugInfo.State).To(Equal(hoststate.StatusError))
	g.Expect(got.Status.DebugInfo.StateInfo).To(Equal(info))
	g.Expect(got.Status.Conditions).To(ContainElement(condition("Installed", corev1.ConditionFalse, "InstallationFailed", "The installation has failed: "+info)))
	g.Expect(res.RequeueAfter).To(Equal(time.Minute), "no deadline in error")
	// The state annotation follows (the running reconciler, which read the
	// Agent between the two writes of this one, mirrors it too).
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(a), a)).To(Succeed())
		g.Expect(a.Annotations).To(HaveKeyWithValue(agentinstallv1.AgentStateAnnotation, hoststate.StatusError))
	}).Should(Succeed())

	clk.Step(time.Hour)
	got, _ = reconcile()
	g.Expect(got.Status.DebugInfo.State).To(Equal(hoststate.StatusError))
	g.Expect(got.Status.DebugInfo.StateInfo).To(Equal(info), "an error stays")
}

// TestInstallStartTimeout: a host in installing whose agent keeps calling
// but reports no stage fails once the start's limit passed since it
// entered installing.
func TestInstallStartTimeout(t *testing.T) {
	g := NewWithT(t)
	a, reconcile := installing(t, g, hoststate.StatusInstalling, "")
	since := record.StateSince(a)
	g.Expect(since).NotTo(BeZero())

	contactAt(g, a, since.Add(testStart-20*time.Second))
	got, res := reconcile()
	g.Expect(got.Status.DebugInfo.State).To(Equal(hoststate.StatusInstalling))
	g.Expect(res.RequeueAfter).To(Equal(21*time.Second), "the start's deadline comes before the disconnection's")

	contactAt(g, a, clk.Now().Add(res.RequeueAfter))
	got, _ = reconcile()
	g.Expect(got.Status.DebugInfo.State).To(Equal(hoststate.StatusError))
	g.Expect(got.Status.DebugInfo.StateInfo).To(Equal("Host failed to install due to timeout while starting installation"))
	g.Expect(got.Status.Conditions).To(ContainElement(condition("Installed", corev1.ConditionFalse, "InstallationFailed",
		"The installation has failed: Host failed to install due to timeout while starting installation")))
}

// TestProgressDoesNotTimeOut: a host that reports each stage, and the
// image written bit by bit, within the limit never times out although its
// install takes many times the limit; once installed no limit applies.
func TestProgressDoesNotTimeOut(t *testing.T) {
	g := NewWithT(t)
	a, reconcile := installing(t, g, hoststate.StatusInstallingInProgress, assistedapi.StageStartingInstallation)
	start := clk.Now()
	step := testStage - time.Minute
	wait := func(stage assistedapi.HostStage) {
		clk.Step(step)
		got, res := reconcile()
		g.Expect(got.Status.DebugInfo.State).To(Equal(hoststate.StatusInstallingInProgress), "%s after %s", stage, clk.Since(start))
		g.Expect(got.Status.DebugInfo.StateInfo).To(Equal(string(stage)))
		g.Expect(res.RequeueAfter).To(Equal(testStage-step+time.Second), "the reconciler looks again at the stage's limit")
	}
	for _, stage := range hoststate.Stages("master", true, true) {
		if stage == assistedapi.StageDone {
			break
		}
		if stage != assistedapi.StageStartingInstallation {
			reportStage(g, a, stage, "")
		}
		wait(stage)
		if stage == assistedapi.StageWritingImageToDisk {
			// Upstream counts from the stage's last report: the image
			// written further is progress.
			for _, pct := range []string{"25%", "50%", "75%"} {
				reportStage(g, a, stage, pct)
				wait(stage)
			}
		}
	}
	g.Expect(clk.Since(start)).To(BeNumerically(">", 5*testStage))
	reportStage(g, a, assistedapi.StageDone, "")
	clk.Step(2 * testStage)
	got, _ := reconcile()
	g.Expect(got.Status.DebugInfo.State).To(Equal(hoststate.StatusInstalled))
}

// TestRebootTimeout: a host that does not come back from Rebooting within
// the limit is not failed but waits for the user to fix its boot, naming
// its installation disk; its next stage ends the wait.
func TestRebootTimeout(t *testing.T) {
	g := NewWithT(t)
	a, reconcile := installing(t, g, hoststate.StatusInstallingInProgress, assistedapi.StageRebooting)
	clk.Step(testStage + time.Second)
	got, res := reconcile()
	g.Expect(got.Status.DebugInfo.State).To(Equal(hoststate.StatusInstallingPendingUserAction))
	g.Expect(got.Status.DebugInfo.StateInfo).To(Equal("Host timed out when pulling the configuration files. Verify in the host console that the host " +
		"boots from the OpenShift installation disk (sdb, /dev/disk/by-id/wwn-0x2) and has network access to the cluster API. The installation " +
		"will resume after the host successfully boots and can access the cluster API"))
	g.Expect(res.RequeueAfter).To(Equal(time.Minute), "no limit while the user is asked")

	clk.Step(time.Hour)
	reportStage(g, a, assistedapi.StageJoined, "")
	got, _ = reconcile()
	g.Expect(got.Status.DebugInfo.State).To(Equal(hoststate.StatusInstallingInProgress))
	g.Expect(got.Status.DebugInfo.StateInfo).To(Equal("Joined"))
}

// TestStageHeldWhileClusterWaits: while the cluster waits for the user to
// fix a host's boot, a host waiting in Waiting for bootkube does not time
// out, however long; once the wait ends it has its full limit again, then
// times out.
func TestStageHeldWhileClusterWaits(t *testing.T) {
	g := NewWithT(t)
	a, reconcile := installing(t, g, hoststate.StatusInstallingInProgress, assistedapi.StageWaitingForBootkube)
	setClusterState(g, a.Namespace, "installing-pending-user-action")
	for range 3 {
		clk.Step(testStage)
		got, res := reconcile()
		g.Expect(got.Status.DebugInfo.State).To(Equal(hoststate.StatusInstallingInProgress), "held after %s", testStage)
		g.Expect(res.RequeueAfter).To(Equal(time.Minute))
		// The manager's own reconciler of this Agent may land a patch
		// it made before the clock moved after the test's (two
		// reconcilers of one Agent: the test's artifact); its next pass
		// records the hold at the clock's time again.
		g.Eventually(func(g Gomega) {
			g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(a), got)).To(Succeed())
			g.Expect(record.StageHeld(got)).To(BeTemporally(">", clk.Now().Add(-testStage)))
		}).Should(Succeed(), "the hold is recorded as it goes on")
	}

	setClusterState(g, a.Namespace, "installing")
	cached(g, a)
	held := record.StageHeld(a)
	g.Expect(held).To(BeTemporally(">", clk.Now().Add(-testStage)))
	clk.SetTime(held.Add(testStage - 30*time.Second))
	got, res := reconcile()
	g.Expect(got.Status.DebugInfo.State).To(Equal(hoststate.StatusInstallingInProgress), "the limit counts from the hold's end")
	g.Expect(res.RequeueAfter).To(Equal(31 * time.Second))

	clk.Step(res.RequeueAfter)
	got, _ = reconcile()
	g.Expect(got.Status.DebugInfo.State).To(Equal(hoststate.StatusError))
	g.Expect(got.Status.DebugInfo.StateInfo).To(Equal("Host failed to install because its installation stage Waiting for bootkube took longer than expected 10m0s"))
}

// setClusterState sets the status of the install sno in ns, as the
// AgentClusterInstall reconciler does, and waits for the cache to hold it.
func setClusterState(g Gomega, ns, state string) {
	ctx := context.Background()
	aci := &hiveextv1.AgentClusterInstall{}
	g.Eventually(func() error {
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "sno"}, aci); err != nil {
			return err
		}
		aci.Status.DebugInfo.State = state
		return env.Client.Status().Update(ctx, aci)
	}).Should(Succeed())
	cached(g, aci)
}
