package agentclusterinstall_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"net"
	"testing"

	. "github.com/onsi/gomega"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	assistedapi "github.com/metalshift/metalshift/api/assisted/v2"
	hivev1 "github.com/metalshift/metalshift/api/hive/v1"
	hiveextv1 "github.com/metalshift/metalshift/api/hiveext/v1beta1"
	"github.com/metalshift/metalshift/assisted/pkg/hoststate"
	"github.com/metalshift/metalshift/assisted/reconcilers/agentclusterinstall"
)

// TestDay2CSRApproval: the hub approves, in an installed cluster (the
// test's own API server, imported with an admin kubeconfig), a joining
// host's client CSR only when the node bootstrapper asked for the node
// name the hub expects of that host and no Node has that name yet, and
// its serving CSR only when the node itself asked for its own names and
// addresses. The CSRs the hub refuses stay pending, with an Event on the
// host's Agent saying why.
func TestDay2CSRApproval(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	ie := importedCluster(t, g, ns)

	// Three joining hosts: one named by its spec (its agent reports
	// another hostname), one by its inventory, one whose name a Node of
	// the cluster has already.
	named := joiningHost(g, ie, "c1000000-0000-4000-8000-000000000001", "worker-7", "master-0", "192.168.111.27")
	reported := joiningHost(g, ie, "c1000000-0000-4000-8000-000000000002", "", "worker-8", "192.168.111.28")
	taken := joiningHost(g, ie, "c1000000-0000-4000-8000-000000000003", "existing-node-"+ns, "", "192.168.111.29")
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "existing-node-" + ns}}
	g.Expect(env.Client.Create(ctx, node)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), node) })

	const intruder = "system:serviceaccount:default:intruder"
	bootstrapper := []string{"system:serviceaccounts", "system:serviceaccounts:openshift-machine-config-operator", "system:authenticated"}
	allowCSRs(t, g, agentclusterinstall.NodeBootstrapperUser, intruder, "system:node:worker-7", "system:node:worker-8")

	// The refused ones first: once the good ones are approved, the hub has
	// seen these.
	refused := map[string]string{
		"reported hostname":    newCSR(g, agentclusterinstall.NodeBootstrapperUser, bootstrapper, clientCSR("master-0")),
		"not the bootstrapper": newCSR(g, intruder, []string{"system:serviceaccounts", "system:authenticated"}, clientCSR("worker-7")),
		"existing Node":        newCSR(g, agentclusterinstall.NodeBootstrapperUser, bootstrapper, clientCSR("existing-node-"+ns)),
		"another node's serving": newCSR(g, "system:node:worker-7", []string{"system:nodes", "system:authenticated"},
			servingCSR("worker-8", "192.168.111.28")),
		"serving, a foreign address": newCSR(g, "system:node:worker-8", []string{"system:nodes", "system:authenticated"},
			servingCSR("worker-8", "192.168.111.99")),
		"client, as the node": newCSR(g, "system:node:worker-8", []string{"system:nodes", "system:authenticated"}, clientCSR("worker-8")),
	}
	client7 := newCSR(g, agentclusterinstall.NodeBootstrapperUser, bootstrapper, clientCSR("worker-7"))
	serving8 := newCSR(g, "system:node:worker-8", []string{"system:nodes", "system:authenticated"}, servingCSR("worker-8", "192.168.111.28"))

	for _, name := range []string{client7, serving8} {
		g.Eventually(func() []certificatesv1.CertificateSigningRequestCondition { return csrConditions(g, name) }).Should(ContainElement(And(
			HaveField("Type", certificatesv1.CertificateApproved), HaveField("Reason", agentclusterinstall.CSRApprovalReason))), name)
	}
	for what, name := range refused {
		g.Expect(csrConditions(g, name)).To(BeEmpty(), what)
	}
	g.Eventually(func() []agentinstallv1.CSRInfo {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(named), named)).To(Succeed())
		return named.Status.CSRStatus.ApprovedCSRs
	}).Should(ConsistOf(And(HaveField("Name", client7), HaveField("Type", agentinstallv1.CSRTypeClient))))
	g.Eventually(func() []string { return agentEvents(g, named) }).Should(ContainElement(
		fmt.Sprintf("CSRNotApproved: Not approving the client certificate signing request %s in the installed cluster: "+
			"it was asked for by %q, not by the node bootstrapper", refused["not the bootstrapper"], intruder)))
	g.Eventually(func() []string { return agentEvents(g, taken) }).Should(ContainElement(
		fmt.Sprintf("CSRNotApproved: Not approving the client certificate signing request %s in the installed cluster: "+
			"the installed cluster has a Node existing-node-%s already", refused["existing Node"], ns)))
	g.Eventually(func() []string { return agentEvents(g, reported) }).Should(ContainElement(
		fmt.Sprintf("CSRNotApproved: Not approving the serving certificate signing request %s in the installed cluster: "+
			"it names address 192.168.111.99, which the host does not have", refused["serving, a foreign address"])))
}

// importedCluster makes an installed cluster imported into the hub, whose
// API is the test's own, and an InfraEnv bound to it.
func importedCluster(t *testing.T, g Gomega, ns string) *agentinstallv1.InfraEnv {
	ctx := context.Background()
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "admin-kubeconfig"},
		Data: map[string][]byte{"kubeconfig": envKubeconfig(g)}})).To(Succeed())
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pull-secret"}, Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"quay.io":{"auth":"dXNlcjpwYXNz"}}}`)}})).To(Succeed())
	imageSet := &hivev1.ClusterImageSet{ObjectMeta: metav1.ObjectMeta{GenerateName: "openshift-v4.16.3-"},
		Spec: hivev1.ClusterImageSetSpec{ReleaseImage: "quay.io/openshift-release-dev/ocp-release:4.16.3-x86_64"}}
	g.Expect(env.Client.Create(ctx, imageSet)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), imageSet) })
	const name = "installed"
	meta := metav1.ObjectMeta{Namespace: ns, Name: name}
	g.Expect(env.Client.Create(ctx, &hivev1.ClusterDeployment{ObjectMeta: meta, Spec: hivev1.ClusterDeploymentSpec{
		ClusterName: name, BaseDomain: "example.com", PullSecretRef: &corev1.LocalObjectReference{Name: "pull-secret"}, Installed: true,
		ClusterMetadata: &hivev1.ClusterMetadata{AdminKubeconfigSecretRef: corev1.LocalObjectReference{Name: "admin-kubeconfig"}},
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
		ProvisionRequirements: hiveextv1.ProvisionRequirements{ControlPlaneAgents: 3},
		SSHPublicKey:          "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFirstKeyFirstKeyFirstKeyFirstKeyFirstKey00 user",
	}}
	g.Expect(env.Client.Create(ctx, aci)).To(Succeed())
	expectACIState(g, aci, "adding-hosts")
	ie := &agentinstallv1.InfraEnv{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: agentinstallv1.InfraEnvSpec{PullSecretRef: &corev1.LocalObjectReference{Name: "pull-secret"},
			ClusterRef: &agentinstallv1.ClusterReference{Namespace: ns, Name: name}}}
	g.Expect(env.Client.Create(ctx, ie)).To(Succeed())
	return ie
}

// envKubeconfig is an admin kubeconfig of the test's API server, which
// stands for the installed cluster.
func envKubeconfig(g Gomega) []byte {
	kc := clientcmdapi.NewConfig()
	cfg := env.Config
	kc.Clusters["installed"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["admin"] = &clientcmdapi.Context{Cluster: "installed", AuthInfo: "admin"}
	kc.CurrentContext = "admin"
	data, err := clientcmd.Write(*kc)
	g.Expect(err).NotTo(HaveOccurred())
	return data
}

// joiningHost is a day-2 worker that wrote its disk and rebooted into the
// installed cluster: named hostname by its spec (when not empty) and
// reportedName by its inventory, with address ip.
func joiningHost(g Gomega, ie *agentinstallv1.InfraEnv, id, hostname, reportedName, ip string) *agentinstallv1.Agent {
	a := register(g, ie, id, "")
	updateAgent(g, a, func(a *agentinstallv1.Agent) {
		a.Spec.Hostname, a.Spec.Role, a.Spec.Approved = hostname, agentinstallv1.HostRoleWorker, true
	})
	g.Eventually(func() error {
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(a), a); err != nil {
			return err
		}
		a.Status.Inventory.Hostname = reportedName
		a.Status.Inventory.Interfaces[0].IPV4Addresses = []string{ip + "/24"}
		a.Status.DebugInfo.State = hoststate.StatusInstallingInProgress
		a.Status.Progress.CurrentStage = string(assistedapi.StageRebooting)
		return env.Client.Status().Update(context.Background(), a)
	}).Should(Succeed())
	return a
}

// allowCSRs lets users ask for certificates (the node bootstrapper's role).
func allowCSRs(t *testing.T, g Gomega, users ...string) {
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{GenerateName: "csr-requesters-"},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:node-bootstrapper"}}
	for _, u := range users {
		crb.Subjects = append(crb.Subjects, rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: u})
	}
	g.Expect(env.Client.Create(context.Background(), crb)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), crb) })
}

// csrSpec is a CSR's request, signer and usages.
type csrSpec struct {
	request []byte
	signer  string
	usages  []certificatesv1.KeyUsage
}

func clientCSR(node string) csrSpec {
	req := certificateRequest(&x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:node:" + node, Organization: []string{"system:nodes"}}})
	return csrSpec{req, certificatesv1.KubeAPIServerClientKubeletSignerName,
		[]certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}}
}

func servingCSR(node, ip string) csrSpec {
	req := certificateRequest(&x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:node:" + node, Organization: []string{"system:nodes"}},
		DNSNames: []string{node}, IPAddresses: []net.IP{net.ParseIP(ip)}})
	return csrSpec{req, certificatesv1.KubeletServingSignerName,
		[]certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageServerAuth}}
}

// certificateRequest is a PEM certificate request of tmpl, with a new key.
func certificateRequest(tmpl *x509.CertificateRequest) []byte {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		panic(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

// newCSR creates a CSR as user (in groups), so that the API server
// records them as its requester, and returns its name.
func newCSR(g Gomega, user string, groups []string, spec csrSpec) string {
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	c, err := client.New(cfg, client.Options{Scheme: env.Client.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())
	csr := &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{GenerateName: "csr-"},
		Spec: certificatesv1.CertificateSigningRequestSpec{Request: spec.request, SignerName: spec.signer, Usages: spec.usages}}
	g.Expect(c.Create(context.Background(), csr)).To(Succeed())
	g.Expect(csr.Spec.Username).To(Equal(user))
	return csr.Name
}

func csrConditions(g Gomega, name string) []certificatesv1.CertificateSigningRequestCondition {
	csr := &certificatesv1.CertificateSigningRequest{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Name: name}, csr)).To(Succeed())
	return csr.Status.Conditions
}

// agentEvents are the reasons and messages of the Events about a.
func agentEvents(g Gomega, a *agentinstallv1.Agent) []string {
	l := &corev1.EventList{}
	g.Expect(env.Client.List(context.Background(), l, client.InNamespace(a.Namespace))).To(Succeed())
	var out []string
	for _, e := range l.Items {
		if e.InvolvedObject.UID == a.UID {
			out = append(out, e.Reason+": "+e.Message)
		}
	}
	return out
}
