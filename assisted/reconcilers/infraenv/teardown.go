package infraenv

import (
	"context"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	rec "github.com/metalshift/metalshift/assisted/pkg/record"
)

// Finalizer keeps an InfraEnv until the service has released it. Its
// image URLs die with it (they name its UID) and its Agents are owned by
// it (Kubernetes' garbage collector deletes them), so releasing is
// removing the finalizer: deleting an InfraEnv deletes nothing else.
const Finalizer = "infraenv.agent-install.openshift.io/ai-deprovision"

// reconcileDelete releases a deleted InfraEnv.
func (r *Reconciler) reconcileDelete(ctx context.Context, ie *agentinstallv1.InfraEnv) error {
	return rec.RemoveFinalizer(ctx, r.Client, ie, Finalizer)
}
