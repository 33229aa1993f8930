package console

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
)

//go:embed web
var web embed.FS

// DefaultSessionTTL is how long a sign-in lasts.
const DefaultSessionTTL = 8 * time.Hour

// maxTokenBytes caps the sign-in form: a bearer token is a few KiB.
const maxTokenBytes = 64 << 10

// Config configures a console Server.
type Config struct {
	// API is the hub's kube-apiserver: only its address and CA are used,
	// never its credentials.
	API *rest.Config
	// SessionTTL is how long a sign-in lasts; 0 means DefaultSessionTTL.
	SessionTTL time.Duration
	// Clock tells the time of session expiry; nil means the real clock.
	Clock clock.Clock
	// Log is where the server logs; never a token.
	Log logr.Logger
}

// Server is the console's HTTP handler.
type Server struct {
	base     *rest.Config
	scheme   *runtime.Scheme
	mapper   meta.RESTMapper
	sessions *sessions
	pages    *template.Template
	static   http.Handler
	log      logr.Logger
	// stop ends the event streams (Close).
	stop     chan struct{}
	stopOnce sync.Once
}

// New returns a console for cfg.API.
func New(cfg Config) (*Server, error) {
	scheme, err := newScheme()
	if err != nil {
		return nil, err
	}
	pages, err := template.ParseFS(web, "web/*.html")
	if err != nil {
		return nil, err
	}
	static, err := fs.Sub(web, "web/static")
	if err != nil {
		return nil, err
	}
	if cfg.SessionTTL == 0 {
		cfg.SessionTTL = DefaultSessionTTL
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &Server{
		base: rest.AnonymousClientConfig(cfg.API), scheme: scheme, mapper: newMapper(),
		sessions: newSessions(cfg.Clock, cfg.SessionTTL), pages: pages,
		static: http.StripPrefix("/static/", http.FileServerFS(static)), log: cfg.Log,
		stop: make(chan struct{}),
	}, nil
}

// Close ends the event streams, which would otherwise hold a graceful
// shutdown of the HTTP server until its timeout; browsers reconnect.
func (s *Server) Close() { s.stopOnce.Do(func() { close(s.stop) }) }

// Handler serves the console's pages, its static files and its API.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /static/", s.static)
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/fleet", http.StatusSeeOther) })
	mux.HandleFunc("GET /signin", func(w http.ResponseWriter, _ *http.Request) { s.render(w, http.StatusOK, "signin.html", nil) })
	mux.HandleFunc("POST /signin", s.handleSignIn)
	mux.HandleFunc("POST /signout", s.write(s.handleSignOut))
	mux.HandleFunc("GET /fleet", s.page("fleet"))
	mux.HandleFunc("GET /hosts", s.page("hosts"))
	mux.HandleFunc("GET /infraenvs", s.page("infraenvs"))
	mux.HandleFunc("GET /clusters/{path}/{namespace}/{name}", s.clusterPage)
	mux.HandleFunc("GET /clusters/agent/{namespace}/{name}/kubeconfig", s.read(s.handleKubeconfig))
	mux.HandleFunc("GET /api/watch/{page}", s.read(s.handleWatch))
	mux.HandleFunc("GET /api/watch/cluster/{path}/{namespace}/{name}", s.read(s.handleClusterWatch))
	mux.HandleFunc("POST /api/agents/{namespace}/{name}/approve", s.write(s.handleApprove))
	mux.HandleFunc("POST /api/agents/{namespace}/{name}/spec", s.write(s.handleAgentSpec))
	return secureHeaders(mux)
}

// secureHeaders keeps the pages from being framed, sniffed, cached or
// running anything but the console's own scripts.
func secureHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "+
			"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		hd.Set("X-Content-Type-Options", "nosniff")
		// same-origin, not no-referrer: with no-referrer browsers send "Origin: null"
		// on the sign-in form's POST, which sameOrigin refuses.
		hd.Set("Referrer-Policy", "same-origin")
		hd.Set("X-Frame-Options", "DENY")
		if !strings.HasPrefix(r.URL.Path, "/static/") {
			hd.Set("Cache-Control", "no-store")
		}
		h.ServeHTTP(w, r)
	})
}

// pageData is what the page templates show.
type pageData struct {
	Page, User, CSRF string
	Error            string
	// Path, Namespace and Name are the cluster of a cluster page.
	Path, Namespace, Name string
}

func (s *Server) render(w http.ResponseWriter, status int, name string, data any) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if err := s.pages.ExecuteTemplate(w, name, data); err != nil {
		s.log.Error(err, "Rendering a page", "page", name)
	}
}

// page serves a page to a signed-in user; others are sent to sign in.
func (s *Server) page(name string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ss := s.sessions.get(r)
		if ss == nil {
			http.Redirect(w, r, "/signin", http.StatusSeeOther)
			return
		}
		s.render(w, http.StatusOK, "page.html", pageData{Page: name, User: ss.user, CSRF: ss.csrf})
	}
}

// read wraps an API read: it needs a session (401 without).
func (s *Server) read(h func(http.ResponseWriter, *http.Request, *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ss := s.sessions.get(r)
		if ss == nil {
			writeJSONError(w, http.StatusUnauthorized, "Sign in first.")
			return
		}
		h(w, r, ss)
	}
}

// write wraps a write: it needs a session (401 without) and the
// session's CSRF token from the console's own origin (403 without).
func (s *Server) write(h func(http.ResponseWriter, *http.Request, *session)) http.HandlerFunc {
	return s.read(func(w http.ResponseWriter, r *http.Request, ss *session) {
		if !checkCSRF(r, ss) {
			writeJSONError(w, http.StatusForbidden, "The request did not come from a console page (CSRF check failed).")
			return
		}
		h(w, r, ss)
	})
}

func (s *Server) handleSignIn(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		s.render(w, http.StatusForbidden, "signin.html", pageData{Error: "Sign in from the console's own page."})
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxTokenBytes)
	token := strings.TrimSpace(r.PostFormValue("token"))
	if token == "" {
		s.render(w, http.StatusBadRequest, "signin.html", pageData{Error: "Enter a bearer token."})
		return
	}
	user, c, err := s.signIn(r.Context(), token)
	if err != nil {
		status := http.StatusBadGateway
		if errors.Is(err, errUnauthenticated) {
			status = http.StatusUnauthorized
		} else {
			s.log.Error(err, "Signing in")
		}
		s.render(w, status, "signin.html", pageData{Error: capitalize(err.Error())})
		return
	}
	if old := s.sessions.get(r); old != nil {
		s.sessions.remove(old)
	}
	ss := s.sessions.add(user, c)
	s.log.Info("Signed in", "user", user)
	http.SetCookie(w, cookie(ss, secure(r)))
	http.Redirect(w, r, "/fleet", http.StatusSeeOther)
}

func (s *Server) handleSignOut(w http.ResponseWriter, r *http.Request, ss *session) {
	s.sessions.remove(ss)
	http.SetCookie(w, cookie(nil, secure(r)))
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleWatch(w http.ResponseWriter, r *http.Request, ss *session) {
	kinds, ok := pages[r.PathValue("page")]
	if !ok {
		writeJSONError(w, http.StatusNotFound, "No such page.")
		return
	}
	s.serveWatch(w, r, ss, kinds, r.URL.Query().Get("namespace"))
}

// handleApprove sets an Agent's spec.approved, as the user: the API
// server's RBAC decides, and its refusal is the answer.
func (s *Server) handleApprove(w http.ResponseWriter, r *http.Request, ss *session) {
	s.patchAgent(w, r, ss, []byte(`{"spec":{"approved":true}}`), "Approved an Agent")
}

// patchAgent merge-patches the Agent of the request's path as the user
// and answers 204, or the API server's refusal; done (and kv) is what the
// log says of it.
func (s *Server) patchAgent(w http.ResponseWriter, r *http.Request, ss *session, patch []byte, done string, kv ...any) {
	agent := &agentinstallv1.Agent{}
	agent.Namespace, agent.Name = r.PathValue("namespace"), r.PathValue("name")
	if err := ss.client.Patch(r.Context(), agent, client.RawPatch(types.MergePatchType, patch)); err != nil {
		s.endIfUnauthorized(ss, err)
		status, msg := apiStatus(err)
		writeJSONError(w, status, msg)
		return
	}
	s.log.Info(done, append([]any{"user", ss.user, "agent", client.ObjectKeyFromObject(agent).String()}, kv...)...)
	w.WriteHeader(http.StatusNoContent)
}

// agentEdit is what the hosts page edits of an Agent: its role and its
// host name (empty: the one its inventory reports).
type agentEdit struct {
	Role     string `json:"role"`
	Hostname string `json:"hostname"`
}

// maxEditBytes bounds an edit's body.
const maxEditBytes = 4 << 10

// agentRoles are the roles a person may give an Agent.
var agentRoles = []string{
	string(agentinstallv1.HostRoleAutoAssign), string(agentinstallv1.HostRoleMaster),
	string(agentinstallv1.HostRoleWorker), string(agentinstallv1.HostRoleArbiter),
}

// handleAgentSpec sets an Agent's role and host name, as the user: a
// merge patch of spec.role and spec.hostname, which the API server and
// the Agent's admission webhook accept or refuse.
func (s *Server) handleAgentSpec(w http.ResponseWriter, r *http.Request, ss *session) {
	var edit agentEdit
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxEditBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&edit); err != nil {
		writeJSONError(w, http.StatusBadRequest, "The edit is not a JSON object of role and hostname.")
		return
	}
	if !slices.Contains(agentRoles, edit.Role) {
		writeJSONError(w, http.StatusBadRequest, fmt.Sprintf("Role %q: want one of %s.", edit.Role, strings.Join(agentRoles, ", ")))
		return
	}
	spec := map[string]any{"role": edit.Role, "hostname": nil}
	if edit.Hostname != "" {
		if errs := validation.IsDNS1123Subdomain(edit.Hostname); len(errs) > 0 {
			writeJSONError(w, http.StatusBadRequest, fmt.Sprintf("Host name %q: %s.", edit.Hostname, strings.Join(errs, "; ")))
			return
		}
		spec["hostname"] = edit.Hostname
	}
	data, err := json.Marshal(map[string]any{"spec": spec})
	if err != nil {
		writeJSONError(w, http.StatusInternalServerError, err.Error())
		return
	}
	s.patchAgent(w, r, ss, data, "Edited an Agent", "role", edit.Role, "hostname", edit.Hostname)
}

// endIfUnauthorized ends ss when the API server no longer accepts its
// token (expired, revoked): the user must sign in again.
func (s *Server) endIfUnauthorized(ss *session, err error) {
	if apierrors.IsUnauthorized(err) {
		s.sessions.remove(ss)
		s.log.Info("Signed out: the API server no longer accepts the token", "user", ss.user)
	}
}

func writeJSONError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:] + "."
}
