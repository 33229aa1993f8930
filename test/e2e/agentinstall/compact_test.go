package agentinstall

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
)

// TestCompact: three machines boot the InfraEnv's ISO; once approved, one
// of the masters bootstraps the other two and then joins itself; the
// cluster comes up with three Nodes behind its API VIP and goes on to
// accept day-2 hosts.
func TestCompact(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(150 * time.Second)
	g.SetDefaultEventuallyPollingInterval(200 * time.Millisecond)
	ctx := context.Background()
	const ns, name = "compact", "compact"
	lab, ie := startSpare(t, g, ns, 3, 0, 1, "127.77.2", "127.77.2.100", "127.77.2.101")
	day1, extra := lab.Machines[:3], lab.Machines[3]
	for _, m := range day1 {
		bootISO(g, m, ie.Status.ISODownloadURL)
	}
	for _, m := range day1 {
		approve(g, ns, m.UUID)
	}
	aci := waitCompleted(g, ns, name)
	g.Expect(aci.Status.Progress.TotalPercentage).To(BeEquivalentTo(100))
	// Installed with more than one node, the cluster goes on to take
	// day-2 hosts; its conditions read as the seed prints them for an
	// installed cluster of three masters.
	g.Eventually(aciState(ns)).Should(Equal("adding-hosts"))
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(aci), aci)).To(Succeed())
	for typ, msg := range map[string]string{
		"SpecSynced":      "The Spec has been successfully applied",
		"Validated":       "The cluster's validations are passing",
		"RequirementsMet": "The cluster installation stopped",
		"Completed":       "The installation has completed: Cluster is installed",
		"Failed":          "The installation has not failed",
		"Stopped":         "The installation has stopped because it completed successfully",
	} {
		g.Expect(condMessage(aci, typ)).To(Equal(msg), typ)
	}
	nodes := spokeNodes(g, ns, name)
	g.Expect(nodes.Items).To(HaveLen(3))
	bootstraps := 0
	for _, m := range day1 {
		agent := &agentinstallv1.Agent{}
		g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: m.UUID}, agent)).To(Succeed())
		g.Expect(agent.Status.Progress.CurrentStage).To(Equal("Done"), m.UUID)
		g.Expect(agent.Status.Role).To(Equal(agentinstallv1.HostRoleMaster))
		if agent.Status.Bootstrap {
			bootstraps++
		}
	}
	g.Expect(bootstraps).To(Equal(1))

	// Day 2: a fourth machine boots the same ISO; approved and known, it
	// installs at once as a worker, the hub approves its kubelet's CSR in
	// the installed cluster (which approves none of its own once
	// installed), and its Agent goes Joined, then Done from its Node.
	bootISO(g, extra, ie.Status.ISODownloadURL)
	approve(g, ns, extra.UUID)
	g.Eventually(func() string {
		a := &agentinstallv1.Agent{}
		_ = env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: extra.UUID}, a)
		return a.Status.DebugInfo.State + "/" + a.Status.Progress.CurrentStage
	}).Should(Equal("added-to-existing-cluster/Done"))
	day2 := &agentinstallv1.Agent{}
	g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: extra.UUID}, day2)).To(Succeed())
	g.Expect(day2.Status.Role).To(Equal(agentinstallv1.HostRoleWorker))
	g.Expect(day2.Status.Bootstrap).To(BeFalse())
	nodes = spokeNodes(g, ns, name)
	g.Expect(nodes.Items).To(HaveLen(4))
	// The hub approved the kubelet's client CSR and recorded it.
	g.Expect(day2.Status.CSRStatus.ApprovedCSRs).To(ContainElement(HaveField("Type", agentinstallv1.CSRTypeClient)))
	approved := day2.Status.CSRStatus.ApprovedCSRs[0].Name
	csr := &certificatesv1.CertificateSigningRequest{}
	g.Expect(spokeClient(g, ns, name).Get(ctx, types.NamespacedName{Name: approved}, csr)).To(Succeed())
	g.Expect(csr.Status.Conditions).To(ContainElement(And(HaveField("Type", certificatesv1.CertificateApproved),
		HaveField("Reason", "AgentServiceApprove"))))
}
