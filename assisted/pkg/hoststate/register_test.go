package hoststate

import (
	"testing"

	assistedapi "github.com/metalshift/metalshift/api/assisted/v2"
)

func TestRegister(t *testing.T) {
	for _, tc := range []struct {
		current string
		bound   bool
		want    string
	}{
		// new → discovering / discovering-unbound
		{"", true, StatusDiscovering},
		{"", false, StatusDiscoveringUnbound},
		// re-register before the install, or while binding → discovering
		{StatusDiscovering, true, StatusDiscovering},
		{StatusKnown, true, StatusDiscovering},
		{StatusInsufficient, true, StatusDiscovering},
		{StatusDisconnected, true, StatusDiscovering},
		{StatusPendingForInput, true, StatusDiscovering},
		{StatusResettingPendingUserAction, true, StatusDiscovering},
		{StatusBinding, true, StatusDiscovering},
		{StatusBinding, false, StatusDiscoveringUnbound},
		// unbound, unbinding*, reclaiming-rebooting → discovering-unbound
		{StatusKnownUnbound, false, StatusDiscoveringUnbound},
		{StatusInsufficientUnbound, false, StatusDiscoveringUnbound},
		{StatusDisconnectedUnbound, false, StatusDiscoveringUnbound},
		{StatusDiscoveringUnbound, false, StatusDiscoveringUnbound},
		{StatusUnbinding, false, StatusDiscoveringUnbound},
		{StatusUnbindingPendingUserAction, false, StatusDiscoveringUnbound},
		{StatusReclaimingRebooting, false, StatusDiscoveringUnbound},
		// preparing-* → known
		{StatusPreparingForInstallation, true, StatusKnown},
		{StatusPreparingSuccessful, true, StatusKnown},
		{StatusPreparingFailed, true, StatusKnown},
		// installing* → error
		{StatusInstalling, true, StatusError},
		{StatusInstallingInProgress, true, StatusError},
		// error and finished hosts keep their status
		{StatusError, true, StatusError},
		{StatusInstalled, true, StatusInstalled},
		{StatusCancelled, true, StatusCancelled},
		{StatusDisabledUnbound, false, StatusDisabledUnbound},
	} {
		if got := Register(tc.current, tc.bound); got != tc.want {
			t.Errorf("Register(%q, %v) = %q, want %q", tc.current, tc.bound, got, tc.want)
		}
	}
}

func TestRegisterBackIntoTheISO(t *testing.T) {
	for _, tc := range []struct {
		current    string
		stage      assistedapi.HostStage
		day2       bool
		want, info string
	}{
		{StatusInstallingInProgress, assistedapi.StageRebooting, false, StatusInstallingPendingUserAction, InfoBootedISOAfterReboot},
		{StatusInstallingInProgress, assistedapi.StageWritingImageToDisk, false, StatusError, InfoRestartedDuringInstall},
		{StatusInstallingPendingUserAction, assistedapi.StageRebooting, false, StatusInstallingPendingUserAction, ""},
		{StatusAddedToExistingCluster, assistedapi.StageDone, true, StatusInstallingPendingUserAction, InfoBootedISOAfterReboot},
		{StatusAddedToExistingCluster, assistedapi.StageDone, false, StatusAddedToExistingCluster, ""},
		{StatusInstalling, "", false, StatusError, InfoRestartedDuringInstall},
		{StatusKnown, "", false, StatusDiscovering, InfoDiscovering},
	} {
		got, info := RegisterAt(tc.current, true, tc.stage, tc.day2)
		if got != tc.want || info != tc.info {
			t.Errorf("RegisterAt(%q, %q, %v) = %q %q, want %q %q", tc.current, tc.stage, tc.day2, got, info, tc.want, tc.info)
		}
	}
}

func TestUnbind(t *testing.T) {
	for _, tc := range []struct {
		current string
		day2    bool
		want    string
		ok      bool
	}{
		{StatusKnown, false, StatusUnbinding, true},
		{StatusInsufficient, false, StatusUnbinding, true},
		{StatusDisconnected, false, StatusUnbinding, true},
		{StatusBinding, false, StatusUnbinding, true},
		{StatusInstalled, false, StatusUnbindingPendingUserAction, true},
		{StatusAddedToExistingCluster, true, StatusUnbindingPendingUserAction, true},
		{StatusError, false, StatusUnbindingPendingUserAction, true},
		{StatusCancelled, false, StatusUnbindingPendingUserAction, true},
		{StatusKnownUnbound, false, StatusKnownUnbound, true},
		{StatusUnbinding, false, StatusUnbinding, true},
		// A day-1 host installing may not leave its cluster; a day-2 one
		// may, and must boot the discovery image again.
		{StatusInstallingInProgress, false, StatusInstallingInProgress, false},
		{StatusPreparingForInstallation, false, StatusPreparingForInstallation, false},
		{StatusInstallingInProgress, true, StatusUnbindingPendingUserAction, true},
		{StatusInstalling, true, StatusUnbindingPendingUserAction, true},
	} {
		if got, ok := Unbind(tc.current, tc.day2); got != tc.want || ok != tc.ok {
			t.Errorf("Unbind(%q, %v) = %q %v, want %q %v", tc.current, tc.day2, got, ok, tc.want, tc.ok)
		}
	}
}
