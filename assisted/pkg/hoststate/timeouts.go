package hoststate

import (
	"fmt"
	"strings"
	"time"

	assistedapi "github.com/metalshift/metalshift/api/assisted/v2"
)

// Install timeouts (upstream's defaults). A host in installing that
// reports no stage within StartTimeout fails; a host in
// installing-in-progress fails when its current stage has had no report for
// longer than the stage's limit, except Rebooting, whose host waits for
// the user to fix its boot (installing-pending-user-action).
const (
	// StartTimeout is how long a host may stay in installing before it
	// reports its first stage.
	StartTimeout = 20 * time.Minute
	// DefaultStageTimeout is the limit of a stage not in
	// DefaultStageTimeouts.
	DefaultStageTimeout = 60 * time.Minute
	// SNORebootTimeout replaces Rebooting's limit for a single node, which
	// reboots into a cluster it bootstraps itself.
	SNORebootTimeout = 80 * time.Minute
)

// DefaultStageTimeouts are the limits of the stages that do not take
// DefaultStageTimeout.
var DefaultStageTimeouts = map[assistedapi.HostStage]time.Duration{
	assistedapi.StageStartingInstallation: 30 * time.Minute,
	assistedapi.StageWritingImageToDisk:   30 * time.Minute,
	assistedapi.StageRebooting:            40 * time.Minute,
	assistedapi.StageWaitingForIgnition:   24 * time.Hour,
}

// Texts of the timeouts' status infos (upstream's, with $STAGE, $MAX_TIME
// and $INSTALLATION_DISK filled in).
const (
	infoStageTimedOut        = "Host failed to install because its installation stage %s took longer than expected %s"
	infoWritingImageTimedOut = "Host failed to install because its installation stage %s did not sufficiently progress in the last %s."
	// InfoRebootTimedOut starts the status info of a host whose Rebooting
	// stage timed out; the installation disk follows.
	InfoRebootTimedOut    = "Host timed out when pulling the configuration files. Verify in the host console that the host boots from the OpenShift installation disk "
	infoRebootTimedOutEnd = " and has network access to the cluster API. The installation will resume after the host successfully boots and can access the cluster API"
)

// wrongBootStages are the stages whose timeout does not count while the
// cluster waits for the user to fix a host's boot: the other hosts wait for
// that one.
var wrongBootStages = map[assistedapi.HostStage]bool{
	assistedapi.StageWaitingForControlPlane: true, assistedapi.StageWaitingForController: true,
	assistedapi.StageWaitingForBootkube: true, assistedapi.StageRebooting: true,
}

// Timeouts are the limits of a host's install. Zero fields take the
// defaults above; Stages overrides single stages of DefaultStageTimeouts.
type Timeouts struct {
	// Start overrides StartTimeout.
	Start time.Duration
	// Stages are limits by stage, over DefaultStageTimeouts.
	Stages map[assistedapi.HostStage]time.Duration
	// Default overrides DefaultStageTimeout.
	Default time.Duration
	// SNOReboot overrides SNORebootTimeout.
	SNOReboot time.Duration
}

// Stage is the limit of stage for a host (a single node's when sno).
func (t Timeouts) Stage(stage assistedapi.HostStage, sno bool) time.Duration {
	if d, ok := t.Stages[stage]; ok && d > 0 {
		return d
	}
	if stage == assistedapi.StageRebooting && sno {
		return orDefault(t.SNOReboot, SNORebootTimeout)
	}
	if d, ok := DefaultStageTimeouts[stage]; ok {
		return d
	}
	return orDefault(t.Default, DefaultStageTimeout)
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// Clock is what a host's install timeout is measured from.
type Clock struct {
	Status string
	Stage  assistedapi.HostStage
	SNO    bool
	// ClusterStatus is the cluster's status.
	ClusterStatus string
	// StatusSince is when the host entered Status.
	StatusSince time.Time
	// StageSince is the current stage's last report (upstream counts from
	// it: a stage that reports progress, e.g. the percentage of the image
	// written, is not stuck).
	StageSince time.Time
	// HeldSince is when the stage's count was last held (Held): it counts
	// from the later of this and StageSince, so that a host that waited on
	// another's boot has its full limit once the wait ends.
	HeldSince time.Time
}

// Held tells whether the stage's count is held: the cluster waits for the
// user to fix a host's boot and this host, installing, waits in one of the
// stages that depend on it. Upstream counts such a stage again from the
// time the wait ends.
func Held(c Clock) bool {
	return (c.Status == StatusInstalling || c.Status == StatusInstallingInProgress) && c.ClusterStatus == clusterPendingUser && wrongBootStages[c.Stage]
}

// Deadline tells when a host times out and the limit that applies; ok is
// false when no limit does: the host is not installing, has finished or
// failed, its cluster waits for the user to fix a host's boot while it
// waits in one of the stages that depend on it, or the time to count from
// is unknown.
func (t Timeouts) Deadline(c Clock) (at time.Time, limit time.Duration, ok bool) {
	switch {
	case c.Stage == assistedapi.StageDone || c.Stage == assistedapi.StageFailed:
		return time.Time{}, 0, false
	case c.Status == StatusInstalling && c.Stage == "":
		if c.StatusSince.IsZero() {
			return time.Time{}, 0, false
		}
		limit = orDefault(t.Start, StartTimeout)
		return c.StatusSince.Add(limit), limit, true
	case c.Status != StatusInstalling && c.Status != StatusInstallingInProgress:
		return time.Time{}, 0, false
	case Held(c):
		return time.Time{}, 0, false
	case c.StageSince.IsZero():
		return time.Time{}, 0, false
	}
	limit = t.Stage(c.Stage, c.SNO)
	since := c.StageSince
	if c.HeldSince.After(since) {
		since = c.HeldSince
	}
	return since.Add(limit), limit, true
}

// TimedOut tells whether a host past its deadline at now has timed out
// (strictly after it, as upstream) and, when it has not, how long is left.
func TimedOut(at, now time.Time) (timedOut bool, left time.Duration) {
	if now.After(at) {
		return true, 0
	}
	return false, at.Sub(now)
}

// stageTimedOutInfo is the status info of a host whose stage took longer
// than limit.
func stageTimedOutInfo(stage assistedapi.HostStage, limit time.Duration) string {
	if stage == assistedapi.StageWritingImageToDisk {
		return fmt.Sprintf(infoWritingImageTimedOut, stage, limit)
	}
	if limit <= 0 {
		return strings.TrimSuffix(fmt.Sprintf(infoStageTimedOut, stage, ""), " ")
	}
	return fmt.Sprintf(infoStageTimedOut, stage, limit)
}

// rebootTimedOutInfo is the status info of a host whose Rebooting stage
// timed out; disk names its installation disk, "(name, id)".
func rebootTimedOutInfo(disk string) string {
	return InfoRebootTimedOut + disk + infoRebootTimedOutEnd
}

// timedStages are the stages that time out, by their name and by the name
// upstream's HOST_STAGE_<NAME>_TIMEOUT settings give them
// (WRITING_IMAGE_TO_DISK).
var timedStages = func() map[string]assistedapi.HostStage {
	m := map[string]assistedapi.HostStage{}
	for _, s := range []assistedapi.HostStage{
		assistedapi.StageStartingInstallation, assistedapi.StageWaitingForControlPlane, assistedapi.StageWaitingForBootkube,
		assistedapi.StageWaitingForController, assistedapi.StageInstalling, assistedapi.StageWritingImageToDisk,
		assistedapi.StageCopyingRegistryData, assistedapi.StageRebooting, assistedapi.StageWaitingForIgnition,
		assistedapi.StageConfiguring, assistedapi.StageJoined,
	} {
		m[strings.ToLower(string(s))] = s
		m[strings.ToLower(strings.ReplaceAll(string(s), " ", "_"))] = s
	}
	return m
}()

// ParseStageTimeouts reads stage limits given as stage name to duration
// ("Writing image to disk": "45m", or "WRITING_IMAGE_TO_DISK": "45m"; case
// does not matter).
func ParseStageTimeouts(in map[string]string) (map[assistedapi.HostStage]time.Duration, error) {
	out := map[assistedapi.HostStage]time.Duration{}
	for k, v := range in {
		s, ok := timedStages[strings.ToLower(strings.TrimSpace(k))]
		if !ok {
			return nil, fmt.Errorf("unknown host stage %q", k)
		}
		d, err := time.ParseDuration(strings.TrimSpace(v))
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("timeout of host stage %q: %q is not a positive duration", k, v)
		}
		out[s] = d
	}
	return out, nil
}
