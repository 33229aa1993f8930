// Package ignitionserver serves Ignition configs too large for a machine's
// user data. The user data then holds a small config that merges the full
// one from here, sending a bearer token bound to the config's Secret, its
// owner (the Machine's bootstrap config) and an expiry, and pinning the
// config's SHA-512. A token is checked from itself alone before anything is
// read from the API; the first fetch of a config is recorded on its Secret,
// and fetches stop once the fetch window after it has passed.
package ignitionserver

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
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
	"github.com/metalshift/metalshift/internal/shard"
)

// PathPrefix and ServedLabel are the contract's (api/ignition/v1).
const (
	PathPrefix  = ignitionapi.PathPrefix
	ServedLabel = ignitionapi.ServedLabel
)

// DefaultTokenTTL is how long a token is valid when Config.TokenTTL is 0.
// A config whose Machine waits for a host is re-signed by the bootstrap
// provider once half of it is gone (see the openshiftconfig reconciler),
// so a host provisioned with it has at least 2 hours to boot and fetch it:
// it does so within minutes.
const DefaultTokenTTL = 4 * time.Hour

// DefaultFetchWindow is how long after its first fetch a config may be
// fetched again when Config.FetchWindow is 0: Ignition fetches it once per
// first boot, again only when that boot is retried.
const DefaultFetchWindow = 30 * time.Minute

// FirstFetchAnnotation and ServedLabel are the contract's (api/ignition/v1).
const FirstFetchAnnotation = ignitionapi.FirstFetchAnnotation

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
	// FetchWindow is how long after its first fetch a config is served;
	// 0 means DefaultFetchWindow.
	FetchWindow time.Duration
}

// Options configure a Server.
type Options struct {
	// Client reads the served Secrets, and records their first fetch on
	// them.
	Client client.Client
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
	// FetchWindow is how long after its first fetch a config is served;
	// 0 means DefaultFetchWindow.
	FetchWindow time.Duration
	// Clock tells the time tokens are made and checked at; nil means the
	// real clock.
	Clock clock.PassiveClock
	// Log receives a line for each refused expired token and each fetch
	// refused after its window (never the token); the zero Logger means
	// ctrl.Log.
	Log logr.Logger
	// WatchFilterValue is the shard of the server's manager (package
	// shard): the server serves the configs of Secrets labelled
	// cluster.x-k8s.io/watch-filter=<value> only; empty means all.
	WatchFilterValue string
}

// Server serves Ignition configs. Create it with New.
type Server struct {
	client  client.Client
	key     []byte
	baseURL *url.URL
	ca      *serving.CA
	ttl     time.Duration
	window  time.Duration
	clock   clock.PassiveClock
	log     logr.Logger
	shard   string
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
	if opts.TokenTTL < 0 || opts.FetchWindow < 0 {
		return nil, fmt.Errorf("the ignition token lifetime %s or fetch window %s is negative", opts.TokenTTL, opts.FetchWindow)
	}
	srv := &Server{client: opts.Client, key: opts.Key, baseURL: u, ttl: opts.TokenTTL, window: opts.FetchWindow, clock: opts.Clock, log: opts.Log, shard: opts.WatchFilterValue}
	if srv.ttl == 0 {
		srv.ttl = DefaultTokenTTL
	}
	if srv.window == 0 {
		srv.window = DefaultFetchWindow
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
// "<expiry as Unix seconds>.<owner UID>.<HMAC-SHA256 of namespace, name,
// owner and expiry>": changing the expiry or the owner breaks the
// signature, and the server checks it before it reads anything.
func (s *Server) SignedToken(namespace, name string, owner types.UID) (string, time.Time) {
	expiry := s.clock.Now().Add(s.ttl).Truncate(time.Second)
	return s.tokenAt(namespace, name, owner, expiry), expiry
}

func (s *Server) tokenAt(namespace, name string, owner types.UID, expiry time.Time) string {
	exp := strconv.FormatInt(expiry.Unix(), 10)
	return exp + "." + string(owner) + "." + s.signature(namespace, name, string(owner), exp)
}

// RenewIn is how long until a token expiring at expiry should be replaced
// (when half its lifetime is left); zero or less means now.
func (s *Server) RenewIn(expiry time.Time) time.Duration {
	return expiry.Add(-s.ttl / 2).Sub(s.clock.Now())
}

// signature is the HMAC of the token's fields, each prefixed with its
// length, so that no two lists of fields sign alike.
func (s *Server) signature(parts ...string) string {
	h := hmac.New(sha256.New, s.key)
	var n [8]byte
	for _, p := range append([]string{"ignition"}, parts...) {
		binary.BigEndian.PutUint64(n[:], uint64(len(p)))
		h.Write(n[:])
		h.Write([]byte(p))
	}
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

// errExpired is a well-signed token past its expiry.
var errExpired = errors.New("expired")

// verify checks a token for Secret namespace/name at the server's time,
// from the token alone, and returns the owner UID it is bound to; a token
// that is not well formed or well signed is an error, one past its expiry
// errExpired (with the time it expired).
func (s *Server) verify(token, namespace, name string) (types.UID, time.Time, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 || !validUID(parts[1]) {
		return "", time.Time{}, errors.New("invalid token")
	}
	expiry, ok := ignitionapi.TokenExpiry(token)
	if !ok || !hmac.Equal([]byte(parts[2]), []byte(s.signature(namespace, name, parts[1], parts[0]))) {
		return "", time.Time{}, errors.New("invalid token")
	}
	if s.clock.Now().After(expiry) {
		return "", expiry, errExpired
	}
	return types.UID(parts[1]), expiry, nil
}

// validUID: what an owner UID in a token may be, 1 to 64 letters, digits
// and '-'.
func validUID(u string) bool {
	if u == "" || len(u) > 64 {
		return false
	}
	for _, c := range u {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
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
	// Wrongly signed, expired, unknown, unlabelled, another owner's and
	// past the fetch window look the same to the client: forbidden. The
	// token is checked before anything is read.
	owner, expiry, err := s.verify(token, ns, name)
	if err != nil {
		if errors.Is(err, errExpired) {
			s.log.Info("Refused an expired Ignition token: the machine booted after its config's token expired; delete the Machine to get a new one",
				"secret", ns+"/"+name, "expired", expiry.UTC().Format(time.RFC3339), "remote", r.RemoteAddr)
		}
		http.Error(w, "forbidden", http.StatusForbidden)
		return
	}
	sec := &corev1.Secret{}
	err = s.client.Get(r.Context(), client.ObjectKey{Namespace: ns, Name: name}, sec)
	if err != nil && !apierrors.IsNotFound(err) {
		ctrl.LoggerFrom(r.Context()).Error(err, "Reading a served Ignition config", "secret", ns+"/"+name)
		http.Error(w, "cannot read the config now; retry", http.StatusServiceUnavailable)
		return
	}
	if err != nil || sec.Labels[ServedLabel] == "" || ownerUID(sec) != owner || !shard.Owns(s.shard, sec) {
		http.Error(w, "forbidden", http.StatusForbidden)
		return
	}
	if !s.inFetchWindow(w, r, sec) {
		return
	}
	w.Header().Set("Content-Type", "application/vnd.coreos.ignition+json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(sec.Data[ignitionapi.ValueKey])
}

// inFetchWindow records the first fetch of a config on its Secret, and
// refuses fetches once the fetch window after it has passed: a token read
// later from the machine's user data (its config drive, its Secret) no
// longer fetches the config. The record is written with the Secret's
// resourceVersion, so two replicas agree on the first fetch.
func (s *Server) inFetchWindow(w http.ResponseWriter, r *http.Request, sec *corev1.Secret) bool {
	now := s.clock.Now()
	if raw, ok := sec.Annotations[FirstFetchAnnotation]; ok {
		first, err := time.Parse(time.RFC3339, raw)
		if err != nil || now.After(first.Add(s.window)) {
			s.log.Info("Refused a fetch of a served Ignition config after its fetch window: it was fetched first at "+raw+"; delete the Machine to get a new one",
				"secret", sec.Namespace+"/"+sec.Name, "window", s.window.String(), "remote", r.RemoteAddr)
			http.Error(w, "forbidden", http.StatusForbidden)
			return false
		}
		return true
	}
	if sec.Annotations == nil {
		sec.Annotations = map[string]string{}
	}
	sec.Annotations[FirstFetchAnnotation] = now.UTC().Format(time.RFC3339)
	if err := s.client.Update(r.Context(), sec); err != nil {
		ctrl.LoggerFrom(r.Context()).Info("Recording the first fetch of a served Ignition config failed; the machine retries", "secret", sec.Namespace+"/"+sec.Name, "error", err.Error())
		http.Error(w, "cannot record the fetch now; retry", http.StatusServiceUnavailable)
		return false
	}
	return true
}

func ownerUID(o *corev1.Secret) types.UID {
	for _, ref := range o.OwnerReferences {
		if ref.Controller != nil && *ref.Controller {
			return ref.UID
		}
	}
	return ""
}
