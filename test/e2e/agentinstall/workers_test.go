package agentinstall

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
)

// TestWorkers: three masters and two workers boot the same ISO; the
// Agents' roles are suggested (the first three masters), one master
// bootstraps, and the cluster comes up with five Nodes.
func TestWorkers(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(150 * time.Second)
	g.SetDefaultEventuallyPollingInterval(200 * time.Millisecond)
	ctx := context.Background()
	const ns = "workers"
	lab, ie := start(t, g, ns, 3, 2, "127.77.7", "127.77.7.100", "127.77.7.101")
	bootAll(g, lab, ie)
	aci := waitCompleted(g, ns, ns)
	g.Expect(aci.Status.ControlPlaneAgentsDiscovered).To(Equal(3))
	g.Expect(aci.Status.WorkerAgentsDiscovered).To(Equal(2))
	g.Expect(spokeNodes(g, ns, ns).Items).To(HaveLen(5))
	roles := map[agentinstallv1.HostRole]int{}
	for _, m := range lab.Machines {
		a := &agentinstallv1.Agent{}
		g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: m.UUID}, a)).To(Succeed())
		g.Expect(a.Status.Progress.CurrentStage).To(Equal("Done"), m.UUID)
		roles[a.Status.Role]++
	}
	g.Expect(roles).To(Equal(map[agentinstallv1.HostRole]int{agentinstallv1.HostRoleMaster: 3, agentinstallv1.HostRoleWorker: 2}))
}
