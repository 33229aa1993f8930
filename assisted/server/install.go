package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	assistedapi "github.com/metalshift/metalshift/api/assisted/v2"
	hivev1 "github.com/metalshift/metalshift/api/hive/v1"
	hiveextv1 "github.com/metalshift/metalshift/api/hiveext/v1beta1"
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

// files serves a host's Ignition: file_name "<role>-<host id>.ign", with
// the X-Secret-Key of the host's InfraEnv.
func (s *Server) files(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	name := r.URL.Query().Get("file_name")
	role, rest, _ := strings.Cut(strings.TrimSuffix(name, ".ign"), "-")
	if !strings.HasSuffix(name, ".ign") || !validHostID(rest) {
		apiError(w, http.StatusBadRequest, fmt.Sprintf("file_name %q: want <role>-<host id>.ign", name))
		return
	}
	aci, err := s.clusterByID(ctx, r.PathValue("cluster"))
	if err != nil {
		apiError(w, http.StatusNotFound, "cluster not found")
		return
	}
	// The host's Agent is one of the cluster's (it may live in another
	// namespace than the cluster).
	a, err := s.clusterAgent(ctx, aci, rest)
	if err != nil {
		apiError(w, http.StatusNotFound, "host not found")
		return
	}
	ie := &agentinstallv1.InfraEnv{}
	if err := s.opts.Client.Get(ctx, types.NamespacedName{Namespace: a.Namespace, Name: a.Labels[agentinstallv1.InfraEnvNameLabel]}, ie); err != nil {
		apiError(w, http.StatusNotFound, "infra env not found")
		return
	}
	if assistedapi.VerifyAgentToken(s.opts.Key, string(ie.UID), r.Header.Get(assistedapi.AuthHeader)) != nil {
		apiError(w, http.StatusUnauthorized, "invalid or missing "+assistedapi.AuthHeader)
		return
	}
	c, err := record.ForAgent(ctx, s.opts.Client, a)
	if err != nil || c == nil || c.ACI.UID != aci.UID { // unbound since
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
	//nolint:gosec // not HTML: an iPXE script, an initrd or an Ignition config, with their content types
	_, _ = w.Write(data)
}

// clusterAgent returns the Agent named id among those bound to aci's
// ClusterDeployment.
func (s *Server) clusterAgent(ctx context.Context, aci *hiveextv1.AgentClusterInstall, id string) (*agentinstallv1.Agent, error) {
	cd := &hivev1.ClusterDeployment{}
	if err := s.opts.Client.Get(ctx, types.NamespacedName{Namespace: aci.Namespace, Name: aci.Spec.ClusterDeploymentRef.Name}, cd); err != nil {
		return nil, err
	}
	agents, err := record.Agents(ctx, s.opts.Client, cd)
	if err != nil {
		return nil, err
	}
	for i := range agents {
		if agents[i].Name == id {
			return &agents[i], nil
		}
	}
	return nil, fmt.Errorf("host %s is not bound to cluster %s", id, aci.UID)
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

func (s *Server) logs(w http.ResponseWriter, r *http.Request) {
	// Logs are accepted and dropped: the service keeps no files.
	if _, err := s.clusterByID(r.Context(), r.PathValue("cluster")); err != nil {
		if apierrors.IsNotFound(err) {
			apiError(w, http.StatusNotFound, "cluster not found")
			return
		}
	}
	w.WriteHeader(http.StatusNoContent)
}
