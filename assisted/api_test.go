package assisted_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	hivev1 "github.com/metalshift/metalshift/api/hive/v1"
	hiveextv1 "github.com/metalshift/metalshift/api/hiveext/v1beta1"
)

const ns = "default"

// TestRoundTrip: an object of each kind, with the fields manifests for the
// assisted service typically set, is stored and read back unchanged.
func TestRoundTrip(t *testing.T) {
	meta := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name, Namespace: ns} }
	objects := []client.Object{
		&agentinstallv1.InfraEnv{ObjectMeta: meta("rt-infraenv"), Spec: agentinstallv1.InfraEnvSpec{
			PullSecretRef:              &corev1.LocalObjectReference{Name: "pull-secret"},
			SSHAuthorizedKey:           "ssh-ed25519 AAAA user@host",
			NMStateConfigLabelSelector: metav1.LabelSelector{MatchLabels: map[string]string{"infraenvs.agent-install.openshift.io": "rt-infraenv"}},
			ClusterRef:                 &agentinstallv1.ClusterReference{Name: "rt-cd", Namespace: ns},
			AgentLabels:                map[string]string{"site": "lab"},
			CpuArchitecture:            "x86_64",
			IPXEScriptType:             agentinstallv1.DiscoveryImageAlways,
			KernelArguments:            []agentinstallv1.KernelArgument{{Operation: "append", Value: "console=ttyS0"}},
			AdditionalNTPSources:       []string{"ntp.example.com"},
		}},
		&agentinstallv1.NMStateConfig{ObjectMeta: meta("rt-nmstate"), Spec: agentinstallv1.NMStateConfigSpec{
			Interfaces: []*agentinstallv1.Interface{{Name: "eth0", MacAddress: "52:54:00:00:00:01"}},
			NetConfig:  &runtime.RawExtension{Raw: []byte(`{"interfaces":[{"name":"eth0","type":"ethernet","state":"up","ipv4":{"enabled":true,"dhcp":false,"address":[{"ip":"192.168.111.20","prefix-length":24}]}}]}`)},
		}},
		&agentinstallv1.Agent{ObjectMeta: meta("0c1a9d7e-5a46-4e39-9d53-2e3b0d5e7a11"), Spec: agentinstallv1.AgentSpec{
			ClusterDeploymentName: &agentinstallv1.ClusterReference{Name: "rt-cd", Namespace: ns},
			Role:                  agentinstallv1.HostRoleMaster,
			Hostname:              "master-0",
			Approved:              false,
			InstallationDiskID:    "/dev/disk/by-id/wwn-0x5000c500a0b1c2d3",
		}},
		&agentinstallv1.AgentClassification{ObjectMeta: meta("rt-classification"), Spec: agentinstallv1.AgentClassificationSpec{
			LabelKey: "size", LabelValue: "large", Query: ".cpu.count >= 16",
		}},
		&hiveextv1.AgentClusterInstall{ObjectMeta: meta("rt-aci"), Spec: hiveextv1.AgentClusterInstallSpec{
			ImageSetRef:          &hivev1.ClusterImageSetReference{Name: "rt-imageset"},
			ClusterDeploymentRef: corev1.LocalObjectReference{Name: "rt-cd"},
			Networking: hiveextv1.Networking{
				MachineNetwork: []hiveextv1.MachineNetworkEntry{{CIDR: "192.168.111.0/24"}},
				ClusterNetwork: []hiveextv1.ClusterNetworkEntry{{CIDR: "10.128.0.0/14", HostPrefix: 23}},
				ServiceNetwork: []string{"172.30.0.0/16"},
				NetworkType:    "OVNKubernetes",
			},
			ProvisionRequirements: hiveextv1.ProvisionRequirements{ControlPlaneAgents: 3, WorkerAgents: 2},
			APIVIPs:               []string{"192.168.111.5"},
			IngressVIPs:           []string{"192.168.111.4"},
			SSHPublicKey:          "ssh-ed25519 AAAA user@host",
			PlatformType:          hiveextv1.BareMetalPlatformType,
		}},
		&hivev1.ClusterDeployment{ObjectMeta: meta("rt-cd"), Spec: hivev1.ClusterDeploymentSpec{
			ClusterName:   "rt",
			BaseDomain:    "example.com",
			PullSecretRef: &corev1.LocalObjectReference{Name: "pull-secret"},
			ClusterInstallRef: &hivev1.ClusterInstallLocalReference{
				Group: hiveextv1.GroupVersion.Group, Version: hiveextv1.GroupVersion.Version, Kind: "AgentClusterInstall", Name: "rt-aci",
			},
			Platform: hivev1.Platform{AgentBareMetal: &hivev1.AgentBareMetalPlatform{
				AgentSelector: metav1.LabelSelector{MatchLabels: map[string]string{"cluster": "rt"}},
			}},
		}},
		&hivev1.ClusterImageSet{ObjectMeta: metav1.ObjectMeta{Name: "rt-imageset"}, Spec: hivev1.ClusterImageSetSpec{
			ReleaseImage: "quay.io/openshift-release-dev/ocp-release:4.16.0-x86_64",
		}},
	}
	for _, obj := range objects {
		t.Run(obj.GetName(), func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			want := obj.DeepCopyObject().(client.Object)
			g.Expect(env.Client.Create(ctx, obj)).To(Succeed())
			t.Cleanup(func() { _ = env.Client.Delete(context.Background(), obj) })
			got := want.DeepCopyObject().(client.Object)
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(obj), got)).To(Succeed())
			g.Expect(specOf(t, got)).To(MatchJSON(specOf(t, want)))
		})
	}
}

// specOf is the object's spec as JSON.
func specOf(t *testing.T, obj client.Object) []byte {
	t.Helper()
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		t.Fatal(err)
	}
	return fields["spec"]
}

// TestApprovedSerialized: an Agent not approved says so, as upstream's
// does (spec.approved has no omitempty), and the API server keeps it.
func TestApprovedSerialized(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	b, err := json.Marshal(agentinstallv1.AgentSpec{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(b)).To(Equal(`{"approved":false}`))

	agent := &agentinstallv1.Agent{ObjectMeta: metav1.ObjectMeta{Name: "approved-false", Namespace: ns}}
	g.Expect(env.Client.Create(ctx, agent)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), agent) })
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(agentinstallv1.GroupVersion.WithKind("Agent"))
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(agent), u)).To(Succeed())
	approved, found, err := unstructured.NestedBool(u.Object, "spec", "approved")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(BeTrue(), "spec.approved is stored")
	g.Expect(approved).To(BeFalse())
}

// TestPrinterColumns: kubectl get shows the assisted service's columns
// (and, as there, no Age: declared columns replace the default ones).
func TestPrinterColumns(t *testing.T) {
	for _, tc := range []struct {
		path    string
		columns []string
		wide    []string // priority 1: kubectl get -o wide
	}{
		{"/apis/agent-install.openshift.io/v1beta1/namespaces/default/infraenvs",
			[]string{"Name", "ISO Created At", "ISO URL"}, []string{"ISO URL"}},
		{"/apis/agent-install.openshift.io/v1beta1/namespaces/default/agents",
			[]string{"Name", "Cluster", "Approved", "Role", "Stage", "Hostname", "Requested Hostname"}, []string{"Hostname", "Requested Hostname"}},
		{"/apis/extensions.hive.openshift.io/v1beta1/namespaces/default/agentclusterinstalls",
			[]string{"Name", "Cluster", "State"}, nil},
		{"/apis/hive.openshift.io/v1/clusterimagesets",
			[]string{"Name", "Release"}, nil},
	} {
		t.Run(tc.path, func(t *testing.T) {
			g := NewWithT(t)
			table := getTable(g, tc.path)
			var names, wide []string
			for _, c := range table.ColumnDefinitions {
				names = append(names, c.Name)
				if c.Priority > 0 {
					wide = append(wide, c.Name)
				}
			}
			g.Expect(names).To(Equal(tc.columns))
			g.Expect(wide).To(Equal(tc.wide))
		})
	}
}

// getTable lists path as a server-side table, as kubectl get does.
func getTable(g Gomega, path string) *metav1.Table {
	hc, err := rest.HTTPClientFor(env.Config)
	g.Expect(err).NotTo(HaveOccurred())
	req, err := http.NewRequest(http.MethodGet, strings.TrimSuffix(env.Config.Host, "/")+path, nil)
	g.Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	resp, err := hc.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK), string(body))
	table := &metav1.Table{}
	g.Expect(json.Unmarshal(body, table)).To(Succeed())
	return table
}

// TestDiscovery: the kinds are served with upstream's scope and short
// names, so that kubectl get aci, cd and imgset work.
func TestDiscovery(t *testing.T) {
	dc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		groupVersion, resource, kind string
		namespaced                   bool
		shortNames                   []string
	}{
		{"agent-install.openshift.io/v1beta1", "infraenvs", "InfraEnv", true, nil},
		{"agent-install.openshift.io/v1beta1", "nmstateconfigs", "NMStateConfig", true, nil},
		{"agent-install.openshift.io/v1beta1", "agents", "Agent", true, nil},
		{"agent-install.openshift.io/v1beta1", "agentclassifications", "AgentClassification", true, nil},
		{"extensions.hive.openshift.io/v1beta1", "agentclusterinstalls", "AgentClusterInstall", true, []string{"aci"}},
		{"hive.openshift.io/v1", "clusterdeployments", "ClusterDeployment", true, []string{"cd"}},
		{"hive.openshift.io/v1", "clusterimagesets", "ClusterImageSet", false, []string{"imgset"}},
	} {
		t.Run(tc.resource, func(t *testing.T) {
			g := NewWithT(t)
			list, err := dc.ServerResourcesForGroupVersion(tc.groupVersion)
			g.Expect(err).NotTo(HaveOccurred())
			var found *metav1.APIResource
			for i := range list.APIResources {
				if list.APIResources[i].Name == tc.resource {
					found = &list.APIResources[i]
				}
			}
			g.Expect(found).NotTo(BeNil())
			g.Expect(found.Kind).To(Equal(tc.kind))
			g.Expect(found.Namespaced).To(Equal(tc.namespaced))
			g.Expect(found.ShortNames).To(Equal(tc.shortNames))
			g.Expect(found.Categories).To(ContainElement("metalshift"))
		})
	}
}

// TestAdmission: the API server refuses what upstream's webhooks refuse and
// a CRD rule can tell: an InfraEnv's clusterRef and cpuArchitecture do not
// change, osImageVersion does not go with clusterRef; an Agent names its
// installation disk one way; an AgentClusterInstall's imageSetRef does not
// change.
func TestAdmission(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	meta := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name, Namespace: ns} }
	update := func(obj client.Object, change func()) error {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj)).To(Succeed())
		change()
		return env.Client.Update(ctx, obj)
	}

	g.Expect(env.Client.Create(ctx, &agentinstallv1.InfraEnv{ObjectMeta: meta("adm-both"), Spec: agentinstallv1.InfraEnvSpec{
		PullSecretRef: &corev1.LocalObjectReference{Name: "pull-secret"}, ClusterRef: &agentinstallv1.ClusterReference{Name: "c", Namespace: ns},
		OSImageVersion: "4.20",
	}})).To(MatchError(ContainSubstring("osImageVersion cannot be set with clusterRef")))

	late := &agentinstallv1.InfraEnv{ObjectMeta: meta("adm-late"), Spec: agentinstallv1.InfraEnvSpec{PullSecretRef: &corev1.LocalObjectReference{Name: "pull-secret"}}}
	g.Expect(env.Client.Create(ctx, late)).To(Succeed())
	g.Expect(update(late, func() { late.Spec.ClusterRef = &agentinstallv1.ClusterReference{Name: "c", Namespace: ns} })).
		To(MatchError(ContainSubstring("clusterRef is immutable")))
	g.Expect(update(late, func() { late.Spec.CpuArchitecture = "aarch64" })).To(MatchError(ContainSubstring("cpuArchitecture is immutable")))
	g.Expect(update(late, func() { late.Spec.SSHAuthorizedKey = "ssh-ed25519 AAAA test" })).To(Succeed(), "other fields change")

	bound := &agentinstallv1.InfraEnv{ObjectMeta: meta("adm-bound"), Spec: agentinstallv1.InfraEnvSpec{
		PullSecretRef: &corev1.LocalObjectReference{Name: "pull-secret"}, ClusterRef: &agentinstallv1.ClusterReference{Name: "c", Namespace: ns}}}
	g.Expect(env.Client.Create(ctx, bound)).To(Succeed())
	g.Expect(update(bound, func() { bound.Spec.ClusterRef.Name = "other" })).To(MatchError(ContainSubstring("clusterRef is immutable")))
	g.Expect(update(bound, func() { bound.Spec.ClusterRef = nil })).To(MatchError(ContainSubstring("clusterRef is immutable")))

	g.Expect(env.Client.Create(ctx, &agentinstallv1.Agent{ObjectMeta: meta("adm-agent"), Spec: agentinstallv1.AgentSpec{
		InstallationDiskID: "/dev/disk/by-id/wwn-0x5000", InstallationDiskPath: "/dev/sda",
	}})).To(MatchError(ContainSubstring("installation_disk_id and installation_disk_path cannot both be set")))

	aci := &hiveextv1.AgentClusterInstall{ObjectMeta: meta("adm-aci"), Spec: hiveextv1.AgentClusterInstallSpec{
		ImageSetRef: &hivev1.ClusterImageSetReference{Name: "openshift-v4.20.0"}, ClusterDeploymentRef: corev1.LocalObjectReference{Name: "c"},
		ProvisionRequirements: hiveextv1.ProvisionRequirements{ControlPlaneAgents: 3},
	}}
	g.Expect(env.Client.Create(ctx, aci)).To(Succeed())
	g.Expect(update(aci, func() { aci.Spec.ImageSetRef.Name = "openshift-v4.21.0" })).To(MatchError(ContainSubstring("imageSetRef is immutable")))
	g.Expect(update(aci, func() { aci.Spec.ProvisionRequirements.WorkerAgents = 2 })).To(Succeed(), "other fields change")
}
