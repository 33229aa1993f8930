package webhooks

import (
	"context"
	"slices"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	assistedapi "github.com/metalshift/metalshift/api/assisted/v2"
	"github.com/metalshift/metalshift/assisted/pkg/hoststate"
)

// +kubebuilder:webhook:path=/validate-agent-install-openshift-io-v1beta1-agent,mutating=false,failurePolicy=fail,sideEffects=None,groups=agent-install.openshift.io,resources=agents,verbs=create;update,versions=v1beta1,name=validation.agent.agent-install.openshift.io,admissionReviewVersions=v1

// Upstream's refusals of Agents.
const (
	msgInstallationDisk               = "Either InstallationDiskID or InstallationDiskPath can be set, not both."
	msgClusterDeploymentNameImmutable = "Attempted to change Spec.ClusterDeploymentName which is immutable during Agent installation."
)

// hostInstallingStates are the host states (status.debugInfo.state) in
// which an Agent stays bound to its cluster: from the preparation of the
// install to the host's reboot.
var hostInstallingStates = []string{
	hoststate.StatusPreparingForInstallation, hoststate.StatusPreparingFailed, hoststate.StatusPreparingSuccessful,
	hoststate.StatusInstalling, hoststate.StatusInstallingInProgress, hoststate.StatusInstallingPendingUserAction,
}

// Agent validates Agents on create and update.
type Agent struct{}

var _ admission.Validator[*agentinstallv1.Agent] = &Agent{}

// SetupWebhookWithManager registers the webhook on mgr's webhook server,
// at the path of the marker above.
func (w *Agent) SetupWebhookWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &agentinstallv1.Agent{}).WithValidator(w).Complete()
}

// ValidateCreate refuses an Agent naming another namespace
// (clusterDeploymentName, ignitionEndpointTokenReference), and one naming
// its installation disk both by id and by path.
func (w *Agent) ValidateCreate(_ context.Context, a *agentinstallv1.Agent) (admission.Warnings, error) {
	if err := crossNamespace("Agent", a.Namespace, agentRefs(a), nil); err != nil {
		return nil, err
	}
	return nil, validateDisk(a)
}

func validateDisk(a *agentinstallv1.Agent) error {
	if a.Spec.InstallationDiskID != "" && a.Spec.InstallationDiskPath != "" {
		return badRequest(msgInstallationDisk)
	}
	return nil
}

// ValidateUpdate refuses a reference to another namespace that was not
// there before, what ValidateCreate refuses of the disk, and a change of
// clusterDeploymentName while the host installs, but for a day-2 host
// (kind AddToExistingClusterHost) being unbound.
func (w *Agent) ValidateUpdate(_ context.Context, old, a *agentinstallv1.Agent) (admission.Warnings, error) {
	if err := crossNamespace("Agent", a.Namespace, agentRefs(a), agentRefs(old)); err != nil {
		return nil, err
	}
	if err := validateDisk(a); err != nil {
		return nil, err
	}
	if sameClusterRef(old.Spec.ClusterDeploymentName, a.Spec.ClusterDeploymentName) ||
		!slices.Contains(hostInstallingStates, a.Status.DebugInfo.State) {
		return nil, nil
	}
	if a.Status.Kind == assistedapi.KindAddToExistingClusterHost && a.Spec.ClusterDeploymentName == nil {
		return nil, nil
	}
	return nil, badRequest(msgClusterDeploymentNameImmutable)
}

// ValidateDelete allows every delete.
func (w *Agent) ValidateDelete(context.Context, *agentinstallv1.Agent) (admission.Warnings, error) {
	return nil, nil
}
