package assisted_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	hivev1 "github.com/metalshift/metalshift/api/hive/v1"
	hiveextv1 "github.com/metalshift/metalshift/api/hiveext/v1beta1"
	"github.com/metalshift/metalshift/assisted"
	"github.com/metalshift/metalshift/component"
	"github.com/metalshift/metalshift/config"
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
				// set, as the defaulting webhook would set it
				UserManagedNetworking: ptr.To(false),
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

// The admission webhooks' names, as the API server quotes them.
const (
	aciWebhook   = "validation.agentclusterinstall.extensions.hive.openshift.io"
	ieWebhook    = "validation.infraenv.agent-install.openshift.io"
	agentWebhook = "validation.agent.agent-install.openshift.io"
	acWebhook    = "validation.agentclassification.agent-install.openshift.io"
)

// refusal is the API server's message for a webhook's refusal.
func refusal(webhook, msg string) string {
	return fmt.Sprintf("admission webhook %q denied the request: %s", webhook, msg)
}

// admissionCase is one object written through the API server: created
// with create, given state as status.debugInfo.state, then updated with
// update (nil: the create is the case).
type admissionCase[T client.Object] struct {
	name   string
	create func(T)
	state  string
	update func(T)
	want   string // the whole error, as the API server words it; empty: accepted
	code   int32  // the refusal's HTTP status; 0 means 400
}

// runAdmission runs the cases with objects from newObj(name, namespace),
// checking each refusal's message and status, and that accepted writes
// are stored.
func runAdmission[T client.Object](t *testing.T, newObj func(name, ns string) T, setState func(T, string), cases []admissionCase[T]) {
	ns := env.Namespace(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			obj := newObj(objectName(tc.name), ns)
			if tc.create != nil {
				tc.create(obj)
			}
			err := env.Client.Create(ctx, obj)
			if tc.update != nil {
				g.Expect(err).NotTo(HaveOccurred())
				if tc.state != "" {
					setState(obj, tc.state)
					g.Expect(env.Client.Status().Update(ctx, obj)).To(Succeed())
				}
				tc.update(obj)
				err = env.Client.Update(ctx, obj)
			}
			if tc.want == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(tc.want))
			code := tc.code
			if code == 0 {
				code = http.StatusBadRequest
			}
			var status apierrors.APIStatus
			g.Expect(errors.As(err, &status)).To(BeTrue())
			g.Expect(status.Status().Code).To(Equal(code), "%v", err)
		})
	}
}

// objectName is a case's name as an object name: "SNO without UMN" is
// sno-without-umn.
func objectName(name string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-':
			return r
		case r >= 'A' && r <= 'Z':
			return r + 'a' - 'A'
		case r == ' ':
			return '-'
		}
		return -1
	}, name)
}

func newACI(name, ns string) *hiveextv1.AgentClusterInstall {
	return &hiveextv1.AgentClusterInstall{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: hiveextv1.AgentClusterInstallSpec{
		ImageSetRef: &hivev1.ClusterImageSetReference{Name: "openshift-v4.20.0"}, ClusterDeploymentRef: corev1.LocalObjectReference{Name: name},
		ProvisionRequirements: hiveextv1.ProvisionRequirements{ControlPlaneAgents: 3}, SSHPublicKey: "ssh-ed25519 AAAA a",
	}}
}

// TestAgentClusterInstallAdmission: userManagedNetworking is defaulted as
// upstream defaults it, and the API server refuses what upstream's
// webhooks refuse, with their messages and statuses.
func TestAgentClusterInstallAdmission(t *testing.T) {
	const frozen = "Attempted to change AgentClusterInstall.Spec which is immutable after install started, except for ClusterMetadata,IgnitionEndpoint fields. Unsupported change: \n"
	sno := func(a *hiveextv1.AgentClusterInstall) { a.Spec.ProvisionRequirements.ControlPlaneAgents = 1 }
	setState := func(a *hiveextv1.AgentClusterInstall, s string) { a.Status.DebugInfo.State = s }
	runAdmission(t, newACI, setState, []admissionCase[*hiveextv1.AgentClusterInstall]{
		{name: "SNO without UMN", create: func(a *hiveextv1.AgentClusterInstall) {
			sno(a)
			a.Spec.Networking.UserManagedNetworking = ptr.To(false)
		},
			want: refusal(aciWebhook, "UserManagedNetworking must be set to true with SNO"), code: http.StatusConflict},
		{name: "SNO loses UMN", create: sno, update: func(a *hiveextv1.AgentClusterInstall) { a.Spec.Networking.UserManagedNetworking = ptr.To(false) },
			want: refusal(aciWebhook, "UserManagedNetworking must be set to true with SNO"), code: http.StatusConflict},
		{name: "imageSetRef changed", update: func(a *hiveextv1.AgentClusterInstall) { a.Spec.ImageSetRef.Name = "openshift-v4.21.0" },
			want: refusal(aciWebhook, "Attempted to change AgentClusterInstall.ImageSetRef which is immutable")},
		{name: "imageSetRef removed", update: func(a *hiveextv1.AgentClusterInstall) { a.Spec.ImageSetRef = nil },
			want: refusal(aciWebhook, "Attempted to change AgentClusterInstall.ImageSetRef which is immutable")},
		{name: "spec before install", state: "ready", update: func(a *hiveextv1.AgentClusterInstall) { a.Spec.ProvisionRequirements.WorkerAgents = 2 }},
		{name: "spec while installing", state: "installing", update: func(a *hiveextv1.AgentClusterInstall) { a.Spec.SSHPublicKey = "ssh-ed25519 BBBB b" },
			want: refusal(aciWebhook, frozen+"\tspec.sshPublicKey: (\"ssh-ed25519 AAAA a\" => \"ssh-ed25519 BBBB b\")")},
		{name: "provisionRequirements while installing", state: "preparing-for-installation",
			update: func(a *hiveextv1.AgentClusterInstall) { a.Spec.ProvisionRequirements.WorkerAgents = 2 },
			want:   refusal(aciWebhook, frozen+"\tspec.provisionRequirements: ({\"controlPlaneAgents\":3} => {\"controlPlaneAgents\":3,\"workerAgents\":2})")},
		{name: "provisionRequirements once installed", state: "installed", update: func(a *hiveextv1.AgentClusterInstall) { a.Spec.ProvisionRequirements.WorkerAgents = 2 }},
		{name: "provisionRequirements once failed", state: "error", update: func(a *hiveextv1.AgentClusterInstall) { a.Spec.ProvisionRequirements.WorkerAgents = 2 }},
		{name: "clusterMetadata once installed", state: "installed", update: func(a *hiveextv1.AgentClusterInstall) {
			a.Spec.ClusterMetadata = &hivev1.ClusterMetadata{ClusterID: "id", InfraID: "infra", AdminKubeconfigSecretRef: corev1.LocalObjectReference{Name: "kubeconfig"}}
		}},
		{name: "ignitionEndpoint while installing", state: "installing", update: func(a *hiveextv1.AgentClusterInstall) {
			a.Spec.IgnitionEndpoint = &hiveextv1.IgnitionEndpoint{URL: "https://ignition.example.com"}
		}},
		{name: "metadata while installing", state: "finalizing", update: func(a *hiveextv1.AgentClusterInstall) { a.Labels = map[string]string{"site": "lab"} }},
		{name: "three API VIPs", create: func(a *hiveextv1.AgentClusterInstall) { a.Spec.APIVIPs = []string{"10.0.0.5", "fd00::5", "10.0.0.6"} },
			want: `AgentClusterInstall.extensions.hive.openshift.io "three-api-vips" is invalid: spec.apiVIPs: Too many: 3: must have at most 2 items`, code: http.StatusUnprocessableEntity},
		{name: "three ingress VIPs", create: func(a *hiveextv1.AgentClusterInstall) {
			a.Spec.IngressVIPs = []string{"10.0.0.4", "fd00::4", "10.0.0.7"}
		},
			want: `AgentClusterInstall.extensions.hive.openshift.io "three-ingress-vips" is invalid: spec.ingressVIPs: Too many: 3: must have at most 2 items`, code: http.StatusUnprocessableEntity},
	})
}

// TestUserManagedNetworkingDefault: the mutating webhook sets
// userManagedNetworking where upstream's does, on create and update.
func TestUserManagedNetworkingDefault(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		edit    func(*hiveextv1.AgentClusterInstall)
		want    *bool
		updated *bool // after userManagedNetworking is removed from the stored object
	}{
		{name: "multi-node", edit: func(*hiveextv1.AgentClusterInstall) {}, want: ptr.To(false), updated: ptr.To(false)},
		{name: "single-node", edit: func(a *hiveextv1.AgentClusterInstall) { a.Spec.ProvisionRequirements.ControlPlaneAgents = 1 }, want: ptr.To(true), updated: ptr.To(true)},
		{name: "none", edit: func(a *hiveextv1.AgentClusterInstall) { a.Spec.PlatformType = hiveextv1.NonePlatformType }, want: ptr.To(true), updated: ptr.To(true)},
		{name: "external", edit: func(a *hiveextv1.AgentClusterInstall) { a.Spec.PlatformType = hiveextv1.ExternalPlatformType }, want: ptr.To(true), updated: ptr.To(true)},
		{name: "vsphere", edit: func(a *hiveextv1.AgentClusterInstall) { a.Spec.PlatformType = hiveextv1.VSpherePlatformType }},
		{name: "set", edit: func(a *hiveextv1.AgentClusterInstall) { a.Spec.Networking.UserManagedNetworking = ptr.To(true) }, want: ptr.To(true), updated: ptr.To(false)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			aci := newACI(tc.name, ns)
			tc.edit(aci)
			g.Expect(env.Client.Create(ctx, aci)).To(Succeed())
			got := &hiveextv1.AgentClusterInstall{}
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(aci), got)).To(Succeed())
			g.Expect(got.Spec.Networking.UserManagedNetworking).To(Equal(tc.want))

			// Unset on update: defaulted again (for "set", to the multi-node default).
			got.Spec.Networking.UserManagedNetworking = nil
			g.Expect(env.Client.Update(ctx, got)).To(Succeed())
			g.Expect(got.Spec.Networking.UserManagedNetworking).To(Equal(tc.updated))
		})
	}

	// Not once the install started: removing it is then a change of the
	// frozen spec (were it defaulted again, there would be no change).
	g := NewWithT(t)
	aci := newACI("started", ns)
	g.Expect(env.Client.Create(ctx, aci)).To(Succeed())
	aci.Status.DebugInfo.State = "installed"
	g.Expect(env.Client.Status().Update(ctx, aci)).To(Succeed())
	aci.Spec.Networking.UserManagedNetworking = nil
	g.Expect(env.Client.Update(ctx, aci)).To(MatchError(refusal(aciWebhook, "Attempted to change AgentClusterInstall.Spec which is immutable after install started, "+
		"except for ClusterMetadata,IgnitionEndpoint fields. Unsupported change: \n\tspec.networking: ({\"userManagedNetworking\":false} => {})")))
}

// TestInfraEnvAdmission: the API server refuses what upstream's InfraEnv
// webhook refuses.
func TestInfraEnvAdmission(t *testing.T) {
	const (
		both      = "Either Spec.ClusterRef or Spec.OSImageVersion should be specified (not both)."
		immutable = "Attempted to change Spec.ClusterRef which is immutable after InfraEnv creation."
		arch      = "Attempted to change Spec.CpuArchitecture which is immutable after InfraEnv creation."
		version   = "spec.OSImageVersion is not valid. It can't be added alongside with a clusterRef when the cluster is not installed yet."
	)
	ctx := context.Background()
	newIE := func(name, namespace string) *agentinstallv1.InfraEnv {
		return &agentinstallv1.InfraEnv{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
			Spec: agentinstallv1.InfraEnvSpec{PullSecretRef: &corev1.LocalObjectReference{Name: "pull-secret"}}}
	}
	bind := func(cd string) func(*agentinstallv1.InfraEnv) {
		return func(ie *agentinstallv1.InfraEnv) {
			ie.Spec.ClusterRef = &agentinstallv1.ClusterReference{Name: cd, Namespace: ie.Namespace}
		}
	}
	cd := func(name string, installed bool) func(*agentinstallv1.InfraEnv) {
		return func(ie *agentinstallv1.InfraEnv) {
			NewWithT(t).Expect(env.Client.Create(ctx, &hivev1.ClusterDeployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ie.Namespace},
				Spec: hivev1.ClusterDeploymentSpec{ClusterName: name, BaseDomain: "example.com", Installed: installed}})).To(Succeed())
			bind(name)(ie)
		}
	}
	addVersion := func(ie *agentinstallv1.InfraEnv) { ie.Spec.OSImageVersion = "4.20" }
	runAdmission(t, newIE, nil, []admissionCase[*agentinstallv1.InfraEnv]{
		{name: "bound with a version", create: func(ie *agentinstallv1.InfraEnv) { bind("c")(ie); addVersion(ie) }, want: refusal(ieWebhook, both)},
		{name: "unbound with a version", create: addVersion},
		{name: "clusterRef set", update: bind("c"), want: refusal(ieWebhook, immutable)},
		{name: "clusterRef changed", create: bind("c"), update: bind("d"), want: refusal(ieWebhook, immutable)},
		{name: "clusterRef removed", create: bind("c"), update: func(ie *agentinstallv1.InfraEnv) { ie.Spec.ClusterRef = nil }, want: refusal(ieWebhook, immutable)},
		{name: "cpuArchitecture changed", update: func(ie *agentinstallv1.InfraEnv) { ie.Spec.CpuArchitecture = "aarch64" }, want: refusal(ieWebhook, arch)},
		{name: "other fields", create: bind("c"), update: func(ie *agentinstallv1.InfraEnv) {
			ie.Spec.SSHAuthorizedKey, ie.Spec.AdditionalNTPSources = "ssh-ed25519 AAAA test", []string{"ntp.example.com"}
		}},
		{name: "version, cluster not installed", create: cd("installing", false), update: addVersion, want: refusal(ieWebhook, version)},
		{name: "version, no cluster", create: bind("missing"), update: addVersion, want: refusal(ieWebhook, version)},
		{name: "version, cluster installed", create: cd("installed", true), update: addVersion},
	})
}

// TestAgentAdmission: the API server refuses what upstream's Agent webhook
// refuses.
func TestAgentAdmission(t *testing.T) {
	const (
		disk      = "Either InstallationDiskID or InstallationDiskPath can be set, not both."
		immutable = "Attempted to change Spec.ClusterDeploymentName which is immutable during Agent installation."
	)
	newAgent := func(name, ns string) *agentinstallv1.Agent {
		return &agentinstallv1.Agent{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: agentinstallv1.AgentSpec{ClusterDeploymentName: &agentinstallv1.ClusterReference{Name: "c", Namespace: ns}}}
	}
	setState := func(a *agentinstallv1.Agent, s string) {
		state, kind, _ := strings.Cut(s, "/")
		a.Status.DebugInfo.State, a.Status.Kind = state, kind
	}
	both := func(a *agentinstallv1.Agent) {
		a.Spec.InstallationDiskID, a.Spec.InstallationDiskPath = "/dev/disk/by-id/wwn-0x5000", "/dev/sda"
	}
	move := func(a *agentinstallv1.Agent) { a.Spec.ClusterDeploymentName.Name = "d" }
	unbind := func(a *agentinstallv1.Agent) { a.Spec.ClusterDeploymentName = nil }
	runAdmission(t, newAgent, setState, []admissionCase[*agentinstallv1.Agent]{
		{name: "disk both ways", create: both, want: refusal(agentWebhook, disk)},
		{name: "disk both ways on update", update: both, want: refusal(agentWebhook, disk)},
		{name: "disk by path", update: func(a *agentinstallv1.Agent) { a.Spec.InstallationDiskPath = "/dev/sda" }},
		{name: "moved before install", state: "known", update: move},
		{name: "moved while installing", state: "installing-in-progress", update: move, want: refusal(agentWebhook, immutable)},
		{name: "unbound while preparing", state: "preparing-successful", update: unbind, want: refusal(agentWebhook, immutable)},
		{name: "day-2 unbound while installing", state: "installing/AddToExistingClusterHost", update: unbind},
		{name: "day-2 moved while installing", state: "installing/AddToExistingClusterHost", update: move, want: refusal(agentWebhook, immutable)},
		{name: "approved while installing", state: "installing", update: func(a *agentinstallv1.Agent) { a.Spec.Approved = true }},
		{name: "unbound once installed", state: "installed", update: unbind},
	})
}

// TestAgentClassificationAdmission: the API server refuses what upstream's
// AgentClassification webhook refuses.
func TestAgentClassificationAdmission(t *testing.T) {
	const modified = "Label modified: the specified label may not be modified after creation"
	newAC := func(name, ns string) *agentinstallv1.AgentClassification {
		return &agentinstallv1.AgentClassification{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: agentinstallv1.AgentClassificationSpec{LabelKey: "size", LabelValue: "large", Query: ".cpu.count >= 16"}}
	}
	runAdmission(t, newAC, nil, []admissionCase[*agentinstallv1.AgentClassification]{
		{name: "valid"},
		{name: "reserved value", create: func(c *agentinstallv1.AgentClassification) { c.Spec.LabelValue = "QUERYERROR-large" },
			want: refusal(acWebhook, `spec: Invalid value: "QUERYERROR-large": label must not start with QUERYERROR as this is reserved`)},
		{name: "bad query", create: func(c *agentinstallv1.AgentClassification) { c.Spec.Query = ".cpu.count >=" },
			want: refusal(acWebhook, `spec: Invalid value: ".cpu.count >=": unexpected EOF`)},
		{name: "bad value", create: func(c *agentinstallv1.AgentClassification) { c.Spec.LabelValue = "very large" },
			want: refusal(acWebhook, `spec: Invalid value: "very large": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', `+
				`and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')`)},
		{name: "bad key", create: func(c *agentinstallv1.AgentClassification) { c.Spec.LabelKey = "big size" },
			want: refusal(acWebhook, `spec: Invalid value: "agentclassification.agent-install.openshift.io/big size": name part must consist of alphanumeric characters, '-', '_' or '.', `+
				`and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`)},
		{name: "key changed", update: func(c *agentinstallv1.AgentClassification) { c.Spec.LabelKey = "big" }, want: refusal(acWebhook, modified)},
		{name: "value changed", update: func(c *agentinstallv1.AgentClassification) { c.Spec.LabelValue = "huge" }, want: refusal(acWebhook, modified)},
		{name: "query changed", update: func(c *agentinstallv1.AgentClassification) { c.Spec.Query = ".cpu.count >= 32" }},
		{name: "query broken", update: func(c *agentinstallv1.AgentClassification) { c.Spec.Query = "nope(" },
			want: refusal(acWebhook, `spec: Invalid value: "nope(": unexpected EOF`)},
	})
}

// TestComponentServesWebhooks: the agent-install component registers every
// webhook config/webhook declares for its groups when the manager serves
// webhooks, without the agent service (the environment's own registration
// of them is not what is tested here).
func TestComponentServesWebhooks(t *testing.T) {
	g := NewWithT(t)
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: env.Client.Scheme(), Metrics: metricsserver.Options{BindAddress: "0"}, Controller: component.ControllerConfig(),
		WebhookServer: webhook.NewServer(webhook.Options{})})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(assisted.Component().Setup(context.Background(), &component.Hub{Manager: mgr, Webhooks: true})).To(Succeed())

	mutating, validating, err := config.OwnWebhooks()
	g.Expect(err).NotTo(HaveOccurred())
	var paths []string
	for _, c := range mutating {
		for _, w := range c.Webhooks {
			paths = append(paths, *w.ClientConfig.Service.Path)
		}
	}
	for _, c := range validating {
		for _, w := range c.Webhooks {
			paths = append(paths, *w.ClientConfig.Service.Path)
		}
	}
	served := 0
	for _, path := range paths {
		if !strings.Contains(path, "agent-install-openshift-io") && !strings.Contains(path, "extensions-hive-openshift-io") {
			continue
		}
		_, pattern := mgr.GetWebhookServer().WebhookMux().Handler(&http.Request{URL: &url.URL{Path: path}})
		g.Expect(pattern).To(Equal(path))
		served++
	}
	g.Expect(served).To(Equal(5))
}
