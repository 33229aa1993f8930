package conditions

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/metalshift/metalshift/assisted/pkg/validations"
)

func TestAgentTable(t *testing.T) {
	T, F, U := corev1.ConditionTrue, corev1.ConditionFalse, corev1.ConditionUnknown
	for _, tc := range []struct {
		status             string
		approved           bool
		requirements, inst row
	}{
		{"known", true, row{T, "AgentIsReady"}, row{F, "InstallationNotStarted"}},
		{"known", false, row{F, "AgentIsNotApproved"}, row{F, "InstallationNotStarted"}},
		{"known-unbound", true, row{T, "AgentIsReady"}, row{F, "InstallationNotStarted"}},
		{"known-unbound", false, row{F, "AgentIsNotApproved"}, row{F, "InstallationNotStarted"}},
		{"discovering", true, row{F, "AgentNotReady"}, row{F, "InstallationNotStarted"}},
		{"discovering-unbound", true, row{F, "AgentNotReady"}, row{F, "InstallationNotStarted"}},
		{"insufficient", true, row{F, "AgentNotReady"}, row{F, "InstallationNotStarted"}},
		{"insufficient-unbound", true, row{F, "AgentNotReady"}, row{F, "InstallationNotStarted"}},
		{"disconnected", true, row{F, "AgentNotReady"}, row{F, "InstallationNotStarted"}},
		{"disconnected-unbound", true, row{F, "AgentNotReady"}, row{F, "InstallationNotStarted"}},
		{"pending-for-input", true, row{F, "AgentNotReady"}, row{F, "InstallationNotStarted"}},
		{"preparing-for-installation", true, row{T, "AgentAlreadyInstalling"}, row{F, "InstallationInProgress"}},
		{"preparing-successful", true, row{T, "AgentAlreadyInstalling"}, row{F, "InstallationInProgress"}},
		{"installing", true, row{T, "AgentAlreadyInstalling"}, row{F, "InstallationInProgress"}},
		{"installing-in-progress", true, row{T, "AgentAlreadyInstalling"}, row{F, "InstallationInProgress"}},
		{"installing-pending-user-action", true, row{T, "AgentAlreadyInstalling"}, row{F, "InstallationInProgress"}},
		{"installed", true, row{T, "AgentInstallationStopped"}, row{T, "InstallationCompleted"}},
		{"added-to-existing-cluster", true, row{T, "AgentInstallationStopped"}, row{T, "InstallationCompleted"}},
		{"error", true, row{T, "AgentInstallationStopped"}, row{F, "InstallationFailed"}},
		{"binding", true, row{F, "Binding"}, row{F, "Binding"}},
		{"unbinding", true, row{F, "Unbinding"}, row{F, "Unbinding"}},
		{"unbinding-pending-user-action", true, row{F, "Unbinding"}, row{F, "Unbinding"}},
		{"preparing-failed", true, row{U, "UnknownStatus"}, row{U, "UnknownStatus"}},
		{"cancelled", true, row{U, "UnknownStatus"}, row{U, "UnknownStatus"}},
		{"resetting", true, row{U, "UnknownStatus"}, row{U, "UnknownStatus"}},
		{"resetting-pending-user-action", true, row{U, "UnknownStatus"}, row{U, "UnknownStatus"}},
		{"reclaiming", true, row{U, "UnknownStatus"}, row{U, "UnknownStatus"}},
		{"reclaiming-rebooting", true, row{U, "UnknownStatus"}, row{U, "UnknownStatus"}},
		{"disabled", true, row{U, "UnknownStatus"}, row{U, "UnknownStatus"}},
		{"disabled-unbound", true, row{U, "UnknownStatus"}, row{U, "UnknownStatus"}},
	} {
		got := byType(Agent(tc.status, "info", tc.approved, "", passingV))
		for typ, want := range map[string]row{"RequirementsMet": tc.requirements, "Installed": tc.inst} {
			if c := got[typ]; c.Status != want.status || c.Reason != want.reason {
				t.Errorf("%s (approved %v) %s = %s %s, want %s %s", tc.status, tc.approved, typ, c.Status, c.Reason, want.status, want.reason)
			}
		}
	}
}

func TestAgentConnectedBoundValidated(t *testing.T) {
	T, F, U := corev1.ConditionTrue, corev1.ConditionFalse, corev1.ConditionUnknown
	for _, tc := range []struct {
		status                  string
		v                       validations.Results
		connected, bound, valid row
	}{
		{"known", passingV, row{T, "AgentIsConnected"}, row{T, "Bound"}, row{T, "ValidationsPassing"}},
		{"disconnected", passingV, row{F, "AgentIsDisconnected"}, row{T, "Bound"}, row{T, "ValidationsPassing"}},
		{"disconnected-unbound", passingV, row{F, "AgentIsDisconnected"}, row{F, "Unbound"}, row{T, "ValidationsPassing"}},
		{"known-unbound", passingV, row{T, "AgentIsConnected"}, row{F, "Unbound"}, row{T, "ValidationsPassing"}},
		{"discovering-unbound", nil, row{T, "AgentIsConnected"}, row{F, "Unbound"}, row{U, "ValidationsUnknown"}},
		{"insufficient", failingV, row{T, "AgentIsConnected"}, row{T, "Bound"}, row{F, "ValidationsFailing"}},
		{"insufficient-unbound", failingV, row{T, "AgentIsConnected"}, row{F, "Unbound"}, row{F, "ValidationsFailing"}},
		{"pending-for-input", failingV, row{T, "AgentIsConnected"}, row{T, "Bound"}, row{F, "ValidationsUserPending"}},
		{"binding", passingV, row{T, "AgentIsConnected"}, row{F, "Binding"}, row{F, "Binding"}},
		{"unbinding", passingV, row{T, "AgentIsConnected"}, row{F, "Unbinding"}, row{F, "Unbinding"}},
		{"unbinding-pending-user-action", passingV, row{T, "AgentIsConnected"}, row{F, "UnbindingPendingUserAction"}, row{F, "Unbinding"}},
		{"installing-in-progress", passingV, row{T, "AgentIsConnected"}, row{T, "Bound"}, row{T, "ValidationsPassing"}},
	} {
		got := byType(Agent(tc.status, "", true, "", tc.v))
		for typ, want := range map[string]row{"Connected": tc.connected, "Bound": tc.bound, "Validated": tc.valid} {
			if c := got[typ]; c.Status != want.status || c.Reason != want.reason {
				t.Errorf("%s %s = %s %s, want %s %s", tc.status, typ, c.Status, c.Reason, want.status, want.reason)
			}
		}
	}
}

func TestAgentMessages(t *testing.T) {
	for _, tc := range []struct {
		status, info, stage string
		v                   validations.Results
		typ, want           string
	}{
		{"installing-in-progress", "Configuring", "Configuring", passingV, "Installed", "The installation is in progress: Configuring"},
		{"preparing-successful", "Host finished successfully to prepare for installation", "", passingV, "Installed", "The installation is in progress: Host finished successfully to prepare for installation"},
		{"installed", "Done", "Done", passingV, "Installed", "The installation has completed: Done"},
		{"error", "Host is part of a cluster that failed to install", "Rebooting", passingV, "Installed", "The installation has failed: Host is part of a cluster that failed to install"},
		{"known", "", "", passingV, "Installed", "The installation has not yet started"},
		{"cancelled", "", "", passingV, "Installed", "The installation status is currently not recognized: cancelled"},
		{"insufficient", "", "", failingV, "Validated", "The agent's validations are failing: waiting,The base domain is undefined and must be provided."},
		{"pending-for-input", "", "", failingV, "Validated", "The agent's validations are pending for user: waiting,The base domain is undefined and must be provided."},
		{"known", "", "", nil, "Validated", "The agent's validations have not yet been calculated"},
		{"known", "", "", passingV, "RequirementsMet", "The agent is ready to begin the installation"},
		{"unbinding-pending-user-action", "", "", passingV, "Bound", "The agent is currently unbinding; Pending host reboot from infraenv image"},
		{"binding", "", "", passingV, "Bound", "The agent is currently binding to a cluster deployment"},
		{"known-unbound", "", "", passingV, "Bound", "The agent is not bound to any cluster deployment"},
		{"known", "", "", passingV, "Bound", "The agent is bound to a cluster deployment"},
		{"disconnected", "", "", passingV, "Connected", "The agent has not contacted the installation service in some time, user action should be taken"},
	} {
		if c := byType(Agent(tc.status, tc.info, true, tc.stage, tc.v))[tc.typ]; c.Message != tc.want {
			t.Errorf("%s %s = %q, want %q", tc.status, tc.typ, c.Message, tc.want)
		}
	}
}

// TestAgentSeed is the seed's kubectl output for an Agent while installing.
func TestAgentSeed(t *testing.T) {
	conds := append([]Cond{AgentSpecSynced(nil, false)}, Agent("installing-in-progress", "Configuring", true, "Configuring", passingV)...)
	var lines []string
	for _, c := range conds[:5] {
		lines = append(lines, c.Type+"\t"+c.Message)
	}
	want := strings.Join([]string{
		"SpecSynced\tThe Spec has been successfully applied",
		"Connected\tThe agent's connection to the installation service is unimpaired",
		"RequirementsMet\tInstallation already started and is in progress",
		"Validated\tThe agent's validations are passing",
		"Installed\tThe installation is in progress: Configuring",
	}, "\n")
	if got := strings.Join(lines, "\n"); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if conds[5].Type != "Bound" {
		t.Errorf("last condition %s", conds[5].Type)
	}
}

func TestAgentNotAvailable(t *testing.T) {
	for _, c := range AgentNotAvailable() {
		if c.Status != corev1.ConditionUnknown || c.Reason != "NotAvailable" || c.Message != "Information not available" {
			t.Errorf("%+v", c)
		}
	}
}
