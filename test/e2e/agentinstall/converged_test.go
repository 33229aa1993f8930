package agentinstall

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	deployapi "github.com/metalshift/metalshift/api/deploy/v1"
	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
	"github.com/metalshift/metalshift/assisted/pkg/conditions"
	"github.com/metalshift/metalshift/assisted/reconcilers/bmac"
	"github.com/metalshift/metalshift/assisted/reconcilers/preprovisioningimage"
)

// restartHub stops the hub and starts it again with the converged flow on
// or off.
func restartHub(g *WithT, converged bool) {
	g.Expect(stopHub()).To(Succeed())
	convergedFlow = converged
	var err error
	stopHub, err = startHub()
	g.Expect(err).NotTo(HaveOccurred())
}

// TestZTPConverged: zero-touch provisioning, the converged flow. The host
// engine makes the labelled host's PreprovisioningImage; the agent service
// serves it the InfraEnv's image, annotated enable-ironic-agent; the engine
// inspects the host in-band with the agent of that image (found by MAC
// through the deploy server's lookup); BMAC sets the custom deploy
// start_assisted_install, which starts the discovery agent; the single
// node installs without a reboot of its own, the engine boots the disk, and
// the host stays managed (provisioned, powered on, not detached).
func TestZTPConverged(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(120 * time.Second)
	g.SetDefaultEventuallyPollingInterval(200 * time.Millisecond)
	ctx := context.Background()
	restartHub(g, true)
	t.Cleanup(func() { restartHub(NewWithT(t), false) })
	const ns, name = "ztp-converged", "ztp-converged"
	lab, _ := startSpare(t, g, ns, 1, 0, 1, "127.77.11")
	g.Expect(lab.Start("127.0.0.1:0")).To(Succeed())
	t.Cleanup(lab.Close)
	m := lab.Machines[0]
	host, secret := lab.Host(m, ns, true)
	host.Labels = map[string]string{agentinstallv1.InfraEnvNameLabel: name}
	host.Annotations = map[string]string{bmac.RoleAnnotation: "master", bmac.HostnameAnnotation: "sno-0"}
	g.Expect(env.Client.Create(ctx, secret)).To(Succeed())
	g.Expect(env.Client.Create(ctx, host)).To(Succeed())

	// The image: the InfraEnv's, for the converged flow.
	ppi := &metal3v1.PreprovisioningImage{}
	g.Eventually(func() string {
		_ = env.Client.Get(ctx, client.ObjectKeyFromObject(host), ppi)
		if c := meta.FindStatusCondition(ppi.Status.Conditions, metal3v1.ImageReadyCondition); c != nil && c.Status == "True" {
			return c.Reason
		}
		return ""
	}).Should(Equal(preprovisioningimage.ReasonInfraEnvAvailable))
	g.Expect(ppi.Finalizers).To(ContainElement(preprovisioningimage.Finalizer))
	ie := &agentinstallv1.InfraEnv{}
	g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, ie)).To(Succeed())
	g.Expect(ie.Annotations).To(HaveKeyWithValue(agentinstallv1.EnableIronicAgentAnnotation, "true"))
	// The InfraEnv's URL may be minted again after the image was first
	// ready (the annotation changes the image): the PreprovisioningImage
	// follows it.
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, ie)).To(Succeed())
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(host), ppi)).To(Succeed())
		g.Expect(ppi.Status.ImageUrl).To(Equal(ie.Status.ISODownloadURL))
	}).Should(Succeed())
	g.Expect(ppi.Status.Format).To(Equal(metal3v1.ImageFormatISO))

	// BMAC: the custom deploy, nothing of the other flow.
	g.Eventually(func() *metal3v1.CustomDeploy {
		_ = env.Client.Get(ctx, client.ObjectKeyFromObject(host), host)
		return host.Spec.CustomDeploy
	}).Should(Equal(&metal3v1.CustomDeploy{Method: deployapi.MethodStartAssistedInstall}))
	g.Expect(host.Spec.Image).To(BeNil())
	g.Expect(host.Annotations).NotTo(HaveKey(metal3v1.InspectAnnotation))

	agent := &agentinstallv1.Agent{}
	g.Eventually(func() bool {
		_ = env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: m.UUID}, agent)
		return agent.Spec.Approved
	}).Should(BeTrue())
	g.Expect(agent.Spec.Role).To(Equal(agentinstallv1.HostRoleMaster))
	g.Expect(agent.Labels).To(HaveKeyWithValue(bmac.BMHLabel, host.Name))
	// Its agent registered with the proof the deploy server handed the
	// host's deploy agent: BMAC approved it for that.
	g.Expect(agent.Annotations).To(HaveKeyWithValue(agentinstallv1.AgentRegisteredForHostAnnotation, host.Name+"/"+string(host.UID)))

	aci := waitCompleted(g, ns, name)
	g.Expect(condMessage(aci, "Completed")).To(Equal("The installation has completed: Cluster is installed"))
	nodes := spokeNodes(g, ns, name)
	g.Expect(nodes.Items).To(HaveLen(1))
	g.Expect(nodes.Items[0].Name).To(Equal("sno-0"))
	g.Eventually(func() string {
		_ = env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: m.UUID}, agent)
		return agent.Status.Progress.CurrentStage
	}).Should(Equal("Done"))

	// The host: inspected by the image's agent, provisioned by the custom
	// deploy, powered on, still managed.
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(host), host)).To(Succeed())
	g.Expect(host.Status.Provisioning.State).To(Equal(metal3v1.StateProvisioned))
	g.Expect(host.Status.Provisioning.CustomDeploy).To(Equal(&metal3v1.CustomDeploy{Method: deployapi.MethodStartAssistedInstall}))
	g.Expect(host.Status.PoweredOn).To(BeTrue())
	g.Expect(m.PoweredOn()).To(BeTrue())
	g.Expect(host.Annotations).NotTo(HaveKey(metal3v1.DetachedAnnotation))
	g.Expect(host.Status.OperationalStatus).To(Equal(metal3v1.OperationalStatusOK))
	g.Expect(host.Status.HardwareDetails).NotTo(BeNil())
	g.Expect(host.Status.HardwareDetails.NIC).To(ContainElement(HaveField("MAC", m.Hardware.NICs[0].MAC)))
	g.Expect(host.Status.HardwareDetails.CPU.Count).To(Equal(m.Hardware.CPUCount))
	g.Expect(lab.Firmware.Log(m.ID)).To(ContainElements(ContainSubstring("Looked up host"), Equal("inspect done"),
		ContainSubstring("Running custom deploy method start_assisted_install"), Equal("custom-deploy done")))

	// The image booted by hand on a machine no BareMetalHost stands for:
	// it finds no host, and the InfraEnv says so.
	spare := lab.Machines[1]
	bootISO(g, spare, ie.Status.ISODownloadURL)
	g.Eventually(func() agentinstallv1.Condition {
		_ = env.Client.Get(ctx, client.ObjectKeyFromObject(ie), ie)
		for _, c := range ie.Status.Conditions {
			if string(c.Type) == conditions.ManualBootCondition {
				return c
			}
		}
		return agentinstallv1.Condition{}
	}).Should(And(HaveField("Status", corev1.ConditionTrue), HaveField("Reason", conditions.ManualBootReason),
		HaveField("Message", And(ContainSubstring("Machines with MAC "+spare.Hardware.NICs[0].MAC),
			ContainSubstring("booted this InfraEnv's discovery image by hand")))))
	g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: spare.UUID}, &agentinstallv1.Agent{})).NotTo(Succeed())
	// ImageCreated is untouched.
	g.Expect(imageCreatedOf(g, ie)()).To(HaveField("Reason", "InfraEnvAvailable"))
}
