// Package ignitionserver serves Ignition configs too large for a machine's
// user data. The user data then holds a small config that merges the full
// one from here, sending a bearer token bound to the config's owner and
// pinning the config's SHA-512.
package ignitionserver

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// PathPrefix is where configs are served: PathPrefix<namespace>/<name>.
const PathPrefix = "/ignition/v1/"

// ServedLabel marks the Secrets this server may serve; their "value" key
// holds the config.
const ServedLabel = "bootstrap.cluster.x-k8s.io/served-ignition"

// Config is how a manager runs the ignition server (the bootstrap
// provider starts it).
type Config struct {
	// ListenAddr is where it listens, e.g. 0.0.0.0:6181; empty disables it.
	ListenAddr string
	// URL is how machines reach it; defaults to http(s)://<ListenAddr>.
	URL string
	// CertFile and KeyFile serve https (reloaded when they change); CA is
	// the PEM machines trust for it. Empty serves http.
	CertFile, KeyFile string
	CA                []byte
	// SigningKey signs tokens; keep it across restarts.
	SigningKey []byte
	// MaxUserDataBytes is the largest config put in user data as is; 0
	// means 64 KiB.
	MaxUserDataBytes int
}

// Options configure a Server.
type Options struct {
	// Client reads the served Secrets.
	Client client.Reader
	// Key signs tokens; keep it across restarts or issued tokens stop working.
	Key []byte
	// BaseURL is how machines reach this server, e.g. https://192.0.2.1:6181.
	BaseURL string
	// CA is the PEM of the CA machines trust for BaseURL; empty for http,
	// or for https with a certificate the machines' system roots trust.
	CA []byte
}

// Server serves Ignition configs. Create it with New.
type Server struct {
	client  client.Reader
	key     []byte
	baseURL *url.URL
	ca      []byte
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
	return &Server{client: opts.Client, key: opts.Key, baseURL: u, ca: opts.CA}, nil
}

// URL is where the config in Secret namespace/name is served.
func (s *Server) URL(namespace, name string) string {
	return s.baseURL.JoinPath(PathPrefix, namespace, name).String()
}

// CA is the PEM machines trust for URL; empty when they need none beyond their system roots.
func (s *Server) CA() []byte { return s.ca }

// Token authorizes reading Secret namespace/name whose controller has UID
// owner: a recreated owner invalidates it.
func (s *Server) Token(namespace, name string, owner types.UID) string {
	h := hmac.New(sha256.New, s.key)
	h.Write([]byte(strings.Join([]string{"ignition", namespace, name, string(owner)}, "\x00")))
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
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
	// Unknown, unlabelled and wrongly signed look the same: forbidden.
	owner := ownerUID(sec)
	if err != nil || sec.Labels[ServedLabel] == "" || owner == "" ||
		!hmac.Equal([]byte(token), []byte(s.Token(ns, name, owner))) {
		http.Error(w, "forbidden", http.StatusForbidden)
		return
	}
	w.Header().Set("Content-Type", "application/vnd.coreos.ignition+json")
	_, _ = w.Write(sec.Data["value"])
}

func ownerUID(o *corev1.Secret) types.UID {
	for _, ref := range o.OwnerReferences {
		if ref.Controller != nil && *ref.Controller {
			return ref.UID
		}
	}
	return ""
}
