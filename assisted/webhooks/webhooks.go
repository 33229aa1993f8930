package webhooks

import (
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
)

// SetupWithManager registers every webhook of the package on mgr's
// webhook server, at the paths of the kubebuilder markers
// (config/webhook). The InfraEnv webhook reads ClusterDeployments through
// mgr's API reader.
func SetupWithManager(mgr ctrl.Manager) error {
	for _, setup := range []func(ctrl.Manager) error{
		(&AgentClusterInstall{}).SetupWebhookWithManager,
		(&InfraEnv{Reader: mgr.GetAPIReader()}).SetupWebhookWithManager,
		(&Agent{}).SetupWebhookWithManager,
		(&AgentClassification{}).SetupWebhookWithManager,
	} {
		if err := setup(mgr); err != nil {
			return err
		}
	}
	return nil
}

// badRequest is a refusal as upstream's webhooks send most of theirs:
// status 400, reason BadRequest.
func badRequest(msg string) error {
	return apierrors.NewBadRequest(msg)
}

// conflict is a refusal with status 409, reason Conflict, as upstream
// refuses a single-node install without user-managed networking.
func conflict(msg string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusConflict, Reason: metav1.StatusReasonConflict, Message: msg,
	}}
}
