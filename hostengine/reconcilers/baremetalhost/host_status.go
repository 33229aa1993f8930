package baremetalhost

import (
	"fmt"
	"time"

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

// DeployAgentTokenCondition is metalshift's own condition on a
// BareMetalHost about the agent token of its current deploy agent request,
// which the deploy server hands out once and records in
// status.deployAgent.token: True once it was handed out (reason
// TokenIssued); False while it was not (TokenNotIssued) and, loudly, when
// it was asked for again after it was handed out (TokenAskedAgain).
// Without a request it keeps what it said about the last one.
const (
	DeployAgentTokenCondition = "DeployAgentToken"

	ReasonTokenNotIssued  = "TokenNotIssued"
	ReasonTokenIssued     = "TokenIssued"
	ReasonTokenAskedAgain = "TokenAskedAgain"
)

// BMCReachableCondition is metalshift's own condition on a BareMetalHost
// about its BMC: False while the host's last step failed because of the BMC
// (it did not answer, answered with an error or timed out: reason
// BMCNotAnswering; refused the deploy image: BMCMediaFailed; refused the
// credentials: BMCCredentialsRefused), its message the step's error; True
// (reason NoBMCTrouble) once a step went through again. It is set once the
// engine first met trouble, so a host whose BMC never failed has none.
// status.errorType and errorMessage say the same in baremetal-operator's
// terms, an Event each time the message changes.
const (
	BMCReachableCondition = "BMCReachable"

	ReasonBMCNotAnswering       = "BMCNotAnswering"
	ReasonBMCMediaFailed        = "BMCMediaFailed"
	ReasonBMCCredentialsRefused = "BMCCredentialsRefused"
	ReasonNoBMCTrouble          = "NoBMCTrouble"
)

var ownedConditions = []string{ManageableCondition, ProvisionedCondition, DeployAgentBootedCondition, DeployAgentTokenCondition, BMCReachableCondition}

// setBMCCondition records in BMCReachable whether the step that just ran
// failed because of the BMC (e, nil for a step that went through).
func setBMCCondition(h *metal3v1.BareMetalHost, e *actionError) {
	switch {
	case e != nil && e.bmc != "":
		conditions.Set(h, metav1.Condition{Type: BMCReachableCondition, Status: metav1.ConditionFalse, Reason: e.bmc, Message: e.msg})
	case conditions.IsFalse(h, BMCReachableCondition) && e == nil:
		conditions.Set(h, metav1.Condition{Type: BMCReachableCondition, Status: metav1.ConditionTrue, Reason: ReasonNoBMCTrouble,
			Message: "The BMC answered the host's last step"})
	}
}

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
	SetTokenCondition(h)
}

// SetTokenCondition sets h's DeployAgentToken condition from its current
// request's token record; it leaves it as it is without a request. The
// deploy server calls it when it writes the record, so that the record
// and the condition are one write.
func SetTokenCondition(h *metal3v1.BareMetalHost) {
	if c := tokenCondition(h); c != nil {
		conditions.Set(h, *c)
	}
}

// tokenCondition is the DeployAgentToken condition of h's current
// request; nil without one.
func tokenCondition(h *metal3v1.BareMetalHost) *metav1.Condition {
	req := h.DeployAgentRequest()
	if req == nil {
		return nil
	}
	tok := h.DeployAgentToken()
	switch {
	case tok == nil:
		return &metav1.Condition{Type: DeployAgentTokenCondition, Status: metav1.ConditionFalse, Reason: ReasonTokenNotIssued,
			Message: fmt.Sprintf("The deploy agent of request %s has not asked for its token yet", req.Generation)}
	case tok.Refusals == 0:
		return &metav1.Condition{Type: DeployAgentTokenCondition, Status: metav1.ConditionTrue, Reason: ReasonTokenIssued,
			Message: fmt.Sprintf("The agent token of request %s was handed out to %s at %s", req.Generation, tok.Source, tok.IssuedAt.UTC().Format(time.RFC3339))}
	}
	last := ""
	if tok.LastRefusalTime != nil {
		last = fmt.Sprintf(", last from %s at %s", tok.LastRefusalSource, tok.LastRefusalTime.UTC().Format(time.RFC3339))
	}
	return &metav1.Condition{Type: DeployAgentTokenCondition, Status: metav1.ConditionFalse, Reason: ReasonTokenAskedAgain,
		Message: fmt.Sprintf("The agent token of request %s was handed out to %s at %s and asked for again %d times since%s. "+
			"Another machine has this request's ticket, or the host booted its deploy image twice: if the host's agent does not report, "+
			"the machine at %s is not this host; find who can reach the provisioning network, then provision the host again",
			req.Generation, tok.Source, tok.IssuedAt.UTC().Format(time.RFC3339), tok.Refusals, last, tok.Source)}
}
