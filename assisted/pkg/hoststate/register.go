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
		StatusResettingPendingUserAction, StatusResetting:
		return fresh()
	case StatusBinding:
		return StatusDiscovering, InfoDiscovering
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
// before the install it unbinds at once; after (installed, error,
// cancelled) it must first boot the discovery image again. ok is false
// where upstream refuses (preparing or installing).
func Unbind(current string) (status string, ok bool) {
	switch {
	case beforeInstall[current]:
		return StatusUnbinding, true
	case current == StatusInstalled, current == StatusAddedToExistingCluster, current == StatusError, current == StatusCancelled:
		return StatusUnbindingPendingUserAction, true
	case IsUnbound(current):
		return current, true
	}
	return current, false
}
