package clusterstate

import (
	"github.com/metalshift/metalshift/assisted/pkg/hoststate"
)

// Weights of the install's phases in the total (upstream's).
const (
	weightPreparing  = 0.10
	weightInstalling = 0.70
)

// Progress is status.progress.totalPercentage while the hosts install:
// the preparation counts as done and the hosts' stages make the
// installing part, as upstream weighs them; 0 before any host reported a
// stage. Only the hosts in the install count (inInstall). Use ProgressFor to account for the cluster's status.
func Progress(hosts []HostSummary, sno bool) int64 {
	done, total, started := 0, 0, false
	for _, h := range inInstall(hosts) {
		stages := hoststate.Stages(h.Role, h.Bootstrap, sno)
		total += len(stages)
		for i, s := range stages {
			if s == h.Stage {
				done += i + 1
				started = true
				break
			}
		}
	}
	if !started || total == 0 {
		return 0
	}
	installing := int64(done * 100 / total)
	return int64(weightPreparing*100 + weightInstalling*float64(installing))
}

// ProgressFor is the total percentage of a cluster in status: 0 before the
// install, Progress while installing or finalizing, 100 once installed.
func ProgressFor(status string, hosts []HostSummary, sno bool) int64 {
	switch status {
	case StatusInstalled, StatusAddingHosts:
		return 100
	case StatusInstalling, StatusInstallingPendingUserAction, StatusFinalizing, StatusError, StatusCancelled:
		return Progress(hosts, sno)
	}
	return 0
}
