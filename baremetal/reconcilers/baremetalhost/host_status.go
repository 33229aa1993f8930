package baremetalhost

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sigs.k8s.io/cluster-api/util/conditions"

	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
)

// Conditions of a BareMetalHost and their reasons.
const (
	// ManageableCondition is True once the BMC accepted the credentials.
	ManageableCondition = "Manageable"
	// ProvisionedCondition is True while an image is on the host.
	ProvisionedCondition = "Provisioned"

	ReasonManageable         = "Manageable"
	ReasonRegistering        = "Registering"
	ReasonRegistrationFailed = "RegistrationFailed"
	ReasonDetached           = "Detached"
	ReasonProvisioned        = "Provisioned"
	ReasonProvisioning       = "Provisioning"
	ReasonNotProvisioned     = "NotProvisioned"
	ReasonDeprovisioning     = "Deprovisioning"
)

var ownedConditions = []string{ManageableCondition, ProvisionedCondition, DeployAgentBootedCondition}

// errorReason turns an error type into an Event reason.
func errorReason(t metal3v1.ErrorType) string {
	switch t {
	case metal3v1.RegistrationError, metal3v1.ProvisionedRegistrationError:
		return "RegistrationError"
	case metal3v1.InspectionError:
		return "InspectionError"
	case metal3v1.ProvisioningError:
		return "ProvisioningError"
	case metal3v1.PowerManagementError:
		return "PowerManagementError"
	}
	return "Error"
}

// setConditions derives the Manageable and Provisioned conditions from the status.
func setConditions(h *metal3v1.BareMetalHost) {
	st := h.Status
	manageable := metav1.Condition{Type: ManageableCondition, Status: metav1.ConditionTrue, Reason: ReasonManageable}
	switch {
	case st.OperationalStatus == metal3v1.OperationalStatusDetached:
		manageable = metav1.Condition{Type: ManageableCondition, Status: metav1.ConditionFalse, Reason: ReasonDetached,
			Message: "The host is detached: remove the " + metal3v1.DetachedAnnotation + " annotation to manage it"}
	case st.ErrorType == metal3v1.RegistrationError:
		manageable = metav1.Condition{Type: ManageableCondition, Status: metav1.ConditionFalse, Reason: ReasonRegistrationFailed, Message: st.ErrorMessage}
	case st.GoodCredentials.Reference == nil:
		manageable = metav1.Condition{Type: ManageableCondition, Status: metav1.ConditionFalse, Reason: ReasonRegistering, Message: "Waiting for the BMC to accept the credentials"}
	}
	conditions.Set(h, manageable)

	provisioned := metav1.Condition{Type: ProvisionedCondition, Status: metav1.ConditionFalse, Reason: ReasonNotProvisioned}
	switch st.Provisioning.State {
	case metal3v1.StateProvisioned, metal3v1.StateExternallyProvisioned:
		provisioned = metav1.Condition{Type: ProvisionedCondition, Status: metav1.ConditionTrue, Reason: ReasonProvisioned}
		if st.Provisioning.Image.URL != "" {
			provisioned.Message = "Image " + st.Provisioning.Image.URL + " is on the host"
		}
	case metal3v1.StateProvisioning:
		provisioned = metav1.Condition{Type: ProvisionedCondition, Status: metav1.ConditionFalse, Reason: ReasonProvisioning}
	case metal3v1.StateDeprovisioning:
		provisioned = metav1.Condition{Type: ProvisionedCondition, Status: metav1.ConditionFalse, Reason: ReasonDeprovisioning}
	}
	conditions.Set(h, provisioned)
}
