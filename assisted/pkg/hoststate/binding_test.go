package hoststate

import (
	"testing"

	assistedapi "github.com/metalshift/metalshift/api/assisted/v2"
)

// TestLateBinding walks a host of an InfraEnv without clusterRef through
// binding, unbinding and the reclaim of an installed host: each step is
// the refresh (or registration) of the status the step before left, with
// the Agent's clusterDeploymentName set or not.
func TestLateBinding(t *testing.T) {
	unboundKnown := Facts{Connected: true, HasInventory: true, Validations: passing()}
	type step struct {
		name       string
		register   bool // the agent registers again instead of a refresh
		bound      bool
		day2Host   bool
		stage      assistedapi.HostStage
		want, info string
	}
	const fresh, installing = StatusDiscoveringUnbound, StatusInstallingInProgress
	for name, tc := range map[string]struct {
		from  string
		steps []step
	}{
		"bind, unbind, bind elsewhere": {fresh, []step{
			{name: "discovered unbound", want: StatusKnownUnbound, info: InfoReadyToBeBound},
			{name: "bound", bound: true, want: StatusBinding, info: InfoBinding},
			{name: "still binding", bound: true, want: StatusBinding, info: InfoBinding},
			{name: "agent registers", register: true, bound: true, want: StatusDiscovering, info: InfoDiscovering},
			{name: "discovered in the cluster", bound: true, want: StatusKnown, info: InfoKnown},
			{name: "unbound", want: StatusUnbinding, info: InfoUnbinding},
			{name: "still unbinding", want: StatusUnbinding, info: InfoUnbinding},
			{name: "agent registers", register: true, want: StatusDiscoveringUnbound, info: InfoDiscovering},
			{name: "back in the InfraEnv", want: StatusKnownUnbound, info: InfoReadyToBeBound},
			{name: "bound to another", bound: true, want: StatusBinding, info: InfoBinding},
			{name: "agent registers", register: true, bound: true, want: StatusDiscovering, info: InfoDiscovering},
			{name: "known there", bound: true, want: StatusKnown, info: InfoKnown},
		}},
		"unbound while binding": {fresh, []step{
			{name: "bound", bound: true, want: StatusBinding, info: InfoBinding},
			{name: "unbound before the agent registered", want: StatusUnbinding, info: InfoUnbinding},
			{name: "rebound while unbinding: released first", bound: true, want: StatusUnbinding, info: InfoUnbinding},
			{name: "agent registers", register: true, bound: true, want: StatusDiscoveringUnbound, info: InfoDiscovering},
			{name: "then bound again", bound: true, want: StatusBinding, info: InfoBinding},
		}},
		"reclaim of an installed host": {installing, []step{
			{name: "installed", bound: true, stage: assistedapi.StageDone, want: StatusInstalled, info: "Done"},
			{name: "unbound", stage: assistedapi.StageDone, want: StatusUnbindingPendingUserAction, info: InfoUnbindingPendingUser},
			{name: "waits for the discovery image", stage: assistedapi.StageDone, want: StatusUnbindingPendingUserAction, info: InfoUnbindingPendingUser},
			{name: "booted from the ISO, registers", register: true, want: StatusDiscoveringUnbound, info: InfoDiscovering},
			{name: "back in the InfraEnv", want: StatusKnownUnbound, info: InfoReadyToBeBound},
		}},
		"day-1 host unbound mid-install stays": {installing, []step{
			{name: "installing", bound: true, stage: assistedapi.StageWritingImageToDisk, want: StatusInstallingInProgress, info: "Writing image to disk"},
			{name: "unbound anyway", stage: assistedapi.StageWritingImageToDisk, want: StatusInstallingInProgress, info: "Writing image to disk"},
		}},
		"day-2 host unbound mid-install": {installing, []step{
			{name: "installing", bound: true, day2Host: true, stage: assistedapi.StageRebooting, want: StatusInstallingInProgress, info: "Rebooting"},
			{name: "unbound", day2Host: true, stage: assistedapi.StageRebooting, want: StatusUnbindingPendingUserAction, info: InfoUnbindingPendingUser},
		}},
	} {
		t.Run(name, func(t *testing.T) {
			f := unboundKnown
			f.Status = tc.from
			for i, s := range tc.steps {
				f.Bound, f.Day2Host, f.Stage = s.bound, s.day2Host, s.stage
				f.ClusterStatus = ""
				if s.bound {
					f.ClusterStatus = "installing"
				}
				var got, info string
				if s.register {
					got, info = RegisterAt(f.Status, s.bound, s.stage, s.day2Host)
				} else {
					got, info = Refresh(f)
				}
				if got != s.want || info != s.info {
					t.Fatalf("step %d (%s) from %q: got %q %q, want %q %q", i, s.name, f.Status, got, info, s.want, s.info)
				}
				f.Status, f.StatusInfo = got, info
			}
		})
	}
}
