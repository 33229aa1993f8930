package console

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"net/url"
	"sync"
	"time"

	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// cookieName is the console's session cookie: a random session ID, no
// credential.
const cookieName = "metalshift-console"

// csrfHeader carries a session's CSRF token on every write.
const csrfHeader = "X-CSRF-Token"

// session is one signed-in user. The bearer token lives only in client,
// on the server.
type session struct {
	id, csrf string
	// user is the name the API server knows the token by.
	user string
	// client reads and writes as the user (with the user's token).
	client  client.WithWatch
	expires time.Time
}

// sessions keeps the signed-in users in memory: a restart signs everyone
// out. A session ends at its absolute expiry, or on sign-out.
type sessions struct {
	clock clock.Clock
	ttl   time.Duration

	mu   sync.Mutex
	byID map[string]*session
}

func newSessions(clk clock.Clock, ttl time.Duration) *sessions {
	return &sessions{clock: clk, ttl: ttl, byID: map[string]*session{}}
}

// add starts a session for user with c and returns it, with a new ID
// (never one the browser offered) and CSRF token. Expired sessions are
// dropped.
func (s *sessions) add(user string, c client.WithWatch) *session {
	now := s.clock.Now()
	ss := &session{id: randomString(), csrf: randomString(), user: user, client: c, expires: now.Add(s.ttl)}
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, old := range s.byID {
		if !now.Before(old.expires) {
			delete(s.byID, id)
		}
	}
	s.byID[ss.id] = ss
	return ss
}

// get returns the live session of r's cookie, or nil.
func (s *sessions) get(r *http.Request) *session {
	c, err := r.Cookie(cookieName)
	if err != nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.byID[c.Value]
	if ss == nil {
		return nil
	}
	if !s.clock.Now().Before(ss.expires) {
		delete(s.byID, ss.id)
		return nil
	}
	return ss
}

func (s *sessions) remove(ss *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byID, ss.id)
}

// cookie is the session's cookie; secure over https. An empty session
// clears it.
func cookie(ss *session, secure bool) *http.Cookie {
	//nolint:gosec // Secure is set over TLS; plain http is --console-insecure-http (loopback or behind a TLS proxy)
	c := &http.Cookie{Name: cookieName, Path: "/", HttpOnly: true, Secure: secure, SameSite: http.SameSiteStrictMode}
	if ss == nil {
		c.MaxAge = -1
		return c
	}
	c.Value, c.Expires = ss.id, ss.expires
	return c
}

// checkCSRF tells whether r, a write, carries ss's CSRF token and comes
// from the console's own origin.
func checkCSRF(r *http.Request, ss *session) bool {
	got := r.Header.Get(csrfHeader)
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(ss.csrf)) == 1 && sameOrigin(r)
}

// sameOrigin tells whether r comes from a page of the console: the host
// of its Origin header (which browsers send on every POST) is the host r
// was sent to. The scheme is not compared: behind a TLS-terminating proxy
// the console sees http where the browser sees https.
func sameOrigin(r *http.Request) bool {
	u, err := url.Parse(r.Header.Get("Origin"))
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" && u.Host == r.Host
}

// secure tells whether the browser reached the console over https: its
// own TLS, or a proxy's that says so (which can only make the cookie
// stricter).
func secure(r *http.Request) bool {
	return r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https"
}

// randomString is 32 random bytes, base64url.
func randomString() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}
