package agent

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
)

// Finalizer keeps an Agent until the service has released its host. The
// host's record is the Agent itself (nothing is kept outside the API), and
// the installed cluster's Nodes are left alone, so releasing is removing
// the finalizer; it marks the Agents the service will release.
const Finalizer = "agent.agent-install.openshift.io/ai-deprovision"

// reconcileDelete releases a deleted Agent.
func (r *Reconciler) reconcileDelete(ctx context.Context, a *agentinstallv1.Agent) error {
	if !controllerutil.ContainsFinalizer(a, Finalizer) {
		return nil
	}
	before := a.DeepCopy()
	controllerutil.RemoveFinalizer(a, Finalizer)
	return client.IgnoreNotFound(r.Client.Patch(ctx, a, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})))
}
