package deployapi

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// The credentials of a boot of the deploy agent.
//
// A deploy image (the ISO's host region, iPXE's host initrd, a lookup
// answer) carries a ticket: an HMAC, with the hub's signing key, over the
// host ID, the generation of the request the image was made for and an
// expiry. The agent's first call exchanges it at TokenPath for the
// request's agent token, a random value the deploy server hands out once
// and keeps only the SHA-256 of (in the host's status); instructions and
// reports need that token. The image's URLs are signed for the same host,
// generation and expiry. Nothing here is a token for more than one request.

// ErrBadToken is returned for a credential that is not well formed, not
// signed with the key, made for something else, or expired.
var ErrBadToken = errors.New("invalid or expired deploy credential")

// sign is the HMAC-SHA256 of label and parts, each prefixed with its
// length, so that no two lists of parts sign alike.
func sign(key []byte, label string, parts ...string) string {
	h := hmac.New(sha256.New, key)
	var n [8]byte
	for _, p := range append([]string{label}, parts...) {
		binary.BigEndian.PutUint64(n[:], uint64(len(p)))
		h.Write(n[:])
		h.Write([]byte(p))
	}
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

// formatExpiry and parseExpiry write and read an expiry as Unix seconds;
// only the canonical form parses, so that one expiry has one spelling.
func formatExpiry(t time.Time) string { return strconv.FormatInt(t.Unix(), 10) }

// expired reports whether a credential valid until exp is expired at now:
// it is valid through its expiry's second.
func expired(now, exp time.Time) bool { return now.Unix() > exp.Unix() }

func parseExpiry(s string) (time.Time, bool) {
	unix, err := strconv.ParseInt(s, 10, 64)
	if err != nil || strconv.FormatInt(unix, 10) != s {
		return time.Time{}, false
	}
	return time.Unix(unix, 0), true
}

// ValidGeneration reports whether gen can name a request in a ticket or
// URL: 1 to 64 letters, digits, '-' or '_' (Fingerprint makes 16 hex digits).
func ValidGeneration(gen string) bool {
	if gen == "" || len(gen) > 64 {
		return false
	}
	for _, c := range gen {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// SignTicket returns the ticket of request generation of host hostID,
// valid until expiry: "<generation>.<expiry as Unix seconds>.<signature>".
// An invalid generation (see ValidGeneration) makes a ticket nothing accepts.
func SignTicket(key []byte, hostID, generation string, expiry time.Time) string {
	exp := formatExpiry(expiry)
	return generation + "." + exp + "." + sign(key, "ticket", hostID, generation, exp)
}

// ParseTicket reads a ticket's generation and expiry without checking its
// signature: for messages, never for trusting it.
func ParseTicket(ticket string) (generation string, expiry time.Time, err error) {
	parts := strings.Split(ticket, ".")
	if len(parts) != 3 || !ValidGeneration(parts[0]) || parts[2] == "" {
		return "", time.Time{}, ErrBadToken
	}
	exp, ok := parseExpiry(parts[1])
	if !ok {
		return "", time.Time{}, ErrBadToken
	}
	return parts[0], exp, nil
}

// VerifyTicket checks a ticket for hostID at time now and returns the
// generation of the request it is for.
func VerifyTicket(key []byte, hostID, ticket string, now time.Time) (string, error) {
	gen, exp, err := ParseTicket(ticket)
	if err != nil || expired(now, exp) {
		return "", ErrBadToken
	}
	if !hmac.Equal([]byte(ticket), []byte(SignTicket(key, hostID, gen, exp))) {
		return "", ErrBadToken
	}
	return gen, nil
}

// NewAgentToken returns a new random agent token and its hash, the only
// form in which it is kept.
func NewAgentToken() (token, hash string, err error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", "", err
	}
	token = base64.RawURLEncoding.EncodeToString(b)
	return token, HashAgentToken(token), nil
}

// HashAgentToken is the hex SHA-256 of an agent token.
func HashAgentToken(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}

// AgentTokenMatches reports, in constant time, whether token is the one
// whose hash is hash. An empty token or hash never matches.
func AgentTokenMatches(token, hash string) bool {
	if token == "" || hash == "" {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(HashAgentToken(token)), []byte(hash)) == 1
}

// HostURL is what a verified deploy image URL is for.
type HostURL struct {
	HostID     string
	Generation string
	Expiry     time.Time
}

// SignHostURLQuery returns the query string that makes a deploy image URL
// at path valid for request generation of host hostID until expiry.
func SignHostURLQuery(key []byte, path, hostID, generation string, expiry time.Time) string {
	exp := formatExpiry(expiry)
	return "host=" + url.QueryEscape(hostID) + "&gen=" + url.QueryEscape(generation) + "&expires=" + exp +
		"&signature=" + sign(key, "host-url", path, hostID, generation, exp)
}

// VerifyHostURL checks the query of a deploy image URL at path at time now.
func VerifyHostURL(key []byte, path string, q url.Values, now time.Time) (HostURL, error) {
	id, gen, expires, sig := q.Get("host"), q.Get("gen"), q.Get("expires"), q.Get("signature")
	exp, ok := parseExpiry(expires)
	if !ok || expired(now, exp) || id == "" || !ValidGeneration(gen) {
		return HostURL{}, ErrBadToken
	}
	if !hmac.Equal([]byte(sig), []byte(sign(key, "host-url", path, id, gen, expires))) {
		return HostURL{}, ErrBadToken
	}
	return HostURL{HostID: id, Generation: gen, Expiry: exp}, nil
}

// SignURLQuery returns the query string that makes a download URL for
// path and subject valid until expiry (the agent service's discovery
// images; deploy images use SignHostURLQuery).
func SignURLQuery(key []byte, path, subject string, expiry time.Time) string {
	exp := formatExpiry(expiry)
	return fmt.Sprintf("host=%s&expires=%s&signature=%s", url.QueryEscape(subject), exp, sign(key, "url", path, subject, exp))
}

// VerifyURL checks a download URL's parameters at time now.
func VerifyURL(key []byte, path, subject, expires, signature string, now time.Time) error {
	exp, ok := parseExpiry(expires)
	if !ok || expired(now, exp) {
		return ErrBadToken
	}
	if !hmac.Equal([]byte(signature), []byte(sign(key, "url", path, subject, expires))) {
		return ErrBadToken
	}
	return nil
}
