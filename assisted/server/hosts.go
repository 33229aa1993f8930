package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	assistedapi "github.com/metalshift/metalshift/api/assisted/v2"
	"github.com/metalshift/metalshift/assisted/pkg/clusterstate"
	"github.com/metalshift/metalshift/assisted/pkg/record"
	"github.com/metalshift/metalshift/internal/shard"
)

func (s *Server) register(w http.ResponseWriter, r *http.Request) {
	ie, ok := s.infraEnv(w, r, r.PathValue("ie"))
	if !ok {
		return
	}
	var p assistedapi.HostCreateParams
	if !decode(w, r, &p, "HostCreateParams") {
		return
	}
	if !validHostID(p.HostID) {
		apiError(w, http.StatusBadRequest, "host_id must be a UUID")
		return
	}
	ctx := r.Context()
	now := s.opts.Clock.Now()
	proven, ok := s.hostProof(w, r, ie, now)
	if !ok {
		return
	}
	key := types.NamespacedName{Namespace: ie.Namespace, Name: p.HostID}
	agent, cred, ok := s.admit(w, r, ie, key, proven, now)
	if !ok {
		return
	}
	if proven != "" && agent.Annotations[registeredForHostAnnotation] != proven {
		if err := s.annotate(ctx, agent, registeredForHostAnnotation, proven); err != nil {
			apiError(w, http.StatusInternalServerError, err.Error())
			return
		}
	}
	// The registration and the contact are the service's to record (a new
	// host's Agent was created with them); the Agent reconciler applies
	// the registration to the host's state (record.State is that state
	// meanwhile).
	stamp := agent.DeepCopy()
	record.SetRegistered(stamp, now)
	record.SetLastContact(stamp, now)
	if agent.Annotations[record.RegisteredAnnotation] != stamp.Annotations[record.RegisteredAnnotation] {
		if err := s.annotate(ctx, agent, record.RegisteredAnnotation, stamp.Annotations[record.RegisteredAnnotation],
			record.LastContactAnnotation, stamp.Annotations[record.LastContactAnnotation]); err != nil {
			apiError(w, http.StatusInternalServerError, err.Error())
			return
		}
	}
	h := s.host(ctx, ie, agent)
	h.NextStepRunnerCommand = &assistedapi.StepRunnerCommand{Command: "next-step-runner", RetrySeconds: int64(s.opts.PollInterval / time.Second)}
	if cred != "" {
		w.Header().Set(assistedapi.HostKeyHeader, cred)
	}
	writeJSON(w, http.StatusCreated, h)
}

// admit decides a registration: a new host's Agent is created with a new
// credential, within the InfraEnv's cap; an existing host registers again
// with its credential, or, reclaimed, gets a new one. cred is the new
// credential, "" when the host keeps its own. It has answered the request
// when ok is false.
func (s *Server) admit(w http.ResponseWriter, r *http.Request, ie *agentinstallv1.InfraEnv, key types.NamespacedName, proven string, now time.Time) (a *agentinstallv1.Agent, cred string, ok bool) {
	ctx := r.Context()
	a, err := s.getAgent(ctx, key)
	if apierrors.IsNotFound(err) {
		if !s.acceptsNewHosts(w, r, ie, key.Name) {
			return nil, "", false
		}
		a, cred, err = s.create(ctx, w, ie, key.Name, proven, now)
		if err == nil {
			return a, cred, true
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, "", false // answered
		}
		// Registered in the meantime, by this host or another machine.
		a, err = s.getAgent(ctx, key)
	}
	switch {
	case err != nil:
		apiError(w, http.StatusInternalServerError, err.Error())
		return nil, "", false
	case a.Labels[agentinstallv1.InfraEnvNameLabel] != ie.Name:
		apiError(w, http.StatusConflict, fmt.Sprintf("host %s belongs to another infra env", key.Name))
		return nil, "", false
	}
	if held := r.Header.Get(assistedapi.HostKeyHeader); held != "" {
		ieID, hostID, err := assistedapi.ParseHostKey(s.opts.Key, held)
		if err != nil || ieID != string(ie.UID) || hostID != key.Name {
			apiError(w, http.StatusUnauthorized, "invalid "+assistedapi.HostKeyHeader+", or another host's")
			return nil, "", false
		}
		if a, err = s.checkCredential(ctx, a, held); err != nil {
			var ce credentialError
			if errors.As(err, &ce) {
				apiError(w, http.StatusUnauthorized, err.Error())
			} else {
				apiError(w, http.StatusInternalServerError, err.Error())
			}
			return nil, "", false
		}
		return a, "", true
	}
	if !reclaimable(a) {
		// The cache may lag behind an unbinding: ask the API before refusing.
		fresh := &agentinstallv1.Agent{}
		if err := s.opts.APIReader.Get(ctx, key, fresh); err != nil {
			apiError(w, http.StatusInternalServerError, err.Error())
			return nil, "", false
		}
		a = fresh
	}
	if !reclaimable(a) {
		msg := fmt.Sprintf("Host %s is registered already: registering it again needs its credential (%s), which this registration did not carry. "+
			"If this machine is the host and it booted the discovery image instead of its disk, fix its boot order; "+
			"if it restarted its discovery, delete Agent %s/%s to let it register anew", key.Name, assistedapi.HostKeyHeader, a.Namespace, a.Name)
		s.event(a, corev1.EventTypeWarning, ReasonRegistrationRefused, msg)
		apiError(w, http.StatusConflict, msg)
		return nil, "", false
	}
	a, cred, err = s.reclaim(ctx, ie, a)
	if err != nil {
		if apierrors.IsConflict(err) || errors.Is(err, errReclaimedElsewhere) {
			apiError(w, http.StatusConflict, fmt.Sprintf("host %s registered again at the same time from elsewhere", key.Name))
		} else {
			apiError(w, http.StatusInternalServerError, err.Error())
		}
		return nil, "", false
	}
	return a, cred, true
}

// installStarted are the states of a cluster whose install started and
// has not ended: it takes no new host (upstream's registration accepts a
// host only while the cluster is insufficient, ready, pending for input
// or adding hosts). Once installed, day 2 adds hosts as before.
var installStarted = map[string]bool{
	clusterstate.StatusPreparingForInstallation: true, clusterstate.StatusInstalling: true,
	clusterstate.StatusInstallingPendingUserAction: true, clusterstate.StatusFinalizing: true,
}

// acceptsNewHosts refuses, with 409 and upstream's message, a new host
// registering from an InfraEnv bound to a cluster being installed: a
// machine that booted the discovery image by mistake (a stray boot) would
// otherwise join a cluster it is not part of. It has answered the request
// when false.
func (s *Server) acceptsNewHosts(w http.ResponseWriter, r *http.Request, ie *agentinstallv1.InfraEnv, hostID string) bool {
	ctx := r.Context()
	c, err := record.ForAgent(ctx, s.opts.Client, newAgent(ie, hostID))
	if err != nil {
		apiError(w, http.StatusInternalServerError, err.Error())
		return false
	}
	if c == nil || !installStarted[c.State()] {
		return true
	}
	msg := "Host can register only in one of the following states: [insufficient ready pending-for-input adding-hosts]"
	ctrl.LoggerFrom(ctx).Info("Registration refused: the cluster is installing", "infraEnv", ie.Namespace+"/"+ie.Name,
		"agent", hostID, "cluster", c.CD.Namespace+"/"+c.CD.Name, "state", c.State())
	s.event(ie, corev1.EventTypeWarning, ReasonRegistrationRefused,
		fmt.Sprintf("Host %s registered while cluster %s is %s: refused (%s)", hostID, c.CD.Name, c.State(), msg))
	apiError(w, http.StatusConflict, msg)
	return false
}

// create creates the Agent of a new host, with its credential's hash (and
// the BareMetalHost its proof names, when proven) and its registration and
// contact at now (one write, where the stamp would be a patch of its own).
// It refuses when the InfraEnv has MaxAgentsPerInfraEnv Agents already. It
// has answered the request on an error other than AlreadyExists.
func (s *Server) create(ctx context.Context, w http.ResponseWriter, ie *agentinstallv1.InfraEnv, hostID, proven string, now time.Time) (*agentinstallv1.Agent, string, error) {
	agents := &agentinstallv1.AgentList{}
	if err := s.opts.Client.List(ctx, agents, client.InNamespace(ie.Namespace),
		client.MatchingLabels{agentinstallv1.InfraEnvNameLabel: ie.Name}); err != nil {
		apiError(w, http.StatusInternalServerError, err.Error())
		return nil, "", err
	}
	if n := len(agents.Items); n >= s.opts.MaxAgentsPerInfraEnv {
		err := fmt.Errorf("infra env %s/%s has %d Agents, the most the agent service registers for one InfraEnv: "+
			"delete the Agents of machines that are gone, or boot more machines from another InfraEnv", ie.Namespace, ie.Name, n)
		apiError(w, http.StatusForbidden, err.Error())
		return nil, "", err
	}
	cred, err := assistedapi.NewHostKey(s.opts.Key, string(ie.UID), hostID)
	if err != nil {
		apiError(w, http.StatusInternalServerError, err.Error())
		return nil, "", err
	}
	a := newAgent(ie, hostID)
	a.Annotations = map[string]string{hostCredentialAnnotation: assistedapi.HostKeyHash(cred)}
	if proven != "" {
		a.Annotations[registeredForHostAnnotation] = proven
	}
	record.SetRegistered(a, now)
	record.SetLastContact(a, now)
	if err := s.opts.Client.Create(ctx, a); err != nil {
		if !apierrors.IsAlreadyExists(err) {
			apiError(w, http.StatusInternalServerError, err.Error())
		}
		return nil, "", err
	}
	ctrl.LoggerFrom(ctx).Info("Host registered", "infraEnv", ie.Namespace+"/"+ie.Name, "agent", hostID)
	return a, cred, nil
}

// errReclaimedElsewhere: another registration reclaimed the host first.
var errReclaimedElsewhere = errors.New("reclaimed by another registration")

// reclaim gives a reclaimed host, registering again with the InfraEnv's
// key only, a new credential. The machine may be another one than the
// host that was installed: unless its InfraEnv approves every Agent, the
// Agent must be approved again. Each patch is conditional on the Agent's
// resource version, read from the API: of two machines registering at
// once, one wins (the other gets errReclaimedElsewhere).
func (s *Server) reclaim(ctx context.Context, ie *agentinstallv1.InfraEnv, a *agentinstallv1.Agent) (*agentinstallv1.Agent, string, error) {
	cred, err := assistedapi.NewHostKey(s.opts.Key, string(ie.UID), a.Name)
	if err != nil {
		return nil, "", err
	}
	seen := a.Annotations[hostCredentialAnnotation]
	autoApprove := ie.Spec.AgentApproval != nil && ie.Spec.AgentApproval.AutoApprove
	unapproved := false
	err = retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		cur := &agentinstallv1.Agent{}
		if err := s.opts.APIReader.Get(ctx, agentKey(a), cur); err != nil {
			return err
		}
		if cur.Annotations[hostCredentialAnnotation] != seen || !reclaimable(cur) {
			return errReclaimedElsewhere
		}
		change := map[string]any{"metadata": map[string]any{"resourceVersion": cur.ResourceVersion,
			"annotations": map[string]string{hostCredentialAnnotation: assistedapi.HostKeyHash(cred)}}}
		unapproved = cur.Spec.Approved && !autoApprove
		if unapproved {
			change["spec"] = map[string]any{"approved": false}
		}
		patch, err := json.Marshal(change)
		if err != nil {
			return err
		}
		a = cur
		return s.opts.Client.Patch(ctx, a, client.RawPatch(types.MergePatchType, patch))
	})
	if err != nil {
		return nil, "", err
	}
	msg := fmt.Sprintf("Host %s, unbound after its installation, registered again from its InfraEnv's discovery image: it has a new credential", a.Name)
	if unapproved {
		msg += " and must be approved again"
	}
	s.event(a, corev1.EventTypeNormal, ReasonReclaimRegistered, msg)
	return a, cred, nil
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
	shard.Propagate(ie, a)
	if ie.Spec.AgentApproval != nil && ie.Spec.AgentApproval.AutoApprove {
		a.Spec.Approved = true
	}
	// A clusterRef into another namespace binds nothing (the InfraEnv
	// controller reports it on the InfraEnv).
	if ref := ie.Spec.ClusterRef; ref != nil && record.InfraEnvClusterReference(ie) == nil {
		a.Spec.ClusterDeploymentName = &agentinstallv1.ClusterReference{Name: ref.Name, Namespace: ref.Namespace}
	}
	return a
}

// host is the REST view of an Agent.
func (s *Server) host(ctx context.Context, ie *agentinstallv1.InfraEnv, a *agentinstallv1.Agent) assistedapi.Host {
	h := assistedapi.Host{ID: a.Name, InfraEnvID: string(ie.UID), Kind: a.Status.Kind, Status: record.State(a),
		StatusInfo: a.Status.DebugInfo.StateInfo, Role: record.Role(a), Bootstrap: a.Status.Bootstrap, RequestedHostname: record.Hostname(a)}
	if h.Kind == "" {
		h.Kind = assistedapi.KindHost // status.kind until the Agent reconciler sets it
	}
	if record.PendingRegistration(a) != "" {
		h.StatusInfo = ""
	}
	if c, err := record.ForAgent(ctx, s.opts.Client, a); err == nil && c != nil {
		h.ClusterID = c.ID()
	}
	return h
}

// agent authenticates a host's call on an infra-envs/{ie}/hosts/{host}
// path with the host's credential and returns its InfraEnv and Agent.
func (s *Server) agent(w http.ResponseWriter, r *http.Request) (*agentinstallv1.InfraEnv, *agentinstallv1.Agent, bool) {
	return s.hostCredential(w, r, r.PathValue("ie"), r.PathValue("host"))
}

// patchStatus records in an Agent's status what its agent reported:
// change edits the Agent as the cache has it (an Agent just created is
// looked for again until it is there) and tells whether it changed
// anything; the change is written as a merge patch of the changed fields,
// the service's own (inventory, ntpSources, progress), with no
// resourceVersion: the Agent and AgentClusterInstall reconcilers write
// other fields of the same status meanwhile, and none of them conflicts
// with another. It returns the Agent as written.
func (s *Server) patchStatus(ctx context.Context, key types.NamespacedName, change func(*agentinstallv1.Agent) bool) (*agentinstallv1.Agent, error) {
	a := &agentinstallv1.Agent{}
	err := retry.OnError(retry.DefaultBackoff, apierrors.IsNotFound, func() error {
		return s.opts.Client.Get(ctx, key, a)
	})
	if err != nil {
		return nil, err
	}
	before := a.DeepCopy()
	if !change(a) {
		return a, nil
	}
	return a, s.opts.Client.Status().Patch(ctx, a, client.MergeFrom(before))
}

func (s *Server) instructions(w http.ResponseWriter, r *http.Request) {
	ie, a, ok := s.agent(w, r)
	if !ok {
		return
	}
	ctx := r.Context()
	now := s.opts.Clock.Now()
	if now.Sub(record.LastContact(a)) >= s.opts.HeartbeatEvery {
		stamp := a.DeepCopy()
		record.SetLastContact(stamp, now)
		if err := s.annotate(ctx, a, record.LastContactAnnotation, stamp.Annotations[record.LastContactAnnotation]); err != nil {
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
