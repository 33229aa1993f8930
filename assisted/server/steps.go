package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	assistedapi "github.com/metalshift/metalshift/api/assisted/v2"
	"github.com/metalshift/metalshift/assisted/pkg/hoststate"
	"github.com/metalshift/metalshift/assisted/pkg/record"
)

// plan is what a host is asked to do now, from its status (the agent
// controller's) and its record: discovery checks until it installs, the
// install step once, then nothing.
func (s *Server) plan(ctx context.Context, ie *agentinstallv1.InfraEnv, a *agentinstallv1.Agent) (assistedapi.Steps, error) {
	steps := assistedapi.Steps{NextInstructionSeconds: int64(s.opts.PollInterval / time.Second), PostStepAction: assistedapi.PostStepContinue,
		Instructions: []assistedapi.Step{}}
	if steps.NextInstructionSeconds < 1 {
		steps.NextInstructionSeconds = 1
	}
	state := record.State(a)
	add := func(t assistedapi.StepType, arg any) {
		st := assistedapi.Step{StepType: t, StepID: fmt.Sprintf("%s-%s", t, randomID())}
		if arg != nil {
			data, _ := json.Marshal(arg)
			st.Args = []string{string(data)}
		}
		steps.Instructions = append(steps.Instructions, st)
	}
	switch state {
	case hoststate.StatusBinding, hoststate.StatusUnbinding, hoststate.StatusUnbindingPendingUserAction:
		// The agent registers again, into its new cluster or none.
		steps.PostStepAction = assistedapi.PostStepExit
		return steps, nil
	case hoststate.StatusInstalling:
		if a.Status.Progress.CurrentStage != "" {
			return steps, nil
		}
		req, err := s.installRequest(ctx, ie, a)
		if err != nil {
			return steps, err
		}
		if req != nil {
			add(assistedapi.StepInstall, req)
		}
		return steps, nil
	case hoststate.StatusPreparingForInstallation:
		if disk := installDisk(a); disk != "" && diskSpeed(a, disk) == nil {
			add(assistedapi.StepInstallationDiskSpeedCheck, assistedapi.DiskSpeedCheckRequest{Path: disk})
		}
		return steps, nil
	}
	if !discoveryState(state) {
		return steps, nil
	}
	add(assistedapi.StepInventory, nil)
	c, err := record.ForAgent(ctx, s.opts.Client, a)
	if err != nil {
		return steps, err
	}
	sources := append([]string(nil), ie.Spec.AdditionalNTPSources...)
	sources = append(sources, ie.Spec.NTPSources...)
	if c != nil {
		sources = append(sources, c.ACI.Spec.NTPSources...)
		domain := c.CD.Spec.ClusterName + "." + c.CD.Spec.BaseDomain
		add(assistedapi.StepDomainResolution, assistedapi.DomainResolutionRequest{Domains: []assistedapi.DomainResolutionRequestDomain{
			{DomainName: "api." + domain}, {DomainName: "api-int." + domain}, {DomainName: "console-openshift-console.apps." + domain},
		}})
	}
	add(assistedapi.StepNTPSynchronizer, assistedapi.NTPSynchronizationRequest{NTPSource: strings.Join(sources, ",")})
	return steps, nil
}

// discoveryState tells whether a host in state is discovering: before an
// install, it sends its inventory and checks.
func discoveryState(state string) bool {
	switch state {
	case hoststate.StatusDiscovering, hoststate.StatusDiscoveringUnbound, hoststate.StatusKnown, hoststate.StatusKnownUnbound,
		hoststate.StatusInsufficient, hoststate.StatusInsufficientUnbound, hoststate.StatusPendingForInput,
		hoststate.StatusDisconnected, hoststate.StatusDisconnectedUnbound, "":
		return true
	}
	return false
}

// installDisk is the path of the host's installation disk.
func installDisk(a *agentinstallv1.Agent) string {
	id := a.Status.InstallationDiskID
	for _, d := range a.Status.Inventory.Disks {
		if d.ID == id || d.Path == id {
			return d.Path
		}
	}
	return ""
}

// diskSpeed is the measured fsync time of the disk at path; nil when not measured.
func diskSpeed(a *agentinstallv1.Agent, path string) *int64 {
	for _, d := range a.Status.Inventory.Disks {
		if d.Path == path && d.IoPerf.SyncDurationMilliseconds > 0 {
			v := d.IoPerf.SyncDurationMilliseconds
			return &v
		}
	}
	return nil
}

func (s *Server) stepReply(w http.ResponseWriter, r *http.Request) {
	_, a, ok := s.agent(w, r)
	if !ok {
		return
	}
	var rep assistedapi.StepReply
	if !decode(w, r, &rep, "a StepReply") {
		return
	}
	ctx := r.Context()
	if rep.ExitCode != 0 {
		logf(ctx, "Step failed", "agent", a.Name, "step", rep.StepType, "exitCode", rep.ExitCode, "error", rep.Error)
		w.WriteHeader(http.StatusNoContent)
		return
	}
	var change func(*agentinstallv1.Agent) bool
	switch rep.StepType {
	case assistedapi.StepInventory:
		inv, err := assistedapi.ParseInventory([]byte(rep.Output))
		if err != nil {
			apiError(w, http.StatusBadRequest, "inventory: "+err.Error())
			return
		}
		if !discoveryState(record.State(a)) {
			// The hardware the install was planned with stays: a late or
			// unasked inventory changes nothing (the hostname the hub
			// expects the host's Node to have among others).
			logf(ctx, "Inventory ignored: the host is past discovery", "agent", a.Name, "state", record.State(a))
			w.WriteHeader(http.StatusNoContent)
			return
		}
		now := metav1.NewTime(s.opts.Clock.Now())
		change = func(a *agentinstallv1.Agent) bool { return record.SetInventory(a, inv, now) }
	case assistedapi.StepNTPSynchronizer:
		resp := &assistedapi.NTPSynchronizationResponse{}
		if err := json.Unmarshal([]byte(rep.Output), resp); err != nil {
			apiError(w, http.StatusBadRequest, "ntp-synchronizer: "+err.Error())
			return
		}
		change = func(a *agentinstallv1.Agent) bool { return record.SetNTPSources(a, resp.NTPSources) }
	case assistedapi.StepInstallationDiskSpeedCheck:
		resp := &assistedapi.DiskSpeedCheckResponse{}
		if err := json.Unmarshal([]byte(rep.Output), resp); err != nil {
			apiError(w, http.StatusBadRequest, "installation-disk-speed-check: "+err.Error())
			return
		}
		change = func(a *agentinstallv1.Agent) bool { return record.SetDiskSpeed(a, resp.Path, resp.IoSyncDuration) }
	case assistedapi.StepDomainResolution:
		resp := &assistedapi.DomainResolutionResponse{}
		if err := json.Unmarshal([]byte(rep.Output), resp); err != nil {
			apiError(w, http.StatusBadRequest, "domain-resolution: "+err.Error())
			return
		}
		if err := s.setDomainResolutions(ctx, a, record.DomainResolutions(resp)); err != nil {
			apiError(w, http.StatusInternalServerError, err.Error())
			return
		}
		w.WriteHeader(http.StatusNoContent)
		return
	case assistedapi.StepInstall:
		// The install wrote the disk and the host reboots into it: its
		// agent has nothing more to ask, and its credential ends.
		if installing(record.State(a)) {
			if err := s.endCredential(ctx, a); err != nil {
				apiError(w, http.StatusInternalServerError, err.Error())
				return
			}
			logf(ctx, "Host installed: its credential ended", "agent", a.Name)
		}
		w.WriteHeader(http.StatusNoContent)
		return
	default:
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if _, err := s.patchStatus(ctx, agentKey(a), change); err != nil {
		apiError(w, http.StatusInternalServerError, err.Error())
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// installing tells whether a host in state runs its install step.
func installing(state string) bool {
	return state == hoststate.StatusInstalling || state == hoststate.StatusInstallingInProgress
}

func (s *Server) progress(w http.ResponseWriter, r *http.Request) {
	_, a, ok := s.agent(w, r)
	if !ok {
		return
	}
	var p assistedapi.HostProgress
	if !decode(w, r, &p, "a HostProgress") {
		return
	}
	if p.CurrentStage == "" {
		apiError(w, http.StatusBadRequest, "the body must be a HostProgress with current_stage")
		return
	}
	ctx := r.Context()
	c, err := record.ForAgent(ctx, s.opts.Client, a)
	if err != nil {
		apiError(w, http.StatusInternalServerError, err.Error())
		return
	}
	if c == nil {
		apiError(w, http.StatusBadRequest, "the host is not bound to a cluster")
		return
	}
	role, bootstrap, sno := record.Role(a), a.Status.Bootstrap, c.SNO()
	if err := hoststate.StageAllowed(role, bootstrap, sno, assistedapi.HostStage(a.Status.Progress.CurrentStage), p.CurrentStage); err != nil {
		apiError(w, http.StatusBadRequest, err.Error())
		return
	}
	now := metav1.NewTime(s.opts.Clock.Now())
	if _, err := s.patchStatus(ctx, agentKey(a), func(a *agentinstallv1.Agent) bool {
		return record.SetStage(a, p.CurrentStage, p.ProgressInfo, hoststate.Stages(role, bootstrap, sno),
			hoststate.Percentage(role, bootstrap, sno, p.CurrentStage), now)
	}); err != nil {
		apiError(w, http.StatusInternalServerError, err.Error())
		return
	}
	logf(ctx, "Host progress", "agent", a.Name, "stage", p.CurrentStage)
	w.WriteHeader(http.StatusOK)
}

func (s *Server) logsProgress(w http.ResponseWriter, r *http.Request) {
	if _, _, ok := s.agent(w, r); !ok {
		return
	}
	if !drain(w, r) {
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// setDomainResolutions records a host's domain-resolution answers on its
// Agent (record.DomainResolutionsAnnotation) when they changed, with a
// merge patch of that one annotation: no conflict with status writers.
func (s *Server) setDomainResolutions(ctx context.Context, a *agentinstallv1.Agent, resolved map[string]bool) error {
	data, err := json.Marshal(resolved) // map keys sorted: equal answers, equal text
	if err != nil {
		return err
	}
	if a.Annotations[record.DomainResolutionsAnnotation] == string(data) {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{record.DomainResolutionsAnnotation: string(data)}}})
	if err != nil {
		return err
	}
	return s.opts.Client.Patch(ctx, a, client.RawPatch(types.MergePatchType, patch))
}
