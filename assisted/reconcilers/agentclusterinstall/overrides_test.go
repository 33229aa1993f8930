package agentclusterinstall_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coreos/ignition/v2/config/v3_4"
	ignitiontypes "github.com/coreos/ignition/v2/config/v3_4/types"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/types"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	assistedapi "github.com/metalshift/metalshift/api/assisted/v2"
	hivev1 "github.com/metalshift/metalshift/api/hive/v1"
	hiveextv1 "github.com/metalshift/metalshift/api/hiveext/v1beta1"
	"github.com/metalshift/metalshift/assisted/pkg/record"
)

const overridesAnnotation = "agent-install.openshift.io/install-config-overrides"

// TestInstallConfigOverrides follows the seed's annotation: applied with
// the seed's kubectl command, it reaches the install-config the install
// renders; a value that does not parse sets SpecSynced False (InputError,
// upstream's message) and keeps a ready cluster from installing until it
// is fixed.
func TestInstallConfigOverrides(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	const ns = "mynamespace" // the seed's
	g.Expect(client.IgnoreAlreadyExists(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))).To(Succeed())
	in := newSNO(t, g, ns, "test-cluster", nil)
	a := register(g, in.ie, "5e000000-0000-4000-8000-000000000001", "")
	expectACICondition(g, in.aci, aciCondition("SpecSynced", corev1.ConditionTrue, "SyncOK", "The Spec has been successfully applied"))

	out, err := exec.Command(kubectl(t), "--kubeconfig", writeKubeconfig(t, g), "annotate", "agentclusterinstalls.extensions.hive.openshift.io",
		"test-cluster", "-n", "mynamespace", `agent-install.openshift.io/install-config-overrides={"networking":{"networkType": "OVNKubernetes"},"fips":true}`).CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(out))
	g.Expect(string(out)).To(Equal("agentclusterinstall.extensions.hive.openshift.io/test-cluster annotated\n"))
	seed := in.aci.DeepCopy()
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(seed), seed)).To(Succeed())
	g.Expect(seed.Annotations).To(HaveKeyWithValue(overridesAnnotation, `{"networking":{"networkType": "OVNKubernetes"},"fips":true}`))
	g.Consistently(func(g Gomega) {
		expectACICondition(g, in.aci, aciCondition("SpecSynced", corev1.ConditionTrue, "SyncOK", "The Spec has been successfully applied"))
	}).WithTimeout(time.Second).Should(Succeed())

	// Broken: an input error, and the ready cluster does not install.
	annotate(g, in.aci, `{"networking":{"networkType": "OVNKubernetes"},"fips":tru}`)
	expectACICondition(g, in.aci, aciCondition("SpecSynced", corev1.ConditionFalse, "InputError",
		"The Spec could not be synced due to an input error: Failed to parse 'agent-install.openshift.io/install-config-overrides' annotation: invalid character '}' in literal true (expecting 'e')"))
	annotate(g, in.aci, `{"networking":{"networkType": "OVNKubernetes"},"fipz":true}`)
	expectACICondition(g, in.aci, aciCondition("SpecSynced", corev1.ConditionFalse, "InputError",
		`The Spec could not be synced due to an input error: Failed to parse 'agent-install.openshift.io/install-config-overrides' annotation: json: unknown field "fipz"`))
	approve(g, a)
	expectACIState(g, in.aci, "ready")
	g.Consistently(func(g Gomega) {
		g.Expect(installState(in.aci)).To(BeNil(), "the install does not start")
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(in.aci), in.aci)).To(Succeed())
		g.Expect(in.aci.Status.DebugInfo.State).To(Equal("ready"))
	}).WithTimeout(2 * time.Second).Should(Succeed())

	// Fixed: the install starts, with the overrides in its install-config.
	annotate(g, in.aci, seed.Annotations[overridesAnnotation])
	var st *corev1.Secret
	g.Eventually(func() *corev1.Secret { st = installState(in.aci); return st }).ShouldNot(BeNil())
	var ic map[string]any
	g.Expect(yaml.Unmarshal(st.Data["install-config.yaml"], &ic)).To(Succeed())
	g.Expect(ic).To(HaveKeyWithValue("fips", true))
	g.Expect(ic).To(HaveKeyWithValue("networking", And(HaveKeyWithValue("networkType", "OVNKubernetes"),
		HaveKeyWithValue("serviceNetwork", ConsistOf("172.30.0.0/16")))))
	expectACICondition(g, in.aci, aciCondition("SpecSynced", corev1.ConditionTrue, "SyncOK", "The Spec has been successfully applied"))
}

// TestAgentOverrides: an Agent's installerArgs with a flag
// coreos-installer may not be given, or that are not a JSON array, and an
// ignitionConfigOverrides that is not Ignition set its SpecSynced False
// (InputError) and keep its cluster from installing; fixed, the cluster
// installs, and the override's file is in the Ignition the service serves
// the host.
func TestAgentOverrides(t *testing.T) {
	g := NewWithT(t)
	ns := env.Namespace(t)
	in := newSNO(t, g, ns, "sno", nil)
	a := register(g, in.ie, "a9000000-0000-4000-8000-000000000001", `["--append-karg", "quiet", "--wrong-param", "x"]`)
	approve(g, a)
	expectAgentCondition(g, a, agentCondition("SpecSynced", corev1.ConditionFalse, "InputError",
		"The Spec could not be synced due to an input error: found unexpected flag --wrong-param for installer - allowed flags are "+
			"[--append-karg --delete-karg -n --copy-network --network-dir --save-partlabel --save-partindex --image-url --image-file]"))
	expectACICondition(g, in.aci, aciCondition("RequirementsMet", corev1.ConditionFalse, "UnsyncedAgents", "The cluster currently has 1 agents with spec error"))

	updateAgent(g, a, func(a *agentinstallv1.Agent) { a.Spec.InstallerArgs = `--append-karg quiet` })
	expectAgentCondition(g, a, agentCondition("SpecSynced", corev1.ConditionFalse, "InputError",
		"The Spec could not be synced due to an input error: Fail to unmarshal installer args for host "+a.Name+" in infraEnv "+string(in.ie.UID)+
			": invalid character '-' in numeric literal"))

	updateAgent(g, a, func(a *agentinstallv1.Agent) {
		a.Spec.InstallerArgs = `["--append-karg", "quiet", "--save-partindex", "1", "-n"]`
		a.Spec.IgnitionConfigOverrides = `{"ignition": {"version": "2.2.0"}}`
	})
	expectAgentCondition(g, a, HaveField("Reason", "InputError"))
	g.Consistently(func(g Gomega) {
		g.Expect(installState(in.aci)).To(BeNil(), "the install does not start")
	}).WithTimeout(2 * time.Second).Should(Succeed())

	// The seed's override (Ignition 3.1) is valid: the install starts and
	// the host's Ignition carries its file.
	updateAgent(g, a, func(a *agentinstallv1.Agent) {
		a.Spec.IgnitionConfigOverrides = `{"ignition": {"version": "3.1.0"}, "storage": {"files": [{"path": "/tmp/example", "contents": {"source": "data:text/plain;base64,aGVscGltdHJhcHBlZGluYXN3YWdnZXJzcGVj"}}]}}`
	})
	expectAgentCondition(g, a, agentCondition("SpecSynced", corev1.ConditionTrue, "SyncOK", "The Spec has been successfully applied"))
	g.Eventually(func() *corev1.Secret { return installState(in.aci) }).ShouldNot(BeNil())
	cfg := servedIgnition(g, in.aci, a)
	g.Expect(cfg.Storage.Files).To(ContainElement(And(
		HaveField("Path", "/tmp/example"),
		HaveField("Contents.Source", HaveValue(Equal("data:text/plain;base64,aGVscGltdHJhcHBlZGluYXN3YWdnZXJzcGVj"))))))
}

// TestManifests: the manifests ConfigMaps' problems show on SpecSynced
// only once the cluster is otherwise ready to install; a missing
// ConfigMap and a name in two ConfigMaps are backend errors, a manifest
// that is not YAML an input error; creating and editing the ConfigMaps
// fixes them at once, and the install starts with the manifests in its
// install state.
func TestManifests(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	in := newSNO(t, g, ns, "sno", func(aci *hiveextv1.AgentClusterInstall) {
		aci.Spec.ManifestsConfigMapRef = &corev1.LocalObjectReference{Name: "ignored"} // deprecated: the list wins
		aci.Spec.ManifestsConfigMapRefs = []hiveextv1.ManifestsConfigMapReference{{Name: "manifests-1"}, {Name: "manifests-2"}}
	})
	const mc = "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: 99-openshift-machineconfig-master-kargs\nspec:\n  kernelArguments:\n  - loglevel=7\n"
	cm1 := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "manifests-1"}, Data: map[string]string{"99_master_kernel_arg.yaml": mc}}
	g.Expect(env.Client.Create(ctx, cm1)).To(Succeed())
	a := register(g, in.ie, "b7000000-0000-4000-8000-000000000001", "")

	// Not ready yet (not approved): SpecSynced is not about manifests.
	g.Consistently(func(g Gomega) {
		expectACICondition(g, in.aci, aciCondition("SpecSynced", corev1.ConditionTrue, "SyncOK", "The Spec has been successfully applied"))
	}).WithTimeout(time.Second).Should(Succeed())

	approve(g, a)
	expectACICondition(g, in.aci, aciCondition("SpecSynced", corev1.ConditionFalse, "BackendError",
		`The Spec could not be synced due to backend error: configmaps "manifests-2" not found`))
	expectACIState(g, in.aci, "ready")

	cm2 := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "manifests-2"}, Data: map[string]string{"99_master_kernel_arg.yaml": mc}}
	g.Expect(env.Client.Create(ctx, cm2)).To(Succeed())
	expectACICondition(g, in.aci, aciCondition("SpecSynced", corev1.ConditionFalse, "BackendError",
		"The Spec could not be synced due to backend error: Conflict in manifest names ('99_master_kernel_arg.yaml' is not unique)"))

	cm2.Data = map[string]string{"50_bad.yaml": "kind: [ConfigMap\n"}
	g.Expect(env.Client.Update(ctx, cm2)).To(Succeed())
	expectACICondition(g, in.aci, aciCondition("SpecSynced", corev1.ConditionFalse, "InputError",
		"The Spec could not be synced due to an input error: Manifest content of file 50_bad.yaml for cluster ID "+string(in.aci.UID)+" has an invalid YAML format"))
	g.Expect(installState(in.aci)).To(BeNil(), "the install does not start")

	cm2.Data = map[string]string{"50_good.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: extra\n  namespace: default\n"}
	g.Expect(env.Client.Update(ctx, cm2)).To(Succeed())
	var st *corev1.Secret
	g.Eventually(func() *corev1.Secret { st = installState(in.aci); return st }).ShouldNot(BeNil())
	g.Expect(st.Data).To(HaveKeyWithValue("manifests.openshift.99_master_kernel_arg.yaml", []byte(mc)))
	g.Expect(st.Data).To(HaveKeyWithValue("manifests.openshift.50_good.yaml", []byte(cm2.Data["50_good.yaml"])))
	expectACICondition(g, in.aci, aciCondition("SpecSynced", corev1.ConditionTrue, "SyncOK", "The Spec has been successfully applied"))
}

// sno is a single-node install and its InfraEnv.
type sno struct {
	aci *hiveextv1.AgentClusterInstall
	ie  *agentinstallv1.InfraEnv
}

// newSNO makes a single-node install as the seed writes one: the pull
// secret, a ClusterImageSet, the ClusterDeployment and AgentClusterInstall
// (user-managed networking), an InfraEnv bound to it, and the
// AgentServiceConfig's OS image.
func newSNO(t *testing.T, g Gomega, ns, name string, edit func(*hiveextv1.AgentClusterInstall)) sno {
	ctx := context.Background()
	asc := &agentinstallv1.AgentServiceConfig{ObjectMeta: metav1.ObjectMeta{Name: agentinstallv1.AgentServiceConfigName},
		Spec: agentinstallv1.AgentServiceConfigSpec{OSImages: []agentinstallv1.OSImage{{OpenshiftVersion: "4.16", URL: "http://images.example.com/os.raw"}}}}
	g.Expect(client.IgnoreAlreadyExists(env.Client.Create(ctx, asc))).To(Succeed())
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pull-secret"}, Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"quay.io":{"auth":"dXNlcjpwYXNz"}}}`)}})).To(Succeed())
	imageSet := &hivev1.ClusterImageSet{ObjectMeta: metav1.ObjectMeta{GenerateName: "openshift-v4.16.3-"},
		Spec: hivev1.ClusterImageSetSpec{ReleaseImage: "quay.io/openshift-release-dev/ocp-release:4.16.3-x86_64"}}
	g.Expect(env.Client.Create(ctx, imageSet)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), imageSet) })
	meta := metav1.ObjectMeta{Namespace: ns, Name: name}
	g.Expect(env.Client.Create(ctx, &hivev1.ClusterDeployment{ObjectMeta: meta, Spec: hivev1.ClusterDeploymentSpec{
		ClusterName: name, BaseDomain: "example.com", PullSecretRef: &corev1.LocalObjectReference{Name: "pull-secret"},
		ClusterInstallRef: &hivev1.ClusterInstallLocalReference{Group: hiveextv1.GroupVersion.Group, Version: hiveextv1.GroupVersion.Version,
			Kind: "AgentClusterInstall", Name: name},
		Platform: hivev1.Platform{AgentBareMetal: &hivev1.AgentBareMetalPlatform{}},
	}})).To(Succeed())
	aci := &hiveextv1.AgentClusterInstall{ObjectMeta: meta, Spec: hiveextv1.AgentClusterInstallSpec{
		ImageSetRef:          &hivev1.ClusterImageSetReference{Name: imageSet.Name},
		ClusterDeploymentRef: corev1.LocalObjectReference{Name: name},
		Networking: hiveextv1.Networking{UserManagedNetworking: ptr.To(true), NetworkType: "OVNKubernetes",
			ClusterNetwork: []hiveextv1.ClusterNetworkEntry{{CIDR: "10.128.0.0/14", HostPrefix: 23}}, ServiceNetwork: []string{"172.30.0.0/16"},
			MachineNetwork: []hiveextv1.MachineNetworkEntry{{CIDR: "192.168.111.0/24"}}},
		ProvisionRequirements: hiveextv1.ProvisionRequirements{ControlPlaneAgents: 1},
		SSHPublicKey:          "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFirstKeyFirstKeyFirstKeyFirstKeyFirstKey00 user",
	}}
	if edit != nil {
		edit(aci)
	}
	g.Expect(env.Client.Create(ctx, aci)).To(Succeed())
	ie := &agentinstallv1.InfraEnv{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: agentinstallv1.InfraEnvSpec{PullSecretRef: &corev1.LocalObjectReference{Name: "pull-secret"},
			ClusterRef: &agentinstallv1.ClusterReference{Namespace: ns, Name: name}}}
	g.Expect(env.Client.Create(ctx, ie)).To(Succeed())
	return sno{aci: aci, ie: ie}
}

// hostKeys are the credentials of the hosts register made, by Agent name.
var hostKeys sync.Map

// register creates an Agent as the agent service's registration does
// (with its host's credential, kept in hostKeys), with installerArgs, and
// records its reports (inventory, NTP) as its steps do: a host that meets
// a single node's minimums.
func register(g Gomega, ie *agentinstallv1.InfraEnv, id, installerArgs string) *agentinstallv1.Agent {
	ctx := context.Background()
	cred, err := assistedapi.NewHostKey(signingKey, string(ie.UID), id)
	g.Expect(err).NotTo(HaveOccurred())
	hostKeys.Store(id, cred)
	a := &agentinstallv1.Agent{
		ObjectMeta: metav1.ObjectMeta{Namespace: ie.Namespace, Name: id, Labels: map[string]string{agentinstallv1.InfraEnvNameLabel: ie.Name},
			Annotations:     map[string]string{agentinstallv1.AgentHostCredentialAnnotation: assistedapi.HostKeyHash(cred)},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: agentinstallv1.GroupVersion.String(), Kind: "InfraEnv", Name: ie.Name, UID: ie.UID}}},
		Spec: agentinstallv1.AgentSpec{Role: agentinstallv1.HostRoleAutoAssign, InstallerArgs: installerArgs,
			ClusterDeploymentName: &agentinstallv1.ClusterReference{Namespace: ie.Spec.ClusterRef.Namespace, Name: ie.Spec.ClusterRef.Name}},
	}
	record.SetRegistered(a, clk.Now())
	record.SetLastContact(a, clk.Now())
	g.Expect(env.Client.Create(ctx, a)).To(Succeed())
	g.Eventually(func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(a), a); err != nil {
			return err
		}
		now := metav1.NewTime(clk.Now())
		a.Status.Inventory = inventory("master-0")
		a.Status.Inventory.ReportTime = &now
		a.Status.NtpSources = []agentinstallv1.HostNTPSources{{SourceName: "ntp.example.com", SourceState: assistedapi.NTPSourceSynced}}
		return env.Client.Status().Update(ctx, a)
	}).Should(Succeed())
	return a
}

func inventory(hostname string) agentinstallv1.HardwareInventory {
	return agentinstallv1.HardwareInventory{
		Hostname: hostname,
		Cpu:      agentinstallv1.HostCPU{Count: 8, Architecture: "x86_64"},
		Memory:   agentinstallv1.HostMemory{PhysicalBytes: 32 << 30, UsableBytes: 32 << 30},
		Disks: []agentinstallv1.HostDisk{{ID: "/dev/disk/by-id/wwn-0x2", Name: "sdb", Path: "/dev/sdb", DriveType: "SSD", SizeBytes: 200 << 30,
			InstallationEligibility: agentinstallv1.HostInstallationEligibility{Eligible: true}}},
		Interfaces: []agentinstallv1.HostInterface{{Name: "eth0", MacAddress: "52:54:00:00:00:01", IPV4Addresses: []string{"192.168.111.20/24"}, HasCarrier: true}},
	}
}

func approve(g Gomega, a *agentinstallv1.Agent) {
	updateAgent(g, a, func(a *agentinstallv1.Agent) { a.Spec.Approved = true })
}

func updateAgent(g Gomega, a *agentinstallv1.Agent, edit func(*agentinstallv1.Agent)) {
	ctx := context.Background()
	g.Eventually(func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(a), a); err != nil {
			return err
		}
		edit(a)
		return env.Client.Update(ctx, a)
	}).Should(Succeed())
}

func annotate(g Gomega, aci *hiveextv1.AgentClusterInstall, overrides string) {
	ctx := context.Background()
	g.Eventually(func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(aci), aci); err != nil {
			return err
		}
		if aci.Annotations == nil {
			aci.Annotations = map[string]string{}
		}
		aci.Annotations[overridesAnnotation] = overrides
		return env.Client.Update(ctx, aci)
	}).Should(Succeed())
}

// installState is the install's install-state Secret, nil before the
// install starts.
func installState(aci *hiveextv1.AgentClusterInstall) *corev1.Secret {
	s := &corev1.Secret{}
	err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: aci.Namespace, Name: aci.Name + "-install-state"}, s)
	if err != nil {
		if !apierrors.IsNotFound(err) {
			panic(err)
		}
		return nil
	}
	return s
}

func expectACIState(g Gomega, aci *hiveextv1.AgentClusterInstall, state string) {
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(aci), aci)).To(Succeed())
		g.Expect(aci.Status.DebugInfo.State).To(Equal(state), "%v", aci.Status.ValidationsInfo)
	}).Should(Succeed())
}

func expectACICondition(g Gomega, aci *hiveextv1.AgentClusterInstall, want types.GomegaMatcher) {
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(aci), aci)).To(Succeed())
		g.Expect(aci.Status.Conditions).To(ContainElement(want))
	}).Should(Succeed())
}

func expectAgentCondition(g Gomega, a *agentinstallv1.Agent, want types.GomegaMatcher) {
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(a), a)).To(Succeed())
		g.Expect(a.Status.Conditions).To(ContainElement(And(HaveField("Type", agentinstallv1.ConditionType("SpecSynced")), want)))
	}).Should(Succeed())
}

func aciCondition(typ string, status corev1.ConditionStatus, reason, msg string) types.GomegaMatcher {
	return And(HaveField("Type", typ), HaveField("Status", status), HaveField("Reason", reason), HaveField("Message", msg))
}

func agentCondition(typ string, status corev1.ConditionStatus, reason, msg string) types.GomegaMatcher {
	return And(HaveField("Type", agentinstallv1.ConditionType(typ)), HaveField("Status", status), HaveField("Reason", reason), HaveField("Message", msg))
}

// servedIgnition fetches a host's Ignition from the agent service as its
// agent does and resolves its data-URL merges as Ignition would.
func servedIgnition(g Gomega, aci *hiveextv1.AgentClusterInstall, a *agentinstallv1.Agent) ignitiontypes.Config {
	g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(aci), aci)).To(Succeed())
	u := fmt.Sprintf("http://%s/api/assisted-install/v2/clusters/%s/downloads/files?file_name=%s", serviceAddr, aci.UID,
		url.QueryEscape(assistedapi.IgnitionFileName("master", a.Name)))
	var body []byte
	g.Eventually(func(g Gomega) {
		req, err := http.NewRequest(http.MethodGet, u, nil)
		g.Expect(err).NotTo(HaveOccurred())
		cred, _ := hostKeys.Load(a.Name)
		req.Header.Set(assistedapi.HostKeyHeader, cred.(string))
		resp, err := http.DefaultClient.Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		body, err = io.ReadAll(resp.Body)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(resp.StatusCode).To(Equal(http.StatusOK), string(body))
	}).Should(Succeed())
	cfg, rpt, err := v3_4.Parse(body)
	g.Expect(err).NotTo(HaveOccurred(), rpt.String())
	for _, m := range cfg.Ignition.Config.Merge {
		src := ptr.Deref(m.Source, "")
		meta, data, ok := strings.Cut(strings.TrimPrefix(src, "data:"), ",")
		if !strings.HasPrefix(src, "data:") || !ok {
			continue
		}
		raw := []byte(data)
		if strings.HasSuffix(meta, ";base64") {
			raw, err = base64.StdEncoding.DecodeString(data)
			g.Expect(err).NotTo(HaveOccurred())
		} else if s, err := url.PathUnescape(data); err == nil {
			raw = []byte(s)
		}
		child, _, err := v3_4.ParseCompatibleVersion(raw)
		g.Expect(err).NotTo(HaveOccurred())
		cfg = v3_4.Merge(cfg, child)
	}
	return cfg
}

func kubectl(t *testing.T) string {
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	if dir == "" {
		dir = filepath.Join("..", "..", "..", "bin")
	}
	p, err := filepath.Abs(filepath.Join(dir, "kubectl"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// writeKubeconfig writes the environment's admin credentials for kubectl.
func writeKubeconfig(t *testing.T, g Gomega) string {
	c := env.Config
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["envtest"] = &clientcmdapi.Cluster{Server: c.Host, CertificateAuthorityData: c.CAData}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: c.CertData, ClientKeyData: c.KeyData, Token: c.BearerToken}
	cfg.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin"}
	cfg.CurrentContext = "envtest"
	p := filepath.Join(t.TempDir(), "kubeconfig")
	g.Expect(clientcmd.WriteToFile(*cfg, p)).To(Succeed())
	return p
}
