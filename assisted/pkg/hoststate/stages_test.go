package hoststate

import (
	"fmt"
	"slices"
	"testing"

	assistedapi "github.com/metalshift/metalshift/api/assisted/v2"
)

// Abbreviations of REFERENCE §4.
var abbrev = map[string]assistedapi.HostStage{
	"St": assistedapi.StageStartingInstallation, "In": assistedapi.StageInstalling, "Wr": assistedapi.StageWritingImageToDisk,
	"Cp": assistedapi.StageCopyingRegistryData, "WCP": assistedapi.StageWaitingForControlPlane, "WB": assistedapi.StageWaitingForBootkube,
	"WC": assistedapi.StageWaitingForController, "Rb": assistedapi.StageRebooting, "WI": assistedapi.StageWaitingForIgnition,
	"Cf": assistedapi.StageConfiguring, "J": assistedapi.StageJoined, "D": assistedapi.StageDone,
}

func order(names ...string) []assistedapi.HostStage {
	out := make([]assistedapi.HostStage, len(names))
	for i, n := range names {
		out[i] = abbrev[n]
	}
	return out
}

func TestStagesPerRole(t *testing.T) {
	for _, tc := range []struct {
		role           string
		bootstrap, sno bool
		want           []assistedapi.HostStage
	}{
		{"master", true, false, order("St", "In", "Wr", "Cp", "WCP", "WB", "WC", "Rb", "Cf", "J", "D")},
		{"bootstrap", false, false, order("St", "In", "Wr", "Cp", "WCP", "WB", "WC", "Rb", "Cf", "J", "D")},
		{"master", false, false, order("St", "In", "Wr", "Cp", "Rb", "Cf", "J", "D")},
		{"arbiter", false, false, order("St", "In", "Wr", "Cp", "Rb", "Cf", "J", "D")},
		{"worker", false, false, order("St", "In", "Wr", "WCP", "Rb", "WI", "Cf", "J", "D")},
		{"master", true, true, order("St", "In", "WB", "Wr", "Cp", "Rb", "J", "D")},
		{"master", false, true, order("St", "In", "WB", "Wr", "Cp", "Rb", "J", "D")},
		{"worker", false, true, order("St", "In", "Wr", "WCP", "Rb", "WI", "Cf", "J", "D")},
		{"auto-assign", false, false, nil},
	} {
		if got := Stages(tc.role, tc.bootstrap, tc.sno); !slices.Equal(got, tc.want) {
			t.Errorf("Stages(%s, %v, %v) = %v, want %v", tc.role, tc.bootstrap, tc.sno, got, tc.want)
		}
	}
}

// TestStageAllowedFollowsEachOrder walks every role's order: each stage may
// follow the one before and repeat itself, none may go back, Failed always.
func TestStageAllowedFollowsEachOrder(t *testing.T) {
	for _, r := range []struct {
		role           string
		bootstrap, sno bool
	}{{"master", true, false}, {"master", false, false}, {"arbiter", false, false}, {"worker", false, false}, {"master", true, true}} {
		stages := Stages(r.role, r.bootstrap, r.sno)
		prev := assistedapi.HostStage("")
		for i, s := range stages {
			if err := StageAllowed(r.role, r.bootstrap, r.sno, prev, s); err != nil {
				t.Errorf("%+v: %q after %q: %v", r, s, prev, err)
			}
			if err := StageAllowed(r.role, r.bootstrap, r.sno, s, s); err != nil {
				t.Errorf("%+v: repeating %q: %v", r, s, err)
			}
			if err := StageAllowed(r.role, r.bootstrap, r.sno, s, assistedapi.StageFailed); err != nil {
				t.Errorf("%+v: Failed after %q: %v", r, s, err)
			}
			if i > 0 {
				err := StageAllowed(r.role, r.bootstrap, r.sno, s, stages[i-1])
				want := fmt.Sprintf("Can't assign lower stage \"%s\" after host has been in stage \"%s\"", stages[i-1], s)
				if err == nil || err.Error() != want {
					t.Errorf("%+v: going back from %q: %v", r, s, err)
				}
			}
			prev = s
		}
	}
}

func TestStageAllowedRefused(t *testing.T) {
	for _, tc := range []struct {
		role           string
		bootstrap, sno bool
		current, next  assistedapi.HostStage
		want           string
	}{
		// The bootstrap master never waits for its ignition.
		{"master", true, false, assistedapi.StageRebooting, assistedapi.StageWaitingForIgnition,
			"Stages Waiting for ignition isn't available for host role master bootstrap true"},
		// Only the bootstrap master runs bootkube.
		{"master", false, false, assistedapi.StageInstalling, assistedapi.StageWaitingForBootkube,
			"Stages Waiting for bootkube isn't available for host role master bootstrap false"},
		{"worker", false, false, assistedapi.StageInstalling, assistedapi.StageCopyingRegistryData,
			"Stages Copying registry data to disk isn't available for host role worker bootstrap false"},
		{"master", true, true, assistedapi.StageRebooting, assistedapi.StageConfiguring,
			"Stages Configuring isn't available for host role master bootstrap true"},
		{"auto-assign", false, false, "", assistedapi.StageJoined,
			"Stages Joined isn't available for host role auto-assign bootstrap false"},
	} {
		err := StageAllowed(tc.role, tc.bootstrap, tc.sno, tc.current, tc.next)
		if err == nil || err.Error() != tc.want {
			t.Errorf("StageAllowed(%s, %v, %v, %q, %q) = %v, want %q", tc.role, tc.bootstrap, tc.sno, tc.current, tc.next, err, tc.want)
		}
	}
	// REFERENCE §4 puts Joined in the bootstrap order: the bootstrap master
	// joins as a normal master after its reboot.
	if err := StageAllowed("master", true, false, assistedapi.StageConfiguring, assistedapi.StageJoined); err != nil {
		t.Errorf("Joined after Configuring for the bootstrap master: %v", err)
	}
}

func TestPercentage(t *testing.T) {
	for _, tc := range []struct {
		role           string
		bootstrap, sno bool
		stage          assistedapi.HostStage
		want           int64
	}{
		{"master", false, false, "", 0},
		{"master", false, false, assistedapi.StageStartingInstallation, 12},
		{"master", false, false, assistedapi.StageRebooting, 62},
		{"master", false, false, assistedapi.StageDone, 100},
		{"master", true, false, assistedapi.StageConfiguring, 81},
		{"worker", false, false, assistedapi.StageWaitingForIgnition, 66},
		{"master", true, true, assistedapi.StageJoined, 87},
		{"worker", false, false, assistedapi.StageFailed, 0},
		{"worker", false, false, assistedapi.StageWaitingForBootkube, 0},
	} {
		if got := Percentage(tc.role, tc.bootstrap, tc.sno, tc.stage); got != tc.want {
			t.Errorf("Percentage(%s, %v, %v, %q) = %d, want %d", tc.role, tc.bootstrap, tc.sno, tc.stage, got, tc.want)
		}
	}
}
