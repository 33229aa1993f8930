package redfish

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/metalshift/metalshift/hostengine/pkg/egress"
)

// Sentinel errors; match them with errors.Is.
var (
	// ErrUnauthorized means the BMC refused the credentials.
	ErrUnauthorized = errors.New("the BMC refused the credentials")
	// ErrNotFound means the resource does not exist on the BMC.
	ErrNotFound = errors.New("not found on the BMC")
	// ErrPreconditionFailed means the resource changed since it was read (ETag).
	ErrPreconditionFailed = errors.New("the resource changed on the BMC")
	// ErrOffOrigin means the BMC linked or redirected to another origin
	// (scheme, host and port): the client only ever talks to the BMC's
	// own, so that its credentials go nowhere else.
	ErrOffOrigin = errors.New("not on the BMC's origin")
	// ErrTooLarge means a reply exceeded one of the client's caps
	// (MaxReplyBytes, MaxMembers).
	ErrTooLarge = errors.New("the BMC's reply exceeds the client's cap")
)

// Caps on what a BMC may make the client read.
const (
	// MaxReplyBytes caps one reply; a Redfish resource is a few KiB.
	MaxReplyBytes = 4 << 20
	// MaxMembers caps the members of one collection, all pages together,
	// and the resources one call (Inventory, CDPath) reads through links.
	MaxMembers = 1024
	// maxRedirects caps the redirects of one request (same origin only).
	maxRedirects = 5
	// drainBytes is how much of a reply the client reads to reuse the
	// connection; a longer reply closes it.
	drainBytes = 64 << 10
)

// HTTPError is a Redfish error answer.
type HTTPError struct {
	Method, Path string
	Status       int
	Message      string
}

func (e *HTTPError) Error() string {
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	return fmt.Sprintf("%s %s: %d %s", e.Method, e.Path, e.Status, msg)
}

// Unwrap maps statuses to the sentinel errors.
func (e *HTTPError) Unwrap() error {
	switch e.Status {
	case http.StatusUnauthorized, http.StatusForbidden:
		return ErrUnauthorized
	case http.StatusNotFound:
		return ErrNotFound
	case http.StatusPreconditionFailed:
		return ErrPreconditionFailed
	}
	return nil
}

// Options configure a client.
type Options struct {
	// Endpoint is the scheme and authority of the BMC, e.g. https://10.0.0.5:443.
	Endpoint string
	Username string
	Password string
	// InsecureSkipVerify accepts any server certificate.
	InsecureSkipVerify bool
	// Timeout bounds each request; 0 means 30 seconds.
	Timeout time.Duration
	// Egress is where connections may be opened: checked on the address
	// the BMC's name resolves to, before anything is sent. The zero value
	// refuses loopback, link-local and the like (egress.Policy).
	Egress egress.Policy
}

// Client talks to one Redfish service. It is safe for concurrent use.
// Every request goes to the BMC's origin (the endpoint's scheme, host and
// port): a link (@odata.id, a Location, a task monitor) or a redirect
// elsewhere is refused with ErrOffOrigin before anything is sent. HTTP
// proxies are not used: the egress policy checks the BMC's own address.
type Client struct {
	base *url.URL
	http *http.Client
	opts Options

	mu         sync.Mutex
	token      string
	sessionURI string
	basicOnly  bool
}

// New returns a client; it does not contact the BMC.
func New(opts Options) (*Client, error) {
	base, err := url.Parse(opts.Endpoint)
	if err != nil || base.Host == "" || (base.Scheme != "http" && base.Scheme != "https") {
		return nil, fmt.Errorf("invalid Redfish endpoint %q: want http(s)://host[:port]", opts.Endpoint)
	}
	if opts.Timeout == 0 {
		opts.Timeout = 30 * time.Second
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	t.DialContext = opts.Egress.Dialer(opts.Timeout).DialContext
	t.TLSClientConfig = &tls.Config{InsecureSkipVerify: opts.InsecureSkipVerify, MinVersion: tls.VersionTLS12} //nolint:gosec // the user opts out per host
	t.MaxIdleConnsPerHost = 4
	t.MaxResponseHeaderBytes = 64 << 10
	c := &Client{base: &url.URL{Scheme: base.Scheme, Host: base.Host}, opts: opts}
	c.http = &http.Client{Transport: t, Timeout: opts.Timeout, CheckRedirect: c.checkRedirect}
	return c, nil
}

// checkRedirect follows a few redirects on the BMC's origin and refuses
// any other: the request carries the session token or the password.
func (c *Client) checkRedirect(req *http.Request, via []*http.Request) error {
	if !c.sameOrigin(req.URL) {
		return fmt.Errorf("redirected to %s: %w %s", shorten(req.URL.Redacted()), ErrOffOrigin, c.base)
	}
	if len(via) >= maxRedirects {
		return fmt.Errorf("more than %d redirects", maxRedirects)
	}
	return nil
}

// sameOrigin says whether u is on the BMC's scheme, host and port.
func (c *Client) sameOrigin(u *url.URL) bool {
	return origin(u) == origin(c.base)
}

// origin is u's scheme://host:port with the default port made explicit.
func origin(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	return strings.ToLower(u.Scheme) + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// resolve turns a link the BMC gave (or a path) into a URL on the BMC's
// origin; a link elsewhere is refused.
func (c *Client) resolve(ref string) (*url.URL, error) {
	u, err := url.Parse(ref)
	if err != nil {
		return nil, fmt.Errorf("link %s: %w", shorten(ref), err)
	}
	if u.Scheme != "" || u.Host != "" || u.User != nil {
		if u.User != nil || !c.sameOrigin(c.base.ResolveReference(u)) {
			u.User = nil
			return nil, fmt.Errorf("link %s: %w %s", shorten(u.String()), ErrOffOrigin, c.base)
		}
	} else if u.Path != "" && u.Path[0] != '/' {
		u.Path = "/" + u.Path
	}
	r := c.base.ResolveReference(u)
	r.Scheme, r.Host = c.base.Scheme, c.base.Host // the endpoint as written
	return r, nil
}

// shorten keeps what a BMC sent short enough for a message.
func shorten(s string) string {
	n := 200
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// readReply reads a reply of at most MaxReplyBytes.
func readReply(method, path string, resp *http.Response) ([]byte, error) {
	if resp.ContentLength > MaxReplyBytes {
		return nil, fmt.Errorf("%s %s: the reply is %d bytes: %w of %d bytes", method, shorten(path), resp.ContentLength, ErrTooLarge, MaxReplyBytes)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxReplyBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s %s: reading the reply: %w", method, shorten(path), err)
	}
	if len(data) > MaxReplyBytes {
		return nil, fmt.Errorf("%s %s: the reply is longer than %d bytes: %w", method, shorten(path), MaxReplyBytes, ErrTooLarge)
	}
	return data, nil
}

// drain reads a little of a reply the client does not need, so that the
// connection can be reused, and closes it.
func drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, drainBytes))
	resp.Body.Close()
}

// Get reads the resource at path into out and returns its ETag. path is a
// path on the BMC or a link the BMC gave, which must be on its origin.
func (c *Client) Get(ctx context.Context, path string, out any) (string, error) {
	resp, err := c.do(ctx, http.MethodGet, path, nil, nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	data, err := readReply(http.MethodGet, path, resp)
	if err != nil {
		return "", err
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return "", fmt.Errorf("GET %s: decoding: %w", shorten(path), err)
		}
	}
	return resp.Header.Get("ETag"), nil
}

// Patch changes the resource at path; etag, when set, is sent as If-Match.
// A BMC that works on it in the background answers with a task monitor,
// returned for the caller to poll with Task; "" when the change is done.
func (c *Client) Patch(ctx context.Context, path string, body any, etag string) (monitor string, err error) {
	h := http.Header{}
	if etag != "" {
		h.Set("If-Match", etag)
	}
	resp, err := c.do(ctx, http.MethodPatch, path, body, h)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	return finish(resp), nil
}

// Post runs an action. An asynchronous answer (202 with a task monitor)
// returns the monitor, for the caller to poll with Task; "" means done.
func (c *Client) Post(ctx context.Context, path string, body any) (monitor string, err error) {
	resp, err := c.do(ctx, http.MethodPost, path, body, nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	return finish(resp), nil
}

// finish drains the answer and returns its task monitor, if any (a link
// that Task checks is on the BMC's origin).
func finish(resp *http.Response) string {
	defer drain(resp)
	if resp.StatusCode != http.StatusAccepted {
		return ""
	}
	return resp.Header.Get("Location")
}

// Task reads a task monitor once: running is true while the task has not
// ended; a task that ended badly is an error naming its state and message.
// It never waits: callers poll by calling again later.
func (c *Client) Task(ctx context.Context, monitor string) (running bool, err error) {
	var t struct {
		TaskState string
		Messages  []struct{ Message string }
	}
	resp, err := c.do(ctx, http.MethodGet, monitor, nil, nil)
	if err != nil {
		return false, fmt.Errorf("task %s: %w", shorten(monitor), err)
	}
	defer resp.Body.Close()
	data, err := readReply(http.MethodGet, monitor, resp)
	if err != nil {
		return false, err
	}
	if err := json.Unmarshal(data, &t); err != nil {
		return false, fmt.Errorf("task %s: decoding: %w", shorten(monitor), err)
	}
	switch t.TaskState {
	case "Completed":
		return false, nil
	case "Exception", "Killed", "Cancelled":
		msg := t.TaskState
		if len(t.Messages) > 0 {
			msg += ": " + t.Messages[0].Message
		}
		return false, fmt.Errorf("task %s: %s", shorten(monitor), shorten(msg))
	}
	return true, nil
}

// do sends one request with authentication, logging in (again) when the
// session is missing or expired.
func (c *Client) do(ctx context.Context, method, path string, body any, h http.Header) (*http.Response, error) {
	if err := c.ensureSession(ctx); err != nil {
		return nil, err
	}
	resp, err := c.send(ctx, method, path, body, h, true)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusUnauthorized && c.hasToken() {
		drain(resp)
		c.dropSession()
		if err := c.ensureSession(ctx); err != nil {
			return nil, err
		}
		if resp, err = c.send(ctx, method, path, body, h, true); err != nil {
			return nil, err
		}
	}
	if resp.StatusCode >= 300 {
		defer resp.Body.Close()
		return nil, httpError(method, path, resp)
	}
	return resp, nil
}

func (c *Client) send(ctx context.Context, method, path string, body any, h http.Header, auth bool) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(data)
	}
	u, err := c.resolve(path)
	if err != nil {
		return nil, fmt.Errorf("%s %w", method, err)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return nil, err
	}
	for k, v := range h {
		req.Header[k] = v
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("OData-Version", "4.0")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if auth {
		c.authorize(req)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		var refused *egress.RefusedError
		if errors.As(err, &refused) {
			return nil, fmt.Errorf("connecting to %s: %w", c.base.Host, refused)
		}
		return nil, fmt.Errorf("%s %s: %w", method, shorten(path), scrub(err))
	}
	return resp, nil
}

func (c *Client) authorize(req *http.Request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.token != "" {
		req.Header.Set("X-Auth-Token", c.token)
		return
	}
	req.SetBasicAuth(c.opts.Username, c.opts.Password)
}

func (c *Client) hasToken() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.token != ""
}

func (c *Client) dropSession() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.token, c.sessionURI = "", ""
}

// ensureSession logs in through the SessionService once; a BMC without
// one is used with Basic auth from then on.
func (c *Client) ensureSession(ctx context.Context) error {
	c.mu.Lock()
	if c.token != "" || c.basicOnly {
		c.mu.Unlock()
		return nil
	}
	c.mu.Unlock()
	body := map[string]string{"UserName": c.opts.Username, "Password": c.opts.Password}
	resp, err := c.send(ctx, http.MethodPost, "/redfish/v1/SessionService/Sessions", body, nil, false)
	if err != nil {
		return err
	}
	defer drain(resp)
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return &HTTPError{Method: http.MethodPost, Path: "/redfish/v1/SessionService/Sessions", Status: resp.StatusCode, Message: "login refused"}
	case resp.StatusCode >= 300 || resp.Header.Get("X-Auth-Token") == "":
		c.mu.Lock()
		c.basicOnly = true
		c.mu.Unlock()
		return nil
	}
	session := resp.Header.Get("Location")
	if u, err := c.resolve(session); err != nil || session == "" {
		session = "" // not ours to delete
	} else {
		session = u.String()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.token, c.sessionURI = resp.Header.Get("X-Auth-Token"), session
	return nil
}

// Close ends the session, if any.
func (c *Client) Close(ctx context.Context) error {
	c.mu.Lock()
	uri := c.sessionURI
	c.mu.Unlock()
	if uri == "" {
		return nil
	}
	resp, err := c.send(ctx, http.MethodDelete, uri, nil, nil, true)
	c.dropSession()
	if err != nil {
		return err
	}
	drain(resp)
	return nil
}

func httpError(method, path string, resp *http.Response) error {
	var body struct {
		Error struct {
			Message  string `json:"message"`
			Extended []struct {
				Message string
			} `json:"@Message.ExtendedInfo"`
		} `json:"error"`
	}
	data, _ := io.ReadAll(io.LimitReader(resp.Body, drainBytes))
	_ = json.Unmarshal(data, &body)
	msg := body.Error.Message
	if len(body.Error.Extended) > 0 && body.Error.Extended[0].Message != "" {
		msg = body.Error.Extended[0].Message
	}
	return &HTTPError{Method: method, Path: shorten(path), Status: resp.StatusCode, Message: shorten(msg)}
}

// scrub removes any userinfo from URLs in transport errors.
func scrub(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		if u, perr := url.Parse(ue.URL); perr == nil && u.User != nil {
			u.User = nil
			ue.URL = u.String()
		}
	}
	return err
}
