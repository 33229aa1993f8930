package agentinstall

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	hivev1 "github.com/metalshift/metalshift/api/hive/v1"
)

// TestSingleNode: one machine boots the InfraEnv's ISO, its Agent is
// approved with the seed's patch, the install starts by itself, and the
// single node comes up: the ClusterDeployment is installed, the admin
// kubeconfig Secret lists the node Ready, the conditions read as the seed's.
func TestSingleNode(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(100 * time.Second)
	g.SetDefaultEventuallyPollingInterval(200 * time.Millisecond)
	ctx := context.Background()
	const ns, name = "sno", "sno"
	lab, ie := start(t, g, ns, 1, 0, "127.77.1")
	g.Expect(ie.Status.Conditions).To(ContainElement(And(
		HaveField("Type", agentinstallv1.ConditionType("ImageCreated")), HaveField("Reason", "InfraEnvAvailable"),
		HaveField("Message", "InfraEnv is available: Image has been created"))))

	// Not approved: the install waits.
	agent := awaitingApproval(g, lab, ie, name)

	// kubectl -n sno patch agents.agent-install.openshift.io <id> -p '{"spec":{"approved":true}}' --type merge
	g.Expect(env.Client.Patch(ctx, agent, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"approved":true}}`)))).To(Succeed())

	aci := waitCompleted(g, ns, name)
	g.Expect(aci.Status.Progress.TotalPercentage).To(BeEquivalentTo(100))
	for typ, msg := range map[string]string{
		"Completed":  "The installation has completed: Cluster is installed",
		"SpecSynced": "The Spec has been successfully applied", "Validated": "The cluster's validations are passing",
		"RequirementsMet": "The cluster installation stopped", "Failed": "The installation has not failed",
		"Stopped": "The installation has stopped because it completed successfully",
	} {
		g.Expect(condMessage(aci, typ)).To(Equal(msg), typ)
	}
	cd := &hivev1.ClusterDeployment{}
	g.Eventually(func() bool {
		_ = env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, cd)
		return cd.Spec.Installed && cd.Spec.ClusterMetadata != nil
	}).Should(BeTrue())
	g.Expect(cd.Spec.ClusterMetadata.AdminKubeconfigSecretRef.Name).To(Equal(name + "-admin-kubeconfig"))
	nodes := spokeNodes(g, ns, name)
	g.Expect(nodes.Items).To(HaveLen(1))
	g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: lab.Machines[0].UUID}, agent)).To(Succeed())
	g.Expect(agent.Status.Progress.CurrentStage).To(Equal("Done"))

	// The install's events, as status.debugInfo.eventsURL serves them.
	events := getEvents(g, aci.Status.DebugInfo.EventsURL, http.StatusOK)
	g.Expect(events).To(ContainElement(And(HaveField("Name", "ClusterStatusUpdated"), HaveField("ClusterID", string(aci.UID)),
		HaveField("Message", "Updated status of the cluster to installed (Cluster is installed)"))))
	g.Expect(events).To(ContainElement(And(HaveField("Name", "HostStatusUpdated"), HaveField("HostID", agent.Name),
		HaveField("Message", "Host "+agent.Status.Inventory.Hostname+": updated status from installing-in-progress to installed (Done)"))))
	g.Expect(events).To(ContainElement(HaveField("Name", "InstallationStarted")))
	g.Expect(getEvents(g, agent.Status.DebugInfo.EventsURL, http.StatusOK)).To(ContainElement(
		And(HaveField("HostID", agent.Name), HaveField("Severity", "info"))))
	g.Expect(getEvents(g, ie.Status.InfraEnvDebugInfo.EventsURL, http.StatusOK)).To(ContainElement(HaveField("Name", "ImageCreated")))
	// Another cluster's ID with this URL's key is refused.
	g.Expect(getEvents(g, strings.Replace(aci.Status.DebugInfo.EventsURL, string(aci.UID), string(ie.UID), 1), http.StatusUnauthorized)).To(BeEmpty())
}
