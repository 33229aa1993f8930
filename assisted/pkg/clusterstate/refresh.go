package clusterstate

import (
	assistedapi "github.com/metalshift/metalshift/api/assisted/v2"
	"github.com/metalshift/metalshift/assisted/pkg/hoststate"
	"github.com/metalshift/metalshift/assisted/pkg/validations"
)

// Facts are what a cluster's refresh looks at.
type Facts struct {
	Status string
	// StatusInfo is the current status info, kept where the status stays.
	StatusInfo  string
	Validations validations.Results
	// Held: holdInstallation, or hive's reconcile-pause annotation.
	Held bool
	// HostsReady counts the approved known hosts that match the
	// requirements; HostsRequired is Σ provisionRequirements.
	HostsReady, HostsRequired int
	// RoleCountsMatch: the hosts per role equal provisionRequirements.
	RoleCountsMatch  bool
	UnsyncedAgents   int
	UnapprovedAgents int
	// PreparationDone: the service chose the bootstrap host and made the
	// install's secrets.
	PreparationDone bool
	// HostStatuses are the cluster's hosts.
	HostStatuses []HostSummary
	// Installed: the installed cluster's ClusterVersion is Available.
	Installed bool
	// Day2: the installed cluster takes more hosts.
	Day2 bool
	SNO  bool
	// Imported: the cluster was installed elsewhere (its ClusterDeployment
	// says installed, with an admin kubeconfig) and is taken on for day 2
	// without an install.
	Imported bool
}

// HostSummary is a host as the cluster's refresh sees it.
type HostSummary struct {
	Role      string
	Bootstrap bool
	Status    string
	Stage     assistedapi.HostStage
}

// userInputIDs are the validations that, not succeeding, make the cluster
// pending-for-input (upstream's pendingConditions and VIPs defined).
var userInputIDs = []string{
	validations.IDMachineCIDRDefined, validations.IDClusterCIDRDefined, validations.IDServiceCIDRDefined,
	validations.IDDNSDomainDefined, validations.IDPullSecretSet, validations.IDAPIVIPsDefined, validations.IDIngressVIPsDefined,
}

// Refresh returns a cluster's next status and its status info.
func Refresh(f Facts) (status, statusInfo string) {
	switch f.Status {
	case "", StatusInsufficient, StatusReady, StatusPendingForInput:
		if f.Imported {
			return StatusAddingHosts, InfoAddingHosts
		}
		s, info := byValidations(f.Validations)
		if s == StatusReady {
			g := f
			g.Status = StatusReady
			if StartInstall(g) {
				return StatusPreparingForInstallation, InfoPreparing
			}
		}
		return s, info
	case StatusPreparingForInstallation:
		return refreshPreparing(f)
	case StatusInstalling, StatusInstallingPendingUserAction:
		return refreshInstalling(f)
	case StatusFinalizing:
		if f.Installed {
			return StatusInstalled, InfoInstalled
		}
		return f.Status, keep(f, InfoFinalizing)
	case StatusInstalled:
		if f.Day2 && !f.SNO {
			return StatusAddingHosts, InfoAddingHosts
		}
		return f.Status, keep(f, InfoInstalled)
	case StatusAddingHosts:
		return f.Status, keep(f, InfoAddingHosts)
	}
	return f.Status, f.StatusInfo
}

func keep(f Facts, fallback string) string {
	if f.StatusInfo != "" {
		return f.StatusInfo
	}
	return fallback
}

// byValidations is the pre-install status: missing input first, then any
// other validation not succeeding, else ready. Without validations the
// cluster is not ready.
func byValidations(v validations.Results) (string, string) {
	if len(v) == 0 {
		return StatusInsufficient, InfoInsufficient
	}
	for _, id := range userInputIDs {
		if !v.Succeeded(id) {
			return StatusPendingForInput, InfoPendingForInput
		}
	}
	if len(v.NotSucceeded()) > 0 {
		return StatusInsufficient, InfoInsufficient
	}
	return StatusReady, InfoReady
}

// refreshPreparing: the install starts once the service prepared it and
// every host is preparing-successful (as upstream); a host that dropped
// out of the preparation sends the cluster back.
func refreshPreparing(f Facts) (string, string) {
	for _, h := range f.HostStatuses {
		switch h.Status {
		case hoststate.StatusDisconnected, hoststate.StatusInsufficient, hoststate.StatusPendingForInput,
			hoststate.StatusDiscovering, hoststate.StatusPreparingFailed:
			return StatusInsufficient, InfoUnpreparingHost
		}
	}
	if !f.PreparationDone {
		return f.Status, keep(f, InfoPreparing)
	}
	// Every host must have finished its own preparation: a host still
	// known when the cluster moved on would never be told to install. A
	// host whose Node already joined the installed cluster (the hub's
	// state was restored from a backup taken while it prepared) is past
	// it.
	for _, h := range f.HostStatuses {
		if h.Status != hoststate.StatusPreparingSuccessful && !joined(h) {
			return f.Status, keep(f, InfoPreparing)
		}
	}
	return StatusInstalling, InfoInstalling
}

// refreshInstalling: error when a control-plane host failed or too few
// workers are left; finalizing once every control-plane host joined;
// pending user action while a host waits for one.
//
// Only the hosts in the install count: a host still before its own
// install (discovering, known, insufficient, ...) while the cluster
// installs did not start it with the others and is never told to (it
// registered late, e.g. a stray boot of the discovery image or a late
// binding), so it neither holds nor fails the install.
func refreshInstalling(f Facts) (string, string) {
	hosts := inInstall(f.HostStatuses)
	if failed(hosts) {
		return StatusError, InfoError
	}
	pendingUser, joined, masters := false, true, 0
	for _, h := range hosts {
		if h.Status == hoststate.StatusInstallingPendingUserAction {
			pendingUser = true
		}
		if !controlPlane(h) {
			continue
		}
		masters++
		if h.Stage != assistedapi.StageJoined && h.Stage != assistedapi.StageDone && h.Status != hoststate.StatusInstalled {
			joined = false
		}
	}
	switch {
	case pendingUser:
		return StatusInstallingPendingUserAction, InfoInstallingPendingUser
	case joined && masters > 0:
		return StatusFinalizing, InfoFinalizing
	}
	return StatusInstalling, InfoInstalling
}

// inInstall are the hosts past their discovery: those the install took.
func inInstall(hosts []HostSummary) []HostSummary {
	var in []HostSummary
	for _, h := range hosts {
		switch h.Status {
		case hoststate.StatusDiscovering, hoststate.StatusKnown, hoststate.StatusDisconnected, hoststate.StatusInsufficient,
			hoststate.StatusPendingForInput, hoststate.StatusDisabled, hoststate.StatusBinding:
			continue
		}
		in = append(in, h)
	}
	return in
}

func controlPlane(h HostSummary) bool {
	return h.Bootstrap || h.Role == "master" || h.Role == "bootstrap" || h.Role == "arbiter"
}

// minWorkersLeft is how many workers must not fail (upstream wants two
// installing workers when there are workers at all).
const minWorkersLeft = 2

// failed tells whether the install failed: a control-plane host in error
// or cancelled, or fewer workers left than needed.
func failed(hosts []HostSummary) bool {
	workers, workersOK := 0, 0
	for _, h := range hosts {
		bad := h.Status == hoststate.StatusError || h.Status == hoststate.StatusCancelled
		if controlPlane(h) {
			if bad {
				return true
			}
			continue
		}
		workers++
		if !bad {
			workersOK++
		}
	}
	return workers > 0 && workersOK < min(workers, minWorkersLeft)
}

// StartInstall tells whether the service starts the installation now: the
// cluster is ready, as many hosts are registered, approved and ready as
// provisionRequirements ask, per role too, no Agent has a spec error and
// nothing holds the install.
func StartInstall(f Facts) bool {
	return f.Status == StatusReady && f.HostsRequired > 0 && f.HostsReady == f.HostsRequired &&
		f.RoleCountsMatch && f.UnsyncedAgents == 0 && f.UnapprovedAgents == 0 && !f.Held
}

// joined tells whether h's Node joined the installed cluster (stage
// Joined or Done).
func joined(h HostSummary) bool {
	return h.Stage == assistedapi.StageJoined || h.Stage == assistedapi.StageDone
}
