package bmac

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	hivev1 "github.com/metalshift/metalshift/api/hive/v1"
	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
	"github.com/metalshift/metalshift/assisted/pkg/record"
)

// ensureFinalizer holds the host for its cleanup when want, and lets go of
// it otherwise (the annotation removed); End writes it.
func ensureFinalizer(host *metal3v1.BareMetalHost, want bool) {
	if want {
		controllerutil.AddFinalizer(host, Finalizer)
	} else {
		controllerutil.RemoveFinalizer(host, Finalizer)
	}
}

// reconcileDelete: a host annotated remove-agent-and-node-on-delete takes
// its Node in the installed cluster and its Agent with it; other hosts
// leave both alone (BMAC holds no finalizer on them). An Agent bound to a
// ClusterDeployment of another namespace has no Node the hub deletes.
func (r *Reconciler) reconcileDelete(ctx context.Context, host *metal3v1.BareMetalHost) error {
	if !controllerutil.ContainsFinalizer(host, Finalizer) {
		return nil
	}
	agent, err := r.agentOf(ctx, host)
	if err != nil {
		return err
	}
	if agent != nil {
		err := r.deleteNode(ctx, agent)
		switch {
		case errors.Is(err, record.ErrCrossNamespace):
			r.event(host, corev1.EventTypeWarning, "NodeDeletionRefused", fmt.Sprintf("Not deleting the Node of Agent %s: %v", agent.Name, err))
		case err != nil:
			r.event(host, corev1.EventTypeWarning, "NodeDeletionFailed", fmt.Sprintf("Deleting the Node of Agent %s: %v", agent.Name, err))
			return err
		}
		if err := r.Client.Delete(ctx, agent); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		r.event(host, corev1.EventTypeNormal, "AgentDeleted", fmt.Sprintf("Deleted Agent %s with its BareMetalHost (%s)", agent.Name, RemoveAgentAndNodeOnDeleteAnnotation))
	}
	controllerutil.RemoveFinalizer(host, Finalizer) // End writes it
	return nil
}

// deleteNode deletes the Agent's Node in its installed cluster, read with
// the ClusterDeployment's admin kubeconfig (inline credentials only: a
// refused one is an error naming the refusal); an Agent of no installed
// cluster has none. A reference to another namespace is refused
// (record.ErrCrossNamespace).
func (r *Reconciler) deleteNode(ctx context.Context, a *agentinstallv1.Agent) error {
	ref := a.Spec.ClusterDeploymentName
	if ref == nil {
		return nil
	}
	if err := record.AgentClusterReference(a); err != nil {
		return err
	}
	cd := &hivev1.ClusterDeployment{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: a.Namespace, Name: ref.Name}, cd); err != nil {
		return client.IgnoreNotFound(err)
	}
	md := cd.Spec.ClusterMetadata
	if !cd.Spec.Installed || md == nil || md.AdminKubeconfigSecretRef.Name == "" {
		return nil
	}
	sec := &corev1.Secret{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: cd.Namespace, Name: md.AdminKubeconfigSecretRef.Name}, sec); err != nil {
		return err
	}
	spoke, err := record.SpokeClient(sec.Data[record.KeyAdminKubeconfig], clientgoscheme.Scheme)
	if err != nil {
		return fmt.Errorf("the admin kubeconfig Secret %s of ClusterDeployment %s: %w", sec.Name, cd.Name, err)
	}
	node := &corev1.Node{}
	node.Name = record.Hostname(a)
	if err := spoke.Delete(ctx, node); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}
