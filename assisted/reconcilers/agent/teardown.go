package agent

import (
	"context"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	"github.com/metalshift/metalshift/assisted/pkg/record"
)

// Finalizer keeps an Agent until the service has released its host. The
// host's record is the Agent itself (nothing is kept outside the API), and
// the installed cluster's Nodes are left alone, so releasing is removing
// the finalizer; it marks the Agents the service will release.
const Finalizer = "agent.agent-install.openshift.io/ai-deprovision"

// reconcileDelete releases a deleted Agent.
func (r *Reconciler) reconcileDelete(ctx context.Context, a *agentinstallv1.Agent) error {
	return record.RemoveFinalizer(ctx, r.Client, a, Finalizer)
}
