package openshiftcontrolplane

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sigs.k8s.io/cluster-api/controllers/clustercache"
	capikubeconfig "sigs.k8s.io/cluster-api/util/kubeconfig"

	"github.com/metalshift/metalshift/internal/kubeconfig"
)

// Workload is what the reconciler asks of the installed cluster.
type Workload interface {
	// Ready fails unless the API answers /readyz.
	Ready(ctx context.Context) error
	// BootstrapComplete reports whether the bootstrap node has handed the
	// cluster over to the masters (ConfigMap kube-system/bootstrap with
	// status: complete, as the bootstrap service writes it).
	BootstrapComplete(ctx context.Context) (bool, error)
	// NodeProviderIDs are the spec.providerID of the cluster's Nodes.
	NodeProviderIDs(ctx context.Context) (map[string]bool, error)
}

// clusterCacheWorkload reaches the installed cluster through Cluster API's
// ClusterCache: the one connection per cluster the hub's controllers share,
// made from <cluster>-kubeconfig once the infrastructure is provisioned,
// health-checked, and dropped when the Cluster goes. While the ClusterCache
// is not connected — it retries on its own schedule (30s by default) and
// drops a connection only after several failed probes, as when the API VIP
// moves from the bootstrap node to the masters — the API is asked directly,
// from the same Secret, so that a bootstrap node is seen serving as soon as
// it does and an error says what failed. Either way the kubeconfig holds
// inline credentials only: the Secret is written by whoever may write
// Secrets in the Cluster's namespace (package kubeconfig; the hub's
// ClusterCache reads it sanitized).
type clusterCacheWorkload struct {
	cc      clustercache.ClusterCache
	secrets client.Reader
	cluster client.ObjectKey

	// cs is made once per workload (one reconcile): Ready and
	// BootstrapComplete share it, and the kubeconfig Secret is read once.
	cs kubernetes.Interface
}

// clientset is for the cluster's API: the ClusterCache's connection, else
// one from the kubeconfig Secret. client-go shares the transport of equal
// configs, so neither opens a new connection per call.
func (w *clusterCacheWorkload) clientset(ctx context.Context) (kubernetes.Interface, error) {
	if w.cs != nil {
		return w.cs, nil
	}
	cfg, err := w.cc.GetRESTConfig(ctx, w.cluster)
	if errors.Is(err, clustercache.ErrClusterNotConnected) {
		var kc []byte
		if kc, err = capikubeconfig.FromSecret(ctx, w.secrets, w.cluster); err != nil {
			return nil, fmt.Errorf("the kubeconfig Secret of Cluster %s: %w", w.cluster.Name, err)
		}
		if cfg, err = kubeconfig.Load(kc); err != nil {
			return nil, fmt.Errorf("the kubeconfig Secret of Cluster %s: %w", w.cluster.Name, err)
		}
		cfg.Timeout = 5 * time.Second
		cfg.QPS, cfg.Burst = 5, 10
	}
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	w.cs = cs
	return cs, nil
}

func (w *clusterCacheWorkload) Ready(ctx context.Context) error {
	cs, err := w.clientset(ctx)
	if err != nil {
		return err
	}
	body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	if err == nil {
		return nil
	}
	// A verbose answer lists the failing checks as "[-]<name> failed".
	var failing []string
	for _, line := range strings.Split(string(body), "\n") {
		if name, ok := strings.CutPrefix(line, "[-]"); ok {
			if f := strings.Fields(name); len(f) > 0 {
				failing = append(failing, f[0])
			}
		}
	}
	if len(failing) > 0 {
		return fmt.Errorf("/readyz: not ready yet (failing: %s)", strings.Join(failing, ", "))
	}
	if apiErr, ok := err.(apierrors.APIStatus); ok && len(body) > 0 {
		return fmt.Errorf("/readyz: %s", apiErr.Status().Reason)
	}
	return err
}

func (w *clusterCacheWorkload) BootstrapComplete(ctx context.Context) (bool, error) {
	cs, err := w.clientset(ctx)
	if err != nil {
		return false, err
	}
	cm, err := cs.CoreV1().ConfigMaps(metav1.NamespaceSystem).Get(ctx, "bootstrap", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return cm.Data["status"] == "complete", nil
}

func (w *clusterCacheWorkload) NodeProviderIDs(ctx context.Context) (map[string]bool, error) {
	cs, err := w.clientset(ctx)
	if err != nil {
		return nil, err
	}
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	ids := map[string]bool{}
	for _, n := range nodes.Items {
		if n.Spec.ProviderID != "" {
			ids[n.Spec.ProviderID] = true
		}
	}
	return ids, nil
}
