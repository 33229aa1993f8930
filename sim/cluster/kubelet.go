package cluster

import (
	"context"
	"crypto/rand"
	"fmt"
	"slices"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/metalshift/metalshift/internal/certs"
	"github.com/metalshift/metalshift/internal/manifest"
)

// Nodes join as kubelets do: the machine-config-server hands out a
// kubeconfig with a bootstrap token, the kubelet asks for a client
// certificate with a CertificateSigningRequest, the cluster approves it
// (OpenShift's machine-approver) and signs it, and the kubelet registers
// its Node as system:node:<name>, renewing its Lease.

const (
	bootstrappersGroup = "system:bootstrappers"
	nodesGroup         = "system:nodes"
	nodeUserPrefix     = "system:node:"
	leaseSeconds       = 40
	// The kubelet renews its Lease every heartbeatInterval and posts its
	// status every statusReportTicks heartbeats (30s here; 5 minutes
	// upstream, time runs faster in the simulator).
	heartbeatInterval = 10 * time.Second
	statusReportTicks = 3
	// networkStartDelay is how long a new Node stays NotReady.
	networkStartDelay = time.Second
)

// newBootstrapToken returns a token "<id>.<secret>" in the format the
// kube-apiserver's bootstrap token authenticator accepts.
func newBootstrapToken() (id, secret string) {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 22)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b[:6]), string(b[6:])
}

// installNodeBootstrap creates the bootstrap token the machine-config-server
// hands out and lets its holders ask for node client certificates.
func (c *Cluster) installNodeBootstrap(ctx context.Context) error {
	tok := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "bootstrap-token-" + c.tokenID, Namespace: metav1.NamespaceSystem},
		Type:       corev1.SecretType("bootstrap.kubernetes.io/token"),
		StringData: map[string]string{
			"token-id": c.tokenID, "token-secret": c.tokenSecret,
			"usage-bootstrap-authentication": "true", "description": "kubelet TLS bootstrap (machine-config-server)",
		},
	}
	if err := c.client.Create(ctx, tok); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the bootstrap token: %w", err)
	}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "system:node-bootstrapper"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:node-bootstrapper"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: bootstrappersGroup}},
	}
	if err := c.client.Create(ctx, crb); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("binding the node bootstrapper role: %w", err)
	}
	return nil
}

// csrLoop approves and signs kubelets' client certificate requests: as
// the machine-approver does, or, in a cluster an agent-based install made,
// as its assisted-installer controller does, only until the cluster is
// installed (later nodes wait for someone else's approval: the hub's).
func (c *Cluster) csrLoop(ctx context.Context) {
	untilInstalled := c.approvesUntilInstalled()
	for {
		list := &certificatesv1.CertificateSigningRequestList{}
		if untilInstalled && c.installed.Load() {
			// Approved CSRs are still signed: signing is the API's, not the approver's.
			list = c.approvedCSRs(ctx)
		} else if err := c.client.List(ctx, list); err != nil {
			list.Items = nil
		}
		for i := range list.Items {
			if err := c.handleCSR(ctx, &list.Items[i]); err != nil && ctx.Err() == nil {
				c.w.opts.Logf("Cluster %s: CSR %s: %v", c.name, list.Items[i].Name, err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(c.poll(200 * time.Millisecond)):
		}
	}
}

// approvesUntilInstalled tells whether the cluster's manifests hold the
// assisted-installer controller's configuration, which says it approves
// CSRs only until the install completes.
func (c *Cluster) approvesUntilInstalled() bool {
	for _, data := range c.files.manifests {
		objs, _ := manifest.Decode(data)
		for _, u := range objs {
			if u.GetKind() == "ConfigMap" && u.GetName() == "assisted-installer-controller-config" {
				v, _, _ := unstructured.NestedString(u.Object, "data", "approve-csrs")
				return v == "until-installed"
			}
		}
	}
	return false
}

// approvedCSRs lists the CSRs someone approved that have no certificate yet.
func (c *Cluster) approvedCSRs(ctx context.Context) *certificatesv1.CertificateSigningRequestList {
	list := &certificatesv1.CertificateSigningRequestList{}
	if err := c.client.List(ctx, list); err != nil {
		return list
	}
	out := list.Items[:0]
	for _, csr := range list.Items {
		for _, cond := range csr.Status.Conditions {
			if cond.Type == certificatesv1.CertificateApproved && cond.Status == corev1.ConditionTrue {
				out = append(out, csr)
				break
			}
		}
	}
	list.Items = out
	return list
}

func (c *Cluster) handleCSR(ctx context.Context, csr *certificatesv1.CertificateSigningRequest) error {
	if csr.Spec.SignerName != certificatesv1.KubeAPIServerClientKubeletSignerName || len(csr.Status.Certificate) > 0 {
		return nil
	}
	approved, denied := false, false
	for _, cond := range csr.Status.Conditions {
		approved = approved || cond.Type == certificatesv1.CertificateApproved
		denied = denied || cond.Type == certificatesv1.CertificateDenied || cond.Type == certificatesv1.CertificateFailed
	}
	if denied {
		return nil
	}
	req, err := certs.ParseRequest(csr.Spec.Request)
	if err != nil {
		return err
	}
	// What the machine-approver checks of a first kubelet certificate: a
	// node identity, asked for by a bootstrap token holder.
	if !strings.HasPrefix(req.Subject.CommonName, nodeUserPrefix) || !slices.Equal(req.Subject.Organization, []string{nodesGroup}) ||
		!slices.Contains(csr.Spec.Groups, bootstrappersGroup) || !slices.Contains(csr.Spec.Usages, certificatesv1.UsageClientAuth) {
		return nil
	}
	if !approved {
		csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
			Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "NodeCSRApprove",
			Message: "This CSR was approved by the Node CSR Approver", LastUpdateTime: metav1.Now(),
		})
		if err := c.client.SubResource("approval").Update(ctx, csr); err != nil {
			return fmt.Errorf("approving: %w", err)
		}
	}
	if csr.Status.Certificate, err = certs.SignClient(c.files.ca, req); err != nil {
		return err
	}
	return c.client.Status().Update(ctx, csr)
}

// kubelet joins with the bootstrap kubeconfig, registers the Node, reports
// it Ready and renews its Lease, and reports Unknown when the machine goes
// down.
func (w *World) kubelet(ctx context.Context, cl *Cluster, m Machine, md metadata, pool, version string, bootstrapKubeconfig []byte) error {
	name := md.Hostname
	if name == "" {
		name = md.Name
	}
	rc, err := clientcmd.RESTConfigFromKubeConfig(bootstrapKubeconfig)
	if err != nil {
		return fmt.Errorf("kubelet: the bootstrap kubeconfig: %w", err)
	}
	rc.Dial = w.DialContext
	rc.Timeout = 10 * time.Second
	c, err := w.nodeClient(ctx, m, rc, name)
	if err != nil || c == nil {
		return err
	}
	n := &nodeReporter{c: c, name: name, ip: m.IP, version: version}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
		"node-role.kubernetes.io/" + pool: "",
	}}, Spec: corev1.NodeSpec{ProviderID: md.ProviderID}}
	if pool == "master" {
		node.Labels["node-role.kubernetes.io/control-plane"] = ""
	}
	if !retry(ctx, func() error {
		if err := c.Create(ctx, node); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		return nil
	}) {
		return nil
	}
	// NotReady until the network plugin runs, then Ready: a Node that
	// changes after it registers, as a real one does. Like a kubelet, it
	// retries until the API takes the status (conflicts, an API server
	// restarting) and says so in its log.
	logf := func(format string, args ...any) { w.opts.Logf("%s: kubelet: "+format, append([]any{m.ID}, args...)...) }
	if !retryLogged(ctx, logf, "posting node status", func() error {
		return n.report(ctx, corev1.ConditionFalse, "KubeletNotReady", "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady")
	}) {
		return nil
	}
	select {
	case <-ctx.Done():
		return nil
	case <-time.After(networkStartDelay):
	}
	if !retryLogged(ctx, logf, "posting node status", func() error {
		return n.report(ctx, corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status")
	}) {
		return nil
	}
	w.opts.Logf("%s: kubelet: Node %s registered (providerID %s), Ready", m.ID, name, md.ProviderID)
	if cl.runsOperator() {
		go w.runPods(ctx, cl, c, name, m.IP, m.ID)
	}
	for tick := 1; ; tick++ {
		if err := renewLease(ctx, c, name); err != nil && ctx.Err() == nil {
			w.opts.Logf("%s: kubelet: renewing the node lease: %v", m.ID, err)
		}
		if tick%statusReportTicks == 0 {
			if err := n.report(ctx, corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"); err != nil && ctx.Err() == nil {
				w.opts.Logf("%s: kubelet: posting node status: %v", m.ID, err)
			}
		}
		select {
		case <-ctx.Done():
			stopCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_ = n.report(stopCtx, corev1.ConditionUnknown, "NodeStatusUnknown", "Kubelet stopped posting node status.")
			return nil
		case <-time.After(heartbeatInterval):
		}
	}
}

// nodeClient gets the node's client certificate through a
// CertificateSigningRequest made with the bootstrap credentials; nil when
// the machine stops first.
func (w *World) nodeClient(ctx context.Context, m Machine, bootstrap *rest.Config, name string) (client.Client, error) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	bc, err := client.New(bootstrap, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	reqPEM, keyPEM, err := certs.NewRequest(certs.Spec{CommonName: nodeUserPrefix + name, Organizations: []string{nodesGroup}})
	if err != nil {
		return nil, err
	}
	csr := &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "csr-"},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request: reqPEM, SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName,
			Usages:            []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
			ExpirationSeconds: ptr.To(int32(365 * 24 * 3600)),
		},
	}
	if !retry(ctx, func() error { return bc.Create(ctx, csr) }) {
		return nil, nil
	}
	w.opts.Logf("%s: kubelet: waiting for CertificateSigningRequest %s to be approved and signed", m.ID, csr.Name)
	var denied error
	if !retry(ctx, func() error {
		if err := bc.Get(ctx, client.ObjectKeyFromObject(csr), csr); err != nil {
			return err
		}
		for _, cond := range csr.Status.Conditions {
			if cond.Type == certificatesv1.CertificateDenied || cond.Type == certificatesv1.CertificateFailed {
				denied = fmt.Errorf("kubelet: CertificateSigningRequest %s %s: %s", csr.Name, cond.Type, cond.Message)
				return nil
			}
		}
		if len(csr.Status.Certificate) == 0 {
			return fmt.Errorf("not signed yet")
		}
		return nil
	}) {
		return nil, nil
	}
	if denied != nil {
		return nil, denied
	}
	nc := rest.AnonymousClientConfig(bootstrap)
	nc.CertData, nc.KeyData = csr.Status.Certificate, keyPEM
	return client.New(nc, client.Options{Scheme: scheme})
}

// retry calls f every 200ms until it succeeds; false if ctx ends first.
func retry(ctx context.Context, f func() error) bool {
	return retryLogged(ctx, nil, "", f)
}

// retryLogged is retry that logs the first failure and every 25th after
// it (every 5 s), so that a kubelet that cannot reach its API says so.
func retryLogged(ctx context.Context, logf func(string, ...any), what string, f func() error) bool {
	for attempt := 0; ; attempt++ {
		err := f()
		if err == nil {
			return true
		}
		if logf != nil && attempt%25 == 0 && ctx.Err() == nil {
			logf("%s: attempt #%d: %v (retrying)", what, attempt+1, err)
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// renewLease is the kubelet's heartbeat: kube-node-lease/<node>.
func renewLease(ctx context.Context, c client.Client, name string) error {
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: corev1.NamespaceNodeLease}}
	err := c.Get(ctx, client.ObjectKeyFromObject(lease), lease)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	lease.Spec.HolderIdentity = ptr.To(name)
	lease.Spec.LeaseDurationSeconds = ptr.To(int32(leaseSeconds))
	lease.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
	if apierrors.IsNotFound(err) {
		return c.Create(ctx, lease)
	}
	return c.Update(ctx, lease)
}

// nodeReporter posts a kubelet's Node status.
type nodeReporter struct {
	c                 client.Client
	name, ip, version string
}

// report posts Ready with status, reason and message, and the pressure
// conditions that go with it, as a patch of the Node's status (as a
// kubelet does): what others changed on the Node meanwhile is no conflict.
func (n *nodeReporter) report(ctx context.Context, status corev1.ConditionStatus, reason, msg string) error {
	node := &corev1.Node{}
	if err := n.c.Get(ctx, client.ObjectKey{Name: n.name}, node); err != nil {
		return err
	}
	base := node.DeepCopy()
	now := metav1.Now()
	// Pressure conditions are what the kubelet reports; Unknown once it stops.
	pressure := corev1.ConditionFalse
	if status != corev1.ConditionTrue {
		pressure = corev1.ConditionUnknown
	}
	want := []corev1.NodeCondition{
		{Type: corev1.NodeMemoryPressure, Status: pressure, Reason: "KubeletHasSufficientMemory"},
		{Type: corev1.NodeDiskPressure, Status: pressure, Reason: "KubeletHasNoDiskPressure"},
		{Type: corev1.NodePIDPressure, Status: pressure, Reason: "KubeletHasSufficientPID"},
		{Type: corev1.NodeReady, Status: status, Reason: reason, Message: msg},
	}
	for i := range want {
		want[i].LastHeartbeatTime, want[i].LastTransitionTime = now, now
		for _, old := range node.Status.Conditions {
			if old.Type == want[i].Type && old.Status == want[i].Status {
				want[i].LastTransitionTime = old.LastTransitionTime
			}
		}
	}
	node.Status.Conditions = want
	if n.ip != "" {
		node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: n.ip}, {Type: corev1.NodeHostName, Address: n.name}}
	}
	node.Status.NodeInfo.KubeletVersion = n.version
	node.Status.NodeInfo.OperatingSystem = "linux"
	node.Status.NodeInfo.Architecture = "amd64"
	node.Status.NodeInfo.OSImage = "Red Hat Enterprise Linux CoreOS (simulated)"
	err := n.c.Status().Patch(ctx, node, client.MergeFrom(base))
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
