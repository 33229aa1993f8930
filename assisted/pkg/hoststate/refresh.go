package hoststate

import (
	"sort"
	"strings"
	"time"

	assistedapi "github.com/metalshift/metalshift/api/assisted/v2"
	"github.com/metalshift/metalshift/assisted/pkg/validations"
)

// Cluster statuses a host's refresh looks at (the clusterstate package's
// values; repeated here so that clusterstate may import this package).
const (
	clusterPreparing  = "preparing-for-installation"
	clusterInstalling = "installing"
	clusterError      = "error"
	// clusterPendingUser: a host waits for the user to fix its boot.
	clusterPendingUser = "installing-pending-user-action"
)

// Facts are what a host's refresh looks at.
type Facts struct {
	Status string
	// StatusInfo is the current status info, kept where the status stays.
	StatusInfo string
	Bound      bool
	// Connected: the agent called within the disconnection timeout.
	Connected    bool
	HasInventory bool
	Validations  validations.Results
	Approved     bool
	// ClusterStatus is the bound cluster's status, "" when unbound.
	ClusterStatus string
	// Stage is the last reported installation stage, "" before any, and
	// ProgressInfo what the agent said with it.
	Stage        assistedapi.HostStage
	ProgressInfo string
	// Day2: the cluster is installed and takes more hosts (adding-hosts).
	Day2 bool
	// StageTimedOut: the install step or the current stage took too long
	// (Timeouts.Deadline passed).
	StageTimedOut bool
	// StageTimeout is the limit that passed, shown in the status info.
	StageTimeout time.Duration
	// InstallationDisk names the host's installation disk, "(name, id)",
	// for the status info of a host that did not come back from its
	// reboot.
	InstallationDisk string
	// Day2Host: the host was bound to an installed cluster to be added to
	// it (status.kind AddToExistingClusterHost); it may be unbound while
	// it installs.
	Day2Host bool
}

// Validation IDs by their effect on a host, as in upstream's state
// machine: failing minimum hardware makes it insufficient, missing user
// input pending-for-input, and anything of sufficientForInstall not
// succeeding keeps it from known. Operator validations count as the last.
var (
	minHardwareIDs = []string{
		validations.IDHasMinValidDisks, validations.IDHasMinCPUCores, validations.IDHasMinMemory,
		validations.IDCompatibleWithClusterPlatform, validations.IDDiskEncryptionSatisfied,
	}
	userInputIDs            = []string{validations.IDHostMachineCIDRDefined}
	sufficientForInstallIDs = []string{
		validations.IDHasMemoryForRole, validations.IDHasCPUCoresForRole, validations.IDBelongsToMachineCIDR,
		validations.IDHostnameUnique, validations.IDHostnameValid, "ignition-downloadable", "belongs-to-majority-group",
		"sufficient-network-latency-requirement-for-role", "sufficient-packet-loss-requirement-for-role",
		"has-default-route", validations.IDAPIDomainResolved, validations.IDAPIIntDomainResolved,
		validations.IDAppsDomainResolved, "dns-wildcard-not-configured", "valid-platform-network-settings",
		validations.IDSufficientInstallDiskSpeed, "non-overlapping-subnets", "compatible-agent",
		"time-synced-between-host-and-service", "no-skip-installation-disk", "no-skip-missing-disk",
	}
)

// Refresh returns a host's next status and its status info.
func Refresh(f Facts) (status, statusInfo string) {
	switch {
	case !f.Bound && leftCluster(f.Status):
		if s, ok := Unbind(f.Status, f.Day2Host); ok {
			return s, unbindInfo(s)
		}
		// Refused (admission stops it first): the host stays in its
		// install, which the Agent's SpecSynced reports.
		return f.Status, f.StatusInfo
	case f.Status == StatusPreparingForInstallation || f.Status == StatusPreparingSuccessful:
		return refreshPreparing(f)
	case installing[f.Status]:
		return refreshInstalling(f)
	case f.Status == StatusInstalled:
		if f.ClusterStatus == clusterError && !f.Day2 {
			return StatusError, InfoAbortingClusterError
		}
		return f.Status, keep(f, string(assistedapi.StageDone))
	case unbound[f.Status] && f.Bound:
		// Bound while unbound: upstream binds a host once it is known.
		if s, info := refreshUnbound(f); s != StatusKnownUnbound {
			return s, info
		}
		return StatusBinding, InfoBinding
	case f.Status == "" || beforeInstall[f.Status] || unbound[f.Status]:
		if !f.Bound {
			return refreshUnbound(f)
		}
		return refreshDiscovery(f)
	case f.Status == StatusBinding:
		return f.Status, keep(f, InfoBinding)
	case f.Status == StatusUnbinding:
		return f.Status, keep(f, InfoUnbinding)
	case f.Status == StatusUnbindingPendingUserAction:
		return f.Status, keep(f, InfoUnbindingPendingUser)
	}
	return f.Status, f.StatusInfo
}

// leftCluster tells whether a host in status, whose cluster reference is
// gone, is to be unbound: it was bound (discovering for, installing in
// or installed in a cluster). Unbound statuses and those of a host
// already unbinding are not.
func leftCluster(status string) bool {
	return status != "" && !IsUnbound(status) && status != StatusDisabled
}

func unbindInfo(status string) string {
	if status == StatusUnbindingPendingUserAction {
		return InfoUnbindingPendingUser
	}
	return InfoUnbinding
}

func keep(f Facts, fallback string) string {
	if f.StatusInfo != "" {
		return f.StatusInfo
	}
	return fallback
}

// refreshDiscovery is the refresh of a bound host before its install.
func refreshDiscovery(f Facts) (string, string) {
	if f.Status == StatusKnown && f.Connected && f.Approved {
		switch {
		case f.Day2:
			return StatusInstalling, InfoInstalling
		case f.ClusterStatus == clusterPreparing:
			return StatusPreparingForInstallation, InfoPreparing
		}
	}
	switch {
	case !f.Connected:
		return StatusDisconnected, InfoDisconnected
	case !f.HasInventory:
		return StatusDiscovering, InfoDiscovering
	case !allSucceeded(f.Validations, minHardwareIDs):
		return StatusInsufficient, InfoInsufficientHardware + failingList(f.Validations)
	case !allSucceeded(f.Validations, userInputIDs):
		return StatusPendingForInput, InfoPendingForInput + failingList(f.Validations)
	case !allSucceeded(f.Validations, sufficientForInstallIDs) || !categorySucceeded(f.Validations, validations.CategoryOperators):
		return StatusInsufficient, InfoNotReadyForInstall + failingList(f.Validations)
	}
	return StatusKnown, InfoKnown
}

// refreshUnbound is the refresh of a host without a cluster.
func refreshUnbound(f Facts) (string, string) {
	switch {
	case !f.Connected:
		return StatusDisconnectedUnbound, InfoDisconnected
	case !f.HasInventory:
		return StatusDiscoveringUnbound, InfoDiscovering
	case !allSucceeded(f.Validations, minHardwareIDs):
		return StatusInsufficientUnbound, InfoInsufficientHardware + failingList(f.Validations)
	}
	return StatusKnownUnbound, InfoReadyToBeBound
}

// refreshPreparing: preparation is immediate unless the disk speed check
// failed; a host whose cluster stopped preparing is known again; a host
// found installed (its Node joined the cluster) is installing.
func refreshPreparing(f Facts) (string, string) {
	switch {
	case f.Stage == assistedapi.StageJoined || f.Stage == assistedapi.StageDone:
		// The hub found the host's Node in the installed cluster: it
		// installed while the hub held an older state (restored from a
		// backup taken before its install step). It goes on from there.
		return StatusInstalling, InfoInstalling
	case !f.Connected:
		return StatusDisconnected, InfoConnectionTimedOutPrep
	case !f.Validations.Succeeded(validations.IDSufficientInstallDiskSpeed):
		return StatusInsufficient, InfoNotReadyForInstall + failingList(f.Validations)
	case f.Status == StatusPreparingSuccessful && f.ClusterStatus == clusterInstalling:
		return StatusInstalling, InfoInstalling
	case f.ClusterStatus == clusterPreparing || f.ClusterStatus == clusterInstalling:
		return StatusPreparingSuccessful, InfoPreparationSuccessful
	}
	return StatusKnown, InfoKnown
}

// refreshInstalling follows the reported stages. A host that stops calling
// after its install step started is not a fault: it reboots into its disk
// and reports no more.
func refreshInstalling(f Facts) (string, string) {
	switch {
	case f.Stage == assistedapi.StageFailed:
		// The status info is the agent's reason, as upstream has it.
		if f.ProgressInfo != "" {
			return StatusError, f.ProgressInfo
		}
		return StatusError, string(assistedapi.StageFailed)
	case f.ClusterStatus == clusterError && !f.Day2:
		return StatusError, InfoAbortingClusterError
	case f.Stage == assistedapi.StageDone:
		if f.Day2 {
			return StatusAddedToExistingCluster, string(assistedapi.StageDone)
		}
		return StatusInstalled, string(assistedapi.StageDone)
	case f.StageTimedOut && f.Stage == "":
		return StatusError, InfoInstallationTimedOut
	case f.StageTimedOut && f.Stage == assistedapi.StageRebooting:
		// The host most likely booted the discovery image again, or
		// cannot reach the cluster: the user can fix that and the
		// install goes on, as upstream has it.
		return StatusInstallingPendingUserAction, rebootTimedOutInfo(f.InstallationDisk)
	case f.StageTimedOut:
		return StatusError, stageTimedOutInfo(f.Stage, f.StageTimeout)
	case f.Stage == "" && !f.Connected:
		return StatusError, InfoConnectionTimedOutInst
	case f.Stage == "":
		return f.Status, keep(f, InfoInstalling)
	case f.Status == StatusInstallingPendingUserAction && f.Stage != assistedapi.StageRebooting:
		// The host waited in Rebooting for the user to fix its boot (it
		// booted the discovery image, or its reboot timed out) and has
		// reached its next stage since: the install goes on, as
		// upstream's progress update has it.
		return StatusInstallingInProgress, string(f.Stage)
	case f.Status == StatusInstallingPendingUserAction:
		return f.Status, keep(f, string(f.Stage))
	}
	return StatusInstallingInProgress, string(f.Stage)
}

// allSucceeded tells whether every listed validation succeeded (absent
// ones count as passing).
func allSucceeded(r validations.Results, ids []string) bool {
	for _, id := range ids {
		if !r.Succeeded(id) {
			return false
		}
	}
	return true
}

func categorySucceeded(r validations.Results, category string) bool {
	for _, res := range r[category] {
		if !r.Succeeded(res.ID) {
			return false
		}
	}
	return true
}

// failingList is upstream's $FAILING_VALIDATIONS: the messages of the
// failed validations, sorted, joined by " ; ".
func failingList(r validations.Results) string {
	var msgs []string
	for _, res := range r.Failing() {
		if res.Status == string(validations.StatusFailure) {
			msgs = append(msgs, res.Message)
		}
	}
	sort.Strings(msgs)
	return strings.Join(msgs, " ; ")
}
