// Package metalclient is metalshift's typed client of the Equinix Metal
// API (api/equinixmetal/v1), the only way the Equinix Metal provider
// reaches the service: context-aware calls for projects, devices and their
// actions, IP reservations and assignments, and the catalog.
//
// Lists are read whole: ListDevices and ListIPReservations follow every
// page of the meta block (a client that reads only the first page misses
// devices past it). Answers other than success are *APIError, with
// helpers (IsNotFound, IsRateLimited, IsUnprocessable, ...); the last
// rate-limit headers are kept (RateLimit). The API key goes only in the
// X-Auth-Token header of requests to the base URL: never into an error, a
// log line or String, and never to another host (redirects are refused).
package metalclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	equinixapi "github.com/metalshift/metalshift/api/equinixmetal/v1"
)

// DefaultBaseURL is the public API's base URL.
const DefaultBaseURL = "https://api.equinix.com/metal/v1"

// maxAnswer bounds an answer's body.
const maxAnswer = 32 << 20

// maxPages bounds the pages a list reads (the API's own limit).
const maxPages = 100000

// Options configure a Client.
type Options struct {
	// BaseURL is the API's base URL, …/metal/v1 (DefaultBaseURL when
	// empty).
	BaseURL string
	// Token is the API key.
	Token string
	// HTTPClient makes the requests (http.DefaultClient's transport when
	// nil). The client is copied: redirects are refused whatever it says.
	HTTPClient *http.Client
	// UserAgent and ConsumerToken name the caller.
	UserAgent, ConsumerToken string
	// PerPage is the page size of lists (1000 when 0).
	PerPage int
}

// Client calls the API. It is safe for concurrent use.
type Client struct {
	base     *url.URL
	token    string
	hc       *http.Client
	ua, ct   string
	perPage  int
	mu       sync.Mutex
	lastRate RateLimit
}

// RateLimit is what the last answer said of the key's rate limit.
type RateLimit struct {
	Limit, Remaining int
	// Reset is when the window ends.
	Reset time.Time
}

// New returns a client.
func New(o Options) (*Client, error) {
	raw := o.BaseURL
	if raw == "" {
		raw = DefaultBaseURL
	}
	base, err := url.Parse(strings.TrimSuffix(raw, "/"))
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fmt.Errorf("equinix metal: base URL %q is not an http or https URL", raw)
	}
	if o.Token == "" {
		return nil, errors.New("equinix metal: no API key")
	}
	hc := &http.Client{}
	if o.HTTPClient != nil {
		copied := *o.HTTPClient
		hc = &copied
	}
	hc.CheckRedirect = func(*http.Request, []*http.Request) error {
		return errors.New("equinix metal: the API answered with a redirect, which is not followed")
	}
	perPage := o.PerPage
	if perPage <= 0 {
		perPage = 1000
	}
	return &Client{base: base, token: o.Token, hc: hc, ua: o.UserAgent, ct: o.ConsumerToken, perPage: perPage}, nil
}

// String names the client by its base URL, never its key.
func (c *Client) String() string { return "equinix metal client for " + c.base.String() }

// GoString is String, so that %#v shows no key either.
func (c *Client) GoString() string { return c.String() }

// RateLimit is what the last answer said of the rate limit.
func (c *Client) RateLimit() RateLimit {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastRate
}

// APIError is an answer other than success.
type APIError struct {
	// Method and Path are the request's (the path under the base URL,
	// with its query).
	Method, Path string
	Status       int
	// Errors are the API's messages.
	Errors []string
	// RateLimit is what the answer said of the rate limit.
	RateLimit RateLimit
}

func (e *APIError) Error() string {
	msg := strings.Join(e.Errors, "; ")
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	return fmt.Sprintf("equinix metal: %s %s: %d: %s", e.Method, e.Path, e.Status, msg)
}

func statusOf(err error) int {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Status
	}
	return 0
}

// IsNotFound says the object is not there (404).
func IsNotFound(err error) bool { return statusOf(err) == http.StatusNotFound }

// IsForbidden says the key may not see the object (403).
func IsForbidden(err error) bool { return statusOf(err) == http.StatusForbidden }

// IsUnauthorized says the key was refused (401).
func IsUnauthorized(err error) bool { return statusOf(err) == http.StatusUnauthorized }

// IsUnprocessable says the request was refused as it is (422: a field,
// the state of the object, a quota, no hardware).
func IsUnprocessable(err error) bool { return statusOf(err) == http.StatusUnprocessableEntity }

// IsRateLimited says the key made too many calls (429); RetryAfter says
// how long to wait.
func IsRateLimited(err error) bool { return statusOf(err) == http.StatusTooManyRequests }

// IsServerError says the service failed (5xx): the call may be tried
// again.
func IsServerError(err error) bool { return statusOf(err) >= 500 }

// RetryAfter is how long until the rate-limit window of err ends, from
// now (0 when err is no 429 or the window is over).
func RetryAfter(err error, now time.Time) time.Duration {
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusTooManyRequests || ae.RateLimit.Reset.IsZero() {
		return 0
	}
	return max(ae.RateLimit.Reset.Sub(now), 0)
}

// Backoff is how long to wait before calling again after err: what a 429
// says (10 s when it says nothing), 5 s after a server error; 0 for any
// other error, which calling again does not mend.
func Backoff(err error, now time.Time) time.Duration {
	switch {
	case IsRateLimited(err):
		if d := RetryAfter(err, now); d > 0 {
			return d
		}
		return 10 * time.Second
	case IsServerError(err):
		return 5 * time.Second
	}
	return 0
}

// do sends a request to path (under the base URL, with its query) with
// in as its JSON body, and decodes the answer into out.
func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(data)
	}
	u := *c.base
	p, q, _ := strings.Cut(path, "?")
	u.Path += p
	u.RawQuery = q
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return err
	}
	req.Header.Set(equinixapi.AuthHeader, c.token)
	req.Header.Set("Accept", "application/json")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.ua != "" {
		req.Header.Set("User-Agent", c.ua)
	}
	if c.ct != "" {
		req.Header.Set(equinixapi.ConsumerTokenHeader, c.ct)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		// url.Error names the URL, which holds no key.
		return fmt.Errorf("equinix metal: %s %s: %w", method, path, unwrapURL(err))
	}
	defer resp.Body.Close()
	rate := readRate(resp.Header)
	if rate.Limit > 0 {
		c.mu.Lock()
		c.lastRate = rate
		c.mu.Unlock()
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	if err != nil {
		return fmt.Errorf("equinix metal: %s %s: reading the answer: %w", method, path, err)
	}
	if len(data) > maxAnswer {
		return fmt.Errorf("equinix metal: %s %s: the answer is over %d bytes", method, path, maxAnswer)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		ae := &APIError{Method: method, Path: path, Status: resp.StatusCode, RateLimit: rate}
		var er equinixapi.ErrorResponse
		if json.Unmarshal(data, &er) == nil {
			ae.Errors = er.Errors
			if er.Error != "" {
				ae.Errors = append(ae.Errors, er.Error)
			}
		}
		return ae
	}
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("equinix metal: %s %s: the answer is not the expected JSON: %w", method, path, err)
		}
	}
	return nil
}

// unwrapURL drops url.Error's wrapping, which repeats the method and URL.
func unwrapURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

func readRate(h http.Header) RateLimit {
	var r RateLimit
	r.Limit, _ = strconv.Atoi(h.Get(equinixapi.RateLimitLimitHeader))
	r.Remaining, _ = strconv.Atoi(h.Get(equinixapi.RateLimitRemainingHeader))
	if s, err := strconv.ParseInt(h.Get(equinixapi.RateLimitResetHeader), 10, 64); err == nil {
		r.Reset = time.Unix(s, 0)
	}
	return r
}

func esc(id string) string { return url.PathEscape(id) }
