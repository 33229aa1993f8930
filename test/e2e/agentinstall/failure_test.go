package agentinstall

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	hiveextv1 "github.com/metalshift/metalshift/api/hiveext/v1beta1"
	"github.com/metalshift/metalshift/imageservice"
)

// TestBelowMinimums: a single node with 2 cores is approved but fails its
// validations with upstream's message, and nothing installs.
func TestBelowMinimums(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(60 * time.Second)
	g.SetDefaultEventuallyPollingInterval(200 * time.Millisecond)
	const ns = "small"
	lab, ie := start(t, g, ns, 1, 0, "127.77.3")
	m := lab.Machines[0]
	m.Hardware.CPUCount = 2
	bootISO(g, m, ie.Status.ISODownloadURL)
	approve(g, ns, m.UUID)
	g.Eventually(agentCondition(g, ns, m.UUID, "Validated")).Should(And(
		HaveField("Status", corev1.ConditionFalse), HaveField("Reason", "ValidationsFailing"),
		HaveField("Message", ContainSubstring("Require at least 8 CPU cores for master role, found only 2"))))
	g.Eventually(agentCondition(g, ns, m.UUID, "RequirementsMet")).Should(And(
		HaveField("Status", corev1.ConditionFalse), HaveField("Reason", "AgentNotReady")))
	g.Consistently(aciState(ns), 5*time.Second).Should(Equal("insufficient"))
	g.Expect(m.Hardware.Disks[0].Writes()).To(BeZero(), "nothing was written to the disk")
}

// TestBadNMStateConfig: an NMStateConfig the InfraEnv selects maps an
// interface to no MAC; the image is not created, with upstream's message,
// and fixing the config creates it.
func TestBadNMStateConfig(t *testing.T) {
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(30 * time.Second)
	g.SetDefaultEventuallyPollingInterval(200 * time.Millisecond)
	ctx := context.Background()
	const ns = "nmstate"
	serviceObjects(t, g)
	objs := installObjects(ns, ns, 1, 0, "", "")
	ie := objs[len(objs)-1].(*agentinstallv1.InfraEnv)
	ie.Spec.NMStateConfigLabelSelector = metav1.LabelSelector{MatchLabels: map[string]string{"infraenvs.agent-install.openshift.io": ns}}
	nm := &agentinstallv1.NMStateConfig{
		ObjectMeta: metav1.ObjectMeta{Name: "node-0", Namespace: ns, Labels: map[string]string{"infraenvs.agent-install.openshift.io": ns}},
		Spec: agentinstallv1.NMStateConfigSpec{
			Interfaces: []*agentinstallv1.Interface{{Name: "eth0", MacAddress: "52:54:00:00:00:01"}},
			NetConfig: &runtime.RawExtension{Raw: []byte(`{"interfaces":[{"name":"eth1","type":"ethernet","state":"up",` +
				`"ipv4":{"enabled":true,"dhcp":false,"address":[{"ip":"192.168.111.20","prefix-length":24}]}}]}`)},
		},
	}
	for _, o := range append(objs, nm) {
		g.Expect(env.Client.Create(ctx, o)).To(Succeed())
	}
	imageCreated := imageCreatedOf(g, ie)
	g.Eventually(imageCreated).Should(And(HaveField("Status", corev1.ConditionFalse), HaveField("Reason", "ImageCreationError"),
		HaveField("Message", "Failed to create image: mac-interface mapping for interface eth1 is missing and not a physical interface")))
	g.Expect(ie.Status.ISODownloadURL).To(BeEmpty())

	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(nm), nm)).To(Succeed())
	nm.Spec.Interfaces[0].Name = "eth1"
	g.Expect(env.Client.Update(ctx, nm)).To(Succeed())
	g.Eventually(imageCreated).Should(And(HaveField("Status", corev1.ConditionTrue), HaveField("Reason", "InfraEnvAvailable")))
	g.Expect(ie.Status.ISODownloadURL).NotTo(BeEmpty())
}

// TestDisconnected: an agent that stops calling (its machine powers off)
// leaves its Agent Connected False after the disconnection timeout.
func TestDisconnected(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(60 * time.Second)
	g.SetDefaultEventuallyPollingInterval(200 * time.Millisecond)
	const ns = "gone"
	lab, ie := start(t, g, ns, 1, 0, "127.77.4")
	m := lab.Machines[0]
	bootISO(g, m, ie.Status.ISODownloadURL)
	connected := agentCondition(g, ns, m.UUID, "Connected")
	g.Eventually(connected).Should(HaveField("Reason", "AgentIsConnected"))
	m.PowerOff()
	g.Eventually(connected).Should(And(HaveField("Status", corev1.ConditionFalse), HaveField("Reason", "AgentIsDisconnected"),
		HaveField("Message", "The agent has not contacted the installation service in some time, user action should be taken")))
	a := &agentinstallv1.Agent{}
	g.Expect(env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: m.UUID}, a)).To(Succeed())
	g.Expect(a.Status.DebugInfo.State).To(Equal("disconnected"))
}

// TestHostFailure: of a compact cluster's three masters, one cannot write
// its OS image (bad blocks at the start of its disk); its Agent reports the
// failure, and the cluster install fails and stops.
func TestHostFailure(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(100 * time.Second)
	g.SetDefaultEventuallyPollingInterval(200 * time.Millisecond)
	ctx := context.Background()
	const ns = "failing"
	lab, ie := start(t, g, ns, 3, 0, "127.77.5", "127.77.5.100", "127.77.5.101")
	bad := lab.Machines[0]
	bad.Hardware.Disks[0].SetBadBlocks(0, 1<<20)
	bootAll(g, lab, ie)
	g.Eventually(aciState(ns)).Should(Equal("error"))
	aci := &hiveextv1.AgentClusterInstall{}
	g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: ns}, aci)).To(Succeed())
	for typ, want := range map[string][2]string{
		"Failed":    {"InstallationFailed", "The installation failed: cluster has hosts in error"},
		"Stopped":   {"InstallationFailed", "The installation has stopped due to error"},
		"Completed": {"InstallationFailed", "The installation has failed: cluster has hosts in error"},
	} {
		g.Expect(aci.Status.Conditions).To(ContainElement(And(HaveField("Type", typ), HaveField("Reason", want[0]), HaveField("Message", want[1]))), typ)
	}
	g.Expect(condTrue(aci, "Failed")).To(BeTrue())
	g.Expect(condTrue(aci, "Stopped")).To(BeTrue())
	a := &agentinstallv1.Agent{}
	g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: bad.UUID}, a)).To(Succeed())
	g.Expect(a.Status.DebugInfo.State).To(Equal("error"))
	g.Expect(a.Status.Progress.CurrentStage).To(Equal("Failed"))
	g.Expect(a.Status.DebugInfo.StateInfo).To(ContainSubstring("input/output error"))
	g.Expect(agentCondition(g, ns, bad.UUID, "Installed")()).To(And(HaveField("Status", corev1.ConditionFalse), HaveField("Reason", "InstallationFailed")))
}

// TestIgnitionConfigOverride: an InfraEnv's ignitionConfigOverride is
// validated as Ignition (upstream's message), bounded at 256 KiB
// compressed (upstream's message), and once valid is carried by the ISO.
func TestIgnitionConfigOverride(t *testing.T) {
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(30 * time.Second)
	g.SetDefaultEventuallyPollingInterval(200 * time.Millisecond)
	ctx := context.Background()
	const ns = "override"
	serviceObjects(t, g)
	objs := installObjects(ns, ns, 1, 0, "", "")
	ie := objs[len(objs)-1].(*agentinstallv1.InfraEnv)
	ie.Spec.IgnitionConfigOverride = `{"ignition":{"version":"3.1.0"},"storage":{"files":[{"path":"etc/motd"}]}}`
	for _, o := range objs {
		g.Expect(env.Client.Create(ctx, o)).To(Succeed())
	}
	imageCreated := imageCreatedOf(g, ie)
	g.Eventually(imageCreated).Should(And(HaveField("Status", corev1.ConditionFalse), HaveField("Reason", "ImageCreationError"),
		HaveField("Message", HavePrefix("Failed to create image: error parsing ignition: "))))

	// 300 KiB that do not compress.
	noise := make([]byte, 300<<10)
	_, _ = rand.Read(noise)
	big := fmt.Sprintf(`{"ignition":{"version":"3.1.0"},"storage":{"files":[{"path":"/etc/noise","contents":{"source":"data:;base64,%s"}}]}}`,
		base64.StdEncoding.EncodeToString(noise))
	g.Expect(env.Client.Patch(ctx, ie, client.RawPatch(types.MergePatchType,
		[]byte(fmt.Sprintf(`{"spec":{"ignitionConfigOverride":%q}}`, big))))).To(Succeed())
	g.Eventually(imageCreated).Should(And(HaveField("Status", corev1.ConditionFalse),
		HaveField("Message", MatchRegexp(`^Failed to create image: The ignition archive size \(\d+ KiB\) is over the maximum allowable size \(256 KiB\)$`))))

	motd := `{"ignition":{"version":"3.1.0"},"storage":{"files":[{"path":"/etc/motd","contents":{"source":"data:,welcome"}}]}}`
	g.Expect(env.Client.Patch(ctx, ie, client.RawPatch(types.MergePatchType,
		[]byte(fmt.Sprintf(`{"spec":{"ignitionConfigOverride":%q}}`, motd))))).To(Succeed())
	g.Eventually(imageCreated).Should(HaveField("Status", corev1.ConditionTrue))
	resp, err := http.Get(ie.Status.ISODownloadURL)
	g.Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	iso, err := io.ReadAll(resp.Body)
	g.Expect(err).NotTo(HaveOccurred())
	cfg, err := imageservice.ReadISOHostConfig(bytes.NewReader(iso))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cfg.Discovery.IgnitionConfigOverride).To(Equal(motd))
}
