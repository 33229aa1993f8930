package hoststate

import (
	"testing"
	"time"

	assistedapi "github.com/metalshift/metalshift/api/assisted/v2"
	"github.com/metalshift/metalshift/assisted/pkg/validations"
)

func passing() validations.Results {
	return validations.Results{
		"hardware": {
			{ID: "has-min-cpu-cores", Status: "success", Message: "Sufficient CPU cores"},
			{ID: "has-cpu-cores-for-role", Status: "success", Message: "Sufficient CPU cores for role master"},
		},
		"network": {
			{ID: "machine-cidr-defined", Status: "success", Message: "Machine Network CIDR is defined"},
			{ID: "ntp-synced", Status: "failure", Message: "Host couldn't synchronize with any NTP server"},
		},
		"operators": {},
	}
}

// with returns passing() with one validation's status and message changed.
func with(id, status, msg string) validations.Results {
	r := passing()
	for c := range r {
		for i := range r[c] {
			if r[c][i].ID == id {
				r[c][i].Status, r[c][i].Message = status, msg
				return r
			}
		}
	}
	r["hardware"] = append(r["hardware"], validations.Result{ID: id, Status: status, Message: msg})
	return r
}

func bound(status string) Facts {
	return Facts{Status: status, Bound: true, Connected: true, HasInventory: true, Validations: passing(), Approved: true, ClusterStatus: "ready"}
}

func TestRefresh(t *testing.T) {
	const ntp = "Host couldn't synchronize with any NTP server"
	for name, tc := range map[string]struct {
		f          Facts
		want, info string
	}{
		// discovery of a bound host
		"new host without inventory": {func() Facts { f := bound(""); f.HasInventory = false; return f }(), StatusDiscovering, InfoDiscovering},
		"no inventory yet":           {func() Facts { f := bound(StatusDiscovering); f.HasInventory = false; return f }(), StatusDiscovering, InfoDiscovering},
		"all pass":                   {bound(StatusDiscovering), StatusKnown, InfoKnown},
		"known stays known":          {bound(StatusKnown), StatusKnown, InfoKnown},
		"minimum hardware fails": {func() Facts {
			f := bound(StatusDiscovering)
			f.Validations = with("has-min-cpu-cores", "failure", "too few cores")
			return f
		}(), StatusInsufficient, InfoInsufficientHardware + ntp + " ; too few cores"},
		"user input missing": {func() Facts {
			f := bound(StatusKnown)
			f.Validations = with("machine-cidr-defined", "failure", "Machine Network CIDR is undefined")
			return f
		}(), StatusPendingForInput, InfoPendingForInput + "Host couldn't synchronize with any NTP server ; Machine Network CIDR is undefined"},
		"role requirement fails": {func() Facts {
			f := bound(StatusKnown)
			f.Validations = with("has-cpu-cores-for-role", "failure", "Require at least 4 CPU cores for master role, found only 2")
			return f
		}(), StatusInsufficient, InfoNotReadyForInstall + "Host couldn't synchronize with any NTP server ; Require at least 4 CPU cores for master role, found only 2"},
		"role requirement pending": {func() Facts {
			f := bound(StatusKnown)
			f.Validations = with("belongs-to-machine-cidr", "pending", "Missing inventory or machine network CIDR")
			return f
		}(), StatusInsufficient, InfoNotReadyForInstall + ntp},
		"operator fails": {func() Facts {
			f := bound(StatusKnown)
			f.Validations["operators"] = []validations.Result{{ID: "lso-requirements-satisfied", Status: "failure", Message: "lso"}}
			return f
		}(), StatusInsufficient, InfoNotReadyForInstall + "Host couldn't synchronize with any NTP server ; lso"},
		"no contact":              {func() Facts { f := bound(StatusKnown); f.Connected = false; return f }(), StatusDisconnected, InfoDisconnected},
		"back in contact":         {bound(StatusDisconnected), StatusKnown, InfoKnown},
		"unbound: no inventory":   {Facts{Status: "", Connected: true}, StatusDiscoveringUnbound, InfoDiscovering},
		"unbound: ready to bind":  {Facts{Status: StatusDiscoveringUnbound, Connected: true, HasInventory: true, Validations: passing()}, StatusKnownUnbound, InfoReadyToBeBound},
		"unbound: no contact":     {Facts{Status: StatusKnownUnbound, HasInventory: true}, StatusDisconnectedUnbound, InfoDisconnected},
		"unbound: hardware fails": {Facts{Status: StatusKnownUnbound, Connected: true, HasInventory: true, Validations: with("has-min-memory", "failure", "ram")}, StatusInsufficientUnbound, InfoInsufficientHardware + ntp + " ; ram"},
		"unbound: role check ignored": {Facts{Status: StatusKnownUnbound, Connected: true, HasInventory: true,
			Validations: with("has-cpu-cores-for-role", "failure", "cores")}, StatusKnownUnbound, InfoReadyToBeBound},
		// binding
		"bound while known-unbound": {func() Facts { f := bound(StatusKnownUnbound); return f }(), StatusBinding, InfoBinding},
		"bound while insufficient-unbound": {func() Facts {
			f := bound(StatusInsufficientUnbound)
			f.Validations = with("has-min-memory", "failure", "ram")
			return f
		}(), StatusInsufficientUnbound, InfoInsufficientHardware + ntp + " ; ram"},
		"binding waits for registration": {bound(StatusBinding), StatusBinding, InfoBinding},
		"unbound while known":            {func() Facts { f := bound(StatusKnown); f.Bound = false; return f }(), StatusUnbinding, InfoUnbinding},
		// preparation
		"cluster preparing, approved": {func() Facts { f := bound(StatusKnown); f.ClusterStatus = "preparing-for-installation"; return f }(), StatusPreparingForInstallation, InfoPreparing},
		"cluster preparing, not approved": {func() Facts {
			f := bound(StatusKnown)
			f.ClusterStatus, f.Approved = "preparing-for-installation", false
			return f
		}(), StatusKnown, InfoKnown},
		"preparation immediate": {func() Facts {
			f := bound(StatusPreparingForInstallation)
			f.ClusterStatus = "preparing-for-installation"
			return f
		}(), StatusPreparingSuccessful, InfoPreparationSuccessful},
		"slow disk while preparing": {func() Facts {
			f := bound(StatusPreparingForInstallation)
			f.ClusterStatus = "preparing-for-installation"
			f.Validations = with("sufficient-installation-disk-speed", "failure", "slow disk")
			return f
		}(), StatusInsufficient, InfoNotReadyForInstall + ntp + " ; slow disk"},
		"preparing host lost":       {func() Facts { f := bound(StatusPreparingSuccessful); f.Connected = false; return f }(), StatusDisconnected, InfoConnectionTimedOutPrep},
		"cluster stopped preparing": {func() Facts { f := bound(StatusPreparingSuccessful); f.ClusterStatus = "ready"; return f }(), StatusKnown, InfoKnown},
		"prepared waits for cluster": {func() Facts {
			f := bound(StatusPreparingSuccessful)
			f.ClusterStatus = "preparing-for-installation"
			return f
		}(), StatusPreparingSuccessful, InfoPreparationSuccessful},
		"cluster installing":   {func() Facts { f := bound(StatusPreparingSuccessful); f.ClusterStatus = "installing"; return f }(), StatusInstalling, InfoInstalling},
		"day-2 known approved": {func() Facts { f := bound(StatusKnown); f.Day2, f.ClusterStatus = true, "adding-hosts"; return f }(), StatusInstalling, InfoInstalling},
		"day-2 known not approved": {func() Facts {
			f := bound(StatusKnown)
			f.Day2, f.ClusterStatus, f.Approved = true, "adding-hosts", false
			return f
		}(), StatusKnown, InfoKnown},
		"installing waits for a stage": {func() Facts { f := bound(StatusInstalling); f.ClusterStatus = "installing"; return f }(), StatusInstalling, InfoInstalling},
	} {
		t.Run(name, func(t *testing.T) {
			got, info := Refresh(tc.f)
			if got != tc.want || info != tc.info {
				t.Errorf("Refresh = %q %q, want %q %q", got, info, tc.want, tc.info)
			}
		})
	}
}

func TestRefreshInstalling(t *testing.T) {
	inst := func(status string, stage assistedapi.HostStage) Facts {
		f := bound(status)
		f.ClusterStatus, f.Stage = "installing", stage
		return f
	}
	for name, tc := range map[string]struct {
		f          Facts
		want, info string
	}{
		"first stage": {inst(StatusInstalling, assistedapi.StageStartingInstallation), StatusInstallingInProgress, "Starting installation"},
		// The hub found the Node of a host it held preparing (its state
		// restored from a backup taken then), silent since.
		"preparing, joined": {func() Facts {
			f := inst(StatusPreparingSuccessful, assistedapi.StageDone)
			f.ClusterStatus, f.Connected = "preparing-for-installation", false
			return f
		}(), StatusInstalling, InfoInstalling},
		"preparing for installation, joined": {func() Facts {
			f := inst(StatusPreparingForInstallation, assistedapi.StageJoined)
			f.Connected = false
			return f
		}(), StatusInstalling, InfoInstalling},
		"next stage":   {inst(StatusInstallingInProgress, assistedapi.StageConfiguring), StatusInstallingInProgress, "Configuring"},
		"done":         {inst(StatusInstallingInProgress, assistedapi.StageDone), StatusInstalled, "Done"},
		"day-2 done":   {func() Facts { f := inst(StatusInstallingInProgress, assistedapi.StageDone); f.Day2 = true; return f }(), StatusAddedToExistingCluster, "Done"},
		"failed stage": {inst(StatusInstallingInProgress, assistedapi.StageFailed), StatusError, "Failed"},
		"failed stage, reason": {func() Facts {
			f := inst(StatusInstallingInProgress, assistedapi.StageFailed)
			f.StatusInfo, f.ProgressInfo = "Writing image to disk", "writing /dev/sda: input/output error"
			return f
		}(), StatusError, "writing /dev/sda: input/output error"},
		"cluster error": {func() Facts {
			f := inst(StatusInstallingInProgress, assistedapi.StageRebooting)
			f.ClusterStatus = "error"
			return f
		}(), StatusError, InfoAbortingClusterError},
		"installed, cluster error": {func() Facts { f := inst(StatusInstalled, assistedapi.StageDone); f.ClusterStatus = "error"; return f }(), StatusError, InfoAbortingClusterError},
		"day-2, cluster error": {func() Facts {
			f := inst(StatusInstallingInProgress, assistedapi.StageRebooting)
			f.ClusterStatus, f.Day2 = "error", true
			return f
		}(), StatusInstallingInProgress, "Rebooting"},
		"stage timeout": {func() Facts {
			f := inst(StatusInstallingInProgress, assistedapi.StageWritingImageToDisk)
			f.StageTimedOut, f.StageTimeout = true, time.Hour
			return f
		}(), StatusError, "Host failed to install because its installation stage Writing image to disk did not sufficiently progress in the last 1h0m0s."},
		"stage timeout, configuring": {func() Facts {
			f := inst(StatusInstallingInProgress, assistedapi.StageConfiguring)
			f.StageTimedOut, f.StageTimeout = true, time.Hour
			return f
		}(), StatusError, "Host failed to install because its installation stage Configuring took longer than expected 1h0m0s"},
		"reboot timeout": {func() Facts {
			f := inst(StatusInstallingInProgress, assistedapi.StageRebooting)
			f.StageTimedOut, f.StageTimeout, f.InstallationDisk = true, 40*time.Minute, "(sdb, /dev/disk/by-id/wwn-0x2)"
			return f
		}(), StatusInstallingPendingUserAction, "Host timed out when pulling the configuration files. Verify in the host console that the host boots from the " +
			"OpenShift installation disk (sdb, /dev/disk/by-id/wwn-0x2) and has network access to the cluster API. The installation will resume after the host " +
			"successfully boots and can access the cluster API"},
		"back from a reboot timeout": {func() Facts {
			f := inst(StatusInstallingPendingUserAction, assistedapi.StageJoined)
			f.StatusInfo = InfoRebootTimedOut + "(sdb, /dev/disk/by-id/wwn-0x2) and has network access"
			return f
		}(), StatusInstallingInProgress, "Joined"},
		"booted from disk after all": {func() Facts {
			f := inst(StatusInstallingPendingUserAction, assistedapi.StageConfiguring)
			f.StatusInfo = InfoBootedISOAfterReboot
			return f
		}(), StatusInstallingInProgress, "Configuring"},
		"start timeout":         {func() Facts { f := inst(StatusInstalling, ""); f.StageTimedOut = true; return f }(), StatusError, InfoInstallationTimedOut},
		"lost before any stage": {func() Facts { f := inst(StatusInstalling, ""); f.Connected = false; return f }(), StatusError, InfoConnectionTimedOutInst},
		"rebooted, silent": {func() Facts {
			f := inst(StatusInstallingInProgress, assistedapi.StageRebooting)
			f.Connected = false
			return f
		}(), StatusInstallingInProgress, "Rebooting"},
		"joined, silent": {func() Facts {
			f := inst(StatusInstallingInProgress, assistedapi.StageJoined)
			f.Connected = false
			return f
		}(), StatusInstallingInProgress, "Joined"},
		"installed stays": {inst(StatusInstalled, assistedapi.StageDone), StatusInstalled, "Done"},
		"pending user action": {func() Facts {
			f := inst(StatusInstallingPendingUserAction, assistedapi.StageRebooting)
			f.StatusInfo = InfoBootedISOAfterReboot
			return f
		}(), StatusInstallingPendingUserAction, InfoBootedISOAfterReboot},
		"pending user, progress": {inst(StatusInstallingPendingUserAction, assistedapi.StageRebooting), StatusInstallingPendingUserAction, "Rebooting"},
		"error stays":            {func() Facts { f := inst(StatusError, ""); f.StatusInfo = "x"; return f }(), StatusError, "x"},
		"added stays": {func() Facts {
			f := inst(StatusAddedToExistingCluster, assistedapi.StageDone)
			f.StatusInfo = "Done"
			return f
		}(), StatusAddedToExistingCluster, "Done"},
	} {
		t.Run(name, func(t *testing.T) {
			got, info := Refresh(tc.f)
			if got != tc.want || info != tc.info {
				t.Errorf("Refresh = %q %q, want %q %q", got, info, tc.want, tc.info)
			}
		})
	}
}
