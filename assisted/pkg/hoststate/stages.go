package hoststate

import (
	"fmt"
	"slices"

	assistedapi "github.com/metalshift/metalshift/api/assisted/v2"
)

// Stage orders per role (REFERENCE §4).
var (
	bootstrapStages = []assistedapi.HostStage{
		assistedapi.StageStartingInstallation, assistedapi.StageInstalling, assistedapi.StageWritingImageToDisk,
		assistedapi.StageCopyingRegistryData, assistedapi.StageWaitingForControlPlane, assistedapi.StageWaitingForBootkube,
		assistedapi.StageWaitingForController, assistedapi.StageRebooting, assistedapi.StageConfiguring,
		assistedapi.StageJoined, assistedapi.StageDone,
	}
	masterStages = []assistedapi.HostStage{
		assistedapi.StageStartingInstallation, assistedapi.StageInstalling, assistedapi.StageWritingImageToDisk,
		assistedapi.StageCopyingRegistryData, assistedapi.StageRebooting, assistedapi.StageConfiguring,
		assistedapi.StageJoined, assistedapi.StageDone,
	}
	workerStages = []assistedapi.HostStage{
		assistedapi.StageStartingInstallation, assistedapi.StageInstalling, assistedapi.StageWritingImageToDisk,
		assistedapi.StageWaitingForControlPlane, assistedapi.StageRebooting, assistedapi.StageWaitingForIgnition,
		assistedapi.StageConfiguring, assistedapi.StageJoined, assistedapi.StageDone,
	}
	snoStages = []assistedapi.HostStage{
		assistedapi.StageStartingInstallation, assistedapi.StageInstalling, assistedapi.StageWaitingForBootkube,
		assistedapi.StageWritingImageToDisk, assistedapi.StageCopyingRegistryData, assistedapi.StageRebooting,
		assistedapi.StageJoined, assistedapi.StageDone,
	}
)

// Stages returns the ordered stages of a host: the bootstrap master's (the
// single node's in SNO), a master's or arbiter's, a worker's; none for an
// unknown role.
func Stages(role string, bootstrap, sno bool) []assistedapi.HostStage {
	var list []assistedapi.HostStage
	switch {
	case sno && (bootstrap || role == "master" || role == "bootstrap"):
		list = snoStages
	case bootstrap || role == "bootstrap":
		list = bootstrapStages
	case role == "master" || role == "arbiter":
		list = masterStages
	case role == "worker":
		list = workerStages
	}
	return slices.Clone(list)
}

// StageAllowed says whether a host in stage current may report next:
// Failed always; otherwise next must be one of the role's stages and not
// before current (repeating current is fine).
func StageAllowed(role string, bootstrap, sno bool, current, next assistedapi.HostStage) error {
	if next == assistedapi.StageFailed {
		return nil
	}
	stages := Stages(role, bootstrap, sno)
	at := slices.Index(stages, next)
	if at < 0 {
		return fmt.Errorf("Stages %s isn't available for host role %s bootstrap %t", next, role, bootstrap)
	}
	if current != "" && current != assistedapi.StageFailed && at < slices.Index(stages, current) {
		return fmt.Errorf("Can't assign lower stage \"%s\" after host has been in stage \"%s\"", next, current) //nolint:staticcheck // upstream's text
	}
	return nil
}

// Percentage is a host's installationPercentage at stage: the share of its
// role's stages done, as upstream computes it; 0 before the first stage or
// for a stage outside the role's list.
func Percentage(role string, bootstrap, sno bool, stage assistedapi.HostStage) int64 {
	stages := Stages(role, bootstrap, sno)
	at := slices.Index(stages, stage)
	if at < 0 {
		return 0
	}
	return int64((at + 1) * 100 / len(stages))
}
