package deployserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deployapi "github.com/metalshift/metalshift/api/deploy/v1"
	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
)

// Event reasons the deploy server records on a BareMetalHost.
const (
	// ReasonTokenAskedAgain: the agent token of the host's current
	// request was asked for after it was handed out.
	ReasonTokenAskedAgain = "DeployAgentTokenAskedAgain"
)

// tokenAttempts bounds how often one token exchange or report reads the
// host again after a conflicting write (the engine wrote the host
// meanwhile).
const tokenAttempts = 3

// token exchanges a boot's ticket for its request's agent token, once: the
// token is random, only its SHA-256 is recorded in the host's status
// (written with the host's resourceVersion, so that two replicas or two
// boots cannot both get one), and every later ask is refused (409),
// recorded in the status and as a Warning Event. The one exception is the
// boot the token was handed to asking again before it has reported: its
// answer was lost (the replica that wrote the record died before it
// answered, or the connection broke), and it gets a new token that
// replaces the first, which then opens nothing.
func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	ticket, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	gen, err := deployapi.VerifyTicket(s.key, id, ticket, s.clock.Now())
	if err != nil {
		http.Error(w, "invalid or expired ticket", http.StatusUnauthorized)
		return
	}
	var tr deployapi.TokenRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4<<10)).Decode(&tr); err != nil {
		http.Error(w, "invalid token request: "+err.Error(), http.StatusBadRequest)
		return
	}
	if tr.Session == "" || len(tr.Session) > deployapi.MaxSessionLength {
		http.Error(w, fmt.Sprintf("invalid token request: the session is 1 to %d characters", deployapi.MaxSessionLength), http.StatusBadRequest)
		return
	}
	host, err := s.currentHost(r.Context(), id, isCurrent(gen))
	for attempt := 1; ; attempt++ {
		if err != nil {
			http.Error(w, "reading the host failed; ask again", http.StatusServiceUnavailable)
			return
		}
		if !s.checkTicketRequest(w, r, host, gen, tr.Session) {
			return
		}
		var token string
		token, err = s.issue(r.Context(), host, gen, tr.Session, r.RemoteAddr)
		switch {
		case err == nil:
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Cache-Control", "no-store")
			_ = json.NewEncoder(w).Encode(deployapi.TokenResponse{Token: token, Generation: gen})
			return
		case apierrors.IsConflict(err) && attempt < tokenAttempts:
			host, err = s.apiHost(r.Context(), id)
		case apierrors.IsConflict(err):
			http.Error(w, "the host changed; ask again", http.StatusServiceUnavailable)
			return
		default:
			http.Error(w, "recording the token failed; ask again", http.StatusServiceUnavailable)
			return
		}
	}
}

// checkTicketRequest answers a token request that cannot be granted: an
// unknown host, a ticket of another request than the host's current one,
// a request that ended, or one whose token was handed out (recorded) to
// another boot or to this one, which has reported since.
func (s *Server) checkTicketRequest(w http.ResponseWriter, r *http.Request, host *metal3v1.BareMetalHost, gen, session string) bool {
	switch {
	case host == nil:
		http.Error(w, "unknown host", http.StatusNotFound)
		return false
	case generation(host) != gen:
		http.Error(w, fmt.Sprintf("the ticket is for request %s, which is not the host's current request", gen), http.StatusGone)
		return false
	case ended(host):
		http.Error(w, fmt.Sprintf("request %s ended", gen), http.StatusGone)
		return false
	case host.DeployAgentToken() != nil && !lostAnswer(host, session):
		s.refuse(r.Context(), host, r.RemoteAddr)
		http.Error(w, fmt.Sprintf("the agent token of request %s was handed out already; it is handed out once", gen), http.StatusConflict)
		return false
	}
	return true
}

// lostAnswer reports whether session is the boot the host's current
// token was handed to and has not reported yet: it asks again because it
// never got the answer.
func lostAnswer(host *metal3v1.BareMetalHost, session string) bool {
	return host.DeployAgentToken().Session == session && host.DeployAgentReport() == nil
}

// issue makes the request's agent token and records its hash for session,
// with the host's resourceVersion: a conflict means someone else wrote the
// host since it was read.
func (s *Server) issue(ctx context.Context, host *metal3v1.BareMetalHost, gen, session, source string) (string, error) {
	token, hash, err := deployapi.NewAgentToken()
	if err != nil {
		return "", err
	}
	base := host.DeepCopy()
	rec := &metal3v1.DeployAgentToken{Generation: gen, SHA256: hash, Session: session, Source: source,
		IssuedAt: metav1.NewTime(s.clock.Now().Truncate(time.Second))}
	if old := host.DeployAgentToken(); old != nil {
		// Handed out again to the same boot: the asks of others stay counted.
		rec.Refusals, rec.LastRefusalTime, rec.LastRefusalSource = old.Refusals, old.LastRefusalTime, old.LastRefusalSource
	}
	host.Status.DeployAgent.Token = rec
	if s.tokenStatus != nil {
		s.tokenStatus(host)
	}
	if err := s.client.Status().Patch(ctx, host, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return "", err
	}
	return token, nil
}

// refuse records an ask for a token that was handed out: a Warning Event,
// and the count, time and source in the token's record, which the engine
// turns into a condition. The record is written with the host's
// resourceVersion, read again from the API after a conflict (the cache may
// be behind the agent's last report).
func (s *Server) refuse(ctx context.Context, host *metal3v1.BareMetalHost, source string) {
	rec := host.DeployAgentToken()
	if s.recorder != nil {
		s.recorder.Eventf(host, nil, corev1.EventTypeWarning, ReasonTokenAskedAgain, "IssueAgentToken",
			"The agent token of request %s was asked for again from %s; it was handed out to %s at %s, and is handed out once. "+
				"Another machine has this request's ticket, or the host booted its deploy image twice",
			rec.Generation, source, rec.Source, rec.IssuedAt.UTC().Format(time.RFC3339))
	}
	gen := rec.Generation
	now := metav1.NewTime(s.clock.Now().Truncate(time.Second))
	var err error
	for attempt := 1; attempt <= tokenAttempts; attempt++ {
		if attempt > 1 {
			fresh := &metal3v1.BareMetalHost{}
			if err = s.apiReader.Get(ctx, client.ObjectKeyFromObject(host), fresh); err != nil {
				break
			}
			host = fresh
		}
		if rec = host.DeployAgentToken(); rec == nil || rec.Generation != gen {
			return // the request changed meanwhile: its record is gone
		}
		base := host.DeepCopy()
		rec.Refusals++
		rec.LastRefusalTime, rec.LastRefusalSource = &now, source
		if s.tokenStatus != nil {
			s.tokenStatus(host)
		}
		if err = s.client.Status().Patch(ctx, host, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); !apierrors.IsConflict(err) {
			break
		}
	}
	if err != nil {
		ctrl.LoggerFrom(ctx).Info("Recording a refused ask for an agent token failed", "host", client.ObjectKeyFromObject(host), "error", err.Error())
	}
}
