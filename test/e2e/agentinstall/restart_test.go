package agentinstall

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	"github.com/metalshift/metalshift/assisted/reconcilers/bmac"
)

// TestHubRestart: the hub (agent service and controllers) stops while a
// single node installs and a new one starts in its place; knowing only
// what the API holds, it sees the install through.
func TestHubRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(100 * time.Second)
	g.SetDefaultEventuallyPollingInterval(200 * time.Millisecond)
	const ns = "restart"
	lab, ie := start(t, g, ns, 1, 0, "127.77.6")
	bootAll(g, lab, ie)
	g.Eventually(aciState(ns)).Should(Equal("installing"))

	g.Expect(stopHub()).To(Succeed())
	t.Log("The hub stopped; the agent carries on without it")
	time.Sleep(3 * time.Second)
	var err error
	stopHub, err = startHub()
	g.Expect(err).NotTo(HaveOccurred())
	t.Log("A new hub started")

	aci := waitCompleted(g, ns, ns)
	g.Expect(condMessage(aci, "Completed")).To(Equal("The installation has completed: Cluster is installed"))
	g.Expect(spokeNodes(g, ns, ns).Items).To(HaveLen(1))
}

// TestHubRestartMidInstall: a compact ZTP install in the converged flow
// (three BareMetalHosts); the hub stops once a host is in its install
// step and stays away far longer than a few retries of the agents' calls
// (they poll every second here), then a new hub starts. The agents wait
// for it through their downloads and progress reports, report no
// failure, and the cluster installs. The outage is shorter than the hub's
// DisconnectedAfter (a minute here); the new hub counts the agents'
// silence from its own start anyway (the Agent reconciler's ServiceStart,
// tested in assisted/reconcilers/agent).
func TestHubRestartMidInstall(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(150 * time.Second)
	g.SetDefaultEventuallyPollingInterval(200 * time.Millisecond)
	ctx := context.Background()
	const ns = "restart-mid-install"
	disconnectedAfter = time.Minute
	restartHub(g, true)
	t.Cleanup(func() {
		disconnectedAfter = 6 * time.Second
		restartHub(NewWithT(t), false)
	})
	lab, _ := start(t, g, ns, 3, 0, "127.77.14", "127.77.14.100", "127.77.14.101")
	g.Expect(lab.Start("127.0.0.1:0")).To(Succeed())
	t.Cleanup(lab.Close)
	for _, m := range lab.Machines {
		host, secret := lab.Host(m, ns, true)
		host.Labels = map[string]string{agentinstallv1.InfraEnvNameLabel: ns}
		host.Annotations = map[string]string{bmac.RoleAnnotation: "master"}
		g.Expect(env.Client.Create(ctx, secret)).To(Succeed())
		g.Expect(env.Client.Create(ctx, host)).To(Succeed())
	}
	installing := func() bool {
		for _, m := range lab.Machines {
			a := &agentinstallv1.Agent{}
			_ = env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: m.UUID}, a)
			if a.Status.Progress.CurrentStage != "" {
				return true
			}
		}
		return false
	}
	g.Eventually(installing).Should(BeTrue())

	g.Expect(stopHub()).To(Succeed())
	t.Log("The hub stopped with a host in its install step")
	// The outage itself, not a wait for something: the agents must live
	// through it (the old agent gave up after 5 attempts, a few seconds).
	time.Sleep(20 * time.Second)
	var err error
	stopHub, err = startHub()
	g.Expect(err).NotTo(HaveOccurred())
	t.Log("A new hub started")

	waitCompleted(g, ns, ns)
	g.Expect(spokeNodes(g, ns, ns).Items).To(HaveLen(3))
	for _, m := range lab.Machines {
		a := &agentinstallv1.Agent{}
		g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: m.UUID}, a)).To(Succeed())
		g.Expect(a.Status.Progress.CurrentStage).To(Equal("Done"), m.UUID)
	}
}
