package conditions

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/metalshift/metalshift/assisted/pkg/hoststate"
	"github.com/metalshift/metalshift/assisted/pkg/validations"
)

// Agent reasons and messages.
const (
	ReasonAgentReady           = "AgentIsReady"
	MsgAgentReady              = "The agent is ready to begin the installation"
	ReasonAgentNotApproved     = "AgentIsNotApproved"
	MsgAgentNotApproved        = "The agent is not approved"
	ReasonAgentNotReady        = "AgentNotReady"
	MsgAgentNotReady           = "The agent is not ready to begin the installation"
	ReasonAgentAlreadyInstall  = "AgentAlreadyInstalling"
	MsgAgentAlreadyInstall     = "Installation already started and is in progress"
	ReasonAgentInstallStopped  = "AgentInstallationStopped"
	MsgAgentInstallStopped     = "The agent installation stopped"
	ReasonBinding              = "Binding"
	MsgBinding                 = "The agent is currently binding to a cluster deployment"
	ReasonUnbinding            = "Unbinding"
	MsgUnbinding               = "The agent is currently unbinding from a cluster deployment"
	ReasonUnbindingPendingUser = "UnbindingPendingUserAction"
	MsgUnbindingPendingUser    = "The agent is currently unbinding; Pending host reboot from infraenv image"
	ReasonUnbound              = "Unbound"
	MsgUnbound                 = "The agent is not bound to any cluster deployment"
	ReasonBound                = "Bound"
	MsgBound                   = "The agent is bound to a cluster deployment"
	ReasonAgentConnected       = "AgentIsConnected"
	MsgAgentConnected          = "The agent's connection to the installation service is unimpaired"
	ReasonAgentDisconnected    = "AgentIsDisconnected"
	MsgAgentDisconnected       = "The agent has not contacted the installation service in some time, user action should be taken"
)

// Host status groups of the Agent's condition table.
var (
	notReady = map[string]bool{
		hoststate.StatusDiscovering: true, hoststate.StatusDiscoveringUnbound: true, hoststate.StatusInsufficient: true,
		hoststate.StatusInsufficientUnbound: true, hoststate.StatusDisconnected: true, hoststate.StatusDisconnectedUnbound: true,
		hoststate.StatusPendingForInput: true,
	}
	inProgress = map[string]bool{
		hoststate.StatusPreparingForInstallation: true, hoststate.StatusPreparingSuccessful: true, hoststate.StatusInstalling: true,
		hoststate.StatusInstallingInProgress: true, hoststate.StatusInstallingPendingUserAction: true,
	}
)

// AgentSpecSynced is an Agent's SpecSynced condition.
func AgentSpecSynced(err error, inputError bool) Cond { return specSynced(err, inputError, MsgSyncOK) }

// AgentNotAvailable are the conditions of an Agent the service has no
// record of.
func AgentNotAvailable() []Cond {
	out := make([]Cond, 0, 4)
	for _, t := range []string{TypeConnected, TypeRequirementsMet, TypeValidated, TypeInstalled} {
		out = append(out, cond(t, corev1.ConditionUnknown, ReasonNotAvailable, MsgNotAvailable))
	}
	return out
}

// Agent returns an Agent's Connected, RequirementsMet, Validated,
// Installed and Bound conditions from its host status and status info,
// approval, current stage and validations. While installing, the message
// names the stage when there is one.
func Agent(status, statusInfo string, approved bool, stage string, v validations.Results) []Cond {
	return []Cond{
		agentConnected(status),
		agentRequirementsMet(status, approved),
		agentValidated(status, v),
		agentInstalled(status, statusInfo, stage),
		agentBound(status),
	}
}

func agentConnected(status string) Cond {
	if status == hoststate.StatusDisconnected || status == hoststate.StatusDisconnectedUnbound {
		return cond(TypeConnected, corev1.ConditionFalse, ReasonAgentDisconnected, MsgAgentDisconnected)
	}
	return cond(TypeConnected, corev1.ConditionTrue, ReasonAgentConnected, MsgAgentConnected)
}

// bindingCond is the condition of type t of a host binding or unbinding;
// ok is false for other statuses.
func bindingCond(t, status string) (Cond, bool) {
	switch status {
	case hoststate.StatusBinding:
		return cond(t, corev1.ConditionFalse, ReasonBinding, MsgBinding), true
	case hoststate.StatusUnbinding, hoststate.StatusUnbindingPendingUserAction:
		return cond(t, corev1.ConditionFalse, ReasonUnbinding, MsgUnbinding), true
	}
	return Cond{}, false
}

func agentRequirementsMet(status string, approved bool) Cond {
	const t = TypeRequirementsMet
	if c, ok := bindingCond(t, status); ok {
		return c
	}
	switch {
	case status == hoststate.StatusKnown || status == hoststate.StatusKnownUnbound:
		if approved {
			return cond(t, corev1.ConditionTrue, ReasonAgentReady, MsgAgentReady)
		}
		return cond(t, corev1.ConditionFalse, ReasonAgentNotApproved, MsgAgentNotApproved)
	case notReady[status]:
		return cond(t, corev1.ConditionFalse, ReasonAgentNotReady, MsgAgentNotReady)
	case inProgress[status]:
		return cond(t, corev1.ConditionTrue, ReasonAgentAlreadyInstall, MsgAgentAlreadyInstall)
	case status == hoststate.StatusInstalled || status == hoststate.StatusAddedToExistingCluster || status == hoststate.StatusError:
		return cond(t, corev1.ConditionTrue, ReasonAgentInstallStopped, MsgAgentInstallStopped)
	}
	return unknownStatus(t, status)
}

func agentValidated(status string, v validations.Results) Cond {
	if c, ok := bindingCond(TypeValidated, status); ok {
		return c
	}
	failing := status == hoststate.StatusInsufficient || status == hoststate.StatusInsufficientUnbound
	return validated("agent's", failing, status == hoststate.StatusPendingForInput, v)
}

func agentInstalled(status, statusInfo, stage string) Cond {
	const t = TypeInstalled
	if c, ok := bindingCond(t, status); ok {
		return c
	}
	switch {
	case status == hoststate.StatusInstalled || status == hoststate.StatusAddedToExistingCluster:
		return cond(t, corev1.ConditionTrue, ReasonInstallationCompleted, withDetail(MsgInstallationCompleted, statusInfo))
	case status == hoststate.StatusError:
		return cond(t, corev1.ConditionFalse, ReasonInstallationFailed, withDetail(MsgInstallationFailed, statusInfo))
	case status == hoststate.StatusKnown || status == hoststate.StatusKnownUnbound || notReady[status]:
		return cond(t, corev1.ConditionFalse, ReasonInstallationNotStarted, MsgInstallationNotStarted)
	case inProgress[status]:
		detail := statusInfo
		if stage != "" {
			detail = stage
		}
		return cond(t, corev1.ConditionFalse, ReasonInstallationInProgress, withDetail(MsgInstallationInProgress, detail))
	}
	return unknownStatus(t, status)
}

func agentBound(status string) Cond {
	const t = TypeBound
	switch status {
	case hoststate.StatusBinding:
		return cond(t, corev1.ConditionFalse, ReasonBinding, MsgBinding)
	case hoststate.StatusUnbinding:
		return cond(t, corev1.ConditionFalse, ReasonUnbinding, MsgUnbinding)
	case hoststate.StatusUnbindingPendingUserAction:
		return cond(t, corev1.ConditionFalse, ReasonUnbindingPendingUser, MsgUnbindingPendingUser)
	case hoststate.StatusDiscoveringUnbound, hoststate.StatusKnownUnbound, hoststate.StatusInsufficientUnbound,
		hoststate.StatusDisconnectedUnbound, hoststate.StatusDisabledUnbound:
		return cond(t, corev1.ConditionFalse, ReasonUnbound, MsgUnbound)
	}
	return cond(t, corev1.ConditionTrue, ReasonBound, MsgBound)
}
