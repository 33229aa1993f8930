package agentinstall

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	hivev1 "github.com/metalshift/metalshift/api/hive/v1"
	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
	"github.com/metalshift/metalshift/assisted/reconcilers/bmac"
)

// TestZTPSingleNode: zero-touch provisioning. A BareMetalHost on the
// simulated Redfish BMC, labelled for the InfraEnv, boots its discovery ISO
// through the host engine (virtual media, live-iso); its Agent is paired
// by MAC, approved, and takes the host's role and hostname annotations and
// agent labels; the host gets the Agent's inventory as hardware details;
// the single node installs, and the host is detached once it rebooted into
// its disk. Nobody boots or approves anything by hand. The hub's metrics
// endpoint, scraped before and after, counts the install and the host's
// provisioning once and the objects by state as the API does.
func TestZTPSingleNode(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(120 * time.Second)
	g.SetDefaultEventuallyPollingInterval(200 * time.Millisecond)
	ctx := context.Background()
	const ns, name = "ztp-sno", "ztp-sno"
	lab, _ := start(t, g, ns, 1, 0, "127.77.8")
	g.Expect(lab.Start("127.0.0.1:0")).To(Succeed())
	metricsBefore := scrapeHub(g)
	t.Cleanup(lab.Close)
	m := lab.Machines[0]
	host, secret := lab.Host(m, ns, true)
	host.Labels = map[string]string{agentinstallv1.InfraEnvNameLabel: name}
	host.Annotations = map[string]string{
		bmac.RoleAnnotation:                   "master",
		bmac.HostnameAnnotation:               "sno-0",
		bmac.AgentLabelPrefix + "agent-label": "label-value",
	}
	host.Spec.RootDeviceHints = &metal3v1.RootDeviceHints{DeviceName: "/dev/sda"}
	g.Expect(env.Client.Create(ctx, secret)).To(Succeed())
	g.Expect(env.Client.Create(ctx, host)).To(Succeed())

	// BMAC pairs the Agent with the host and approves it.
	agent := &agentinstallv1.Agent{}
	g.Eventually(func() bool {
		_ = env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: m.UUID}, agent)
		return agent.Spec.Approved
	}).Should(BeTrue())
	g.Expect(agent.Labels).To(HaveKeyWithValue(bmac.BMHLabel, host.Name))
	g.Expect(agent.Labels).To(HaveKeyWithValue("agent-label", "label-value"))
	g.Expect(agent.Spec.Role).To(Equal(agentinstallv1.HostRoleMaster))
	g.Expect(agent.Spec.Hostname).To(Equal("sno-0"))

	aci := waitCompleted(g, ns, name)
	g.Expect(condMessage(aci, "Completed")).To(Equal("The installation has completed: Cluster is installed"))
	cd := &hivev1.ClusterDeployment{}
	g.Eventually(func() bool {
		_ = env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, cd)
		return cd.Spec.Installed
	}).Should(BeTrue())
	nodes := spokeNodes(g, ns, name)
	g.Expect(nodes.Items).To(HaveLen(1))
	g.Expect(nodes.Items[0].Name).To(Equal("sno-0"))

	// The host: booted the ISO as live-iso without inspection or
	// cleaning, has the Agent's inventory as hardware details, and is
	// detached now that the install rebooted it into its disk.
	g.Eventually(func() map[string]string {
		_ = env.Client.Get(ctx, client.ObjectKeyFromObject(host), host)
		return host.Annotations
	}).Should(HaveKey(metal3v1.DetachedAnnotation))
	g.Expect(host.Annotations).To(HaveKeyWithValue(metal3v1.InspectAnnotation, "disabled"))
	g.Expect(host.Spec.Image).NotTo(BeNil())
	g.Expect(*host.Spec.Image.DiskFormat).To(Equal("live-iso"))
	g.Expect(host.Spec.AutomatedCleaningMode).To(Equal(metal3v1.CleaningModeDisabled))
	g.Expect(host.Status.Provisioning.State).To(Equal(metal3v1.StateProvisioned))
	hw := &metal3v1.HardwareDetails{}
	g.Expect(json.Unmarshal([]byte(host.Annotations[metal3v1.HardwareDetailsAnnotation]), hw)).To(Succeed())
	g.Expect(hw.NIC).To(ContainElement(HaveField("MAC", m.Hardware.NICs[0].MAC)))
	g.Expect(hw.CPU.Count).To(Equal(m.Hardware.CPUCount))
	g.Expect(host.Status.HardwareDetails).NotTo(BeNil())
	g.Expect(host.Status.HardwareDetails.NIC).To(ContainElement(HaveField("MAC", m.Hardware.NICs[0].MAC)))

	// The hub's metrics: the install and the host's provisioning observed
	// once, the gauges as the API counts.
	expectInstallMetrics(t, metricsBefore, aci, host)
}

// TestZTPWorkers: three masters and two workers from BareMetalHosts
// labelled for the InfraEnv, roles from the hosts' role annotations, then a
// day-2 worker: a sixth host labelled after the install joins the installed
// cluster. The flow that boots the ISO as a live-iso image and detaches
// the hosts once installed.
func TestZTPWorkers(t *testing.T) {
	ztpWorkers(t, false, "ztp-workers", "127.77.12")
}

// TestZTPWorkersConverged is TestZTPWorkers in the converged flow: the
// hosts stay managed by the host engine.
func TestZTPWorkersConverged(t *testing.T) {
	ztpWorkers(t, true, "ztp-workers-converged", "127.77.13")
}

func ztpWorkers(t *testing.T, converged bool, ns, subnet string) {
	if testing.Short() {
		t.Skip("end to end")
	}
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(150 * time.Second)
	g.SetDefaultEventuallyPollingInterval(200 * time.Millisecond)
	ctx := context.Background()
	if converged {
		restartHub(g, true)
		t.Cleanup(func() { restartHub(NewWithT(t), false) })
	}
	lab, _ := startSpare(t, g, ns, 3, 2, 1, subnet, subnet+".100", subnet+".101")
	g.Expect(lab.Start("127.0.0.1:0")).To(Succeed())
	t.Cleanup(lab.Close)
	addHost := func(i int, role string) *metal3v1.BareMetalHost {
		host, secret := lab.Host(lab.Machines[i], ns, true)
		host.Labels = map[string]string{agentinstallv1.InfraEnvNameLabel: ns}
		host.Annotations = map[string]string{bmac.RoleAnnotation: role}
		g.Expect(env.Client.Create(ctx, secret)).To(Succeed())
		g.Expect(env.Client.Create(ctx, host)).To(Succeed())
		return host
	}
	for i, role := range []string{"master", "master", "master", "worker", "worker"} {
		addHost(i, role)
	}
	waitCompleted(g, ns, ns)
	g.Expect(spokeNodes(g, ns, ns).Items).To(HaveLen(5))
	for _, m := range lab.Machines[:5] {
		a := &agentinstallv1.Agent{}
		g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: m.UUID}, a)).To(Succeed())
		g.Expect(a.Status.Progress.CurrentStage).To(Equal("Done"), m.UUID)
	}
	g.Eventually(aciState(ns)).Should(Equal("adding-hosts"))

	// Day 2: a host labelled now installs into the running cluster.
	host := addHost(5, "worker")
	g.Eventually(func() string {
		a := &agentinstallv1.Agent{}
		_ = env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: lab.Machines[5].UUID}, a)
		return a.Status.DebugInfo.State + "/" + a.Status.Progress.CurrentStage
	}).Should(Equal("added-to-existing-cluster/Done"))
	g.Expect(spokeNodes(g, ns, ns).Items).To(HaveLen(6))
	if converged {
		g.Eventually(func() metal3v1.ProvisioningState {
			_ = env.Client.Get(ctx, client.ObjectKeyFromObject(host), host)
			return host.Status.Provisioning.State
		}).Should(Equal(metal3v1.StateProvisioned))
		g.Expect(host.Annotations).NotTo(HaveKey(metal3v1.DetachedAnnotation))
		g.Expect(host.Spec.CustomDeploy).NotTo(BeNil())
	} else {
		g.Eventually(func() map[string]string {
			_ = env.Client.Get(ctx, client.ObjectKeyFromObject(host), host)
			return host.Annotations
		}).Should(HaveKey(metal3v1.DetachedAnnotation))
	}

	// Deleting a host cascades nothing, unless it is annotated
	// remove-agent-and-node-on-delete: then its Agent and its Node in the
	// installed cluster go with it.
	other := &metal3v1.BareMetalHost{}
	g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: lab.Machines[4].ID}, other)).To(Succeed())
	g.Expect(env.Client.Delete(ctx, other)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(other), other))
	}).Should(BeTrue())
	g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: lab.Machines[4].UUID}, &agentinstallv1.Agent{})).To(Succeed())
	g.Expect(spokeNodes(g, ns, ns).Items).To(HaveLen(6))

	g.Expect(env.Client.Patch(ctx, host, client.RawPatch(types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"`+bmac.RemoveAgentAndNodeOnDeleteAnnotation+`":"true"}}}`)))).To(Succeed())
	g.Eventually(func() []string {
		_ = env.Client.Get(ctx, client.ObjectKeyFromObject(host), host)
		return host.Finalizers
	}).Should(ContainElement(bmac.Finalizer))
	g.Expect(env.Client.Delete(ctx, host)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(host), host)) &&
			apierrors.IsNotFound(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: lab.Machines[5].UUID}, &agentinstallv1.Agent{}))
	}).Should(BeTrue())
	names := []string{}
	for _, n := range spokeNodes(g, ns, ns).Items {
		names = append(names, n.Name)
	}
	g.Expect(names).To(HaveLen(5))
	g.Expect(names).NotTo(ContainElement(lab.Machines[5].ID))
}
