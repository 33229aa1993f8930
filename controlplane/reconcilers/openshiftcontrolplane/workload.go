package openshiftcontrolplane

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sigs.k8s.io/cluster-api/controllers/clustercache"
)

// Workload is what the reconciler asks of the installed cluster.
type Workload interface {
	// Ready fails unless the API answers /readyz.
	Ready(ctx context.Context) error
	// BootstrapComplete reports whether the bootstrap node has handed the
	// cluster over to the masters (ConfigMap kube-system/bootstrap with
	// status: complete, as the bootstrap service writes it).
	BootstrapComplete(ctx context.Context) (bool, error)
}

// clusterCacheWorkload reaches the installed cluster through Cluster API's
// ClusterCache: the one connection per cluster the hub's controllers share,
// made from <cluster>-kubeconfig once the infrastructure is provisioned,
// health-checked, and dropped when the Cluster goes.
type clusterCacheWorkload struct {
	cc      clustercache.ClusterCache
	cluster client.ObjectKey
}

func (w *clusterCacheWorkload) Ready(ctx context.Context) error {
	cfg, err := w.cc.GetRESTConfig(ctx, w.cluster)
	if err != nil {
		return w.notConnected(ctx, err)
	}
	// client-go shares the transport of equal configs: no new connection per call.
	cs, err := kubernetes.NewForConfig(cfg)
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
			failing = append(failing, strings.Fields(name)[0])
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
	c, err := w.cc.GetUncachedClient(ctx, w.cluster)
	if err != nil {
		return false, w.notConnected(ctx, err)
	}
	cm := &corev1.ConfigMap{}
	err = c.Get(ctx, client.ObjectKey{Namespace: metav1.NamespaceSystem, Name: "bootstrap"}, cm)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return cm.Data["status"] == "complete", nil
}

// notConnected says how long the hub has tried to reach the cluster.
func (w *clusterCacheWorkload) notConnected(ctx context.Context, err error) error {
	if !errors.Is(err, clustercache.ErrClusterNotConnected) {
		return err
	}
	st := w.cc.GetHealthCheckingState(ctx, w.cluster)
	if st.LastProbeSuccessTime.IsZero() {
		return errors.New("the hub has not connected to the API yet")
	}
	return fmt.Errorf("the hub lost its connection to the API (last answer %s, %d failed probes since)",
		st.LastProbeSuccessTime.UTC().Format("15:04:05Z"), st.ConsecutiveFailures)
}
