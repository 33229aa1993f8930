package kubeapi

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1 "github.com/metalshift/metalshift/api/config/v1"
	"github.com/metalshift/metalshift/config"
	"github.com/metalshift/metalshift/internal/certs"
)

var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = apiextensionsv1.AddToScheme(s)
	_ = configv1.AddToScheme(s)
	return s
}()

// cluster is a running server with its CA and an admin kubeconfig, as an
// installed cluster's admin kubeconfig is made.
type cluster struct {
	srv        *Server
	ca         certs.KeyPair
	url        string
	kubeconfig []byte
}

func start(t *testing.T) *cluster {
	t.Helper()
	g := NewWithT(t)
	ca, err := certs.NewCA("root-ca")
	g.Expect(err).NotTo(HaveOccurred())
	serving, err := certs.Issue(ca, certs.Spec{CommonName: "api", Server: true, IPs: []net.IP{net.ParseIP("127.0.0.1")}})
	g.Expect(err).NotTo(HaveOccurred())
	cert, err := tls.X509KeyPair(serving.Cert, serving.Key)
	g.Expect(err).NotTo(HaveOccurred())
	srv, err := New(Options{Certificate: cert, ClientCA: ca.Cert, Version: "v1.29.5"})
	g.Expect(err).NotTo(HaveOccurred())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	addr := ln.Addr().String()
	srv.Serve(ln)
	t.Cleanup(srv.Close)
	c := &cluster{srv: srv, ca: ca, url: "https://" + addr}
	admin, err := certs.Issue(ca, certs.Spec{CommonName: "system:admin", Organizations: []string{"system:masters"}})
	g.Expect(err).NotTo(HaveOccurred())
	c.kubeconfig = c.kubeconfigFor(t, &clientcmdapi.AuthInfo{ClientCertificateData: admin.Cert, ClientKeyData: admin.Key})
	return c
}

func (c *cluster) kubeconfigFor(t *testing.T, user *clientcmdapi.AuthInfo) []byte {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: c.url, CertificateAuthorityData: c.ca.Cert}
	cfg.AuthInfos["u"] = user
	cfg.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	cfg.CurrentContext = "c"
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func (c *cluster) client(t *testing.T, kubeconfig []byte) client.WithWatch {
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// installCRDs creates the config.openshift.io CRDs and waits until they
// are Established, as the simulated bootstrap does.
func installCRDs(g *WithT, c client.Client) {
	ctx := context.Background()
	crds, err := config.CRDs(config.OwnCRDs)
	g.Expect(err).NotTo(HaveOccurred())
	n := 0
	for _, crd := range crds {
		if crd.Spec.Group != configv1.GroupVersion.Group {
			continue
		}
		n++
		g.Expect(c.Create(ctx, crd)).To(Succeed())
		got := &apiextensionsv1.CustomResourceDefinition{}
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(crd), got)).To(Succeed())
		g.Expect(got.Status.Conditions).To(ContainElement(And(HaveField("Type", apiextensionsv1.Established),
			HaveField("Status", apiextensionsv1.ConditionTrue))))
	}
	g.Expect(n).To(Equal(3), "ClusterVersion, ClusterOperator and Infrastructure")
}

func readyNode(name string, labels map[string]string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"}}}}
}

// TestHubReads: what the hub reads of an installed cluster with its admin
// kubeconfig (assisted/reconcilers/agentclusterinstall's KubeconfigSpoke:
// a new controller-runtime client, List Nodes, Get ClusterVersion
// "version") and what the discovery agent reads (a plain GET of the
// masters by label) work against the twin.
func TestHubReads(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := start(t)
	admin := c.client(t, c.kubeconfig)
	installCRDs(g, admin)
	cv := &configv1.ClusterVersion{ObjectMeta: metav1.ObjectMeta{Name: "version"}, Spec: configv1.ClusterVersionSpec{ClusterID: "id"}}
	g.Expect(admin.Create(ctx, cv)).To(Succeed())
	g.Expect(cv.Status.Conditions).To(BeEmpty())
	configv1.SetCondition(&cv.Status.Conditions, configv1.ClusterOperatorStatusCondition{Type: configv1.OperatorAvailable, Status: metav1.ConditionTrue})
	g.Expect(admin.Status().Update(ctx, cv)).To(Succeed())
	g.Expect(admin.Create(ctx, readyNode("master-0", map[string]string{"node-role.kubernetes.io/master": ""}))).To(Succeed())
	g.Expect(admin.Create(ctx, readyNode("worker-0", map[string]string{"node-role.kubernetes.io/worker": ""}))).To(Succeed())

	// The hub: a new client from the kubeconfig bytes, as each reconcile makes.
	cfg, err := clientcmd.RESTConfigFromKubeConfig(c.kubeconfig)
	g.Expect(err).NotTo(HaveOccurred())
	cfg.Timeout = 5 * time.Second
	hub, err := client.New(cfg, client.Options{Scheme: scheme})
	g.Expect(err).NotTo(HaveOccurred())
	nodes := &corev1.NodeList{}
	g.Expect(hub.List(ctx, nodes)).To(Succeed())
	g.Expect(nodes.Items).To(HaveLen(2))
	g.Expect(nodes.Items[0].Status.Conditions).To(ContainElement(HaveField("Type", corev1.NodeReady)))
	got := &configv1.ClusterVersion{}
	g.Expect(hub.Get(ctx, types.NamespacedName{Name: "version"}, got)).To(Succeed())
	g.Expect(got.Spec.ClusterID).To(Equal("id"))
	g.Expect(got.Status.Conditions).To(ContainElement(And(HaveField("Type", configv1.OperatorAvailable), HaveField("Status", metav1.ConditionTrue))))

	// The discovery agent: GET /api/v1/nodes?labelSelector=... with the same credentials.
	hc, err := rest.HTTPClientFor(cfg)
	g.Expect(err).NotTo(HaveOccurred())
	resp, err := hc.Get(c.url + "/api/v1/nodes?labelSelector=node-role.kubernetes.io%2Fmaster")
	g.Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	masters := &corev1.NodeList{}
	g.Expect(json.NewDecoder(resp.Body).Decode(masters)).To(Succeed())
	g.Expect(masters.Items).To(HaveLen(1))
	g.Expect(masters.Items[0].Name).To(Equal("master-0"))
}

// TestKubeletJoin: a kubelet's TLS bootstrap and registration: a CSR made
// with a bootstrap token records the token's groups, is approved and
// signed by an admin, and the node's certificate registers its Node,
// patches its status and renews its Lease. The token can do nothing else.
func TestKubeletJoin(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := start(t)
	admin := c.client(t, c.kubeconfig)
	g.Expect(admin.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "bootstrap-token-abcdef", Namespace: metav1.NamespaceSystem},
		Type:       corev1.SecretType(bootstrapTokenType),
		StringData: map[string]string{"token-id": "abcdef", "token-secret": "0123456789abcdef", "usage-bootstrap-authentication": "true"},
	})).To(Succeed())
	bootstrap := c.client(t, c.kubeconfigFor(t, &clientcmdapi.AuthInfo{Token: "abcdef.0123456789abcdef"}))
	g.Expect(apierrors.IsForbidden(bootstrap.List(ctx, &corev1.SecretList{}))).To(BeTrue())
	wrong := c.client(t, c.kubeconfigFor(t, &clientcmdapi.AuthInfo{Token: "abcdef.0123456789abcdeX"}))
	g.Expect(apierrors.IsUnauthorized(wrong.List(ctx, &certificatesv1.CertificateSigningRequestList{}))).To(BeTrue())

	reqPEM, keyPEM, err := certs.NewRequest(certs.Spec{CommonName: "system:node:node-0", Organizations: []string{"system:nodes"}})
	g.Expect(err).NotTo(HaveOccurred())
	csr := &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{GenerateName: "csr-"},
		Spec: certificatesv1.CertificateSigningRequestSpec{Request: reqPEM, SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName,
			Usages: []certificatesv1.KeyUsage{certificatesv1.UsageClientAuth}, ExpirationSeconds: ptr.To(int32(365 * 24 * 3600))}}
	g.Expect(bootstrap.Create(ctx, csr)).To(Succeed())
	g.Expect(csr.Name).To(HavePrefix("csr-"))
	g.Expect(csr.Spec.Username).To(Equal("system:bootstrap:abcdef"))
	g.Expect(csr.Spec.Groups).To(ContainElement("system:bootstrappers"))
	g.Expect(*csr.Spec.ExpirationSeconds).To(Equal(int32(365 * 24 * 3600)))

	csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "NodeCSRApprove"})
	g.Expect(apierrors.IsForbidden(bootstrap.SubResource("approval").Update(ctx, csr.DeepCopy()))).To(BeTrue())
	g.Expect(admin.SubResource("approval").Update(ctx, csr)).To(Succeed())
	req, err := certs.ParseRequest(reqPEM)
	g.Expect(err).NotTo(HaveOccurred())
	csr.Status.Certificate, err = certs.SignClient(c.ca, req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(admin.Status().Update(ctx, csr)).To(Succeed())
	g.Expect(bootstrap.Get(ctx, client.ObjectKeyFromObject(csr), csr)).To(Succeed())
	g.Expect(csr.Status.Conditions).To(HaveLen(1))
	g.Expect(csr.Status.Certificate).NotTo(BeEmpty())

	node := c.client(t, c.kubeconfigFor(t, &clientcmdapi.AuthInfo{ClientCertificateData: csr.Status.Certificate, ClientKeyData: keyPEM}))
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-0"}, Spec: corev1.NodeSpec{ProviderID: "metal://node-0"}}
	g.Expect(node.Create(ctx, n)).To(Succeed())
	base := n.DeepCopy()
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"}}
	n.Spec.ProviderID = "changed by a status patch"
	g.Expect(node.Status().Patch(ctx, n, client.MergeFrom(base))).To(Succeed())
	g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(n), n)).To(Succeed())
	g.Expect(n.Status.Conditions).To(HaveLen(1))
	g.Expect(n.Spec.ProviderID).To(Equal("metal://node-0"), "a status patch leaves the spec")
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "node-0", Namespace: corev1.NamespaceNodeLease},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("node-0"), RenewTime: &metav1.MicroTime{Time: time.Now()}}}
	g.Expect(node.Create(ctx, lease)).To(Succeed())
	lease.Spec.RenewTime = &metav1.MicroTime{Time: time.Now().Add(time.Second)}
	g.Expect(node.Update(ctx, lease)).To(Succeed())
	g.Expect(apierrors.IsForbidden(node.List(ctx, &corev1.SecretList{}))).To(BeTrue())
}

// TestSemantics: the API's errors and write rules that clients rely on.
func TestSemantics(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := start(t)
	admin := c.client(t, c.kubeconfig)
	installCRDs(g, admin)

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "default"}, Data: map[string]string{"k": "v"}}
	g.Expect(admin.Create(ctx, cm)).To(Succeed())
	g.Expect(apierrors.IsAlreadyExists(admin.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "default"}}))).To(BeTrue())
	g.Expect(apierrors.IsNotFound(admin.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "nowhere"}}))).To(BeTrue())
	g.Expect(apierrors.IsNotFound(admin.Get(ctx, types.NamespacedName{Namespace: "default", Name: "b"}, &corev1.ConfigMap{}))).To(BeTrue())
	stale := cm.DeepCopy()
	cm.Data["k"] = "w"
	g.Expect(admin.Update(ctx, cm)).To(Succeed())
	g.Expect(cm.ResourceVersion).NotTo(Equal(stale.ResourceVersion))
	stale.Data["k"] = "x"
	g.Expect(apierrors.IsConflict(admin.Update(ctx, stale))).To(BeTrue())
	rv := cm.ResourceVersion
	g.Expect(admin.Update(ctx, cm)).To(Succeed())
	g.Expect(cm.ResourceVersion).To(Equal(rv), "an update that changes nothing writes nothing")

	// A custom resource with a status subresource: the halves are written apart.
	co := &configv1.ClusterOperator{ObjectMeta: metav1.ObjectMeta{Name: "dns"}}
	g.Expect(admin.Create(ctx, co)).To(Succeed())
	g.Expect(co.Generation).To(Equal(int64(1)))
	configv1.SetCondition(&co.Status.Conditions, configv1.ClusterOperatorStatusCondition{Type: configv1.OperatorAvailable, Status: metav1.ConditionTrue})
	co.Labels = map[string]string{"ignored": "by a status update"}
	g.Expect(admin.Status().Update(ctx, co)).To(Succeed())
	g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(co), co)).To(Succeed())
	g.Expect(co.Status.Conditions).To(HaveLen(1))
	g.Expect(co.Labels).To(BeEmpty())
	g.Expect(co.Generation).To(Equal(int64(1)))
	co.Status.Conditions = nil
	co.Labels = map[string]string{"kept": "by an update"}
	g.Expect(admin.Update(ctx, co)).To(Succeed())
	g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(co), co)).To(Succeed())
	g.Expect(co.Status.Conditions).To(HaveLen(1), "an update leaves the status")
	g.Expect(co.Labels).To(HaveKey("kept"))

	// Finalizers hold a deleted object until they are removed.
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "held", Namespace: "default", Finalizers: []string{"example.com/hold"}}}
	g.Expect(admin.Create(ctx, sec)).To(Succeed())
	g.Expect(admin.Delete(ctx, sec)).To(Succeed())
	g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(sec), sec)).To(Succeed())
	g.Expect(sec.DeletionTimestamp).NotTo(BeNil())
	sec.Finalizers = nil
	g.Expect(admin.Update(ctx, sec)).To(Succeed())
	g.Expect(apierrors.IsNotFound(admin.Get(ctx, client.ObjectKeyFromObject(sec), sec))).To(BeTrue())

	// Unknown resources and anonymous clients.
	g.Expect(apierrors.IsNotFound(admin.Get(ctx, types.NamespacedName{Name: "x"}, &apiextensionsv1.CustomResourceDefinition{}))).To(BeTrue())
	resp, err := (&http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}).Get(c.url + "/api/v1/nodes")
	g.Expect(err).NotTo(HaveOccurred())
	resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusUnauthorized))
}

// TestWatch: an informer (client-go's watch-list: initial events and their
// bookmark) sees Nodes come and change, and a watch from a resource
// version sees what came after it.
func TestWatch(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := start(t)
	admin := c.client(t, c.kubeconfig)
	g.Expect(admin.Create(ctx, readyNode("before", nil))).To(Succeed())
	cfg, err := clientcmd.RESTConfigFromKubeConfig(c.kubeconfig)
	g.Expect(err).NotTo(HaveOccurred())
	ca, err := cache.New(cfg, cache.Options{Scheme: scheme})
	g.Expect(err).NotTo(HaveOccurred())
	go func() { _ = ca.Start(ctx) }()
	nodes := func() []string {
		list := &corev1.NodeList{}
		if err := ca.List(ctx, list); err != nil {
			return []string{err.Error()}
		}
		var out []string
		for _, n := range list.Items {
			out = append(out, fmt.Sprintf("%s:%s", n.Name, n.Labels["step"]))
		}
		return out
	}
	g.Eventually(nodes, 10*time.Second).Should(Equal([]string{"before:"}))
	after := readyNode("after", nil)
	g.Expect(admin.Create(ctx, after)).To(Succeed())
	g.Eventually(nodes, 10*time.Second).Should(Equal([]string{"after:", "before:"}))
	after.Labels = map[string]string{"step": "2"}
	g.Expect(admin.Update(ctx, after)).To(Succeed())
	g.Eventually(nodes, 10*time.Second).Should(Equal([]string{"after:2", "before:"}))

	w, err := admin.Watch(ctx, &corev1.NodeList{}, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: after.ResourceVersion}})
	g.Expect(err).NotTo(HaveOccurred())
	defer w.Stop()
	g.Expect(admin.Delete(ctx, after)).To(Succeed())
	var e = <-w.ResultChan()
	g.Expect(string(e.Type)).To(Equal("DELETED"))
	g.Expect(e.Object.(*corev1.Node).Name).To(Equal("after"))
}

// TestRootPaths: "/" lists the paths served, CRDs' groups included, as
// kube-apiserver's does: Cluster API's cluster cache GETs it to decide
// that a workload cluster is reachable, and connects to none that answers
// 404. A client without credentials is refused.
func TestRootPaths(t *testing.T) {
	g := NewWithT(t)
	c := start(t)
	installCRDs(g, c.client(t, c.kubeconfig))
	cfg, err := clientcmd.RESTConfigFromKubeConfig(c.kubeconfig)
	g.Expect(err).NotTo(HaveOccurred())
	hc, err := rest.HTTPClientFor(cfg)
	g.Expect(err).NotTo(HaveOccurred())
	resp, err := hc.Get(c.url + "/")
	g.Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	root := &metav1.RootPaths{}
	g.Expect(json.NewDecoder(resp.Body).Decode(root)).To(Succeed())
	g.Expect(root.Paths).To(ContainElements("/api", "/api/v1", "/apis", "/apis/config.openshift.io", "/apis/config.openshift.io/v1", "/version"))

	anon := rest.AnonymousClientConfig(cfg)
	hc, err = rest.HTTPClientFor(anon)
	g.Expect(err).NotTo(HaveOccurred())
	resp, err = hc.Get(c.url + "/")
	g.Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusUnauthorized))
}
