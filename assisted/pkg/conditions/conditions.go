// Package conditions computes the conditions of the Agent, the
// AgentClusterInstall and the InfraEnv from the agent service's state, with
// the upstream assisted service's types, reasons and messages.
package conditions

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/metalshift/metalshift/assisted/pkg/validations"
)

// Cond is a condition before the caller stamps its times.
type Cond struct {
	Type    string
	Status  corev1.ConditionStatus
	Reason  string
	Message string
}

// Condition types.
const (
	TypeSpecSynced      = "SpecSynced"
	TypeConnected       = "Connected"
	TypeRequirementsMet = "RequirementsMet"
	TypeValidated       = "Validated"
	TypeInstalled       = "Installed"
	TypeBound           = "Bound"
	TypeCompleted       = "Completed"
	TypeFailed          = "Failed"
	TypeStopped         = "Stopped"
	TypeImageCreated    = "ImageCreated"
)

// Reasons and messages shared by the kinds.
const (
	ReasonSyncOK       = "SyncOK"
	MsgSyncOK          = "The Spec has been successfully applied"
	ReasonBackendError = "BackendError"
	MsgBackendError    = "The Spec could not be synced due to backend error:"
	ReasonInputError   = "InputError"
	MsgInputError      = "The Spec could not be synced due to an input error:"

	ReasonNotAvailable = "NotAvailable"
	MsgNotAvailable    = "Information not available"

	ReasonUnknownStatus = "UnknownStatus"
	MsgUnknownStatus    = "The installation status is currently not recognized:"

	ReasonInstallationNotStarted = "InstallationNotStarted"
	MsgInstallationNotStarted    = "The installation has not yet started"
	ReasonInstallationInProgress = "InstallationInProgress"
	MsgInstallationInProgress    = "The installation is in progress:"
	ReasonInstallationCompleted  = "InstallationCompleted"
	MsgInstallationCompleted     = "The installation has completed:"
	ReasonInstallationFailed     = "InstallationFailed"
	MsgInstallationFailed        = "The installation has failed:"

	ReasonValidationsPassing     = "ValidationsPassing"
	ReasonValidationsFailing     = "ValidationsFailing"
	ReasonValidationsUserPending = "ValidationsUserPending"
	ReasonValidationsUnknown     = "ValidationsUnknown"
)

func cond(t string, s corev1.ConditionStatus, reason, msg string) Cond {
	return Cond{Type: t, Status: s, Reason: reason, Message: msg}
}

// withDetail joins a message ending in ':' and its detail.
func withDetail(msg, detail string) string { return msg + " " + detail }

// specSynced is the SpecSynced condition with the given success message.
func specSynced(err error, inputError bool, okMsg string) Cond {
	switch {
	case err == nil:
		return cond(TypeSpecSynced, corev1.ConditionTrue, ReasonSyncOK, okMsg)
	case inputError:
		return cond(TypeSpecSynced, corev1.ConditionFalse, ReasonInputError, withDetail(MsgInputError, err.Error()))
	}
	return cond(TypeSpecSynced, corev1.ConditionFalse, ReasonBackendError, withDetail(MsgBackendError, err.Error()))
}

// validated is the Validated condition of a host or cluster ("agent's" or
// "cluster's"): failing or pending-for-user by status, unknown before any
// validation, else passing. Its details are the messages of the
// validations that did not succeed, comma-joined.
func validated(whose string, failing, userPending bool, v validations.Results) Cond {
	var msgs []string
	for _, r := range v.NotSucceeded() {
		msgs = append(msgs, r.Message)
	}
	detail := strings.Join(msgs, ",")
	prefix := "The " + whose + " validations are "
	switch {
	case failing:
		return cond(TypeValidated, corev1.ConditionFalse, ReasonValidationsFailing, withDetail(prefix+"failing:", detail))
	case userPending:
		return cond(TypeValidated, corev1.ConditionFalse, ReasonValidationsUserPending, withDetail(prefix+"pending for user:", detail))
	case len(v) == 0:
		return cond(TypeValidated, corev1.ConditionUnknown, ReasonValidationsUnknown, "The "+whose+" validations have not yet been calculated")
	}
	return cond(TypeValidated, corev1.ConditionTrue, ReasonValidationsPassing, prefix+"passing")
}

func unknownStatus(t, status string) Cond {
	return cond(t, corev1.ConditionUnknown, ReasonUnknownStatus, withDetail(MsgUnknownStatus, status))
}

// ManualBootCondition on an InfraEnv whose converged-flow image a machine
// booted by hand (metalshift's; upstream's InfraEnv has only ImageCreated):
// True, reason ManualBootReason, the machine and what to do in the message.
// The agent service sets it when such a machine reports.
const (
	ManualBootCondition = "ImageBootedByHand"
	ManualBootReason    = "NeedsHostEngine"
)

// ImageCreated is an InfraEnv's ImageCreated condition after its image
// was made (err nil) or not; inputError tells a user's error from an
// internal one.
func ImageCreated(err error, inputError bool) Cond {
	switch {
	case err == nil:
		return cond(TypeImageCreated, corev1.ConditionTrue, "InfraEnvAvailable", "InfraEnv is available: Image has been created")
	case inputError:
		return cond(TypeImageCreated, corev1.ConditionFalse, "ImageCreationError", fmt.Sprintf("Failed to create image: %s", err))
	}
	return cond(TypeImageCreated, corev1.ConditionFalse, "ImageCreationError", fmt.Sprintf("Failed to create image due to an internal error: %s", err))
}
