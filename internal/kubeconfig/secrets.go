package kubeconfig

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sigs.k8s.io/cluster-api/util/secret"
)

// SanitizingSecrets is a reader of Cluster API kubeconfig Secrets
// (<cluster>-kubeconfig, key value) for code that loads them with
// client-go, such as Cluster API's ClusterCache: a Secret it reads has its
// kubeconfig replaced by Sanitize's, and a refused one is an error naming
// the Secret and what was refused. Lists are passed through unchanged.
type SanitizingSecrets struct {
	client.Reader
}

// Get reads the Secret and sanitizes its kubeconfig.
func (s SanitizingSecrets) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := s.Reader.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	sec, ok := obj.(*corev1.Secret)
	if !ok {
		return nil
	}
	data, ok := sec.Data[secret.KubeconfigDataName]
	if !ok {
		return nil
	}
	clean, err := Sanitize(data)
	if err != nil {
		return fmt.Errorf("kubeconfig Secret %s/%s: %w", key.Namespace, key.Name, err)
	}
	sec.Data[secret.KubeconfigDataName] = clean
	return nil
}
