// Package hoststate is the host state machine of the agent service as
// tables and pure functions: the upstream host statuses, what registration
// and each refresh make of them, and the installation stages a host of a
// role goes through. It reads facts the caller gathered (validations,
// connection, the cluster's status, the reported stage) and keeps nothing.
package hoststate

// Host statuses (upstream's).
const (
	StatusDiscovering                 = "discovering"
	StatusKnown                       = "known"
	StatusDisconnected                = "disconnected"
	StatusInsufficient                = "insufficient"
	StatusDisabled                    = "disabled"
	StatusPreparingForInstallation    = "preparing-for-installation"
	StatusPreparingFailed             = "preparing-failed"
	StatusPreparingSuccessful         = "preparing-successful"
	StatusPendingForInput             = "pending-for-input"
	StatusInstalling                  = "installing"
	StatusInstallingInProgress        = "installing-in-progress"
	StatusInstallingPendingUserAction = "installing-pending-user-action"
	StatusResettingPendingUserAction  = "resetting-pending-user-action"
	StatusInstalled                   = "installed"
	StatusError                       = "error"
	StatusResetting                   = "resetting"
	StatusAddedToExistingCluster      = "added-to-existing-cluster"
	StatusCancelled                   = "cancelled"
	StatusBinding                     = "binding"
	StatusUnbinding                   = "unbinding"
	StatusUnbindingPendingUserAction  = "unbinding-pending-user-action"
	StatusKnownUnbound                = "known-unbound"
	StatusDisconnectedUnbound         = "disconnected-unbound"
	StatusInsufficientUnbound         = "insufficient-unbound"
	StatusDisabledUnbound             = "disabled-unbound"
	StatusDiscoveringUnbound          = "discovering-unbound"
	StatusReclaiming                  = "reclaiming"
	StatusReclaimingRebooting         = "reclaiming-rebooting"
)

// Statuses are every host status, in the order above.
var Statuses = []string{
	StatusDiscovering, StatusKnown, StatusDisconnected, StatusInsufficient, StatusDisabled,
	StatusPreparingForInstallation, StatusPreparingFailed, StatusPreparingSuccessful, StatusPendingForInput,
	StatusInstalling, StatusInstallingInProgress, StatusInstallingPendingUserAction, StatusResettingPendingUserAction,
	StatusInstalled, StatusError, StatusResetting, StatusAddedToExistingCluster, StatusCancelled,
	StatusBinding, StatusUnbinding, StatusUnbindingPendingUserAction,
	StatusKnownUnbound, StatusDisconnectedUnbound, StatusInsufficientUnbound, StatusDisabledUnbound, StatusDiscoveringUnbound,
	StatusReclaiming, StatusReclaimingRebooting,
}

// Status infos (upstream's texts; $-free ones are used as they are).
const (
	InfoDiscovering          = "Waiting for host to send hardware details"
	InfoDisconnected         = "Host has stopped communicating with the installation service"
	InfoInsufficientHardware = "Host does not meet the minimum hardware requirements: "
	InfoPendingForInput      = "Waiting for user input: "
	InfoNotReadyForInstall   = "Host cannot be installed due to following failing validation(s): "
	InfoKnown                = "Host is ready to be installed"
	InfoReadyToBeBound       = "Host is ready to be bound to a cluster"
	InfoBinding              = "Host is waiting to be bound to the cluster"
	InfoUnbinding            = "Host is waiting to be unbound from the cluster"
	// InfoUnbindingPendingUser is ours: upstream's Bound condition says
	// the same ("Pending host reboot from infraenv image").
	InfoUnbindingPendingUser   = "Host is waiting to be unbound from the cluster: boot it from its InfraEnv's discovery image again to return it to the InfraEnv"
	InfoPreparing              = "Host is preparing for installation"
	InfoPreparationSuccessful  = "Host finished successfully to prepare for installation"
	InfoInstalling             = "Installation is in progress"
	InfoAbortingClusterError   = "Host is part of a cluster that failed to install"
	InfoInstallationTimedOut   = "Host failed to install due to timeout while starting installation"
	InfoConnectionTimedOutInst = "Host failed to install due to timeout while connecting to host during the installation phase."
	InfoConnectionTimedOutPrep = "Host failed to install due to timeout while connecting to host during the preparation phase."
	InfoRestartedDuringInstall = "The host unexpectedly restarted during the installation"
	InfoBootedISOAfterReboot   = "Expected the host to boot from disk, but it booted the installation image. Please reboot and fix boot order to boot from disk."
)

// Status groups.
var (
	// beforeInstall are the statuses of a bound host being discovered.
	beforeInstall = set(StatusDiscovering, StatusKnown, StatusDisconnected, StatusInsufficient, StatusPendingForInput)
	// unbound are the statuses of a host without a cluster being discovered.
	unbound = set(StatusDiscoveringUnbound, StatusKnownUnbound, StatusDisconnectedUnbound, StatusInsufficientUnbound)
	// installing are the statuses of a host whose install step was sent.
	installing = set(StatusInstalling, StatusInstallingInProgress, StatusInstallingPendingUserAction)
	// preparing are the statuses of a host preparing for its install.
	preparing = set(StatusPreparingForInstallation, StatusPreparingSuccessful, StatusPreparingFailed)
)

func set(items ...string) map[string]bool {
	m := make(map[string]bool, len(items))
	for _, i := range items {
		m[i] = true
	}
	return m
}

// IsUnbound tells whether status is one of a host that belongs to no
// cluster.
func IsUnbound(status string) bool {
	return unbound[status] || status == StatusDisabledUnbound || status == StatusUnbinding ||
		status == StatusUnbindingPendingUserAction || status == StatusReclaiming || status == StatusReclaimingRebooting
}

// BeforeInstallation tells whether status is one in which the host can
// still change its role, hostname or disk and be bound or unbound.
func BeforeInstallation(status string) bool {
	return status == "" || beforeInstall[status] || unbound[status] || status == StatusBinding
}
