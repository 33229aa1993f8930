package server

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	assistedapi "github.com/metalshift/metalshift/api/assisted/v2"
	"github.com/metalshift/metalshift/assisted/pkg/hoststate"
	"github.com/metalshift/metalshift/assisted/pkg/record"
)

// Host credentials. The InfraEnv's key (X-Secret-Key, in every copy of its
// image) only registers hosts. Registering a new host mints the host's
// credential (assistedapi.NewHostKey), answered once in
// assistedapi.HostKeyHeader; the Agent keeps its SHA-256 in
// hostCredentialAnnotation. Every other call of the host's agent sends it.
// It ends when the Agent is deleted, when the host's install step
// succeeded (the annotation then says credentialEnded) and while the host
// is installed; a host whose install is over registers again without it
// only once a person unbound it (reclaim), which mints a new one.
const (
	hostCredentialAnnotation    = agentinstallv1.AgentHostCredentialAnnotation
	credentialEnded             = agentinstallv1.AgentHostCredentialEnded
	registeredForHostAnnotation = agentinstallv1.AgentRegisteredForHostAnnotation
)

// Reasons of the Events the service records on Agents about credentials.
const (
	// ReasonRegistrationRefused: a registration of an existing host came
	// without the host's credential.
	ReasonRegistrationRefused = "RegistrationRefused"
	// ReasonReclaimRegistered: a reclaimed host registered again with the
	// InfraEnv's key: it has a new credential and must be approved again.
	ReasonReclaimRegistered = "ReclaimRegistered"
)

// Body caps, per endpoint: what a well-behaved agent sends is far below
// them. A larger body is refused with 413 before it is read further.
const (
	maxSmallBody     = 16 << 10  // registration, progress, logs-progress, manual boot
	maxStepReplyBody = 256 << 10 // a step reply; its inventory is capped apart (assistedapi.MaxInventoryBytes)
	maxLogsBody      = 8 << 20   // a logs upload, read and dropped
)

// limit caps the body of the requests h serves at n bytes.
func limit(n int64, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > n {
			apiError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("the body has %d bytes, at most %d", r.ContentLength, n))
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, n)
		h(w, r)
	}
}

// decode reads a JSON body into v; it has answered the request (400, or
// 413 past the cap) when ok is false. what names the expected body.
func decode(w http.ResponseWriter, r *http.Request, v any, what string) bool {
	err := json.NewDecoder(r.Body).Decode(v)
	if err == nil {
		return true
	}
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		apiError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("the body is larger than %d bytes", tooLarge.Limit))
		return false
	}
	apiError(w, http.StatusBadRequest, "the body must be "+what+": "+err.Error())
	return false
}

// credentialError is why a host credential is refused, answered 401.
type credentialError string

func (e credentialError) Error() string { return string(e) }

const errNoCredential = credentialError("this call needs the host's credential (" + assistedapi.HostKeyHeader +
	"), which the host's registration answered; the InfraEnv's " + assistedapi.AuthHeader + " only registers hosts")

// hostCredential authenticates a host's call: the credential's signature
// first (nothing is read for a forged one), then that it was minted for
// wantIE and wantHost when they are given, then the Agent: it must exist
// in the credential's InfraEnv, hold the credential's hash, and not be done
// with its install. It returns the InfraEnv and the Agent, or has answered
// the request (401; 404 when the Agent is gone, which makes the agent
// register again; 500).
func (s *Server) hostCredential(w http.ResponseWriter, r *http.Request, wantIE, wantHost string) (*agentinstallv1.InfraEnv, *agentinstallv1.Agent, bool) {
	cred := r.Header.Get(assistedapi.HostKeyHeader)
	if cred == "" {
		apiError(w, http.StatusUnauthorized, errNoCredential.Error())
		return nil, nil, false
	}
	ieID, hostID, err := assistedapi.ParseHostKey(s.opts.Key, cred)
	if err != nil {
		apiError(w, http.StatusUnauthorized, "invalid "+assistedapi.HostKeyHeader)
		return nil, nil, false
	}
	if (wantIE != "" && ieID != wantIE) || (wantHost != "" && hostID != wantHost) {
		apiError(w, http.StatusUnauthorized, "the "+assistedapi.HostKeyHeader+" is another host's")
		return nil, nil, false
	}
	ctx := r.Context()
	ie, err := s.infraEnvByID(ctx, ieID)
	if err != nil {
		if apierrors.IsNotFound(err) {
			apiError(w, http.StatusUnauthorized, "the credential's infra env is gone")
		} else {
			apiError(w, http.StatusInternalServerError, err.Error())
		}
		return nil, nil, false
	}
	a, err := s.getAgent(ctx, types.NamespacedName{Namespace: ie.Namespace, Name: hostID})
	switch {
	case apierrors.IsNotFound(err):
		apiError(w, http.StatusNotFound, fmt.Sprintf("host %s not found", hostID))
		return nil, nil, false
	case err != nil:
		apiError(w, http.StatusInternalServerError, err.Error())
		return nil, nil, false
	case a.Labels[agentinstallv1.InfraEnvNameLabel] != ie.Name:
		apiError(w, http.StatusNotFound, fmt.Sprintf("host %s not found in infra env %s", hostID, ieID))
		return nil, nil, false
	}
	if a, err = s.checkCredential(ctx, a, cred); err != nil {
		code := http.StatusUnauthorized
		var ce credentialError
		if !errors.As(err, &ce) {
			code = http.StatusInternalServerError
		}
		apiError(w, code, err.Error())
		return nil, nil, false
	}
	return ie, a, true
}

// checkCredential checks that cred is a's live credential, reading a
// again from the API when the cache's copy refuses it: the cache may not
// have the hash of a credential minted a moment ago yet. It returns the
// Agent it checked; a credentialError when refused.
func (s *Server) checkCredential(ctx context.Context, a *agentinstallv1.Agent, cred string) (*agentinstallv1.Agent, error) {
	if credentialOf(a, cred) == nil {
		return a, nil
	}
	fresh := &agentinstallv1.Agent{}
	if err := s.opts.APIReader.Get(ctx, agentKey(a), fresh); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, credentialError(fmt.Sprintf("host %s is gone", a.Name))
		}
		return nil, err
	}
	if fresh.Labels[agentinstallv1.InfraEnvNameLabel] != a.Labels[agentinstallv1.InfraEnvNameLabel] {
		return nil, credentialError(fmt.Sprintf("host %s moved to another infra env", a.Name))
	}
	return fresh, credentialOf(fresh, cred)
}

// credentialOf tells whether cred is a's live credential.
func credentialOf(a *agentinstallv1.Agent, cred string) error {
	recorded := a.Annotations[hostCredentialAnnotation]
	if recorded == credentialEnded || finished(a) {
		return credentialError(fmt.Sprintf("host %s finished its installation: its credential has ended", a.Name))
	}
	if recorded == "" || subtle.ConstantTimeCompare([]byte(recorded), []byte(assistedapi.HostKeyHash(cred))) != 1 {
		return credentialError(fmt.Sprintf("the %s is not (or no longer) host %s's", assistedapi.HostKeyHeader, a.Name))
	}
	return nil
}

// finished tells whether a's install is over: its agent has nothing more
// to ask the service.
func finished(a *agentinstallv1.Agent) bool {
	switch record.State(a) {
	case hoststate.StatusInstalled, hoststate.StatusAddedToExistingCluster:
		return true
	}
	return false
}

// reclaimable tells whether a's host may register again without its
// credential: a person unbound it after its install (or while a day-2
// install ran), and the host has to boot the discovery image again, with
// no credential of the earlier boot.
func reclaimable(a *agentinstallv1.Agent) bool {
	switch record.State(a) {
	case hoststate.StatusUnbindingPendingUserAction, hoststate.StatusReclaiming, hoststate.StatusReclaimingRebooting:
		return true
	}
	return false
}

// getAgent reads an Agent from the cache, and from the API when the cache
// does not have it (yet): an Agent registered a moment ago. Callers have
// authenticated the request.
func (s *Server) getAgent(ctx context.Context, key types.NamespacedName) (*agentinstallv1.Agent, error) {
	a := &agentinstallv1.Agent{}
	err := s.opts.Client.Get(ctx, key, a)
	if apierrors.IsNotFound(err) {
		a = &agentinstallv1.Agent{}
		err = s.opts.APIReader.Get(ctx, key, a)
	}
	return a, err
}

// endCredential marks a's credential ended: its install step succeeded.
func (s *Server) endCredential(ctx context.Context, a *agentinstallv1.Agent) error {
	return client.IgnoreNotFound(s.annotate(ctx, a, hostCredentialAnnotation, credentialEnded))
}

// event records an Event about o when the server has a recorder.
func (s *Server) event(o client.Object, typ, reason, msg string) {
	if s.opts.Recorder != nil {
		s.opts.Recorder.Event(o, typ, reason, msg)
	}
}

// drain reads and drops a body the service keeps nothing of; it has
// answered 413 past the cap when ok is false.
func drain(w http.ResponseWriter, r *http.Request) bool {
	if _, err := io.Copy(io.Discard, r.Body); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			apiError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("the body is larger than %d bytes", tooLarge.Limit))
		} else {
			apiError(w, http.StatusBadRequest, "reading the body: "+err.Error())
		}
		return false
	}
	return true
}

// hostProof checks a registration's host proof, when it carries one, and
// returns the BareMetalHost it names ("<name>/<uid>", "" without a proof).
// A proof that is forged, expired or of another namespace's host is
// refused (401): it has answered the request when ok is false.
func (s *Server) hostProof(w http.ResponseWriter, r *http.Request, ie *agentinstallv1.InfraEnv, now time.Time) (string, bool) {
	proof := r.Header.Get(assistedapi.HostProofHeader)
	if proof == "" {
		return "", true
	}
	p, err := assistedapi.ParseHostProof(s.opts.Key, proof, now)
	if err != nil {
		apiError(w, http.StatusUnauthorized, "invalid or expired "+assistedapi.HostProofHeader)
		return "", false
	}
	if p.Namespace != ie.Namespace {
		apiError(w, http.StatusUnauthorized, "the "+assistedapi.HostProofHeader+" is of a host in another namespace")
		return "", false
	}
	return p.Host(), true
}

// annotate sets annotations of a, key then value, with a merge patch of
// those keys only (no resourceVersion: no conflict with the writers of
// other fields); a becomes the Agent as written.
func (s *Server) annotate(ctx context.Context, a *agentinstallv1.Agent, kv ...string) error {
	set := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		set[kv[i]] = kv[i+1]
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": set}})
	if err != nil {
		return err
	}
	return s.opts.Client.Patch(ctx, a, client.RawPatch(types.MergePatchType, patch))
}
