package agentclusterinstall_test

import (
	"context"
	"errors"
	"fmt"
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

// TestSilentInstallerWithNodeIsDone: the hub last heard of the single node
// before it said Rebooting, two minutes ago: its later reports (the stages up
// to Rebooting, the install step's reply) reached a hub whose state was
// since restored from an older backup. The host booted its disk and its
// Node is Ready in the installed cluster (the test's API server). The hub
// follows it to Done and the host is installed, wherever the backup held
// it: before its first stage (a fresh-clone CI run's restored hub then
// failed the host, "timeout while connecting to host during the
// installation phase"), at Installing (it waited for the stage's 60-minute
// limit), or at a stage of the single node's own bootstrap.
func TestSilentInstallerWithNodeIsDone(t *testing.T) {
	for i, stage := range []assistedapi.HostStage{"", assistedapi.StageInstalling, assistedapi.StageWaitingForBootkube} {
		t.Run("stage "+string(stage), func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			ns := env.Namespace(t)
			in := newSNO(t, g, ns, "sno", nil)
			a := register(g, in.ie, fmt.Sprintf("a8000000-0000-4000-8000-00000000000%d", i), "")
			hostname := "silent-" + ns
			updateAgent(g, a, func(a *agentinstallv1.Agent) { a.Spec.Hostname, a.Spec.Approved = hostname, true })
			key := client.ObjectKeyFromObject(a)
			g.Eventually(func(g Gomega) {
				g.Expect(env.Client.Get(ctx, key, a)).To(Succeed())
				g.Expect(a.Status.DebugInfo.State).To(Equal(hoststate.StatusInstalling))
			}).Should(Succeed())

			// The installed cluster is the test's API server, with the
			// host's Node Ready.
			installedClusterIsEnv(g, in)
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: hostname}}
			g.Expect(env.Client.Create(ctx, node)).To(Succeed())
			t.Cleanup(func() { _ = env.Client.Delete(context.Background(), node) })
			node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"}}
			g.Expect(env.Client.Status().Update(ctx, node)).To(Succeed())

			// The last the hub heard of the host: two minutes ago (its
			// recorded contacts are up to a minute stale), at stage.
			minutesAgo := clk.Now().Add(-2 * time.Minute)
			lastHeard(g, a, stage, minutesAgo)

			g.Eventually(func(g Gomega) {
				g.Expect(env.Client.Get(ctx, key, a)).To(Succeed())
				g.Expect(a.Status.Progress.CurrentStage).To(Equal(string(assistedapi.StageDone)))
				g.Expect(a.Status.DebugInfo.State).To(Equal(hoststate.StatusInstalled))
			}).Should(Succeed())
		})
	}
}

// TestSilentInstallerWithoutNodeWaits: a host silent before Rebooting
// whose Node is not in the installed cluster is left where it is: the
// hub does not guess.
func TestSilentInstallerWithoutNodeWaits(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	in := newSNO(t, g, ns, "sno", nil)
	a := register(g, in.ie, "a8000000-0000-4000-8000-000000000009", "")
	updateAgent(g, a, func(a *agentinstallv1.Agent) { a.Spec.Hostname, a.Spec.Approved = "nowhere-"+ns, true })
	key := client.ObjectKeyFromObject(a)
	installedClusterIsEnv(g, in)
	minutesAgo := clk.Now().Add(-2 * time.Minute)
	lastHeard(g, a, assistedapi.StageWritingImageToDisk, minutesAgo)
	g.Consistently(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, key, a)).To(Succeed())
		g.Expect(a.Status.Progress.CurrentStage).To(Equal(string(assistedapi.StageWritingImageToDisk)))
	}, 5*time.Second).Should(Succeed())
}

// installedClusterIsEnv makes the test's API server the installed cluster
// of in: its install state's admin kubeconfig points there.
func installedClusterIsEnv(g Gomega, in sno) {
	g.Eventually(func() error {
		st := installState(in.aci)
		if st == nil {
			return errors.New("no install state yet")
		}
		st.Data[record.KeyAdminKubeconfig] = envKubeconfig(g)
		return env.Client.Update(context.Background(), st)
	}).Should(Succeed())
}

// lastHeard records that the hub last heard of the single node a at
// time at: its last contact, and its stage when not empty.
func lastHeard(g Gomega, a *agentinstallv1.Agent, stage assistedapi.HostStage, at time.Time) {
	updateAgent(g, a, func(a *agentinstallv1.Agent) { record.SetLastContact(a, at) })
	if stage == "" {
		return
	}
	g.Eventually(func() error {
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(a), a); err != nil {
			return err
		}
		record.SetStage(a, stage, "", hoststate.Stages("master", true, true), hoststate.Percentage("master", true, true, stage), metav1.NewTime(at))
		return env.Client.Status().Update(context.Background(), a)
	}).Should(Succeed())
}
