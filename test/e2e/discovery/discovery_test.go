package discovery

import (
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	hivev1 "github.com/metalshift/metalshift/api/hive/v1"
	hiveextv1 "github.com/metalshift/metalshift/api/hiveext/v1beta1"
	"github.com/metalshift/metalshift/assisted"
	"github.com/metalshift/metalshift/component"
	"github.com/metalshift/metalshift/internal/testenv"
	"github.com/metalshift/metalshift/sim"
	"github.com/metalshift/metalshift/sim/machine"
	"github.com/metalshift/metalshift/sim/qemu"
)

// The cluster the InfraEnv is bound to: a single node, as seed 001's.
const ns, name = "qemu-sno", "qemu-sno"

// TestQEMUDiscovery boots a QEMU VM (UEFI, TCG) from an InfraEnv's
// discovery ISO, as served by the agent service with the live images of
// `make images`: the discovery agent in it registers, its Agent appears
// on the hub named after the VM's SMBIOS UUID with the VM's real hardware
// as its inventory, connected, with a state and validations computed from
// that inventory, and the ntp-synchronizer step answered. The VM is far
// below a node's minimums: nothing is installed.
func TestQEMUDiscovery(t *testing.T) {
	images := requireQEMU(t)
	g := NewWithT(t)
	ctx := context.Background()
	start := time.Now()
	env := startHub(t, images)

	for _, o := range clusterObjects() {
		g.Expect(env.Client.Create(ctx, o)).To(Succeed())
	}
	ie := &agentinstallv1.InfraEnv{}
	g.Eventually(func() string {
		_ = env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, ie)
		return ie.Status.ISODownloadURL
	}, 30*time.Second, 200*time.Millisecond).Should(HavePrefix("http://" + qemu.DefaultGuestHostAlias + ":"))

	lab := startLab(t)
	m := lab.Machines[0]
	bootISO(g, m, ie.Status.ISODownloadURL)
	booted := time.Now()

	agent := &agentinstallv1.Agent{}
	key := types.NamespacedName{Namespace: ns, Name: m.UUID}
	g.Eventually(func() error { return env.Client.Get(ctx, key, agent) }, 5*time.Minute, time.Second).Should(Succeed(),
		"the VM's discovery agent registers (console: %s)", lab.QEMU.ConsoleLog(m.ID))
	registered := time.Now()
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, key, agent)).To(Succeed())
		g.Expect(agent.Status.Inventory.ReportTime).NotTo(BeNil(), "the inventory step is answered")
		g.Expect(agent.Status.NtpSources).NotTo(BeEmpty(), "the ntp-synchronizer step is answered")
		g.Expect(agent.Status.ValidationsInfo).NotTo(BeEmpty())
		g.Expect(agent.Status.DebugInfo.State).NotTo(BeEmpty())
		g.Expect(condition(agent, "Connected")).To(HaveField("Status", corev1.ConditionTrue))
	}, 2*time.Minute, time.Second).Should(Succeed())
	reported := time.Now()

	// The inventory is the VM's, as QEMU presents the lab's hardware.
	hw, inv := m.Hardware, agent.Status.Inventory
	g.Expect(agent.Spec.ClusterDeploymentName).To(HaveField("Name", name))
	g.Expect(inv.Cpu.Count).To(BeEquivalentTo(hw.CPUCount))
	g.Expect(inv.Cpu.Architecture).To(Equal("x86_64"))
	g.Expect(inv.Memory.PhysicalBytes).To(BeEquivalentTo(int64(hw.RAMMiB) << 20))
	g.Expect(inv.Disks).To(ContainElement(And(HaveField("Path", hw.Disks[0].Name), HaveField("SizeBytes", hw.Disks[0].SizeBytes),
		HaveField("Serial", hw.Disks[0].SerialNumber))))
	g.Expect(inv.Interfaces).To(ContainElement(And(HaveField("MacAddress", hw.NICs[0].MAC),
		HaveField("IPV4Addresses", ContainElement(qemu.GuestIP+"/24")))))
	g.Expect(inv.SystemVendor).To(And(HaveField("Manufacturer", hw.Manufacturer), HaveField("ProductName", hw.Model),
		HaveField("SerialNumber", hw.SerialNumber)))
	g.Expect(inv.Boot.CurrentBootMode).To(Equal("uefi"))
	g.Expect(agent.Status.NtpSources).To(ContainElement(agentinstallv1.HostNTPSources{SourceName: qemu.DefaultGuestHostAlias, SourceState: "synced"}))
	// Validations are computed from that inventory: 2 cores are not a
	// single node's 8.
	g.Expect(agent.Status.ValidationsInfo["hardware"]).To(ContainElement(And(HaveField("ID", "has-cpu-cores-for-role"),
		HaveField("Status", "failure"), HaveField("Message", ContainSubstring("found only 2")))))
	g.Expect(console(lab, m)).To(ContainSubstring("Discovery agent for host " + m.UUID))

	t.Logf("%s: %d CPUs, %d MiB, disks %s, NICs %s, %s %s %s, boot %s", m.UUID, inv.Cpu.Count, inv.Memory.PhysicalBytes>>20,
		disks(inv), nics(inv), inv.SystemVendor.Manufacturer, inv.SystemVendor.ProductName, inv.SystemVendor.SerialNumber, inv.Boot.CurrentBootMode)
	t.Logf("state %s (%s); failing validations: %s", agent.Status.DebugInfo.State, agent.Status.DebugInfo.StateInfo, failing(agent))
	t.Logf("ISO URL after %s; registered %s after power on; inventory, NTP and validations %s later; %s in all",
		booted.Sub(start).Round(time.Second), registered.Sub(booted).Round(time.Second), reported.Sub(registered).Round(time.Second),
		time.Since(start).Round(time.Second))
}

// requireQEMU skips the test unless QEMU, OVMF and the live images are
// there, and returns the images' directory.
func requireQEMU(t *testing.T) string {
	t.Helper()
	images := os.Getenv("METALSHIFT_IMAGES_DIR")
	if images == "" {
		t.Skip("METALSHIFT_IMAGES_DIR is not set: `make test` builds the live images and sets it")
	}
	if _, err := os.Stat(filepath.Join(images, "metalshift-live.iso")); err != nil {
		t.Skipf("no live image in %s: run `make images`", images)
	}
	if err := qemu.New(qemu.Options{StateDir: t.TempDir()}).Check(); err != nil {
		t.Skipf("%v: the real-boot test needs it", err)
	}
	return images
}

// startHub starts envtest and the agent service with its controllers, as
// the hub runs them. The service listens on the host's loopback, which the
// VM reaches at 10.0.2.2 (QEMU's user networking): the image's URLs and
// the agent's service URL say so. It serves the live images.
func startHub(t *testing.T, images string) *testenv.Env {
	t.Helper()
	// The service takes the listener: nothing can bind its port first.
	ln := testenv.Listen(t)
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	env, err := testenv.Start(testenv.Options{Components: []component.Component{{Name: "agent-service",
		Setup: func(ctx context.Context, hub *component.Hub) error {
			return assisted.Setup(ctx, hub, assisted.Options{Listener: ln, URL: "http://" + net.JoinHostPort(qemu.DefaultGuestHostAlias, port),
				PollInterval: 2 * time.Second, LiveImageDir: images, Key: key})
		}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Error(err)
		}
	})
	return env
}

// startLab starts a lab of one UEFI QEMU VM and shows the tail of its
// console if the test fails.
func startLab(t *testing.T) *sim.Lab {
	t.Helper()
	lab := sim.NewLab(sim.LabOptions{Hosts: 1, Backend: sim.BackendQEMU, NamePrefix: "discovery", StateDir: t.TempDir(), MACOctet: 0x51})
	if err := lab.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lab.Close)
	t.Cleanup(func() {
		if t.Failed() {
			for _, m := range lab.Machines {
				out := console(lab, m)
				if len(out) > 8000 {
					out = out[len(out)-8000:]
				}
				t.Logf("console of %s (tail):\n%s", m.ID, out)
			}
		}
	})
	return lab
}

// bootISO does what a person does at a BMC: insert the ISO, boot from it once.
func bootISO(g *WithT, m *machine.Machine, url string) {
	g.Expect(m.InsertMedia(url)).To(Succeed())
	m.SetOverride(machine.BootOverride{Target: machine.BootCd, UEFI: true})
	m.PowerOn()
}

// clusterObjects are a single-node cluster in seed 001's shapes, with
// user-managed networking: a ClusterImageSet, the pull secret, a
// ClusterDeployment and its AgentClusterInstall, and an InfraEnv bound to
// it whose additional NTP source is the VM's gateway.
func clusterObjects() []client.Object {
	meta := metav1.ObjectMeta{Name: name, Namespace: ns}
	return []client.Object{
		&hivev1.ClusterImageSet{ObjectMeta: metav1.ObjectMeta{Name: "openshift-v4.16.3"},
			Spec: hivev1.ClusterImageSetSpec{ReleaseImage: "quay.io/openshift-release-dev/ocp-release:4.16.3-x86_64"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "pull-secret", Namespace: ns}, Type: corev1.SecretTypeDockerConfigJson,
			Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"quay.io":{"auth":"c2ltOnNpbQ=="}}}`)}},
		&hivev1.ClusterDeployment{ObjectMeta: meta, Spec: hivev1.ClusterDeploymentSpec{
			ClusterName: name, BaseDomain: "example.com", PullSecretRef: &corev1.LocalObjectReference{Name: "pull-secret"},
			ClusterInstallRef: &hivev1.ClusterInstallLocalReference{Group: hiveextv1.GroupVersion.Group, Version: hiveextv1.GroupVersion.Version,
				Kind: "AgentClusterInstall", Name: name},
			Platform: hivev1.Platform{AgentBareMetal: &hivev1.AgentBareMetalPlatform{}},
		}},
		&hiveextv1.AgentClusterInstall{ObjectMeta: meta, Spec: hiveextv1.AgentClusterInstallSpec{
			ImageSetRef:          &hivev1.ClusterImageSetReference{Name: "openshift-v4.16.3"},
			ClusterDeploymentRef: corev1.LocalObjectReference{Name: name},
			Networking: hiveextv1.Networking{
				ClusterNetwork:        []hiveextv1.ClusterNetworkEntry{{CIDR: "10.128.0.0/14", HostPrefix: 23}},
				ServiceNetwork:        []string{"172.30.0.0/16"},
				UserManagedNetworking: ptr.To(true),
			},
			ProvisionRequirements: hiveextv1.ProvisionRequirements{ControlPlaneAgents: 1},
			SSHPublicKey:          "ssh-ed25519 AAAA user@host",
		}},
		&agentinstallv1.InfraEnv{ObjectMeta: meta, Spec: agentinstallv1.InfraEnvSpec{
			PullSecretRef: &corev1.LocalObjectReference{Name: "pull-secret"}, SSHAuthorizedKey: "ssh-ed25519 AAAA user@host",
			ClusterRef:           &agentinstallv1.ClusterReference{Name: name, Namespace: ns},
			AdditionalNTPSources: []string{qemu.DefaultGuestHostAlias},
		}},
	}
}

func condition(a *agentinstallv1.Agent, typ string) agentinstallv1.Condition {
	for _, c := range a.Status.Conditions {
		if string(c.Type) == typ {
			return c
		}
	}
	return agentinstallv1.Condition{}
}

func console(lab *sim.Lab, m *machine.Machine) string {
	out, _ := os.ReadFile(lab.QEMU.ConsoleLog(m.ID))
	return string(out)
}

func disks(inv agentinstallv1.HardwareInventory) string {
	var s []string
	for _, d := range inv.Disks {
		s = append(s, fmt.Sprintf("%s %d bytes %s eligible=%t", d.Path, d.SizeBytes, d.DriveType, d.InstallationEligibility.Eligible))
	}
	return strings.Join(s, ", ")
}

func nics(inv agentinstallv1.HardwareInventory) string {
	var s []string
	for _, n := range inv.Interfaces {
		s = append(s, fmt.Sprintf("%s %s %v", n.Name, n.MacAddress, n.IPV4Addresses))
	}
	return strings.Join(s, ", ")
}

// failing lists the validations that do not succeed, by category.
func failing(a *agentinstallv1.Agent) string {
	var s []string
	for cat, vs := range a.Status.ValidationsInfo {
		for _, v := range vs {
			if v.Status != "success" {
				s = append(s, fmt.Sprintf("%s/%s %s: %s", cat, v.ID, v.Status, v.Message))
			}
		}
	}
	sort.Strings(s)
	return strings.Join(s, "; ")
}
