package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	inmemoryruntime "sigs.k8s.io/cluster-api/test/infrastructure/inmemory/pkg/runtime"
	inmemoryserver "sigs.k8s.io/cluster-api/test/infrastructure/inmemory/pkg/server"

	configv1 "github.com/metalshift/metalshift/api/config/v1"
	"github.com/metalshift/metalshift/config"
	"github.com/metalshift/metalshift/sim/kubeapi"
)

// withClusterVersion: populate creates the ClusterVersion and the
// ClusterOperators (-clusterversion).
var withClusterVersion = true

// unserved are the kinds of installedClusterObjects a server refused, with
// its error.
var unserved = map[string]string{}

// operators are the ClusterOperators a simulated installed cluster reports.
const operators = 13

// pki is one CA for every cluster (the memory of a key is not what is
// measured) and an admin client certificate it signed.
type pki struct {
	caCert  *x509.Certificate
	caKey   *rsa.PrivateKey
	caPEM   []byte
	admin   tls.Certificate
	serving tls.Certificate
}

// runMemory starts n API servers of one kind, gives each the objects of an
// installed cluster and a watch on its Nodes, and prints the memory they
// took per cluster; then probes what the fleet twin relies on.
func runMemory(ctx context.Context, kind string, n int) error {
	p, err := newPKI()
	if err != nil {
		return err
	}
	var start func(i int) (*rest.Config, error)
	switch kind {
	case "upstream":
		imm := inmemoryruntime.NewManager(inMemoryScheme())
		if err := imm.Start(ctx); err != nil {
			return err
		}
		mux, err := inmemoryserver.NewWorkloadClustersMux(imm, "127.0.0.1")
		if err != nil {
			return err
		}
		start = func(i int) (*rest.Config, error) { return startUpstream(imm, mux, p, i) }
	case "ours":
		start = func(int) (*rest.Config, error) { return startOurs(p) }
	default:
		return fmt.Errorf("unknown -server %q", kind)
	}
	before := measure()
	var watches []watch.Interface
	crds := true
	for i := range n {
		cfg, err := start(i)
		if err != nil {
			return fmt.Errorf("cluster %d: %w", i, err)
		}
		w, crdsOK, err := populate(ctx, cfg)
		if err != nil {
			return fmt.Errorf("cluster %d: %w", i, err)
		}
		crds = crds && crdsOK
		watches = append(watches, w)
	}
	after := measure()
	fmt.Printf("RESULT memory server=%s clusters=%d heap_mib_per_cluster=%.2f rss_mib_per_cluster=%.2f clusterversion=%v\n", kind, n,
		float64(after.heap-before.heap)/float64(n)/(1<<20), float64(after.rss-before.rss)/float64(n)/(1<<20), crds)
	for obj, err := range unserved {
		fmt.Printf("UNSERVED server=%s %s: %s\n", kind, obj, err)
	}
	for _, w := range watches {
		w.Stop()
	}
	cfg, err := start(n)
	if err != nil {
		return err
	}
	probe(ctx, kind, cfg)
	return nil
}

type usage struct{ heap, rss uint64 }

// measure returns the heap in use after a collection and the process's
// resident set.
func measure() usage {
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	u := usage{heap: ms.HeapInuse}
	data, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseUint(f[1], 10, 64)
			u.rss = kb << 10
		}
	}
	return u
}

func startUpstream(imm inmemoryruntime.Manager, mux *inmemoryserver.WorkloadClustersMux, p *pki, i int) (*rest.Config, error) {
	name := fmt.Sprintf("cluster-%d", i)
	imm.AddResourceGroup(name)
	l, err := mux.InitWorkloadClusterListener(name, 0)
	if err != nil {
		return nil, err
	}
	if err := mux.RegisterResourceGroup(name, name); err != nil {
		return nil, err
	}
	if err := mux.AddAPIServer(name, "kube-apiserver-"+name, p.caCert, p.caKey); err != nil {
		return nil, err
	}
	return p.config(l.HostPort()), nil
}

func startOurs(p *pki) (*rest.Config, error) {
	s, err := kubeapi.New(kubeapi.Options{Certificate: p.serving, ClientCA: p.caPEM, Version: kubernetesVersion})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	go s.Serve(ln)
	return p.config(ln.Addr().String()), nil
}

// populate creates what an installed cluster of one master and one worker
// holds (namespaces, two Nodes with their Leases, ConfigMaps, Secrets,
// the ClusterVersion and ClusterOperator CRDs and objects where the server
// serves CRDs) and opens a watch on its Nodes, as the hub's cluster cache
// does. It reports whether the ClusterVersion could be created.
func populate(ctx context.Context, cfg *rest.Config) (watch.Interface, bool, error) {
	c, err := client.New(cfg, client.Options{Scheme: memoryScheme()})
	if err != nil {
		return nil, false, err
	}
	for _, o := range installedClusterObjects() {
		if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			unserved[fmt.Sprintf("%T", o)] = err.Error()
		}
	}
	crds := false
	if withClusterVersion {
		crds = createClusterVersion(ctx, cfg) == nil
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, false, err
	}
	w, err := cs.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{})
	return w, crds, err
}

func installedClusterObjects() []client.Object {
	var objs []client.Object
	namespaces := []string{"openshift-config", "openshift-config-managed", "openshift-machine-api", "openshift-cluster-version",
		"openshift-etcd", "openshift-kube-apiserver", "openshift-ingress", "openshift-monitoring", "kube-node-lease", "openshift-infra"}
	for _, ns := range namespaces {
		objs = append(objs, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	data := strings.Repeat("x", 1024)
	for i, ns := range namespaces {
		objs = append(objs, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "config"}, Data: map[string]string{"data": data}})
		if i < 5 {
			objs = append(objs, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "secret"}, Data: map[string][]byte{"tls.crt": []byte(data + data)}})
		}
	}
	for _, role := range []string{"master", "worker"} {
		name := "cluster-" + role + "-0"
		objs = append(objs, node(name, role), &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-node-lease", Name: name},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(name), LeaseDurationSeconds: ptr.To[int32](40), RenewTime: &metav1.MicroTime{Time: time.Now()}}})
	}
	return objs
}

func node(name, role string) *corev1.Node {
	ready := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is posting ready status",
		LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"node-role.kubernetes.io/" + role: "", "kubernetes.io/hostname": name, "kubernetes.io/os": "linux"}},
		Spec:       corev1.NodeSpec{ProviderID: "metal3://ns/" + name + "/" + name},
		Status: corev1.NodeStatus{
			Conditions: []corev1.NodeCondition{ready},
			Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.0.2.10"}, {Type: corev1.NodeHostName, Address: name}},
			Capacity:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32Gi")},
			NodeInfo:   corev1.NodeSystemInfo{KubeletVersion: kubernetesVersion, OperatingSystem: "linux", Architecture: "amd64"},
		},
	}
}

// createClusterVersion installs the config.openshift.io CRDs and creates
// the ClusterVersion and the ClusterOperators with their conditions, as a
// simulated installed cluster holds them.
func createClusterVersion(ctx context.Context, cfg *rest.Config) error {
	crds, err := config.CRDs(config.OwnCRDs)
	if err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: memoryScheme()})
	if err != nil {
		return err
	}
	for _, crd := range crds {
		if crd.Spec.Group == configv1.GroupVersion.Group {
			if err := c.Create(ctx, crd); err != nil {
				return fmt.Errorf("CRD %s: %w", crd.Name, err)
			}
		}
	}
	// A new client: its REST mapper discovers the new group.
	if c, err = client.New(cfg, client.Options{Scheme: memoryScheme()}); err != nil {
		return err
	}
	cond := func(t string) configv1.ClusterOperatorStatusCondition {
		return configv1.ClusterOperatorStatusCondition{Type: t, Status: metav1.ConditionTrue, Reason: "AsExpected", Message: "All is well", LastTransitionTime: metav1.Now()}
	}
	cv := &configv1.ClusterVersion{ObjectMeta: metav1.ObjectMeta{Name: "version"}, Spec: configv1.ClusterVersionSpec{ClusterID: "6f6b4c1e-0000-4000-8000-000000000000"}}
	if err := c.Create(ctx, cv); err != nil {
		return fmt.Errorf("ClusterVersion: %w", err)
	}
	for i := range operators {
		co := &configv1.ClusterOperator{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("operator-%d", i)}}
		if err := c.Create(ctx, co); err != nil {
			return fmt.Errorf("ClusterOperator: %w", err)
		}
		co.Status.Conditions = []configv1.ClusterOperatorStatusCondition{cond(configv1.OperatorAvailable), cond("Progressing"), cond("Degraded")}
		if err := c.Status().Update(ctx, co); err != nil {
			return fmt.Errorf("ClusterOperator status: %w", err)
		}
	}
	return nil
}

// probe prints whether the server does what the fleet twin's installed
// clusters and the hub rely on, one FIDELITY line each.
func probe(ctx context.Context, kind string, cfg *rest.Config) {
	say := func(what string, err error) {
		r := "yes"
		if err != nil {
			r = "no (" + strings.ReplaceAll(err.Error(), "\n", " ") + ")"
		}
		fmt.Printf("FIDELITY server=%s %s: %s\n", kind, what, r)
	}
	anon := rest.CopyConfig(cfg)
	anon.CertData, anon.KeyData = nil, nil
	cs, _ := kubernetes.NewForConfig(anon)
	_, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err == nil {
		err = fmt.Errorf("a client without a certificate listed Nodes")
	} else {
		err = nil
	}
	say("refuses a client without credentials", err)
	cs, _ = kubernetes.NewForConfig(cfg)
	w, err := cs.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{})
	if err == nil {
		if _, err = cs.CoreV1().Nodes().Create(ctx, node("watched", "worker"), metav1.CreateOptions{}); err == nil {
			err = firstAdded(w)
		}
		w.Stop()
	}
	say("watch", err)
	n, err := cs.CoreV1().Nodes().Get(ctx, "watched", metav1.GetOptions{})
	if err == nil {
		n.Status.Conditions[0].Status = corev1.ConditionFalse
		n.Labels["changed"] = "by-status"
		_, err = cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		if err == nil {
			n, err = cs.CoreV1().Nodes().Get(ctx, "watched", metav1.GetOptions{})
			if err == nil && n.Labels["changed"] != "" {
				err = fmt.Errorf("a status update changed the labels")
			}
		}
	}
	say("status subresource (a status update leaves metadata alone)", err)
	_, err = cs.CoreV1().ConfigMaps("default").Apply(ctx, applyConfigMap(), metav1.ApplyOptions{FieldManager: "probe"})
	say("server-side apply", err)
	_, err = cs.CertificatesV1().CertificateSigningRequests().Create(ctx, &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "node-csr"},
		Spec: certificatesv1.CertificateSigningRequestSpec{Request: csrPEM(), SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName,
			Usages: []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}},
	}, metav1.CreateOptions{})
	say("CertificateSigningRequests (kubelet client certificates)", err)
	err = createClusterVersion(ctx, cfg)
	say("CRDs served (ClusterVersion, ClusterOperator)", err)
	_, err = cs.Discovery().ServerResourcesForGroupVersion(schema.GroupVersion{Group: "config.openshift.io", Version: "v1"}.String())
	say("discovery of a CRD's group", err)
	_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "gen-"}}, metav1.CreateOptions{})
	say("generateName", err)
	_, err = cs.CoreV1().RESTClient().Get().AbsPath("/").DoRaw(ctx)
	say("an answer at / (Cluster API's cluster cache's reachability check)", err)
}

// memoryScheme is the clients' scheme: Kubernetes' types, CRDs and
// config.openshift.io.
func memoryScheme() *k8sruntime.Scheme {
	s := k8sruntime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = apiextensionsv1.AddToScheme(s)
	_ = configv1.AddToScheme(s)
	return s
}

func applyConfigMap() *corev1ac.ConfigMapApplyConfiguration {
	return corev1ac.ConfigMap("applied", "default").WithData(map[string]string{"k": "v"})
}

func newPKI() (*pki, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "bench-ca"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	ca, _ := x509.ParseCertificate(der)
	p := &pki{caCert: ca, caKey: key, caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
	if p.admin, err = p.issue(&x509.Certificate{Subject: pkix.Name{CommonName: "admin", Organization: []string{"system:masters"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		return nil, err
	}
	p.serving, err = p.issue(&x509.Certificate{Subject: pkix.Name{CommonName: "kube-apiserver"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	return p, err
}

func (p *pki) issue(tmpl *x509.Certificate) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl.SerialNumber = big.NewInt(time.Now().UnixNano())
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, &key.PublicKey, p.caKey)
	if err != nil {
		return tls.Certificate{}, err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.X509KeyPair(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}))
}

// config is an admin's client of the server at hostPort.
func (p *pki) config(hostPort string) *rest.Config {
	crt := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.admin.Certificate[0]})
	kder, _ := x509.MarshalECPrivateKey(p.admin.PrivateKey.(*ecdsa.PrivateKey))
	return &rest.Config{Host: "https://" + hostPort, QPS: -1, Timeout: 10 * time.Second, TLSClientConfig: rest.TLSClientConfig{
		CAData: p.caPEM, CertData: crt, KeyData: pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})}}
}

func csrPEM() []byte {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, _ := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:node:watched", Organization: []string{"system:nodes"}}}, key)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

// firstAdded waits for an ADDED event, skipping bookmarks.
func firstAdded(w watch.Interface) error {
	timeout := time.After(5 * time.Second)
	for {
		select {
		case e, ok := <-w.ResultChan():
			switch {
			case !ok:
				return fmt.Errorf("the watch ended")
			case e.Type == watch.Added:
				return nil
			case e.Type != watch.Bookmark:
				return fmt.Errorf("first event %s", e.Type)
			}
		case <-timeout:
			return fmt.Errorf("no event in 5s")
		}
	}
}
