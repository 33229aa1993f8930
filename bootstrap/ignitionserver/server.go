// Package ignitionserver serves Ignition configs too large for a machine's
// user data. The user data then holds a small config that merges the full
// one from here, sending a bearer token bound to the config's owner and to
// an expiry, and pinning the config's SHA-512.
package ignitionserver

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ignitionapi "github.com/metalshift/metalshift/api/ignition/v1"
	"github.com/metalshift/metalshift/internal/serving"
)

// PathPrefix and ServedLabel are the contract's (api/ignition/v1).
const (
	PathPrefix  = ignitionapi.PathPrefix
	ServedLabel = ignitionapi.ServedLabel
)

// DefaultTokenTTL is how long a token is valid when Config.TokenTTL is 0.
// 24 hours covers an install (the bootstrap node and masters boot within
// the hour; workers wait for the control plane, and hosts for inspection
// and slow virtual media) with room for a retry the next morning, and
// matches the 24 hours that the certificates in openshift-install's
// Ignition configs are valid: a machine that boots later cannot join with
// them either. A config whose machine waits for a host longer is re-signed
// by the bootstrap provider (see the openshiftconfig reconciler).
const DefaultTokenTTL = 24 * time.Hour

// Config is how a manager runs the ignition server (the bootstrap
// provider starts it).
type Config struct {
	// ListenAddr is where it listens, e.g. 0.0.0.0:6181; empty disables it.
	ListenAddr string
	// URL is how machines reach it; defaults to http(s)://<ListenAddr>.
	URL string
	// CertFile and KeyFile serve https; CAFile holds the PEM machines
	// trust for it. All three are read again when they change (a renewed
	// certificate). Empty serves http.
	CertFile, KeyFile, CAFile string
	// SigningKey signs tokens; keep it across restarts.
	SigningKey []byte
	// MaxUserDataBytes is the largest config put in user data as is; 0
	// means 64 KiB.
	MaxUserDataBytes int
	// TokenTTL is how long a token is valid after it is made; 0 means
	// DefaultTokenTTL.
	TokenTTL time.Duration
}

// Options configure a Server.
type Options struct {
	// Client reads the served Secrets.
	Client client.Reader
	// Key signs tokens; keep it across restarts or issued tokens stop working.
	Key []byte
	// BaseURL is how machines reach this server, e.g. https://192.0.2.1:6181.
	BaseURL string
	// CAFile holds the PEM of the CA machines trust for BaseURL, read
	// again after it changes; empty for http, or for https with a
	// certificate the machines' system roots trust.
	CAFile string
	// TokenTTL is how long a token is valid; 0 means DefaultTokenTTL.
	TokenTTL time.Duration
	// Clock tells the time tokens are made and checked at; nil means the
	// real clock.
	Clock clock.PassiveClock
	// Log receives a line for each refused expired token (never the
	// token); the zero Logger means ctrl.Log.
	Log logr.Logger
}

// Server serves Ignition configs. Create it with New.
type Server struct {
	client  client.Reader
	key     []byte
	baseURL *url.URL
	ca      *serving.CA
	ttl     time.Duration
	clock   clock.PassiveClock
	log     logr.Logger
}

// New returns a Server.
func New(opts Options) (*Server, error) {
	if len(opts.Key) < 16 {
		return nil, errors.New("the ignition server needs a signing key of at least 16 bytes")
	}
	u, err := url.Parse(opts.BaseURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("invalid ignition server URL %q: want http(s)://host:port", opts.BaseURL)
	}
	if opts.TokenTTL < 0 {
		return nil, fmt.Errorf("the ignition token lifetime %s is negative", opts.TokenTTL)
	}
	srv := &Server{client: opts.Client, key: opts.Key, baseURL: u, ttl: opts.TokenTTL, clock: opts.Clock, log: opts.Log}
	if srv.ttl == 0 {
		srv.ttl = DefaultTokenTTL
	}
	if srv.clock == nil {
		srv.clock = clock.RealClock{}
	}
	if srv.log.GetSink() == nil {
		srv.log = ctrl.Log.WithName("ignition-server")
	}
	if opts.CAFile != "" {
		if srv.ca, err = serving.NewCA(opts.CAFile, "ignition server", srv.log); err != nil {
			return nil, fmt.Errorf("the ignition server's CA: %w", err)
		}
	}
	return srv, nil
}

// URL is where the config in Secret namespace/name is served.
func (s *Server) URL(namespace, name string) string {
	return s.baseURL.JoinPath(PathPrefix, namespace, name).String()
}

// CA is the PEM machines trust for URL, as the CA file holds it now;
// empty when they need none beyond their system roots.
func (s *Server) CA() []byte {
	return s.ca.PEM()
}

// Token authorizes reading Secret namespace/name whose controller has UID
// owner until TokenTTL from now: a recreated owner invalidates it.
func (s *Server) Token(namespace, name string, owner types.UID) string {
	token, _ := s.SignedToken(namespace, name, owner)
	return token
}

// SignedToken is Token and the time it expires. A token is
// "<expiry as Unix seconds>.<HMAC-SHA256 of namespace, name, owner and expiry>":
// changing the expiry breaks the signature.
func (s *Server) SignedToken(namespace, name string, owner types.UID) (string, time.Time) {
	expiry := s.clock.Now().Add(s.ttl).Truncate(time.Second)
	exp := strconv.FormatInt(expiry.Unix(), 10)
	return exp + "." + s.signature(namespace, name, owner, exp), expiry
}

// RenewIn is how long until a token expiring at expiry should be replaced
// (when half its lifetime is left); zero or less means now.
func (s *Server) RenewIn(expiry time.Time) time.Duration {
	return expiry.Add(-s.ttl / 2).Sub(s.clock.Now())
}

// TokenExpiry reads when a token expires, without checking it: for
// scheduling its renewal, never for trusting it.
func TokenExpiry(token string) (time.Time, bool) {
	exp, _, ok := strings.Cut(token, ".")
	unix, err := strconv.ParseInt(exp, 10, 64)
	if !ok || err != nil {
		return time.Time{}, false
	}
	return time.Unix(unix, 0), true
}

func (s *Server) signature(namespace, name string, owner types.UID, exp string) string {
	h := hmac.New(sha256.New, s.key)
	h.Write([]byte(strings.Join([]string{"ignition", namespace, name, string(owner), exp}, "\x00")))
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

// errExpired is a well-signed token past its expiry.
var errExpired = errors.New("expired")

// verify checks a token for Secret namespace/name of owner at the
// server's time; a token that is not well signed is an error, one past its
// expiry errExpired (with the time it expired).
func (s *Server) verify(token, namespace, name string, owner types.UID) (time.Time, error) {
	exp, sig, ok := strings.Cut(token, ".")
	unix, err := strconv.ParseInt(exp, 10, 64)
	if !ok || err != nil || !hmac.Equal([]byte(sig), []byte(s.signature(namespace, name, owner, exp))) {
		return time.Time{}, errors.New("invalid token")
	}
	expiry := time.Unix(unix, 0)
	if s.clock.Now().After(expiry) {
		return expiry, errExpired
	}
	return expiry, nil
}

// Handler serves GET PathPrefix<namespace>/<name>.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+PathPrefix+"{namespace}/{name}", s.serve)
	return mux
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || token == "" {
		http.Error(w, "a bearer token is required", http.StatusUnauthorized)
		return
	}
	sec := &corev1.Secret{}
	err := s.client.Get(r.Context(), client.ObjectKey{Namespace: ns, Name: name}, sec)
	if err != nil && !apierrors.IsNotFound(err) {
		ctrl.LoggerFrom(r.Context()).Error(err, "Reading a served Ignition config", "secret", ns+"/"+name)
		http.Error(w, "cannot read the config now; retry", http.StatusServiceUnavailable)
		return
	}
	// Unknown, unlabelled, wrongly signed and expired look the same to the
	// client: forbidden.
	owner := ownerUID(sec)
	if err != nil || sec.Labels[ServedLabel] == "" || owner == "" {
		http.Error(w, "forbidden", http.StatusForbidden)
		return
	}
	if expiry, err := s.verify(token, ns, name, owner); err != nil {
		if errors.Is(err, errExpired) {
			s.log.Info("Refused an expired Ignition token: the machine booted after its config's token expired; delete the Machine to get a new one",
				"secret", ns+"/"+name, "expired", expiry.UTC().Format(time.RFC3339), "remote", r.RemoteAddr)
		}
		http.Error(w, "forbidden", http.StatusForbidden)
		return
	}
	w.Header().Set("Content-Type", "application/vnd.coreos.ignition+json")
	_, _ = w.Write(sec.Data[ignitionapi.ValueKey])
}

func ownerUID(o *corev1.Secret) types.UID {
	for _, ref := range o.OwnerReferences {
		if ref.Controller != nil && *ref.Controller {
			return ref.UID
		}
	}
	return ""
}
