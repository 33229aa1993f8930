package agentclusterinstall_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	assistedapi "github.com/metalshift/metalshift/api/assisted/v2"
	"github.com/metalshift/metalshift/assisted/pkg/hoststate"
	"github.com/metalshift/metalshift/assisted/pkg/record"
)

// TestStageTimeoutFailsInstall: the single node's agent reports Writing
// image to disk and goes silent; once upstream's limit of that stage (30
// minutes) has passed, the host is in error naming the stage and the
// limit, an Event names the host, and the cluster fails as it does for any
// control-plane host in error. It moves the clock on by more than 30
// minutes.
func TestStageTimeoutFailsInstall(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	in := newSNO(t, g, ns, "sno", nil)
	a := register(g, in.ie, "a7000000-0000-4000-8000-000000000007", "")
	approve(g, a)
	key := client.ObjectKeyFromObject(a)
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, key, a)).To(Succeed())
		g.Expect(a.Status.DebugInfo.State).To(Equal(hoststate.StatusInstalling))
	}).Should(Succeed())

	// The stage reported, as the agent service records it.
	g.Eventually(func() error {
		if err := env.Client.Get(ctx, key, a); err != nil {
			return err
		}
		stage := assistedapi.StageWritingImageToDisk
		record.SetStage(a, stage, "", hoststate.Stages("master", true, true), hoststate.Percentage("master", true, true, stage), metav1.NewTime(clk.Now()))
		return env.Client.Status().Update(ctx, a)
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, key, a)).To(Succeed())
		g.Expect(a.Status.DebugInfo.State).To(Equal(hoststate.StatusInstallingInProgress))
	}).Should(Succeed())

	clk.Step(30*time.Minute + time.Second)
	// The reconciler would look again on its own within a minute; a change
	// wakes it now.
	updateAgent(g, a, func(a *agentinstallv1.Agent) { a.Labels["touched"] = "yes" })
	const info = "Host failed to install because its installation stage Writing image to disk did not sufficiently progress in the last 30m0s."
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, key, a)).To(Succeed())
		g.Expect(a.Status.DebugInfo.State).To(Equal(hoststate.StatusError))
		g.Expect(a.Status.DebugInfo.StateInfo).To(Equal(info))
		g.Expect(a.Status.Conditions).To(ContainElement(agentCondition("Installed", corev1.ConditionFalse, "InstallationFailed", "The installation has failed: "+info)))
	}).Should(Succeed())
	g.Eventually(func() []string { return agentEvents(g, a) }).Should(ContainElement(
		"HostStatusUpdated: Host master-0: updated status from installing-in-progress to error (" + info + ")"))

	expectACIState(g, in.aci, "error")
	expectACICondition(g, in.aci, aciCondition("Failed", corev1.ConditionTrue, "InstallationFailed", "The installation failed: cluster has hosts in error"))
	expectACICondition(g, in.aci, aciCondition("Stopped", corev1.ConditionTrue, "InstallationFailed", "The installation has stopped due to error"))
}
