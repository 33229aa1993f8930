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
		current, want string
		ok            bool
	}{
		{StatusKnown, StatusUnbinding, true},
		{StatusInsufficient, StatusUnbinding, true},
		{StatusInstalled, StatusUnbindingPendingUserAction, true},
		{StatusAddedToExistingCluster, StatusUnbindingPendingUserAction, true},
		{StatusError, StatusUnbindingPendingUserAction, true},
		{StatusCancelled, StatusUnbindingPendingUserAction, true},
		{StatusKnownUnbound, StatusKnownUnbound, true},
		{StatusInstallingInProgress, StatusInstallingInProgress, false},
		{StatusPreparingForInstallation, StatusPreparingForInstallation, false},
	} {
		if got, ok := Unbind(tc.current); got != tc.want || ok != tc.ok {
			t.Errorf("Unbind(%q) = %q %v, want %q %v", tc.current, got, ok, tc.want, tc.ok)
		}
	}
}
