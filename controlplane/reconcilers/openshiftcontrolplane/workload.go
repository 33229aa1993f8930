package openshiftcontrolplane

import (
	"context"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
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

type workload struct{ cs kubernetes.Interface }

func newWorkload(kubeconfig []byte) (Workload, error) {
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("the admin kubeconfig of the install state: %w", err)
	}
	cfg.Timeout = 5 * time.Second
	cfg.QPS, cfg.Burst = 5, 10
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &workload{cs: cs}, nil
}

func (w *workload) Ready(ctx context.Context) error {
	body, err := w.cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
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

func (w *workload) BootstrapComplete(ctx context.Context) (bool, error) {
	cm, err := w.cs.CoreV1().ConfigMaps(metav1.NamespaceSystem).Get(ctx, "bootstrap", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return cm.Data["status"] == "complete", nil
}
