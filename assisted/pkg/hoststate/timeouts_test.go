package hoststate

import (
	"testing"
	"time"

	assistedapi "github.com/metalshift/metalshift/api/assisted/v2"
)

// TestStageTimeouts: upstream's limits by stage, the single node's longer
// reboot, and overrides of single stages.
func TestStageTimeouts(t *testing.T) {
	var def Timeouts
	for _, tc := range []struct {
		stage assistedapi.HostStage
		sno   bool
		want  time.Duration
	}{
		{assistedapi.StageStartingInstallation, false, 30 * time.Minute},
		{assistedapi.StageInstalling, false, 60 * time.Minute},
		{assistedapi.StageWritingImageToDisk, false, 30 * time.Minute},
		{assistedapi.StageWaitingForControlPlane, false, 60 * time.Minute},
		{assistedapi.StageRebooting, false, 40 * time.Minute},
		{assistedapi.StageRebooting, true, 80 * time.Minute},
		{assistedapi.StageWaitingForIgnition, false, 24 * time.Hour},
		{assistedapi.StageConfiguring, false, 60 * time.Minute},
		{assistedapi.StageJoined, false, 60 * time.Minute},
		{assistedapi.StageCopyingRegistryData, false, 60 * time.Minute},
	} {
		if got := def.Stage(tc.stage, tc.sno); got != tc.want {
			t.Errorf("Stage(%q, sno %t) = %s, want %s", tc.stage, tc.sno, got, tc.want)
		}
	}
	custom := Timeouts{Stages: map[assistedapi.HostStage]time.Duration{assistedapi.StageRebooting: time.Minute}, Default: 2 * time.Minute}
	if got := custom.Stage(assistedapi.StageRebooting, true); got != time.Minute {
		t.Errorf("overridden Rebooting = %s, want 1m", got)
	}
	if got := custom.Stage(assistedapi.StageJoined, false); got != 2*time.Minute {
		t.Errorf("Joined with Default 2m = %s", got)
	}
	if got := custom.Stage(assistedapi.StageWritingImageToDisk, false); got != 30*time.Minute {
		t.Errorf("a stage not overridden keeps upstream's limit, got %s", got)
	}
}

// TestDeadline is the timing decision on a fake timeline: which hosts are
// held to a limit, counted from when, and when they are past it.
func TestDeadline(t *testing.T) {
	t0 := time.Date(2025, 6, 2, 12, 0, 0, 0, time.UTC)
	inStage := func(stage assistedapi.HostStage, at time.Time) Clock {
		return Clock{Status: StatusInstallingInProgress, Stage: stage, ClusterStatus: "installing", StageSince: at, StatusSince: t0}
	}
	for name, tc := range map[string]struct {
		c      Clock
		ok     bool
		at     time.Time
		limit  time.Duration
		timing Timeouts
	}{
		"installing, no stage":      {c: Clock{Status: StatusInstalling, StatusSince: t0}, ok: true, at: t0.Add(20 * time.Minute), limit: 20 * time.Minute},
		"installing, custom start":  {c: Clock{Status: StatusInstalling, StatusSince: t0}, ok: true, at: t0.Add(time.Minute), limit: time.Minute, timing: Timeouts{Start: time.Minute}},
		"installing, since unknown": {c: Clock{Status: StatusInstalling}},
		"writing image, from its last report": {c: inStage(assistedapi.StageWritingImageToDisk, t0.Add(5*time.Minute)), ok: true,
			at: t0.Add(35 * time.Minute), limit: 30 * time.Minute},
		"first stage while still installing": {c: Clock{Status: StatusInstalling, Stage: assistedapi.StageStartingInstallation, StageSince: t0}, ok: true,
			at: t0.Add(30 * time.Minute), limit: 30 * time.Minute},
		"sno reboot": {c: func() Clock { c := inStage(assistedapi.StageRebooting, t0); c.SNO = true; return c }(), ok: true,
			at: t0.Add(80 * time.Minute), limit: 80 * time.Minute},
		"waiting while the cluster waits for the user": {c: func() Clock {
			c := inStage(assistedapi.StageWaitingForControlPlane, t0)
			c.ClusterStatus = "installing-pending-user-action"
			return c
		}()},
		"after a hold, from its end": {c: func() Clock {
			c := inStage(assistedapi.StageWaitingForControlPlane, t0)
			c.HeldSince = t0.Add(2 * time.Hour)
			return c
		}(), ok: true, at: t0.Add(3 * time.Hour), limit: time.Hour},
		"a hold before the stage's last report": {c: func() Clock {
			c := inStage(assistedapi.StageWritingImageToDisk, t0)
			c.HeldSince = t0.Add(-time.Hour)
			return c
		}(), ok: true, at: t0.Add(30 * time.Minute), limit: 30 * time.Minute},
		"configuring while the cluster waits for the user": {c: func() Clock {
			c := inStage(assistedapi.StageConfiguring, t0)
			c.ClusterStatus = "installing-pending-user-action"
			return c
		}(), ok: true, at: t0.Add(time.Hour), limit: time.Hour},
		"done":                {c: inStage(assistedapi.StageDone, t0)},
		"failed":              {c: inStage(assistedapi.StageFailed, t0)},
		"stage without times": {c: inStage(assistedapi.StageConfiguring, time.Time{})},
		"pending user action": {c: func() Clock {
			c := inStage(assistedapi.StageRebooting, t0)
			c.Status = StatusInstallingPendingUserAction
			return c
		}()},
		"error": {c: func() Clock { c := inStage(assistedapi.StageConfiguring, t0); c.Status = StatusError; return c }()},
		"known": {c: Clock{Status: StatusKnown, StatusSince: t0}},
	} {
		t.Run(name, func(t *testing.T) {
			at, limit, ok := tc.timing.Deadline(tc.c)
			if ok != tc.ok || !at.Equal(tc.at) || limit != tc.limit {
				t.Errorf("Deadline = %s %s %t, want %s %s %t", at, limit, ok, tc.at, tc.limit, tc.ok)
			}
		})
	}
	held := Clock{Status: StatusInstallingInProgress, Stage: assistedapi.StageWaitingForBootkube, ClusterStatus: "installing-pending-user-action"}
	if !Held(held) {
		t.Error("Waiting for bootkube is held while the cluster waits for the user")
	}
	for _, c := range []Clock{
		{Status: StatusInstallingInProgress, Stage: assistedapi.StageWaitingForBootkube, ClusterStatus: "installing"},
		{Status: StatusInstallingInProgress, Stage: assistedapi.StageConfiguring, ClusterStatus: "installing-pending-user-action"},
		{Status: StatusInstallingPendingUserAction, Stage: assistedapi.StageRebooting, ClusterStatus: "installing-pending-user-action"},
	} {
		if Held(c) {
			t.Errorf("%+v is held", c)
		}
	}

	// Past the deadline only strictly after it; before, the time left.
	at := t0.Add(30 * time.Minute)
	for _, tc := range []struct {
		now  time.Time
		over bool
		left time.Duration
	}{
		{t0, false, 30 * time.Minute},
		{at.Add(-time.Second), false, time.Second},
		{at, false, 0},
		{at.Add(time.Nanosecond), true, 0},
		{at.Add(time.Hour), true, 0},
	} {
		if over, left := TimedOut(at, tc.now); over != tc.over || left != tc.left {
			t.Errorf("TimedOut at %s = %t %s, want %t %s", tc.now.Sub(t0), over, left, tc.over, tc.left)
		}
	}
}

// TestParseStageTimeouts reads stage names and upstream's setting names.
func TestParseStageTimeouts(t *testing.T) {
	got, err := ParseStageTimeouts(map[string]string{"Writing image to disk": "45m", "REBOOTING": "1h", "waiting_for_ignition": "2h"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[assistedapi.HostStage]time.Duration{assistedapi.StageWritingImageToDisk: 45 * time.Minute,
		assistedapi.StageRebooting: time.Hour, assistedapi.StageWaitingForIgnition: 2 * time.Hour}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %s, want %s", k, got[k], v)
		}
	}
	for _, bad := range []map[string]string{{"Done": "1m"}, {"Flying": "1m"}, {"Rebooting": "soon"}, {"Rebooting": "-1m"}, {"Rebooting": "0s"}} {
		if _, err := ParseStageTimeouts(bad); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}
