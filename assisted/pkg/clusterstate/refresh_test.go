package clusterstate

import (
	"testing"

	assistedapi "github.com/metalshift/metalshift/api/assisted/v2"
	"github.com/metalshift/metalshift/assisted/pkg/validations"
)

func allPassing() validations.Results {
	return validations.Cluster(validations.ClusterInput{
		MachineNetworks: []string{"192.168.111.0/24"}, ClusterNetworks: []string{"10.128.0.0/14"}, ServiceNetworks: []string{"172.30.0.0/16"},
		APIVIPs: []string{"192.168.111.5"}, IngressVIPs: []string{"192.168.111.4"}, BaseDomain: "example.com", PullSecretSet: true,
		Hosts: []validations.ClusterHost{{Role: "master", Status: "known"}, {Role: "master", Status: "known"}, {Role: "master", Status: "known"}},
	})
}

func ready() Facts {
	return Facts{Status: StatusReady, Validations: allPassing(), HostsReady: 3, HostsRequired: 3, RoleCountsMatch: true}
}

func hosts(stage assistedapi.HostStage, statuses ...string) []HostSummary {
	out := []HostSummary{{Role: "master", Bootstrap: true, Status: statuses[0], Stage: stage}}
	for _, s := range statuses[1:] {
		out = append(out, HostSummary{Role: "master", Status: s, Stage: stage})
	}
	return out
}

func TestRefresh(t *testing.T) {
	noPullSecret := allPassing()
	noPullSecret["configuration"][0].Status = "failure"
	notReadyHosts := allPassing()
	for i, r := range notReadyHosts["hosts-data"] {
		if r.ID == validations.IDAllHostsReadyToInstall {
			notReadyHosts["hosts-data"][i].Status = "failure"
		}
	}
	installing := func(h []HostSummary) Facts { return Facts{Status: StatusInstalling, HostStatuses: h} }
	for name, tc := range map[string]struct {
		f          Facts
		want, info string
	}{
		"new, nothing computed":   {Facts{}, StatusInsufficient, InfoInsufficient},
		"pull secret missing":     {Facts{Status: StatusInsufficient, Validations: noPullSecret}, StatusPendingForInput, InfoPendingForInput},
		"hosts not ready":         {Facts{Status: StatusReady, Validations: notReadyHosts}, StatusInsufficient, InfoInsufficient},
		"all pass, held":          {func() Facts { f := ready(); f.Held = true; return f }(), StatusReady, InfoReady},
		"all pass, unapproved":    {func() Facts { f := ready(); f.UnapprovedAgents = 1; return f }(), StatusReady, InfoReady},
		"all pass, starts":        {func() Facts { f := ready(); f.Status = StatusInsufficient; return f }(), StatusPreparingForInstallation, InfoPreparing},
		"preparing":               {Facts{Status: StatusPreparingForInstallation, HostStatuses: hosts("", "preparing-successful")}, StatusPreparingForInstallation, InfoPreparing},
		"prepared":                {Facts{Status: StatusPreparingForInstallation, PreparationDone: true, HostStatuses: hosts("", "preparing-successful")}, StatusInstalling, InfoInstalling},
		"a host not prepared yet": {Facts{Status: StatusPreparingForInstallation, PreparationDone: true, HostStatuses: hosts("", "preparing-successful", "known")}, StatusPreparingForInstallation, InfoPreparing},
		// The hub found the Node of a host it held preparing (its state
		// restored from a backup taken then): the install goes on.
		"prepared, a host joined already": {Facts{Status: StatusPreparingForInstallation, PreparationDone: true,
			HostStatuses: append(hosts("", "preparing-successful"), HostSummary{Role: "master", Status: "installing", Stage: assistedapi.StageDone})}, StatusInstalling, InfoInstalling},
		"host dropped out":    {Facts{Status: StatusPreparingForInstallation, HostStatuses: hosts("", "preparing-successful", "disconnected")}, StatusInsufficient, InfoUnpreparingHost},
		"installing":          {installing(hosts(assistedapi.StageWritingImageToDisk, "installing-in-progress", "installing-in-progress", "installing-in-progress")), StatusInstalling, InfoInstalling},
		"some masters joined": {installing(hosts(assistedapi.StageJoined, "installing-in-progress", "installing-in-progress", "installing")), StatusFinalizing, InfoFinalizing},
		"one master behind": {installing(append(hosts(assistedapi.StageJoined, "installing-in-progress", "installing-in-progress"),
			HostSummary{Role: "master", Status: "installing-in-progress", Stage: assistedapi.StageConfiguring})), StatusInstalling, InfoInstalling},
		"masters done, workers installing": {installing(append(hosts(assistedapi.StageDone, "installed", "installed", "installed"),
			HostSummary{Role: "worker", Status: "installing-in-progress", Stage: assistedapi.StageRebooting})), StatusFinalizing, InfoFinalizing},
		"master in error":    {installing(hosts(assistedapi.StageRebooting, "installing-in-progress", "error", "installing-in-progress")), StatusError, InfoError},
		"bootstrap in error": {installing(hosts(assistedapi.StageFailed, "error", "installing-in-progress", "installing-in-progress")), StatusError, InfoError},
		"one of three workers in error": {installing(append(hosts(assistedapi.StageJoined, "installing-in-progress", "installing-in-progress", "installing-in-progress"),
			HostSummary{Role: "worker", Status: "error"}, HostSummary{Role: "worker", Status: "installing-in-progress"}, HostSummary{Role: "worker", Status: "installing-in-progress"})), StatusFinalizing, InfoFinalizing},
		"two of three workers in error": {installing(append(hosts(assistedapi.StageJoined, "installing-in-progress", "installing-in-progress", "installing-in-progress"),
			HostSummary{Role: "worker", Status: "error"}, HostSummary{Role: "worker", Status: "error"}, HostSummary{Role: "worker", Status: "installing-in-progress"})), StatusError, InfoError},
		"only worker in error": {installing(append(hosts(assistedapi.StageJoined, "installing-in-progress", "installing-in-progress", "installing-in-progress"),
			HostSummary{Role: "worker", Status: "error"})), StatusError, InfoError},
		"pending user action": {installing(hosts(assistedapi.StageRebooting, "installing-in-progress", "installing-pending-user-action", "installing-in-progress")),
			StatusInstallingPendingUserAction, InfoInstallingPendingUser},
		"user acted": {Facts{Status: StatusInstallingPendingUserAction, HostStatuses: hosts(assistedapi.StageConfiguring, "installing-in-progress", "installing-in-progress", "installing-in-progress")},
			StatusInstalling, InfoInstalling},
		"sno joined": {Facts{Status: StatusInstalling, SNO: true, HostStatuses: hosts(assistedapi.StageJoined, "installing-in-progress")}, StatusFinalizing, InfoFinalizing},
		// A host that registered after the install started is not in it.
		"sno joined, a late known master": {Facts{Status: StatusInstalling, SNO: true, HostStatuses: append(hosts(assistedapi.StageJoined, "installing-in-progress"),
			HostSummary{Role: "master", Status: "known"}, HostSummary{Role: "master", Status: "disconnected"})}, StatusFinalizing, InfoFinalizing},
		"finalizing":               {Facts{Status: StatusFinalizing}, StatusFinalizing, InfoFinalizing},
		"finalizing → installed":   {Facts{Status: StatusFinalizing, Installed: true}, StatusInstalled, InfoInstalled},
		"installed":                {Facts{Status: StatusInstalled, Installed: true}, StatusInstalled, InfoInstalled},
		"installed → adding-hosts": {Facts{Status: StatusInstalled, Installed: true, Day2: true}, StatusAddingHosts, InfoAddingHosts},
		"sno stays installed":      {Facts{Status: StatusInstalled, Installed: true, Day2: true, SNO: true}, StatusInstalled, InfoInstalled},
		"adding-hosts stays":       {Facts{Status: StatusAddingHosts}, StatusAddingHosts, InfoAddingHosts},
		// An imported cluster takes hosts at once, whatever its validations.
		"imported":                   {Facts{Imported: true}, StatusAddingHosts, InfoAddingHosts},
		"imported, was insufficient": {Facts{Status: StatusInsufficient, Imported: true, Validations: validations.Results{"network": {{ID: "api-vips-defined", Status: "failure"}}}}, StatusAddingHosts, InfoAddingHosts},
		"imported single node":       {Facts{Status: StatusReady, Imported: true, SNO: true}, StatusAddingHosts, InfoAddingHosts},
		"imported stays":             {Facts{Status: StatusAddingHosts, Imported: true}, StatusAddingHosts, InfoAddingHosts},
		"error stays":                {Facts{Status: StatusError, StatusInfo: InfoError}, StatusError, InfoError},
		"cancelled stays":            {Facts{Status: StatusCancelled, StatusInfo: "x"}, StatusCancelled, "x"},
	} {
		t.Run(name, func(t *testing.T) {
			got, info := Refresh(tc.f)
			if got != tc.want || info != tc.info {
				t.Errorf("Refresh = %q %q, want %q %q", got, info, tc.want, tc.info)
			}
		})
	}
}

func TestStartInstall(t *testing.T) {
	for name, tc := range map[string]struct {
		f    Facts
		want bool
	}{
		"everything there":   {ready(), true},
		"held":               {func() Facts { f := ready(); f.Held = true; return f }(), false},
		"unapproved agent":   {func() Facts { f := ready(); f.UnapprovedAgents = 1; f.HostsReady = 2; return f }(), false},
		"missing agents":     {func() Facts { f := ready(); f.HostsReady = 2; return f }(), false},
		"extra agents":       {func() Facts { f := ready(); f.HostsReady = 4; return f }(), false},
		"roles differ":       {func() Facts { f := ready(); f.RoleCountsMatch = false; return f }(), false},
		"unsynced agent":     {func() Facts { f := ready(); f.UnsyncedAgents = 1; return f }(), false},
		"not ready":          {func() Facts { f := ready(); f.Status = StatusInsufficient; return f }(), false},
		"nothing required":   {func() Facts { f := ready(); f.HostsReady, f.HostsRequired = 0, 0; return f }(), false},
		"already installing": {func() Facts { f := ready(); f.Status = StatusInstalling; return f }(), false},
	} {
		if got := StartInstall(tc.f); got != tc.want {
			t.Errorf("%s: StartInstall = %v, want %v", name, got, tc.want)
		}
	}
}

func TestProgress(t *testing.T) {
	three := func(stage assistedapi.HostStage) []HostSummary {
		return []HostSummary{{Role: "master", Bootstrap: true, Stage: stage}, {Role: "master", Stage: stage}, {Role: "master", Stage: stage}}
	}
	if got := Progress(three(""), false); got != 0 {
		t.Errorf("before any stage = %d", got)
	}
	if got := Progress(three(assistedapi.StageDone), false); got != 80 {
		t.Errorf("all done = %d", got)
	}
	// 2 of 11 + 2×(2 of 8) = 6 of 27 stages: 22% of the installing 70%.
	if got := Progress(three(assistedapi.StageInstalling), false); got != 25 {
		t.Errorf("installing = %d", got)
	}
	if got := Progress([]HostSummary{{Role: "master", Bootstrap: true, Stage: assistedapi.StageJoined}}, true); got != 70 {
		t.Errorf("sno joined = %d", got)
	}
	if got := ProgressFor(StatusInstalled, three(assistedapi.StageJoined), false); got != 100 {
		t.Errorf("installed = %d", got)
	}
	if got := ProgressFor(StatusReady, nil, false); got != 0 {
		t.Errorf("ready = %d", got)
	}
	if got, want := ProgressFor(StatusFinalizing, three(assistedapi.StageDone), false), Progress(three(assistedapi.StageDone), false); got != want {
		t.Errorf("finalizing = %d, want %d", got, want)
	}
}
