package conditions

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/metalshift/metalshift/assisted/pkg/clusterstate"
	"github.com/metalshift/metalshift/assisted/pkg/validations"
)

// AgentClusterInstall reasons and messages.
const (
	ReasonClusterNotReady          = "ClusterNotReady"
	MsgClusterNotReady             = "The cluster is not ready to begin the installation"
	ReasonClusterIsReady           = "ClusterIsReady"
	MsgClusterIsReady              = "The cluster is ready to begin the installation"
	ReasonClusterAlreadyInstalling = "ClusterAlreadyInstalling"
	MsgClusterAlreadyInstalling    = "The cluster requirements are met"
	ReasonClusterInstallStopped    = "ClusterInstallationStopped"
	MsgClusterInstallStopped       = "The cluster installation stopped"
	ReasonInsufficientAgents       = "InsufficientAgents"
	MsgInsufficientAgents          = "The cluster currently requires exactly %d master agents, %d arbiter agents and %d worker agents, but currently registered %d master agents, %d arbiter agents and %d worker agents"
	ReasonUnsyncedAgents           = "UnsyncedAgents"
	MsgUnsyncedAgents              = "The cluster currently has %d agents with spec error"
	ReasonUnapprovedAgents         = "UnapprovedAgents"
	MsgUnapprovedAgents            = "The installation is pending on the approval of %d agents"
	ReasonInstallationOnHold       = "InstallationOnHold"
	MsgInstallationOnHold          = "The installation is on hold. To unhold set holdInstallation to false"
	ReasonInstallationNotFailed    = "InstallationNotFailed"
	MsgInstallationNotFailed       = "The installation has not failed"
	MsgClusterFailed               = "The installation failed:"
	ReasonInstallationCancelled    = "InstallationCancelled"
	ReasonInstallationNotStopped   = "InstallationNotStopped"
	MsgStoppedFailed               = "The installation has stopped due to error"
	MsgStoppedCancelled            = "The installation has stopped because it was cancelled"
	MsgStoppedCompleted            = "The installation has stopped because it completed successfully"
	MsgNotStopped                  = "The installation is waiting to start or in progress"
)

// ACISpecSynced is an AgentClusterInstall's SpecSynced condition. On
// success its message is the sentence the hive docs show, not upstream's
// literal "SyncOK".
func ACISpecSynced(err error, inputError bool) Cond { return specSynced(err, inputError, MsgSyncOK) }

// ACIInput is what an AgentClusterInstall's conditions come from.
type ACIInput struct {
	// Status and StatusInfo are the cluster's.
	Status, StatusInfo string
	// Held: holdInstallation, or hive's reconcile-pause annotation.
	Held bool
	// V are the cluster's validations; empty before any was computed.
	V validations.Results
	// Required* are provisionRequirements; the others count the Agents
	// bound per role, those with a spec error and those not approved.
	RequiredMasters, RequiredArbiters, RequiredWorkers int
	Masters, Arbiters, Workers                         int
	Unsynced, Unapproved                               int
}

// ACI returns an AgentClusterInstall's Validated, RequirementsMet,
// Completed, Failed and Stopped conditions.
func ACI(in ACIInput) []Cond {
	return []Cond{aciValidated(in), aciRequirementsMet(in), aciCompleted(in), aciFailed(in), aciStopped(in)}
}

func aciValidated(in ACIInput) Cond {
	if in.Status == clusterstate.StatusAddingHosts {
		return cond(TypeValidated, corev1.ConditionTrue, ReasonValidationsPassing, "The cluster's validations are passing")
	}
	return validated("cluster's", in.Status == clusterstate.StatusInsufficient, in.Status == clusterstate.StatusPendingForInput, in.V)
}

func aciRequirementsMet(in ACIInput) Cond {
	const t = TypeRequirementsMet
	switch in.Status {
	case clusterstate.StatusReady:
		return readyRequirements(in)
	case clusterstate.StatusInsufficient, clusterstate.StatusPendingForInput:
		return cond(t, corev1.ConditionFalse, ReasonClusterNotReady, MsgClusterNotReady)
	case clusterstate.StatusPreparingForInstallation, clusterstate.StatusInstalling, clusterstate.StatusFinalizing,
		clusterstate.StatusInstallingPendingUserAction:
		return cond(t, corev1.ConditionTrue, ReasonClusterAlreadyInstalling, MsgClusterAlreadyInstalling)
	// A multi-node cluster that installed goes on to adding-hosts; seed 001
	// prints it as installed (upstream's code says ClusterAlreadyInstalling
	// and the day-2 status info): the seed wins.
	case clusterstate.StatusInstalled, clusterstate.StatusAddingHosts, clusterstate.StatusError:
		return cond(t, corev1.ConditionTrue, ReasonClusterInstallStopped, MsgClusterInstallStopped)
	}
	return unknownStatus(t, in.Status)
}

// readyRequirements: the first of missing or extra Agents, Agents with a
// spec error, unapproved Agents keeps a ready cluster from installing.
func readyRequirements(in ACIInput) Cond {
	const t = TypeRequirementsMet
	switch {
	case in.Masters != in.RequiredMasters || in.Arbiters != in.RequiredArbiters || in.Workers != in.RequiredWorkers:
		return cond(t, corev1.ConditionFalse, ReasonInsufficientAgents, fmt.Sprintf(MsgInsufficientAgents,
			in.RequiredMasters, in.RequiredArbiters, in.RequiredWorkers, in.Masters, in.Arbiters, in.Workers))
	case in.Unsynced > 0:
		return cond(t, corev1.ConditionFalse, ReasonUnsyncedAgents, fmt.Sprintf(MsgUnsyncedAgents, in.Unsynced))
	case in.Unapproved > 0:
		return cond(t, corev1.ConditionFalse, ReasonUnapprovedAgents, fmt.Sprintf(MsgUnapprovedAgents, in.Unapproved))
	}
	return cond(t, corev1.ConditionTrue, ReasonClusterIsReady, MsgClusterIsReady)
}

func aciCompleted(in ACIInput) Cond {
	const t = TypeCompleted
	switch in.Status {
	case clusterstate.StatusReady:
		if in.Held {
			return cond(t, corev1.ConditionFalse, ReasonInstallationOnHold, MsgInstallationOnHold)
		}
		return cond(t, corev1.ConditionFalse, ReasonInstallationNotStarted, MsgInstallationNotStarted)
	case clusterstate.StatusInsufficient, clusterstate.StatusPendingForInput:
		return cond(t, corev1.ConditionFalse, ReasonInstallationNotStarted, MsgInstallationNotStarted)
	case clusterstate.StatusPreparingForInstallation, clusterstate.StatusInstalling, clusterstate.StatusFinalizing,
		clusterstate.StatusInstallingPendingUserAction:
		return cond(t, corev1.ConditionFalse, ReasonInstallationInProgress, withDetail(MsgInstallationInProgress, in.StatusInfo))
	case clusterstate.StatusInstalled:
		return cond(t, corev1.ConditionTrue, ReasonInstallationCompleted, withDetail(MsgInstallationCompleted, in.StatusInfo))
	case clusterstate.StatusAddingHosts: // as installed, after the seed
		return cond(t, corev1.ConditionTrue, ReasonInstallationCompleted, withDetail(MsgInstallationCompleted, clusterstate.InfoInstalled))
	case clusterstate.StatusError:
		return cond(t, corev1.ConditionFalse, ReasonInstallationFailed, withDetail(MsgInstallationFailed, in.StatusInfo))
	}
	return unknownStatus(t, in.Status)
}

func aciFailed(in ACIInput) Cond {
	if in.Status == clusterstate.StatusError {
		return cond(TypeFailed, corev1.ConditionTrue, ReasonInstallationFailed, withDetail(MsgClusterFailed, in.StatusInfo))
	}
	return cond(TypeFailed, corev1.ConditionFalse, ReasonInstallationNotFailed, MsgInstallationNotFailed)
}

func aciStopped(in ACIInput) Cond {
	const t = TypeStopped
	switch in.Status {
	case clusterstate.StatusInstalled, clusterstate.StatusAddingHosts:
		return cond(t, corev1.ConditionTrue, ReasonInstallationCompleted, MsgStoppedCompleted)
	case clusterstate.StatusError:
		return cond(t, corev1.ConditionTrue, ReasonInstallationFailed, MsgStoppedFailed)
	case clusterstate.StatusCancelled:
		return cond(t, corev1.ConditionTrue, ReasonInstallationCancelled, MsgStoppedCancelled)
	}
	return cond(t, corev1.ConditionFalse, ReasonInstallationNotStopped, MsgNotStopped)
}
