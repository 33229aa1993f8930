package hoststate

import assistedapi "github.com/metalshift/metalshift/api/assisted/v2"

// Register is the status after the agent registers: a new host starts
// discovering (unbound without a cluster); a host not yet installing starts
// over; one preparing is known again; one installing has restarted and is
// in error.
func Register(current string, bound bool) string {
	s, _ := RegisterAt(current, bound, "", false)
	return s
}

// RegisterAt is Register with what the host reported last: its stage and
// whether it is a day-2 host. A host whose last stage was Rebooting, or a
// day-2 host already Done, has booted the discovery image instead of its
// disk: installing-pending-user-action. It also returns the status info
// to set, "" to keep the current one.
func RegisterAt(current string, bound bool, stage assistedapi.HostStage, day2 bool) (status, statusInfo string) {
	fresh := func() (string, string) {
		if bound {
			return StatusDiscovering, InfoDiscovering
		}
		return StatusDiscoveringUnbound, InfoDiscovering
	}
	switch current {
	case "", StatusDiscovering, StatusKnown, StatusDisconnected, StatusInsufficient, StatusPendingForInput,
		StatusResettingPendingUserAction, StatusResetting, StatusBinding:
		return fresh()
	case StatusDiscoveringUnbound, StatusKnownUnbound, StatusDisconnectedUnbound, StatusInsufficientUnbound,
		StatusUnbinding, StatusUnbindingPendingUserAction, StatusReclaiming, StatusReclaimingRebooting:
		return StatusDiscoveringUnbound, InfoDiscovering
	case StatusPreparingForInstallation, StatusPreparingSuccessful, StatusPreparingFailed:
		return StatusKnown, InfoKnown
	case StatusInstalling:
		return StatusError, InfoRestartedDuringInstall
	case StatusInstallingInProgress:
		if stage == assistedapi.StageRebooting {
			return StatusInstallingPendingUserAction, InfoBootedISOAfterReboot
		}
		return StatusError, InfoRestartedDuringInstall
	case StatusAddedToExistingCluster:
		if day2 && stage == assistedapi.StageDone {
			return StatusInstallingPendingUserAction, InfoBootedISOAfterReboot
		}
	}
	return current, ""
}

// Unbind is the status of a host whose cluster reference was removed:
// before its install (or while binding) it unbinds at once and is
// released when its agent registers again; once installed, failed or
// cancelled, and a day-2 host while it installs, it must first be booted
// from the discovery image again (upstream's reclaim without a
// BareMetalHost). ok is false where upstream refuses: a day-1 host
// preparing or installing.
func Unbind(current string, day2 bool) (status string, ok bool) {
	switch {
	case beforeInstall[current], current == StatusBinding:
		return StatusUnbinding, true
	case current == StatusInstalled, current == StatusAddedToExistingCluster, current == StatusError, current == StatusCancelled:
		return StatusUnbindingPendingUserAction, true
	case installing[current] || preparing[current]:
		if day2 {
			return StatusUnbindingPendingUserAction, true
		}
		return current, false
	case IsUnbound(current):
		return current, true
	}
	return current, false
}
