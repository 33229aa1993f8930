package tenancytest

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	deployapi "github.com/metalshift/metalshift/api/deploy/v1"
	hivev1 "github.com/metalshift/metalshift/api/hive/v1"
	hiveextv1 "github.com/metalshift/metalshift/api/hiveext/v1beta1"
	"github.com/metalshift/metalshift/imageservice"
	"github.com/metalshift/metalshift/internal/certs"
)

// imageSet is the ClusterImageSet every install here names.
const imageSet = "openshift-v4.16.3"

var serviceOnce sync.Once

// serviceObjects creates, once, the cluster-wide objects an install reads:
// its ClusterImageSet and the AgentServiceConfig's OS image.
func serviceObjects(t *testing.T) {
	serviceOnce.Do(func() {
		ctx := context.Background()
		for _, o := range []client.Object{
			&hivev1.ClusterImageSet{ObjectMeta: metav1.ObjectMeta{Name: imageSet},
				Spec: hivev1.ClusterImageSetSpec{ReleaseImage: "quay.io/openshift-release-dev/ocp-release:4.16.3-x86_64"}},
			&agentinstallv1.AgentServiceConfig{ObjectMeta: metav1.ObjectMeta{Name: agentinstallv1.AgentServiceConfigName},
				Spec: agentinstallv1.AgentServiceConfigSpec{OSImages: []agentinstallv1.OSImage{{OpenshiftVersion: "4.16", Version: "416.94",
					URL: "http://images.example.com/rhcos-live.iso", CPUArchitecture: "x86_64"}}}},
		} {
			if err := env.Client.Create(ctx, o); err != nil {
				t.Fatalf("creating %T: %v", o, err)
			}
		}
	})
}

// pullSecret is an install's pull secret in ns.
func pullSecret(ns string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pull-secret"}, Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"registry.example.com":{"auth":"dXNlcjpwYXNz"}}}`)}}
}

// importedCluster creates, in ns, the objects of a cluster installed
// elsewhere and imported for day 2: ClusterDeployment "cluster"
// (installed, its admin kubeconfig in Secret admin-kubeconfig) and its
// AgentClusterInstall, with the kubeconfig given; and waits for the
// install to be adding hosts.
func importedCluster(t *testing.T, g Gomega, ns string, kubeconfig []byte) {
	t.Helper()
	serviceObjects(t)
	ctx := context.Background()
	meta := metav1.ObjectMeta{Namespace: ns, Name: "cluster"}
	for _, o := range []client.Object{
		pullSecret(ns),
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "admin-kubeconfig"}, Data: map[string][]byte{"kubeconfig": kubeconfig}},
		&hivev1.ClusterDeployment{ObjectMeta: meta, Spec: hivev1.ClusterDeploymentSpec{
			ClusterName: "cluster", BaseDomain: "example.com", PullSecretRef: &corev1.LocalObjectReference{Name: "pull-secret"}, Installed: true,
			ClusterMetadata: &hivev1.ClusterMetadata{ClusterID: "id", InfraID: "infra", AdminKubeconfigSecretRef: corev1.LocalObjectReference{Name: "admin-kubeconfig"}},
			ClusterInstallRef: &hivev1.ClusterInstallLocalReference{Group: hiveextv1.GroupVersion.Group, Version: hiveextv1.GroupVersion.Version,
				Kind: "AgentClusterInstall", Name: "cluster"},
			Platform: hivev1.Platform{AgentBareMetal: &hivev1.AgentBareMetalPlatform{}},
		}},
		&hiveextv1.AgentClusterInstall{ObjectMeta: meta, Spec: hiveextv1.AgentClusterInstallSpec{
			ImageSetRef: &hivev1.ClusterImageSetReference{Name: imageSet}, ClusterDeploymentRef: corev1.LocalObjectReference{Name: "cluster"},
			Networking: hiveextv1.Networking{UserManagedNetworking: ptr.To(true),
				ClusterNetwork: []hiveextv1.ClusterNetworkEntry{{CIDR: "10.128.0.0/14", HostPrefix: 23}}, ServiceNetwork: []string{"172.30.0.0/16"}},
			ProvisionRequirements: hiveextv1.ProvisionRequirements{ControlPlaneAgents: 3},
			SSHPublicKey:          "ssh-ed25519 AAAA user@host",
		}},
	} {
		g.Expect(env.Client.Create(ctx, o)).To(Succeed(), "%T %s", o, o.GetName())
	}
	g.Eventually(func() string {
		aci := &hiveextv1.AgentClusterInstall{}
		_ = env.Client.Get(ctx, client.ObjectKeyFromObject(&hiveextv1.AgentClusterInstall{ObjectMeta: meta}), aci)
		return aci.Status.DebugInfo.State
	}).Should(Equal("adding-hosts"))
}

// hubKubeconfig is an admin kubeconfig of the test's API server, with
// inline credentials: the hub plays the victim's installed cluster.
func hubKubeconfig(g Gomega) []byte {
	c := env.Config
	g.Expect(c.CertData).NotTo(BeEmpty(), "envtest's admin has an inline client certificate")
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["hub"] = &clientcmdapi.Cluster{Server: c.Host, CertificateAuthorityData: c.CAData}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: c.CertData, ClientKeyData: c.KeyData}
	cfg.Contexts["admin"] = &clientcmdapi.Context{Cluster: "hub", AuthInfo: "admin"}
	cfg.CurrentContext = "admin"
	data, err := clientcmd.Write(*cfg)
	g.Expect(err).NotTo(HaveOccurred())
	return data
}

// agentHost is an Agent's host: its hostname, boot NIC's MAC and install
// stage.
type agentHost struct {
	hostname, mac string
	stage         string
}

// createAgent creates an Agent in ns with c (a tenant's client or the
// admin's), gives it the status its host's agent reports (the agent
// service writes it from what the host says, so the host's owner chooses
// it), and then binds it to ref (nil: unbound): whoever sees it bound sees
// that status too.
func createAgent(g Gomega, c client.Client, ns, name string, role agentinstallv1.HostRole, ref *agentinstallv1.ClusterReference, h agentHost) *agentinstallv1.Agent {
	ctx := context.Background()
	a := &agentinstallv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: agentinstallv1.AgentSpec{Role: role, Hostname: h.hostname}}
	g.Expect(c.Create(ctx, a)).To(Succeed())
	now := metav1.Now()
	g.Eventually(func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(a), a); err != nil {
			return err
		}
		a.Status.Inventory = agentinstallv1.HardwareInventory{Hostname: h.hostname, ReportTime: &now,
			Interfaces: []agentinstallv1.HostInterface{{Name: "eth0", MacAddress: h.mac, IPV4Addresses: []string{"192.0.2.10/24"}}}}
		a.Status.Progress.CurrentStage = h.stage
		return c.Status().Update(ctx, a)
	}).Should(Succeed())
	if ref != nil {
		g.Eventually(func() error {
			if err := c.Get(ctx, client.ObjectKeyFromObject(a), a); err != nil {
				return err
			}
			a.Spec.ClusterDeploymentName = ref
			return c.Update(ctx, a)
		}).Should(Succeed())
	}
	return a
}

// bootstrapper is the client of the identity that asks for a new node's
// first kubelet certificate in OpenShift (the machine-config operator's
// node-bootstrapper), allowed to create CSRs.
func bootstrapper(t *testing.T, g Gomega) client.Client {
	ctx := context.Background()
	const user = "system:serviceaccount:openshift-machine-config-operator:node-bootstrapper"
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "tenancytest-node-bootstrapper"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{certificatesv1.GroupName}, Resources: []string{"certificatesigningrequests"}, Verbs: []string{"create", "get"}}}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}}
	for _, o := range []client.Object{role, binding} {
		g.Expect(client.IgnoreAlreadyExists(env.Client.Create(ctx, o))).To(Succeed())
	}
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:openshift-machine-config-operator", "system:authenticated"}}
	c, err := client.New(cfg, client.Options{Scheme: env.Client.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = env.Client.Delete(ctx, binding) })
	return c
}

// kubeletCSR creates a node's first kubelet client certificate request,
// as its kubelet would, with c.
func kubeletCSR(g Gomega, c client.Client, node string) *certificatesv1.CertificateSigningRequest {
	req, _, err := certs.NewRequest(certs.Spec{CommonName: "system:node:" + node, Organizations: []string{"system:nodes"}})
	g.Expect(err).NotTo(HaveOccurred())
	csr := &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{GenerateName: "csr-"},
		Spec: certificatesv1.CertificateSigningRequestSpec{Request: req, SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName,
			Usages: []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}}}
	g.Expect(c.Create(context.Background(), csr)).To(Succeed())
	return csr
}

// approved tells whether the CSR is approved.
func approved(g Gomega, csr *certificatesv1.CertificateSigningRequest) bool {
	got := &certificatesv1.CertificateSigningRequest{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(csr), got)).To(Succeed())
	for _, c := range got.Status.Conditions {
		if c.Type == certificatesv1.CertificateApproved {
			return true
		}
	}
	return false
}

// agentCondition is the Agent's condition of type t.
func agentCondition(g Gomega, ns, name, t string) agentinstallv1.Condition {
	a := &agentinstallv1.Agent{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, a)).To(Succeed())
	for _, c := range a.Status.Conditions {
		if string(c.Type) == t {
			return c
		}
	}
	return agentinstallv1.Condition{}
}

// workersDiscovered is the number of workers the AgentClusterInstall
// counted in the last reconcile that wrote its status.
func workersDiscovered(g Gomega, ns string) int {
	aci := &hiveextv1.AgentClusterInstall{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "cluster"}, aci)).To(Succeed())
	return aci.Status.WorkerAgentsDiscovered
}

// aciCondition is the AgentClusterInstall's condition of type t.
func aciCondition(g Gomega, ns, t string) hivev1.ClusterInstallCondition {
	aci := &hiveextv1.AgentClusterInstall{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "cluster"}, aci)).To(Succeed())
	for _, c := range aci.Status.Conditions {
		if c.Type == t {
			return c
		}
	}
	return hivev1.ClusterInstallCondition{}
}

// nmStateConfig configures eth0 statically, for the host with MAC mac.
func nmStateConfig(ns, name, label, mac string) *agentinstallv1.NMStateConfig {
	return &agentinstallv1.NMStateConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"network": label}},
		Spec: agentinstallv1.NMStateConfigSpec{
			Interfaces: []*agentinstallv1.Interface{{Name: "eth0", MacAddress: mac}},
			NetConfig: &runtime.RawExtension{Raw: []byte(`{"interfaces":[{"name":"eth0","type":"ethernet","state":"up",` +
				`"ipv4":{"enabled":true,"dhcp":false,"address":[{"ip":"192.168.111.20","prefix-length":24}]}}]}`)},
		}}
}

// imageConfig is the boot configuration the InfraEnv's image carries, as
// a host booting it by iPXE downloads it from the agent service.
func imageConfig(g Gomega, ie *agentinstallv1.InfraEnv) deployapi.BootConfig {
	script := get(g, ie.Status.BootArtifacts.IpxeScriptURL)
	boot, err := imageservice.ParseIPXEScript(string(script))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(boot.Initrds).NotTo(BeEmpty())
	cfg, err := imageservice.ReadHostInitrd(bytes.NewReader(get(g, boot.Initrds[len(boot.Initrds)-1].URL)))
	g.Expect(err).NotTo(HaveOccurred())
	return cfg
}

func get(g Gomega, url string) []byte {
	resp, err := http.Get(url) //nolint:noctx // the test's own server
	g.Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK), "GET %s: %s", url, body)
	return body
}
