package agentinstall

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	hivev1 "github.com/metalshift/metalshift/api/hive/v1"
	hiveextv1 "github.com/metalshift/metalshift/api/hiveext/v1beta1"
)

// TestLateBinding: a machine boots the ISO of an InfraEnv without
// clusterRef and waits known-unbound; its Agent is bound to a cluster
// (binding, then known there), unbound (unbinding, then known-unbound
// again) and bound to another cluster, each step with upstream's Bound
// condition. The clusters are single nodes left unapproved: nothing
// installs.
func TestLateBinding(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(40 * time.Second)
	g.SetDefaultEventuallyPollingInterval(200 * time.Millisecond)
	ctx := context.Background()
	const ns = "latebinding"
	serviceObjects(t, g)
	objs := installObjects(ns, "a", 1, 0, "", "")
	objs = append(objs[:4], installObjects(ns, "b", 1, 0, "", "")[2:4]...) // b: its CD and ACI
	objs = append(objs, lateInfraEnv(ns, "late"))
	for _, o := range objs {
		g.Expect(env.Client.Create(ctx, o)).To(Succeed())
	}
	lab := world(t, 1, "127.77.9")
	m := lab.Machines[0]
	t.Cleanup(m.PowerOff)
	bootISO(g, m, isoURL(g, ns, "late"))

	// Unbound: known-unbound once its inventory passes the minimums.
	g.Eventually(agentState(ns, m.UUID)).Should(Equal("known-unbound"))
	g.Expect(agentCondition(g, ns, m.UUID, "Bound")()).To(And(HaveField("Status", corev1.ConditionFalse),
		HaveField("Reason", "Unbound"), HaveField("Message", "The agent is not bound to any cluster deployment")))

	bind := func(cd string) {
		patch := `{"spec":{"clusterDeploymentName":null}}`
		if cd != "" {
			patch = fmt.Sprintf(`{"spec":{"clusterDeploymentName":{"name":%q,"namespace":%q}}}`, cd, ns)
		}
		a := &agentinstallv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: m.UUID}}
		g.Expect(env.Client.Patch(ctx, a, client.RawPatch(types.MergePatchType, []byte(patch)))).To(Succeed())
	}
	bound := And(HaveField("Status", corev1.ConditionTrue), HaveField("Reason", "Bound"),
		HaveField("Message", "The agent is bound to a cluster deployment"))

	// Bound: binding (the agent is told to register again, which makes it
	// discovering), then discovered in the cluster.
	bind("a")
	g.Eventually(agentState(ns, m.UUID)).Should(Equal("known"))
	g.Expect(agentCondition(g, ns, m.UUID, "Bound")()).To(bound)
	g.Eventually(transitions(ns, m.UUID)).Should(ContainElements("known-unbound→binding", "discovering→known"))

	// Unbound: unbinding, discovering-unbound once it registered again,
	// then back in the InfraEnv.
	bind("")
	g.Eventually(agentState(ns, m.UUID)).Should(Equal("known-unbound"))
	g.Expect(agentCondition(g, ns, m.UUID, "Bound")()).To(HaveField("Reason", "Unbound"))
	g.Eventually(transitions(ns, m.UUID)).Should(ContainElements("known→unbinding", "discovering-unbound→known-unbound"))
	g.Eventually(mastersDiscovered(ns, "a")).Should(BeZero())

	// Bound to the other cluster.
	bind("b")
	g.Eventually(agentState(ns, m.UUID)).Should(Equal("known"))
	g.Expect(agentCondition(g, ns, m.UUID, "Bound")()).To(bound)
	g.Eventually(mastersDiscovered(ns, "b")).Should(Equal(1))
	g.Eventually(aciCondition(ns, "b", "RequirementsMet")).Should(Equal("The installation is pending on the approval of 1 agents"))
}

// TestImport: a single node installed by the service is imported through
// a new ClusterDeployment (installed: true, clusterMetadata naming a copy
// of its admin kubeconfig Secret) and AgentClusterInstall in another
// namespace: the install is at once adding-hosts, and a worker booted
// from an InfraEnv bound to it installs with a pointer Ignition to the
// cluster's machine-config-server, its CSRs approved by the hub through
// the imported kubeconfig. Unbound afterwards, the worker waits to boot
// the discovery image again (reclaim) and is then known-unbound.
func TestImport(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(100 * time.Second)
	g.SetDefaultEventuallyPollingInterval(200 * time.Millisecond)
	ctx := context.Background()
	const src, ns = "impsrc", "imported"
	lab, ie := startSpare(t, g, src, 1, 0, 1, "127.77.10")
	node, worker := lab.Machines[0], lab.Machines[1]
	bootISO(g, node, ie.Status.ISODownloadURL)
	approve(g, src, node.UUID)
	waitCompleted(g, src, src)

	// Import: the admin kubeconfig is all the hub gets.
	kc := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: src, Name: src + "-admin-kubeconfig"}, kc)).To(Succeed())
	// The imported cluster has user-managed networking: its API and
	// ingress names resolve in the network's DNS, which the worker's
	// domain-resolution answers show (the DNS validations read them).
	objs := installObjects(ns, ns, 3, 0, "", "")
	cd := objs[2].(*hivev1.ClusterDeployment)
	cd.Spec.ClusterName, cd.Spec.Installed = src, true
	cd.Spec.ClusterMetadata = &hivev1.ClusterMetadata{AdminKubeconfigSecretRef: corev1.LocalObjectReference{Name: "imported-kubeconfig"}}
	objs = append(objs, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "imported-kubeconfig"},
		Data: map[string][]byte{"kubeconfig": kc.Data["kubeconfig"]}})
	for _, o := range objs {
		g.Expect(env.Client.Create(ctx, o)).To(Succeed())
	}
	g.Eventually(aciState(ns)).Should(Equal("adding-hosts"))
	aci := &hiveextv1.AgentClusterInstall{}
	g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: ns}, aci)).To(Succeed())
	g.Expect(aci.Status.DebugInfo.StateInfo).To(Equal("cluster is adding hosts to existing OCP cluster"))
	g.Expect(condMessage(aci, "Completed")).To(Equal("The installation has completed: Cluster is installed"))
	g.Expect(condTrue(aci, "Stopped")).To(BeTrue())
	sec := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: ns + "-install-state"}, sec)).NotTo(Succeed())

	// A worker booted from the imported cluster's InfraEnv installs at once.
	bootISO(g, worker, isoURL(g, ns, ns))
	a := approve(g, ns, worker.UUID)
	g.Expect(env.Client.Patch(ctx, a, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"role":"worker"}}`)))).To(Succeed())
	g.Eventually(func() string {
		_ = env.Client.Get(ctx, client.ObjectKeyFromObject(a), a)
		return a.Status.DebugInfo.State + "/" + a.Status.Progress.CurrentStage
	}).Should(Equal("added-to-existing-cluster/Done"), func() string { return fmt.Sprintf("%s %+v", a.Status.DebugInfo.StateInfo, a.Status.ValidationsInfo) })
	g.Expect(a.Status.Kind).To(Equal("AddToExistingClusterHost"))
	g.Expect(a.Status.ValidationsInfo["network"]).To(ContainElement(And(HaveField("ID", "api-domain-name-resolved-correctly"),
		HaveField("Status", "success"))))
	g.Expect(a.Annotations).To(HaveKeyWithValue("metalshift.io/domain-resolutions",
		`{"api-int.impsrc.example.com":true,"api.impsrc.example.com":true,"console-openshift-console.apps.impsrc.example.com":true}`))
	g.Expect(spokeNodes(g, src, src).Items).To(HaveLen(2))
	g.Expect(a.Status.CSRStatus.ApprovedCSRs).To(ContainElement(HaveField("Type", agentinstallv1.CSRTypeClient)))
	csr := &certificatesv1.CertificateSigningRequest{}
	g.Expect(spokeClient(g, src, src).Get(ctx, types.NamespacedName{Name: a.Status.CSRStatus.ApprovedCSRs[0].Name}, csr)).To(Succeed())
	g.Expect(csr.Status.Conditions).To(ContainElement(HaveField("Reason", "AgentServiceApprove")))

	// Reclaim: unbound once installed, the host must boot the discovery
	// image again; it then registers unbound.
	g.Expect(env.Client.Patch(ctx, a, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"clusterDeploymentName":null}}`)))).To(Succeed())
	g.Eventually(agentState(ns, worker.UUID)).Should(Equal("unbinding-pending-user-action"))
	g.Expect(agentCondition(g, ns, worker.UUID, "Bound")()).To(And(HaveField("Status", corev1.ConditionFalse),
		HaveField("Reason", "UnbindingPendingUserAction"),
		HaveField("Message", "The agent is currently unbinding; Pending host reboot from infraenv image")))
	worker.PowerOff()
	bootISO(g, worker, isoURL(g, ns, ns))
	g.Eventually(agentState(ns, worker.UUID)).Should(Equal("known-unbound"))
}

// lateInfraEnv is an InfraEnv without clusterRef (late binding).
func lateInfraEnv(ns, name string) *agentinstallv1.InfraEnv {
	return &agentinstallv1.InfraEnv{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: agentinstallv1.InfraEnvSpec{
		PullSecretRef: &corev1.LocalObjectReference{Name: "pull-secret"}, SSHAuthorizedKey: "ssh-ed25519 AAAA user@host",
	}}
}

// isoURL waits for an InfraEnv's ISO URL.
func isoURL(g *WithT, ns, name string) string {
	ie := &agentinstallv1.InfraEnv{}
	g.Eventually(func() string {
		_ = env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, ie)
		return ie.Status.ISODownloadURL
	}).ShouldNot(BeEmpty())
	return ie.Status.ISODownloadURL
}

func agentState(ns, uuid string) func() string {
	return func() string {
		a := &agentinstallv1.Agent{}
		_ = env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: uuid}, a)
		return a.Status.DebugInfo.State
	}
}

func aciCondition(ns, name, typ string) func() string {
	return func() string {
		aci := &hiveextv1.AgentClusterInstall{}
		_ = env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, aci)
		return condMessage(aci, typ)
	}
}

func mastersDiscovered(ns, name string) func() int {
	return func() int {
		aci := &hiveextv1.AgentClusterInstall{}
		_ = env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, aci)
		return aci.Status.ControlPlaneAgentsDiscovered
	}
}

// transitions are an Agent's status changes ("from→to") from its
// HostStatusUpdated events, oldest first.
func transitions(ns, uuid string) func() []string {
	return func() []string {
		list := &corev1.EventList{}
		_ = env.Client.List(context.Background(), list, client.InNamespace(ns))
		sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].FirstTimestamp.Before(&list.Items[j].FirstTimestamp) })
		var out []string
		for _, e := range list.Items {
			if e.InvolvedObject.Name != uuid || e.Reason != "HostStatusUpdated" {
				continue
			}
			// "Host <name>: updated status from <from> to <to> (<info>)"
			_, rest, _ := strings.Cut(e.Message, "updated status from ")
			from, rest, _ := strings.Cut(rest, " to ")
			to, _, _ := strings.Cut(rest, " ")
			out = append(out, from+"→"+to)
		}
		return out
	}
}
