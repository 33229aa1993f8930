package bmac_test

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
	"github.com/metalshift/metalshift/assisted/pkg/hoststate"
	"github.com/metalshift/metalshift/assisted/reconcilers/bmac"
)

const bootMAC = "52:54:00:aa:00:01"

// TestSpoofedMAC: anyone with a copy of an InfraEnv's image can register
// an Agent that reports a host's boot MAC. In the converged flow BMAC
// pairs and approves only an Agent registered with the host's proof (the
// host engine started its agent for that host): an Agent without it is
// named in an Event and left alone. A second Agent with the host's proof
// too (a replayed proof) makes BMAC withdraw the approval it gave, approve
// neither, and say why; once the intruder's Agent is deleted, the host's
// Agent is approved again. Once an install started, its approval stays.
func TestSpoofedMAC(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	ie := &agentinstallv1.InfraEnv{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ztp"},
		Spec: agentinstallv1.InfraEnvSpec{PullSecretRef: &corev1.LocalObjectReference{Name: "pull-secret"}}}
	g.Expect(env.Client.Create(ctx, ie)).To(Succeed())
	host := &metal3v1.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "host-0",
		Labels: map[string]string{agentinstallv1.InfraEnvNameLabel: ie.Name}},
		Spec: metal3v1.BareMetalHostSpec{BootMACAddress: bootMAC,
			BMC: metal3v1.BMCDetails{Address: "redfish-virtualmedia://192.0.2.1/redfish/v1/Systems/1", CredentialsName: "bmc"}}}
	g.Expect(env.Client.Create(ctx, host)).To(Succeed())
	proof := host.Name + "/" + string(host.UID)

	// An Agent with the MAC but no proof, registered before the host's.
	early := registered(g, ie, "d1000000-0000-4000-8000-000000000009", bootMAC, "")
	g.Eventually(func() []string { return events(g, host) }).Should(ContainElement(
		"Warning UnprovenAgent: Agent " + early.Name + " reports the boot MAC " + bootMAC + " of BareMetalHost host-0, " +
			"but the host engine did not start its agent for this host: it is not paired or approved. Delete it if it is no machine of yours"))

	hostAgent := registered(g, ie, "d1000000-0000-4000-8000-000000000001", bootMAC, proof)
	g.Eventually(approved(hostAgent)).Should(BeTrue())
	g.Expect(hostAgent.Labels).To(HaveKeyWithValue(bmac.BMHLabel, host.Name))
	g.Expect(approved(early)()).To(BeFalse())
	g.Expect(early.Labels).NotTo(HaveKey(bmac.BMHLabel))
	// A proof of another host (or of this one before it was made again)
	// is no proof.
	stale := registered(g, ie, "d1000000-0000-4000-8000-000000000008", bootMAC, host.Name+"/another-uid")
	g.Eventually(func() []string { return events(g, host) }).Should(ContainElement(ContainSubstring("Agent " + stale.Name + " reports")))
	g.Expect(approved(stale)()).To(BeFalse())
	g.Expect(approved(hostAgent)()).To(BeTrue())

	intruder := registered(g, ie, "d1000000-0000-4000-8000-000000000002", "52:54:00:AA:00:01", proof)
	g.Eventually(approved(hostAgent)).Should(BeFalse())
	g.Expect(approved(intruder)()).To(BeFalse())
	g.Expect(intruder.Labels).NotTo(HaveKey(bmac.BMHLabel))
	msg := fmt.Sprintf("Agents %s, %s all report the boot MAC %s of BareMetalHost host-0: none is approved for it. "+
		"Delete the Agents of machines that are not this host", hostAgent.Name, intruder.Name, bootMAC)
	g.Eventually(func() []string { return events(g, hostAgent) }).Should(ContainElement("Warning AmbiguousAgents: " + msg + ": approval withdrawn"))
	g.Eventually(func() []string { return events(g, host) }).Should(ContainElement("Warning AmbiguousAgents: " + msg))

	g.Expect(env.Client.Delete(ctx, intruder)).To(Succeed())
	g.Eventually(approved(hostAgent)).Should(BeTrue())

	// Installing: too late to withdraw; the host says so all the same.
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(hostAgent), hostAgent)).To(Succeed())
	hostAgent.Status.DebugInfo.State = hoststate.StatusInstalling
	g.Expect(env.Client.Status().Update(ctx, hostAgent)).To(Succeed())
	late := registered(g, ie, "d1000000-0000-4000-8000-000000000003", bootMAC, proof)
	g.Eventually(func() []string { return events(g, host) }).Should(ContainElement(ContainSubstring(late.Name)))
	g.Expect(approved(hostAgent)()).To(BeTrue())
	g.Expect(approved(late)()).To(BeFalse())
	g.Expect(approved(early)()).To(BeFalse())
}

// registered is an Agent as the agent service registers one from ie's
// image, whose inventory reports mac, with a host's proof (the
// registered-for-host annotation) when proof is not empty.
func registered(g Gomega, ie *agentinstallv1.InfraEnv, id, mac, proof string) *agentinstallv1.Agent {
	ctx := context.Background()
	a := &agentinstallv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: ie.Namespace, Name: id,
		Labels: map[string]string{agentinstallv1.InfraEnvNameLabel: ie.Name}},
		Spec: agentinstallv1.AgentSpec{Role: agentinstallv1.HostRoleAutoAssign}}
	if proof != "" {
		a.Annotations = map[string]string{agentinstallv1.AgentRegisteredForHostAnnotation: proof}
	}
	g.Expect(env.Client.Create(ctx, a)).To(Succeed())
	a.Status.DebugInfo.State = hoststate.StatusDiscoveringUnbound
	a.Status.Inventory.Interfaces = []agentinstallv1.HostInterface{{Name: "eth0", MacAddress: mac}}
	g.Expect(env.Client.Status().Update(ctx, a)).To(Succeed())
	return a
}

// approved reads whether a is approved (and refreshes a).
func approved(a *agentinstallv1.Agent) func() bool {
	return func() bool {
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(a), a); err != nil {
			return false
		}
		return a.Spec.Approved
	}
}

// events are the Events about o, "<type> <reason>: <message>".
func events(g Gomega, o client.Object) []string {
	l := &corev1.EventList{}
	g.Expect(env.Client.List(context.Background(), l, client.InNamespace(o.GetNamespace()))).To(Succeed())
	var out []string
	for _, e := range l.Items {
		if e.InvolvedObject.UID == o.GetUID() {
			out = append(out, e.Type+" "+e.Reason+": "+e.Message)
		}
	}
	return out
}
