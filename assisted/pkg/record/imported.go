package record

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hivev1 "github.com/metalshift/metalshift/api/hive/v1"
	"github.com/metalshift/metalshift/internal/kubeconfig"
)

// ErrNoAdminKubeconfig says the cluster has no admin kubeconfig yet (its
// install has not started, and it was not imported).
var ErrNoAdminKubeconfig = errors.New("the cluster has no admin kubeconfig")

// Imported tells whether a ClusterDeployment stands for a cluster
// installed elsewhere that the service takes on for day 2 (upstream's
// import): installed: true with an admin kubeconfig Secret, when the
// service has no install state of it.
func Imported(cd *hivev1.ClusterDeployment, state *corev1.Secret) bool {
	return state == nil && cd.Spec.Installed && cd.Spec.ClusterMetadata != nil &&
		cd.Spec.ClusterMetadata.AdminKubeconfigSecretRef.Name != ""
}

// AdminKubeconfig is the installed cluster's admin kubeconfig: the one the
// service made (its install state), else, for an imported cluster, the
// Secret clusterMetadata.adminKubeconfigSecretRef names (key kubeconfig,
// as Hive writes it). state is the install-state Secret, nil if none.
func AdminKubeconfig(ctx context.Context, r client.Reader, cd *hivev1.ClusterDeployment, state *corev1.Secret) ([]byte, error) {
	if state != nil {
		if kc := state.Data[KeyAdminKubeconfig]; len(kc) > 0 {
			return kc, nil
		}
		return nil, fmt.Errorf("the install state has no %s", KeyAdminKubeconfig)
	}
	if !Imported(cd, nil) {
		return nil, ErrNoAdminKubeconfig
	}
	name := cd.Spec.ClusterMetadata.AdminKubeconfigSecretRef.Name
	s := &corev1.Secret{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: cd.Namespace, Name: name}, s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("the admin kubeconfig Secret %s of the imported cluster is missing", name)
		}
		return nil, err
	}
	kc := s.Data[KeyAdminKubeconfig]
	if len(kc) == 0 {
		return nil, fmt.Errorf("the admin kubeconfig Secret %s has no %s", name, KeyAdminKubeconfig)
	}
	return kc, nil
}

// SpokeTimeout bounds each request the hub makes to an installed cluster's
// API.
const SpokeTimeout = 5 * time.Second

// SpokeConfig is the client configuration of an installed cluster's admin
// kubeconfig, with inline credentials only: an imported cluster's is
// written by a tenant (package kubeconfig says what it refuses; a refusal
// matches kubeconfig.ErrRefused). Requests time out after SpokeTimeout.
func SpokeConfig(data []byte) (*rest.Config, error) {
	cfg, err := kubeconfig.Load(data)
	if err != nil {
		return nil, fmt.Errorf("the installed cluster's admin kubeconfig: %w", err)
	}
	cfg.Timeout = SpokeTimeout
	return cfg, nil
}

// SpokeClient is a client of an installed cluster's API through its admin
// kubeconfig (SpokeConfig), with the types of scheme.
func SpokeClient(data []byte, scheme *runtime.Scheme) (client.Client, error) {
	cfg, err := SpokeConfig(data)
	if err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: scheme})
}
