package redfish

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Sentinel errors; match them with errors.Is.
var (
	// ErrUnauthorized means the BMC refused the credentials.
	ErrUnauthorized = errors.New("the BMC refused the credentials")
	// ErrNotFound means the resource does not exist on the BMC.
	ErrNotFound = errors.New("not found on the BMC")
	// ErrPreconditionFailed means the resource changed since it was read (ETag).
	ErrPreconditionFailed = errors.New("the resource changed on the BMC")
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
	// Transport overrides the HTTP transport (tests).
	Transport http.RoundTripper
}

// Client talks to one Redfish service. It is safe for concurrent use.
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
	tr := opts.Transport
	if tr == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.TLSClientConfig = &tls.Config{InsecureSkipVerify: opts.InsecureSkipVerify, MinVersion: tls.VersionTLS12} //nolint:gosec // the user opts out per host
		t.MaxIdleConnsPerHost = 4
		tr = t
	}
	return &Client{base: &url.URL{Scheme: base.Scheme, Host: base.Host}, http: &http.Client{Transport: tr, Timeout: opts.Timeout}, opts: opts}, nil
}

// Get reads the resource at path into out and returns its ETag.
func (c *Client) Get(ctx context.Context, path string, out any) (string, error) {
	resp, err := c.do(ctx, http.MethodGet, path, nil, nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			return "", fmt.Errorf("GET %s: decoding: %w", path, err)
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
	return finish(resp), nil
}

// Post runs an action. An asynchronous answer (202 with a task monitor)
// returns the monitor, for the caller to poll with Task; "" means done.
func (c *Client) Post(ctx context.Context, path string, body any) (monitor string, err error) {
	resp, err := c.do(ctx, http.MethodPost, path, body, nil)
	if err != nil {
		return "", err
	}
	return finish(resp), nil
}

// finish drains the answer and returns its task monitor, if any.
func finish(resp *http.Response) string {
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
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
		return false, fmt.Errorf("task %s: %w", monitor, err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&t); err != nil {
		return false, fmt.Errorf("task %s: decoding: %w", monitor, err)
	}
	switch t.TaskState {
	case "Completed":
		return false, nil
	case "Exception", "Killed", "Cancelled":
		msg := t.TaskState
		if len(t.Messages) > 0 {
			msg += ": " + t.Messages[0].Message
		}
		return false, fmt.Errorf("task %s: %s", monitor, msg)
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
		resp.Body.Close()
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
	u := c.base.JoinPath(path)
	if strings.HasPrefix(path, "http://") || strings.HasPrefix(path, "https://") {
		var err error
		if u, err = url.Parse(path); err != nil {
			return nil, err
		}
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
		return nil, fmt.Errorf("%s %s: %w", method, path, scrub(err))
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
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return &HTTPError{Method: http.MethodPost, Path: "/redfish/v1/SessionService/Sessions", Status: resp.StatusCode, Message: "login refused"}
	case resp.StatusCode >= 300 || resp.Header.Get("X-Auth-Token") == "":
		c.mu.Lock()
		c.basicOnly = true
		c.mu.Unlock()
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.token, c.sessionURI = resp.Header.Get("X-Auth-Token"), resp.Header.Get("Location")
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
	resp.Body.Close()
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
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	_ = json.Unmarshal(data, &body)
	msg := body.Error.Message
	if len(body.Error.Extended) > 0 && body.Error.Extended[0].Message != "" {
		msg = body.Error.Extended[0].Message
	}
	return &HTTPError{Method: method, Path: path, Status: resp.StatusCode, Message: msg}
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
