package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	ctrl "sigs.k8s.io/controller-runtime"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	assistedapi "github.com/metalshift/metalshift/api/assisted/v2"
	"github.com/metalshift/metalshift/assisted/pkg/hoststate"
	"github.com/metalshift/metalshift/assisted/pkg/installstate"
	"github.com/metalshift/metalshift/assisted/pkg/record"
)

func logf(ctx context.Context, msg string, kv ...any) { ctrl.LoggerFrom(ctx).Info(msg, kv...) }

// installRequest is the install step of a host whose install started; nil
// when its cluster's state is not there yet.
func (s *Server) installRequest(ctx context.Context, ie *agentinstallv1.InfraEnv, a *agentinstallv1.Agent) (*assistedapi.InstallCmdRequest, error) {
	c, err := record.ForAgent(ctx, s.opts.Client, a)
	if err != nil || c == nil {
		return nil, err
	}
	img, err := record.ImageSet(ctx, s.opts.Client, c)
	if err != nil {
		return nil, err
	}
	version := record.OpenshiftVersion(img.Spec.ReleaseImage)
	osImage, err := record.OSImage(ctx, s.opts.Client, version, ie.Spec.CpuArchitecture)
	if err != nil {
		return nil, err
	}
	role := record.Role(a)
	req := &assistedapi.InstallCmdRequest{
		ClusterID: c.ID(), HostID: a.Name, InfraEnvID: string(ie.UID), Role: role, BootDevice: installDisk(a),
		HighAvailabilityMode: assistedapi.HighAvailabilityFull, OpenshiftVersion: version, OSImage: osImage,
		Hostname: record.Hostname(a),
	}
	if c.SNO() {
		req.HighAvailabilityMode = assistedapi.HighAvailabilityNone
	}
	// A host whose installerArgs are wrong is not installed (its Agent
	// says why, and keeps the cluster from starting).
	if req.InstallerArgs, err = record.InstallerArgs(a); err != nil {
		return nil, err
	}
	req.IgnitionFileName = assistedapi.IgnitionFileName(role, a.Name)
	if a.Status.Bootstrap && !c.SNO() {
		req.Role = assistedapi.RoleBootstrap
		req.BootstrapIgnitionFileName = assistedapi.IgnitionFileName(assistedapi.RoleBootstrap, a.Name)
		req.ControlPlaneMasters = c.ACI.Spec.ProvisionRequirements.ControlPlaneAgents - 1
	}
	if req.BootDevice == "" {
		return nil, errors.New("the host has no installation disk")
	}
	return req, nil
}

// files serves a host's Ignition, file_name "<role>-<host id>.ign", to
// that host's credential only, and only while the host runs its install
// step up to its download (stages up to Installing): not before its
// install started, not once it wrote its disk. The bootstrap Ignition goes
// to the bootstrap host only.
func (s *Server) files(w http.ResponseWriter, r *http.Request) {
	name := r.URL.Query().Get("file_name")
	role, hostID, _ := strings.Cut(strings.TrimSuffix(name, ".ign"), "-")
	if !strings.HasSuffix(name, ".ign") || !validHostID(hostID) {
		apiError(w, http.StatusBadRequest, fmt.Sprintf("file_name %q: want <role>-<host id>.ign", name))
		return
	}
	_, a, ok := s.hostCredential(w, r, "", hostID)
	if !ok {
		return
	}
	if !downloading(a) {
		// The cache may not have the write that started the host's
		// install yet (its install step was handed out from a copy that
		// had it): the API's copy decides a refusal.
		fresh := &agentinstallv1.Agent{}
		if err := s.opts.APIReader.Get(r.Context(), agentKey(a), fresh); err != nil {
			apiError(w, http.StatusInternalServerError, err.Error())
			return
		}
		a = fresh
	}
	if stage := assistedapi.HostStage(a.Status.Progress.CurrentStage); preparing(record.State(a)) && fetchStage(stage) && stage != "" {
		// The host runs an install step the hub has no record of handing
		// out: the hub was restored from a backup taken while the install
		// was being prepared. The hub starts the host's install again
		// (its state moves to installing) and the download can go on
		// then: "not yet", not a refusal that would fail the install.
		w.Header().Set("Retry-After", strconv.Itoa(filesRetryAfter))
		apiError(w, http.StatusServiceUnavailable, fmt.Sprintf("host %s reports stage %q but its install has not started on the hub yet (state %q): try again",
			a.Name, stage, record.State(a)))
		return
	}
	if !downloading(a) {
		apiError(w, http.StatusConflict, fmt.Sprintf("host %s is not downloading its installation files (state %q, stage %q)",
			a.Name, record.State(a), a.Status.Progress.CurrentStage))
		return
	}
	ctx := r.Context()
	c, err := record.ForAgent(ctx, s.opts.Client, a)
	if err != nil || c == nil || c.ID() != r.PathValue("cluster") { // unbound since, or another cluster's path
		apiError(w, http.StatusNotFound, "the host is not bound to this cluster")
		return
	}
	data, err := s.renderIgnition(ctx, c, a, role)
	if err != nil {
		apiError(w, http.StatusConflict, err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/vnd.coreos.ignition+json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(data)
}

// downloading tells whether a's host may download its Ignition: it runs
// its install step, up to the download.
func downloading(a *agentinstallv1.Agent) bool {
	return installing(record.State(a)) && fetchStage(assistedapi.HostStage(a.Status.Progress.CurrentStage))
}

// filesRetryAfter is the pause, in seconds, a host asks again after for
// files its install is not started for yet.
const filesRetryAfter = 5

// preparing tells whether a host is in the install's preparation, from
// which the hub starts its install.
func preparing(state string) bool {
	return state == hoststate.StatusPreparingForInstallation || state == hoststate.StatusPreparingSuccessful
}

// fetchStage tells whether a host reporting stage may still download its
// Ignition: the agent fetches it in Installing, before it writes its disk.
func fetchStage(stage assistedapi.HostStage) bool {
	switch stage {
	case "", assistedapi.StageStartingInstallation, assistedapi.StageInstalling:
		return true
	}
	return false
}

func (s *Server) renderIgnition(ctx context.Context, c *record.Cluster, a *agentinstallv1.Agent, role string) ([]byte, error) {
	sec, err := record.InstallState(ctx, s.opts.Client, c.ACI)
	if err != nil {
		return nil, err
	}
	if sec == nil { // imported, or not started
		return s.importedIgnition(ctx, c, a, role)
	}
	st, err := installstate.FromData(sec.Data)
	if err != nil {
		return nil, err
	}
	img, err := record.ImageSet(ctx, s.opts.Client, c)
	if err != nil {
		return nil, err
	}
	version := record.OpenshiftVersion(img.Spec.ReleaseImage)
	domain := c.CD.Spec.ClusterName + "." + c.CD.Spec.BaseDomain
	var override []byte
	if a.Spec.IgnitionConfigOverrides != "" {
		override = []byte(a.Spec.IgnitionConfigOverrides)
	}
	switch {
	case role == assistedapi.RoleBootstrap && a.Status.Bootstrap:
		ps, err := record.PullSecret(ctx, s.opts.Client, c.CD.Namespace, c.CD.Spec.PullSecretRef)
		if err != nil {
			return nil, err
		}
		return installstate.HostIgnition(st, domain, "", true, false, ps, version, nil)
	case role != record.Role(a):
		return nil, fmt.Errorf("the host's role is %s, not %s", record.Role(a), role)
	case c.SNO() && a.Status.Bootstrap:
		ps, err := record.PullSecret(ctx, s.opts.Client, c.CD.Namespace, c.CD.Spec.PullSecretRef)
		if err != nil {
			return nil, err
		}
		return installstate.HostIgnition(st, domain, role, true, true, ps, version, override)
	default:
		return installstate.HostIgnition(st, domain, role, false, false, nil, version, override)
	}
}

// logs takes a host's logs upload (upstream's logs_type=host, with
// infra_env_id and host_id) with the credential of a host of that
// cluster, and drops it: the service keeps no files.
func (s *Server) logs(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	_, a, ok := s.hostCredential(w, r, q.Get("infra_env_id"), q.Get("host_id"))
	if !ok {
		return
	}
	c, err := record.ForAgent(r.Context(), s.opts.Client, a)
	if err != nil || c == nil || c.ID() != r.PathValue("cluster") {
		apiError(w, http.StatusNotFound, "the host is not bound to this cluster")
		return
	}
	if !drain(w, r) {
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
