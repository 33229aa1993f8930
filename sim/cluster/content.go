package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1 "github.com/metalshift/metalshift/api/config/v1"
	"github.com/metalshift/metalshift/config"
	"github.com/metalshift/metalshift/internal/manifest"
)

// Node role labels.
const (
	masterRoleLabel = "node-role.kubernetes.io/master"
	workerRoleLabel = "node-role.kubernetes.io/worker"
)

// installContent does what the bootstrap service does first: CRDs of the
// config.openshift.io API, the user's manifests, ClusterVersion and the
// ClusterOperators.
func (c *Cluster) installContent(ctx context.Context) error {
	crds, err := config.CRDs(config.OwnCRDs)
	if err != nil {
		return err
	}
	for _, crd := range crds {
		if crd.Spec.Group != configv1.GroupVersion.Group {
			continue
		}
		if err := c.client.Create(ctx, crd); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("installing CRD %s: %w", crd.Name, err)
		}
	}
	for _, crd := range crds {
		if crd.Spec.Group == configv1.GroupVersion.Group {
			if err := c.waitEstablished(ctx, crd.Name); err != nil {
				return err
			}
		}
	}
	if err := c.installNodeBootstrap(ctx); err != nil {
		return err
	}
	c.applyManifests(ctx)
	// openshift-install's kube-system/root-ca: the CA the
	// machine-config-server's certificate is signed with.
	rootCA := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "root-ca"},
		Data: map[string]string{"ca.crt": string(c.files.ca.Cert)}}
	if err := c.client.Create(ctx, rootCA); err != nil && !apierrors.IsAlreadyExists(err) {
		c.w.opts.Logf("Cluster %s: ConfigMap kube-system/root-ca: %v", c.name, err)
	}
	if err := c.installInfrastructure(ctx); err != nil {
		return err
	}
	cv := &configv1.ClusterVersion{
		ObjectMeta: metav1.ObjectMeta{Name: "version"},
		Spec:       configv1.ClusterVersionSpec{ClusterID: clusterID(c.files.ca.Cert)},
	}
	if err := c.client.Create(ctx, cv); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating ClusterVersion: %w", err)
	}
	for _, op := range operators {
		if op.name == baremetalOperator && c.runsOperator() {
			continue // the operator creates it
		}
		co := &configv1.ClusterOperator{ObjectMeta: metav1.ObjectMeta{Name: op.name}}
		if err := c.client.Create(ctx, co); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating ClusterOperator %s: %w", op.name, err)
		}
	}
	return nil
}

// clusterID is a UUID derived from the cluster's root CA.
func clusterID(caCert []byte) string {
	sum := sha256.Sum256(caCert)
	h := hex.EncodeToString(sum[:16])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

func (c *Cluster) waitEstablished(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.client.Get(ctx, client.ObjectKey{Name: name}, crd); err == nil {
			for _, cond := range crd.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("CRD %s not established: %w", name, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// applyManifests creates every object of the user's manifests, as the
// bootstrap service does; an object that cannot be created is logged.
func (c *Cluster) applyManifests(ctx context.Context) {
	paths := make([]string, 0, len(c.files.manifests))
	for p := range c.files.manifests {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		objs, err := manifest.Decode(c.files.manifests[p])
		if err != nil {
			c.w.opts.Logf("Cluster %s: manifest %s: %v", c.name, p, err)
		}
		for _, u := range objs {
			if err := c.client.Create(ctx, u); err != nil && !apierrors.IsAlreadyExists(err) {
				c.w.opts.Logf("Cluster %s: manifest %s: %s %s: %v", c.name, p, u.GetKind(), u.GetName(), err)
			}
		}
	}
}

// operator is a simulated cluster operator: Available once enough Nodes are Ready.
type operator struct {
	name  string
	ready func(n nodeCounts) bool
}

type nodeCounts struct{ masters, workers, wantMasters, wantWorkers int }

func quorum(n nodeCounts) bool     { return n.masters >= n.wantMasters/2+1 }
func allMasters(n nodeCounts) bool { return n.masters >= n.wantMasters }

// ingress runs on workers, or on masters when the cluster has none.
func ingress(n nodeCounts) bool {
	if n.wantWorkers == 0 {
		return allMasters(n)
	}
	return allMasters(n) && n.workers >= min(2, n.wantWorkers)
}

var operators = []operator{
	{"etcd", quorum}, {"kube-apiserver", quorum}, {"kube-controller-manager", quorum}, {"kube-scheduler", quorum},
	{"openshift-apiserver", allMasters}, {"network", allMasters}, {"dns", allMasters}, {"machine-config", allMasters},
	{"baremetal", allMasters}, {"ingress", ingress}, {"authentication", ingress}, {"console", ingress}, {"monitoring", ingress},
}

// versionLoop is the cluster-version operator: it reports the bootstrap
// complete once every master is Ready, and moves the operators and the
// ClusterVersion to Available as Nodes join.
func (c *Cluster) versionLoop(ctx context.Context) {
	started := metav1.Now()
	for {
		if err := c.syncVersion(ctx, started); err != nil && ctx.Err() == nil {
			c.w.opts.Logf("Cluster %s: cluster-version: %v", c.name, err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(c.poll(500 * time.Millisecond)):
		}
	}
}

func (c *Cluster) syncVersion(ctx context.Context, started metav1.Time) error {
	nodes := &corev1.NodeList{}
	if err := c.client.List(ctx, nodes); err != nil {
		return err
	}
	ic := c.files.installConfig
	n := nodeCounts{wantMasters: int(ic.ControlPlaneReplicas()), wantWorkers: int(ic.WorkerReplicas())}
	for _, node := range nodes.Items {
		if !nodeReady(&node) {
			continue
		}
		if _, ok := node.Labels[masterRoleLabel]; ok {
			n.masters++
		} else if _, ok := node.Labels[workerRoleLabel]; ok {
			n.workers++
		}
	}
	if allMasters(n) {
		if err := c.reportBootstrapComplete(ctx); err != nil {
			return err
		}
	}
	cos := &configv1.ClusterOperatorList{}
	if err := c.client.List(ctx, cos); err != nil {
		return err
	}
	byName := map[string]*configv1.ClusterOperator{}
	for i := range cos.Items {
		byName[cos.Items[i].Name] = &cos.Items[i]
	}
	available := 0
	for _, op := range operators {
		co := byName[op.name]
		if op.name == baremetalOperator && c.runsOperator() {
			// The bare-metal operator reports itself.
			if co != nil {
				if cond := configv1.FindCondition(co.Status.Conditions, configv1.OperatorAvailable); cond != nil && cond.Status == metav1.ConditionTrue {
					available++
				}
			}
			continue
		}
		ok := op.ready(n)
		if ok {
			available++
		}
		if co == nil {
			return fmt.Errorf("ClusterOperator %s is missing", op.name)
		}
		if err := c.setOperator(ctx, co, ok); err != nil {
			return err
		}
	}
	return c.setVersion(ctx, started, available)
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// reportBootstrapComplete writes kube-system/bootstrap status: complete.
func (c *Cluster) reportBootstrapComplete(ctx context.Context) error {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceSystem, Name: "bootstrap"}, Data: map[string]string{"status": "complete"}}
	err := c.client.Create(ctx, cm)
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

func (c *Cluster) setOperator(ctx context.Context, co *configv1.ClusterOperator, available bool) error {
	before := co.Status.DeepCopy()
	avail, prog := metav1.ConditionFalse, metav1.ConditionTrue
	msg := "Waiting for Nodes to run the operands"
	if available {
		avail, prog, msg = metav1.ConditionTrue, metav1.ConditionFalse, "All is well"
	}
	configv1.SetCondition(&co.Status.Conditions, configv1.ClusterOperatorStatusCondition{Type: configv1.OperatorAvailable, Status: avail, Reason: reason(available), Message: msg})
	configv1.SetCondition(&co.Status.Conditions, configv1.ClusterOperatorStatusCondition{Type: configv1.OperatorProgressing, Status: prog, Reason: reason(available), Message: msg})
	configv1.SetCondition(&co.Status.Conditions, configv1.ClusterOperatorStatusCondition{Type: configv1.OperatorDegraded, Status: metav1.ConditionFalse, Reason: "AsExpected"})
	configv1.SetCondition(&co.Status.Conditions, configv1.ClusterOperatorStatusCondition{Type: configv1.OperatorUpgradeable, Status: metav1.ConditionTrue, Reason: "AsExpected"})
	if available {
		co.Status.Versions = []configv1.OperandVersion{{Name: "operator", Version: c.files.release}}
	}
	if apiequality.Semantic.DeepEqual(before, &co.Status) {
		return nil
	}
	return c.client.Status().Update(ctx, co)
}

func reason(ok bool) string {
	if ok {
		return "AsExpected"
	}
	return "Deploying"
}

func (c *Cluster) setVersion(ctx context.Context, started metav1.Time, available int) error {
	if err := c.installInfrastructure(ctx); err != nil {
		return err
	}
	cv := &configv1.ClusterVersion{}
	if err := c.client.Get(ctx, client.ObjectKey{Name: "version"}, cv); err != nil {
		return err
	}
	before := cv.Status.DeepCopy()
	rel := c.files.release
	cv.Status.Desired = configv1.Release{Version: rel}
	done := available == len(operators)
	if len(cv.Status.History) == 0 {
		cv.Status.History = []configv1.UpdateHistory{{State: "Partial", StartedTime: started, Version: rel}}
	}
	h := &cv.Status.History[0]
	if done && h.State != "Completed" {
		h.State, h.CompletionTime = "Completed", ptr.To(metav1.Now())
	}
	if h.State == "Completed" {
		configv1.SetCondition(&cv.Status.Conditions, configv1.ClusterOperatorStatusCondition{Type: configv1.OperatorAvailable, Status: metav1.ConditionTrue, Message: "Done applying " + rel})
		configv1.SetCondition(&cv.Status.Conditions, configv1.ClusterOperatorStatusCondition{Type: configv1.OperatorProgressing, Status: metav1.ConditionFalse, Message: "Cluster version is " + rel})
	} else {
		msg := fmt.Sprintf("Working towards %s: %d of %d done (%d%% complete)", rel, available, len(operators), available*100/len(operators))
		configv1.SetCondition(&cv.Status.Conditions, configv1.ClusterOperatorStatusCondition{Type: configv1.OperatorAvailable, Status: metav1.ConditionFalse, Message: msg})
		configv1.SetCondition(&cv.Status.Conditions, configv1.ClusterOperatorStatusCondition{Type: configv1.OperatorProgressing, Status: metav1.ConditionTrue, Message: msg})
	}
	configv1.SetCondition(&cv.Status.Conditions, configv1.ClusterOperatorStatusCondition{Type: configv1.ClusterVersionFailing, Status: metav1.ConditionFalse})
	if !apiequality.Semantic.DeepEqual(before, &cv.Status) {
		if err := c.client.Status().Update(ctx, cv); err != nil {
			return err
		}
	}
	c.installed.Store(h.State == "Completed")
	return nil
}

// poll is how long a loop of the cluster's waits between syncs: fast
// while it installs, settledPoll once its version is Completed (a fleet
// of installed clusters would otherwise keep the simulator busy).
func (c *Cluster) poll(fast time.Duration) time.Duration {
	if c.installed.Load() {
		return settledPoll
	}
	return fast
}

// settledPoll is how often an installed cluster's loops sync.
const settledPoll = 5 * time.Second

// serveConfig is the machine-config-server: /config/master and /config/worker.
func (c *Cluster) serveConfig(w http.ResponseWriter, r *http.Request) {
	pool, ok := strings.CutPrefix(r.URL.Path, "/config/")
	if !ok || (pool != "master" && pool != "worker") {
		http.NotFound(w, r)
		return
	}
	cfg := map[string]any{
		"ignition": map[string]any{"version": "3.4.0"},
		"storage": map[string]any{"files": []any{
			ignFile("/etc/kubernetes/kubeconfig", c.kubelet, 0o600),
			ignFile("/etc/kubernetes/kubelet-ca.crt", c.files.ca.Cert, 0o644),
			ignFile("/etc/machine-config-daemon/pool", []byte(pool), 0o644),
		}},
	}
	w.Header().Set("Content-Type", "application/vnd.coreos.ignition+json;version=3.4.0")
	_ = json.NewEncoder(w).Encode(cfg)
}

func ignFile(path string, data []byte, mode int) map[string]any {
	return map[string]any{"path": path, "mode": mode, "overwrite": true,
		"contents": map[string]any{"source": dataURL(data)}}
}

// kubeconfig returns a kubeconfig for server with the given credentials.
func kubeconfig(server string, ca []byte, user *clientcmdapi.AuthInfo) ([]byte, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["cluster"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos["user"] = user
	cfg.Contexts["default"] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: "user"}
	cfg.CurrentContext = "default"
	return clientcmd.Write(*cfg)
}
