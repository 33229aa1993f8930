package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	assistedapi "github.com/metalshift/metalshift/api/assisted/v2"
	"github.com/metalshift/metalshift/assisted/pkg/hoststate"
	"github.com/metalshift/metalshift/assisted/pkg/record"
)

// maxBody bounds a request body (an inventory is a few KiB).
const maxBody = 4 << 20

func (s *Server) register(w http.ResponseWriter, r *http.Request) {
	ie, ok := s.infraEnv(w, r, r.PathValue("ie"))
	if !ok {
		return
	}
	var p assistedapi.HostCreateParams
	if err := json.NewDecoder(io.LimitReader(r.Body, maxBody)).Decode(&p); err != nil || !validHostID(p.HostID) {
		apiError(w, http.StatusBadRequest, "the body must be HostCreateParams with host_id a UUID")
		return
	}
	ctx := r.Context()
	key := types.NamespacedName{Namespace: ie.Namespace, Name: p.HostID}
	agent := &agentinstallv1.Agent{}
	err := s.opts.Client.Get(ctx, key, agent)
	switch {
	case apierrors.IsNotFound(err):
		agent = newAgent(ie, p.HostID)
		if err := s.opts.Client.Create(ctx, agent); err != nil && !apierrors.IsAlreadyExists(err) {
			apiError(w, http.StatusInternalServerError, err.Error())
			return
		}
		ctrl.LoggerFrom(ctx).Info("Host registered", "infraEnv", ie.Namespace+"/"+ie.Name, "agent", p.HostID)
	case err != nil:
		apiError(w, http.StatusInternalServerError, err.Error())
		return
	case agent.Labels[agentinstallv1.InfraEnvNameLabel] != ie.Name:
		apiError(w, http.StatusConflict, fmt.Sprintf("host %s belongs to another infra env", p.HostID))
		return
	}
	now := s.opts.Clock.Now()
	agent, err = s.updateAgent(ctx, key, func(a *agentinstallv1.Agent) bool {
		bound := a.Spec.ClusterDeploymentName != nil
		a.Status.DebugInfo.State = hoststate.Register(a.Status.DebugInfo.State, bound)
		a.Status.DebugInfo.StateInfo = ""
		if a.Status.Kind == "" {
			a.Status.Kind = assistedapi.KindHost
		}
		record.SetLastContact(a, now)
		return true
	})
	if err != nil {
		apiError(w, http.StatusInternalServerError, err.Error())
		return
	}
	h := s.host(ctx, ie, agent)
	h.NextStepRunnerCommand = &assistedapi.StepRunnerCommand{Command: "next-step-runner", RetrySeconds: int64(s.opts.PollInterval / time.Second)}
	writeJSON(w, http.StatusCreated, h)
}

// newAgent is the Agent of a host registering from ie's image.
func newAgent(ie *agentinstallv1.InfraEnv, hostID string) *agentinstallv1.Agent {
	labels := map[string]string{}
	for k, v := range ie.Spec.AgentLabels {
		labels[k] = v
	}
	labels[agentinstallv1.InfraEnvNameLabel] = ie.Name
	a := &agentinstallv1.Agent{
		ObjectMeta: metav1.ObjectMeta{Name: hostID, Namespace: ie.Namespace, Labels: labels,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: agentinstallv1.GroupVersion.String(), Kind: "InfraEnv", Name: ie.Name, UID: ie.UID,
			}}},
		Spec: agentinstallv1.AgentSpec{Role: agentinstallv1.HostRoleAutoAssign},
	}
	if ie.Spec.AgentApproval != nil && ie.Spec.AgentApproval.AutoApprove {
		a.Spec.Approved = true
	}
	if ref := ie.Spec.ClusterRef; ref != nil {
		a.Spec.ClusterDeploymentName = &agentinstallv1.ClusterReference{Name: ref.Name, Namespace: ref.Namespace}
	}
	return a
}

// host is the REST view of an Agent.
func (s *Server) host(ctx context.Context, ie *agentinstallv1.InfraEnv, a *agentinstallv1.Agent) assistedapi.Host {
	h := assistedapi.Host{ID: a.Name, InfraEnvID: string(ie.UID), Kind: a.Status.Kind, Status: a.Status.DebugInfo.State,
		StatusInfo: a.Status.DebugInfo.StateInfo, Role: record.Role(a), Bootstrap: a.Status.Bootstrap, RequestedHostname: record.Hostname(a)}
	if c, err := record.ForAgent(ctx, s.opts.Client, a); err == nil && c != nil {
		h.ClusterID = c.ID()
	}
	return h
}

// agent authenticates a host's request and returns its InfraEnv and Agent.
func (s *Server) agent(w http.ResponseWriter, r *http.Request) (*agentinstallv1.InfraEnv, *agentinstallv1.Agent, bool) {
	ie, ok := s.infraEnv(w, r, r.PathValue("ie"))
	if !ok {
		return nil, nil, false
	}
	a := &agentinstallv1.Agent{}
	if err := s.opts.Client.Get(r.Context(), types.NamespacedName{Namespace: ie.Namespace, Name: r.PathValue("host")}, a); err != nil {
		if apierrors.IsNotFound(err) {
			apiError(w, http.StatusNotFound, fmt.Sprintf("host %s not found", r.PathValue("host")))
		} else {
			apiError(w, http.StatusInternalServerError, err.Error())
		}
		return nil, nil, false
	}
	if a.Labels[agentinstallv1.InfraEnvNameLabel] != ie.Name {
		apiError(w, http.StatusNotFound, fmt.Sprintf("host %s not found in infra env %s", a.Name, r.PathValue("ie")))
		return nil, nil, false
	}
	return ie, a, true
}

// updateAgent applies change to the latest Agent's status and writes it
// when change says it changed something, retrying conflicts: the agent
// controller and other replicas write the same object. It returns the
// Agent as written.
func (s *Server) updateAgent(ctx context.Context, key types.NamespacedName, change func(*agentinstallv1.Agent) bool) (*agentinstallv1.Agent, error) {
	a := &agentinstallv1.Agent{}
	// A NotFound is retried too: an Agent just created may not be in the
	// cache yet.
	err := retry.OnError(retry.DefaultBackoff, func(err error) bool { return apierrors.IsConflict(err) || apierrors.IsNotFound(err) }, func() error {
		a = &agentinstallv1.Agent{}
		if err := s.opts.Client.Get(ctx, key, a); err != nil {
			return err
		}
		if !change(a) {
			return nil
		}
		return s.opts.Client.Status().Update(ctx, a)
	})
	return a, err
}

func (s *Server) instructions(w http.ResponseWriter, r *http.Request) {
	ie, a, ok := s.agent(w, r)
	if !ok {
		return
	}
	ctx := r.Context()
	now := s.opts.Clock.Now()
	if now.Sub(record.LastContact(a)) >= s.opts.HeartbeatEvery {
		if _, err := s.updateAgent(ctx, agentKey(a), func(a *agentinstallv1.Agent) bool {
			record.SetLastContact(a, now)
			return true
		}); err != nil {
			apiError(w, http.StatusInternalServerError, err.Error())
			return
		}
	}
	steps, err := s.plan(ctx, ie, a)
	if err != nil {
		apiError(w, http.StatusInternalServerError, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, steps)
}

func agentKey(a *agentinstallv1.Agent) types.NamespacedName {
	return types.NamespacedName{Namespace: a.Namespace, Name: a.Name}
}
