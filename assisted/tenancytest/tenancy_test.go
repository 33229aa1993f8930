package tenancytest

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	hiveextv1 "github.com/metalshift/metalshift/api/hiveext/v1beta1"
	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
	"github.com/metalshift/metalshift/assisted/reconcilers/bmac"
)

// TestCrossNamespaceBinding plays tenant "attacker", with every right in
// its namespace, against tenant "victim", whose imported cluster is adding
// hosts, on a hub without webhooks: the attacker's Agents, hosts,
// InfraEnv and NMStateConfig name the victim's cluster (or match its
// selector) and get nothing of it — each refusal named in a condition or
// Event of the attacker's object — while the victim's own do.
func TestCrossNamespaceBinding(t *testing.T) {
	ctx := context.Background()
	g := NewWithT(t)
	victim, attacker := env.Namespace(t), env.Namespace(t)
	importedCluster(t, g, victim, hubKubeconfig(g))
	tenant := env.Tenant(t, attacker)
	g.Expect(tenant.Create(ctx, pullSecret(attacker))).To(Succeed())
	victimCluster := &agentinstallv1.ClusterReference{Namespace: victim, Name: "cluster"}
	refusal := func(kind string) string {
		return `"` + victim + `" is another namespace: a reference must stay in the ` + kind + `'s namespace "` + attacker + `"`
	}

	t.Run("an Agent joins and gets its CSR approved", func(t *testing.T) {
		g := NewWithT(t)
		csrs := bootstrapper(t, g)
		intruderCSR := kubeletCSR(g, csrs, "intruder-node")
		victimCSR := kubeletCSR(g, csrs, "victim-joiner")
		// The attacker's host says it rebooted into the victim's cluster.
		createAgent(g, tenant, attacker, "intruder", agentinstallv1.HostRoleMaster, victimCluster,
			agentHost{hostname: "intruder-node", mac: "52:54:00:7e:00:01", stage: "Rebooting"})
		g.Eventually(func(g Gomega) {
			c := agentCondition(g, attacker, "intruder", "SpecSynced")
			g.Expect(c.Status).To(Equal(corev1.ConditionFalse))
			g.Expect(c.Reason).To(Equal("InputError"))
			g.Expect(c.Message).To(ContainSubstring("spec.clusterDeploymentName.namespace: " + refusal("Agent")))
		}).Should(Succeed())
		g.Expect(agentCondition(g, attacker, "intruder", "Bound").Status).To(Equal(corev1.ConditionFalse))

		// The victim's own day-2 worker joins: its CSR is approved in the
		// same pass over the cluster's CSRs that sees the intruder's.
		createAgent(g, env.Client, victim, "victim-joiner", agentinstallv1.HostRoleWorker, victimCluster,
			agentHost{hostname: "victim-joiner", mac: "52:54:00:7e:00:02", stage: "Rebooting"})
		g.Eventually(func(g Gomega) bool { return approved(g, victimCSR) }).Should(BeTrue())
		g.Expect(approved(g, intruderCSR)).To(BeFalse(), "the intruder's CSR is not approved in the victim's cluster")
		aci := &hiveextv1.AgentClusterInstall{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: victim, Name: "cluster"}, aci)).To(Succeed())
		g.Expect(aci.Status.ControlPlaneAgentsDiscovered).To(BeZero(), "the intruder is none of the victim's masters")
	})

	// The attacker's InfraEnv, labelled hosts follow it.
	g.Expect(tenant.Create(ctx, &agentinstallv1.InfraEnv{ObjectMeta: metav1.ObjectMeta{Namespace: attacker, Name: "hosts"},
		Spec: agentinstallv1.InfraEnvSpec{PullSecretRef: &corev1.LocalObjectReference{Name: "pull-secret"}}})).To(Succeed())
	host := func(name, mac string, ann map[string]string) *metal3v1.BareMetalHost {
		return &metal3v1.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: attacker, Name: name, Annotations: ann,
			Labels: map[string]string{agentinstallv1.InfraEnvNameLabel: "hosts"}},
			Spec: metal3v1.BareMetalHostSpec{BootMACAddress: mac, BMC: metal3v1.BMCDetails{Address: "redfish://192.0.2.1/redfish/v1/Systems/1", CredentialsName: "bmc"}}}
	}

	t.Run("a host deleted with its Node deletes the victim's Node", func(t *testing.T) {
		g := NewWithT(t)
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "victim-node"}}
		g.Expect(env.Client.Create(ctx, node)).To(Succeed())
		t.Cleanup(func() { _ = env.Client.Delete(ctx, node) })
		h := host("deleter", "52:54:00:7e:00:03", map[string]string{bmac.RemoveAgentAndNodeOnDeleteAnnotation: "true"})
		g.Expect(tenant.Create(ctx, h)).To(Succeed())
		g.Eventually(func(g Gomega) {
			g.Expect(tenant.Get(ctx, client.ObjectKeyFromObject(h), h)).To(Succeed())
			g.Expect(controllerutil.ContainsFinalizer(h, bmac.Finalizer)).To(BeTrue())
		}).Should(Succeed())
		// Its Agent claims the victim's cluster and the victim's Node name.
		createAgent(g, tenant, attacker, "deleter", agentinstallv1.HostRoleWorker, victimCluster,
			agentHost{hostname: "victim-node", mac: "52:54:00:7e:00:03", stage: "Done"})
		g.Expect(tenant.Delete(ctx, h)).To(Succeed())
		g.Eventually(func() bool { return apierrors.IsNotFound(tenant.Get(ctx, client.ObjectKeyFromObject(h), h)) }).Should(BeTrue(),
			"BMAC lets the host go")
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(node), node)).To(Succeed(), "the victim's Node is still there")
		g.Expect(node.DeletionTimestamp).To(BeNil())
		// Events are written by the recorder after the fact: wait for it.
		g.Eventually(func(g Gomega) {
			events := &corev1.EventList{}
			g.Expect(env.Client.List(ctx, events, client.InNamespace(attacker))).To(Succeed())
			g.Expect(events.Items).To(ContainElement(And(HaveField("Reason", "NodeDeletionRefused"), HaveField("Type", corev1.EventTypeWarning),
				HaveField("Message", ContainSubstring("spec.clusterDeploymentName.namespace: "+refusal("Agent"))))), "said on the host")
		}).Should(Succeed())
	})

	t.Run("a host's cluster-reference annotation binds its Agent", func(t *testing.T) {
		g := NewWithT(t)
		h := host("binder", "52:54:00:7e:00:04", map[string]string{bmac.ClusterReferenceAnnotation: victim + "/cluster"})
		g.Expect(tenant.Create(ctx, h)).To(Succeed())
		a := createAgent(g, tenant, attacker, "binder", agentinstallv1.HostRoleWorker, nil, agentHost{hostname: "binder", mac: "52:54:00:7e:00:04"})
		g.Eventually(func(g Gomega) {
			g.Expect(tenant.Get(ctx, client.ObjectKeyFromObject(h), h)).To(Succeed())
			c := meta.FindStatusCondition(h.Status.Conditions, bmac.ClusterReferenceCondition)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(bmac.ReasonCrossNamespaceReference))
			g.Expect(c.Message).To(HavePrefix("metadata.annotations[bmac.agent-install.openshift.io/cluster-reference]: " + refusal("BareMetalHost")))
		}).Should(Succeed())
		// BMAC did pair them (labelled, approved), and bound nothing.
		g.Eventually(func(g Gomega) {
			g.Expect(tenant.Get(ctx, client.ObjectKeyFromObject(a), a)).To(Succeed())
			g.Expect(a.Labels).To(HaveKeyWithValue(bmac.BMHLabel, "binder"))
			g.Expect(a.Spec.Approved).To(BeTrue())
		}).Should(Succeed())
		g.Expect(a.Spec.ClusterDeploymentName).To(BeNil())
	})

	t.Run("an InfraEnv bound to the victim's cluster", func(t *testing.T) {
		g := NewWithT(t)
		ie := &agentinstallv1.InfraEnv{ObjectMeta: metav1.ObjectMeta{Namespace: attacker, Name: "bound"},
			Spec: agentinstallv1.InfraEnvSpec{PullSecretRef: &corev1.LocalObjectReference{Name: "pull-secret"}, ClusterRef: victimCluster}}
		g.Expect(tenant.Create(ctx, ie)).To(Succeed())
		g.Eventually(func(g Gomega) {
			g.Expect(tenant.Get(ctx, client.ObjectKeyFromObject(ie), ie)).To(Succeed())
			var c *agentinstallv1.Condition
			for i := range ie.Status.Conditions {
				if ie.Status.Conditions[i].Type == "ImageCreated" {
					c = &ie.Status.Conditions[i]
				}
			}
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(corev1.ConditionFalse))
			g.Expect(c.Message).To(Equal("Failed to create image: spec.clusterRef.namespace: " + refusal("InfraEnv")))
		}).Should(Succeed())
		g.Expect(ie.Status.ISODownloadURL).To(BeEmpty(), "no image: its hosts would join the victim's cluster")
	})

	t.Run("an NMStateConfig matching the victim's selector", func(t *testing.T) {
		g := NewWithT(t)
		ie := &agentinstallv1.InfraEnv{ObjectMeta: metav1.ObjectMeta{Namespace: victim, Name: "static"},
			Spec: agentinstallv1.InfraEnvSpec{PullSecretRef: &corev1.LocalObjectReference{Name: "pull-secret"},
				NMStateConfigLabelSelector: metav1.LabelSelector{MatchLabels: map[string]string{"network": "static"}}}}
		g.Expect(env.Client.Create(ctx, nmStateConfig(victim, "own", "static", "52:54:00:7e:00:05"))).To(Succeed())
		forged := nmStateConfig(attacker, "forged", "static", "52:54:00:7e:00:06")
		g.Expect(tenant.Create(ctx, forged)).To(Succeed())
		// The agent service reads the manager's cache: wait until it holds
		// the forged one.
		g.Eventually(func() error { return env.Manager.GetClient().Get(ctx, client.ObjectKeyFromObject(forged), forged) }).Should(Succeed())
		g.Expect(env.Client.Create(ctx, ie)).To(Succeed())
		g.Eventually(func(g Gomega) {
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(ie), ie)).To(Succeed())
			g.Expect(ie.Status.BootArtifacts.IpxeScriptURL).NotTo(BeEmpty())
		}).Should(Succeed())
		var macs []string
		for _, h := range imageConfig(g, ie).Discovery.StaticNetwork {
			for _, m := range h.MACInterfaceMap {
				macs = append(macs, m.MACAddress)
			}
		}
		g.Expect(macs).To(Equal([]string{"52:54:00:7e:00:05"}), "the victim's image holds its own NMStateConfig only")
	})
}
