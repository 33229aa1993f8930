package conditions

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/metalshift/metalshift/assisted/pkg/validations"
)

type row struct {
	status corev1.ConditionStatus
	reason string
}

var (
	passingV = validations.Results{"network": {{ID: "a", Status: "success", Message: "fine"}}}
	failingV = validations.Results{
		"network":       {{ID: "a", Status: "failure", Message: "The base domain is undefined and must be provided."}, {ID: "b", Status: "success", Message: "ok"}},
		"configuration": {{ID: "pull-secret-set", Status: "pending", Message: "waiting"}},
	}
)

func byType(conds []Cond) map[string]Cond {
	m := map[string]Cond{}
	for _, c := range conds {
		m[c.Type] = c
	}
	return m
}

func TestACITable(t *testing.T) {
	T, F, U := corev1.ConditionTrue, corev1.ConditionFalse, corev1.ConditionUnknown
	for _, tc := range []struct {
		status                                string
		held                                  bool
		requirements, completed, failed, stop row
	}{
		{"insufficient", false, row{F, "ClusterNotReady"}, row{F, "InstallationNotStarted"}, row{F, "InstallationNotFailed"}, row{F, "InstallationNotStopped"}},
		{"pending-for-input", false, row{F, "ClusterNotReady"}, row{F, "InstallationNotStarted"}, row{F, "InstallationNotFailed"}, row{F, "InstallationNotStopped"}},
		{"ready", false, row{T, "ClusterIsReady"}, row{F, "InstallationNotStarted"}, row{F, "InstallationNotFailed"}, row{F, "InstallationNotStopped"}},
		{"ready", true, row{T, "ClusterIsReady"}, row{F, "InstallationOnHold"}, row{F, "InstallationNotFailed"}, row{F, "InstallationNotStopped"}},
		{"preparing-for-installation", false, row{T, "ClusterAlreadyInstalling"}, row{F, "InstallationInProgress"}, row{F, "InstallationNotFailed"}, row{F, "InstallationNotStopped"}},
		{"installing", false, row{T, "ClusterAlreadyInstalling"}, row{F, "InstallationInProgress"}, row{F, "InstallationNotFailed"}, row{F, "InstallationNotStopped"}},
		{"finalizing", false, row{T, "ClusterAlreadyInstalling"}, row{F, "InstallationInProgress"}, row{F, "InstallationNotFailed"}, row{F, "InstallationNotStopped"}},
		{"installing-pending-user-action", false, row{T, "ClusterAlreadyInstalling"}, row{F, "InstallationInProgress"}, row{F, "InstallationNotFailed"}, row{F, "InstallationNotStopped"}},
		{"adding-hosts", false, row{T, "ClusterInstallationStopped"}, row{T, "InstallationCompleted"}, row{F, "InstallationNotFailed"}, row{T, "InstallationCompleted"}},
		{"installed", false, row{T, "ClusterInstallationStopped"}, row{T, "InstallationCompleted"}, row{F, "InstallationNotFailed"}, row{T, "InstallationCompleted"}},
		{"error", false, row{T, "ClusterInstallationStopped"}, row{F, "InstallationFailed"}, row{T, "InstallationFailed"}, row{T, "InstallationFailed"}},
		{"cancelled", false, row{U, "UnknownStatus"}, row{U, "UnknownStatus"}, row{F, "InstallationNotFailed"}, row{T, "InstallationCancelled"}},
	} {
		in := ACIInput{Status: tc.status, StatusInfo: "info", Held: tc.held, V: passingV, RequiredMasters: 3, Masters: 3}
		got := byType(ACI(in))
		for typ, want := range map[string]row{"RequirementsMet": tc.requirements, "Completed": tc.completed, "Failed": tc.failed, "Stopped": tc.stop} {
			if c := got[typ]; c.Status != want.status || c.Reason != want.reason {
				t.Errorf("%s (held %v) %s = %s %s, want %s %s", tc.status, tc.held, typ, c.Status, c.Reason, want.status, want.reason)
			}
		}
	}
}

func TestACIMessages(t *testing.T) {
	for _, tc := range []struct {
		in        ACIInput
		typ, want string
	}{
		{ACIInput{Status: "installing", StatusInfo: "Installation in progress"}, "Completed", "The installation is in progress: Installation in progress"},
		{ACIInput{Status: "error", StatusInfo: "cluster has hosts in error"}, "Completed", "The installation has failed: cluster has hosts in error"},
		{ACIInput{Status: "error", StatusInfo: "cluster has hosts in error"}, "Failed", "The installation failed: cluster has hosts in error"},
		{ACIInput{Status: "error"}, "Stopped", "The installation has stopped due to error"},
		{ACIInput{Status: "cancelled"}, "Stopped", "The installation has stopped because it was cancelled"},
		{ACIInput{Status: "cancelled"}, "Completed", "The installation status is currently not recognized: cancelled"},
		{ACIInput{Status: "insufficient"}, "Stopped", "The installation is waiting to start or in progress"},
		{ACIInput{Status: "ready", Held: true}, "Completed", "The installation is on hold. To unhold set holdInstallation to false"},
		{ACIInput{Status: "ready"}, "Completed", "The installation has not yet started"},
		{ACIInput{Status: "insufficient"}, "RequirementsMet", "The cluster is not ready to begin the installation"},
		{ACIInput{Status: "installing"}, "RequirementsMet", "The cluster requirements are met"},
		{ACIInput{Status: "insufficient", V: failingV}, "Validated", "The cluster's validations are failing: waiting,The base domain is undefined and must be provided."},
		{ACIInput{Status: "pending-for-input", V: failingV}, "Validated", "The cluster's validations are pending for user: waiting,The base domain is undefined and must be provided."},
		{ACIInput{Status: "ready"}, "Validated", "The cluster's validations have not yet been calculated"},
		{ACIInput{Status: "ready", V: passingV}, "Validated", "The cluster's validations are passing"},
		{ACIInput{Status: "adding-hosts"}, "Validated", "The cluster's validations are passing"},
	} {
		if c := byType(ACI(tc.in))[tc.typ]; c.Message != tc.want {
			t.Errorf("%s %s = %q, want %q", tc.in.Status, tc.typ, c.Message, tc.want)
		}
	}
}

func TestACIValidatedStatuses(t *testing.T) {
	for _, tc := range []struct {
		status string
		v      validations.Results
		want   row
	}{
		{"insufficient", failingV, row{corev1.ConditionFalse, "ValidationsFailing"}},
		{"pending-for-input", failingV, row{corev1.ConditionFalse, "ValidationsUserPending"}},
		{"ready", nil, row{corev1.ConditionUnknown, "ValidationsUnknown"}},
		{"installed", passingV, row{corev1.ConditionTrue, "ValidationsPassing"}},
	} {
		if c := byType(ACI(ACIInput{Status: tc.status, V: tc.v}))["Validated"]; c.Status != tc.want.status || c.Reason != tc.want.reason {
			t.Errorf("%s Validated = %s %s, want %+v", tc.status, c.Status, c.Reason, tc.want)
		}
	}
}

func TestACIReadySubCases(t *testing.T) {
	base := ACIInput{Status: "ready", V: passingV, RequiredMasters: 3, RequiredWorkers: 2, Masters: 3, Workers: 2}
	for _, tc := range []struct {
		name        string
		change      func(*ACIInput)
		reason, msg string
		status      corev1.ConditionStatus
	}{
		{"ready", func(*ACIInput) {}, "ClusterIsReady", "The cluster is ready to begin the installation", corev1.ConditionTrue},
		{"missing worker", func(in *ACIInput) { in.Workers = 1 }, "InsufficientAgents",
			"The cluster currently requires exactly 3 master agents, 0 arbiter agents and 2 worker agents, but currently registered 3 master agents, 0 arbiter agents and 1 worker agents", corev1.ConditionFalse},
		{"extra master", func(in *ACIInput) { in.Masters = 4; in.Unsynced = 1 }, "InsufficientAgents",
			"The cluster currently requires exactly 3 master agents, 0 arbiter agents and 2 worker agents, but currently registered 4 master agents, 0 arbiter agents and 2 worker agents", corev1.ConditionFalse},
		{"unsynced before unapproved", func(in *ACIInput) { in.Unsynced, in.Unapproved = 2, 1 }, "UnsyncedAgents",
			"The cluster currently has 2 agents with spec error", corev1.ConditionFalse},
		{"unapproved", func(in *ACIInput) { in.Unapproved = 1 }, "UnapprovedAgents",
			"The installation is pending on the approval of 1 agents", corev1.ConditionFalse},
	} {
		in := base
		tc.change(&in)
		c := byType(ACI(in))["RequirementsMet"]
		if c.Status != tc.status || c.Reason != tc.reason || c.Message != tc.msg {
			t.Errorf("%s: %+v", tc.name, c)
		}
	}
}

// TestACISeed is the seed's kubectl output for an installed cluster.
func TestACISeed(t *testing.T) {
	conds := append([]Cond{ACISpecSynced(nil, false)}, ACI(ACIInput{Status: "installed", StatusInfo: "Cluster is installed", V: passingV})...)
	var lines []string
	for _, c := range conds {
		lines = append(lines, c.Type+"\t"+c.Message)
	}
	want := strings.Join([]string{
		"SpecSynced\tThe Spec has been successfully applied",
		"Validated\tThe cluster's validations are passing",
		"RequirementsMet\tThe cluster installation stopped",
		"Completed\tThe installation has completed: Cluster is installed",
		"Failed\tThe installation has not failed",
		"Stopped\tThe installation has stopped because it completed successfully",
	}, "\n")
	if got := strings.Join(lines, "\n"); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestSpecSynced(t *testing.T) {
	err := errors.New("boom")
	for _, tc := range []struct {
		got  Cond
		want Cond
	}{
		{ACISpecSynced(nil, false), Cond{"SpecSynced", corev1.ConditionTrue, "SyncOK", "The Spec has been successfully applied"}},
		{ACISpecSynced(err, true), Cond{"SpecSynced", corev1.ConditionFalse, "InputError", "The Spec could not be synced due to an input error: boom"}},
		{ACISpecSynced(err, false), Cond{"SpecSynced", corev1.ConditionFalse, "BackendError", "The Spec could not be synced due to backend error: boom"}},
		{AgentSpecSynced(nil, false), Cond{"SpecSynced", corev1.ConditionTrue, "SyncOK", "The Spec has been successfully applied"}},
		{AgentSpecSynced(err, true), Cond{"SpecSynced", corev1.ConditionFalse, "InputError", "The Spec could not be synced due to an input error: boom"}},
		{AgentSpecSynced(err, false), Cond{"SpecSynced", corev1.ConditionFalse, "BackendError", "The Spec could not be synced due to backend error: boom"}},
	} {
		if tc.got != tc.want {
			t.Errorf("got %+v, want %+v", tc.got, tc.want)
		}
	}
}

func TestImageCreated(t *testing.T) {
	err := errors.New("bad nmstate")
	for _, tc := range []struct{ got, want Cond }{
		{ImageCreated(nil, false), Cond{"ImageCreated", corev1.ConditionTrue, "InfraEnvAvailable", "InfraEnv is available: Image has been created"}},
		{ImageCreated(err, true), Cond{"ImageCreated", corev1.ConditionFalse, "ImageCreationError", "Failed to create image: bad nmstate"}},
		{ImageCreated(err, false), Cond{"ImageCreated", corev1.ConditionFalse, "ImageCreationError", "Failed to create image due to an internal error: bad nmstate"}},
	} {
		if tc.got != tc.want {
			t.Errorf("got %+v, want %+v", tc.got, tc.want)
		}
	}
}
