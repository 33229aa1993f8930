package serving

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"
)

// Budgets bound what one client may cost a machine-facing server. A zero
// field means its default; the defaults suit machines on a provisioning
// network, many of them behind one address in a lab.
type Budgets struct {
	// ReadHeaderTimeout is how long a client may take to send a request's
	// headers (and, over TLS, to finish its handshake); default 10s.
	ReadHeaderTimeout time.Duration
	// ReadTimeout is how long a client may take to send a whole request,
	// body included; default 1m. A body dribbled slower is cut off.
	ReadTimeout time.Duration
	// IdleTimeout is how long a kept-alive connection may wait for its
	// next request; default 2m.
	IdleTimeout time.Duration
	// WriteStallTimeout is how long a response may make no progress: each
	// part of it must be taken by the client within this time, so a
	// download of any length goes on while the client reads (a BMC reading
	// an ISO slowly, iPXE loading an initrd) and a client that stops
	// reading is cut off; default 1m. It is also the time a handler has
	// before it starts its response.
	WriteStallTimeout time.Duration
	// MaxHeaderBytes caps a request's headers; default 64 KiB.
	MaxHeaderBytes int
	// MaxBodyBytes caps a request's body; default 4 MiB. A larger body is
	// answered 413 and the handler reads no more than the cap. Handlers may
	// cap their routes lower.
	MaxBodyBytes int64
	// Unauthenticated limits the requests of one source that a server
	// tells are unauthenticated (Options.Unauthenticated); default 20 a
	// second, 400 at once. A source past it is answered 429 with
	// Retry-After.
	Unauthenticated Rate
	// AuthFailures limits the failed authentications (answers 401 or 403)
	// of one source; default 1 a second, 60 at once. A source past it is
	// answered 429 with Retry-After for every request until it has earned
	// a failure again.
	AuthFailures Rate
	// MaxSources is how many sources the limits remember; the one seen
	// least recently is forgotten first; default 16384.
	MaxSources int
}

// Rate is a token bucket: Burst requests at once, refilled at PerSecond.
// A PerSecond of +Inf (Unlimited) turns the limit off.
type Rate struct {
	PerSecond float64
	Burst     int
}

// Unlimited is a Rate that limits nothing.
var Unlimited = Rate{PerSecond: math.Inf(1)}

// Defaults of Budgets.
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultReadTimeout       = time.Minute
	DefaultIdleTimeout       = 2 * time.Minute
	DefaultWriteStallTimeout = time.Minute
	DefaultMaxHeaderBytes    = 64 << 10
	DefaultMaxBodyBytes      = 4 << 20
	DefaultMaxSources        = 16384
)

// Default rates of Budgets. A BMC reads virtual media in many ranges and
// every simulated machine of a lab comes from one address, so the limit on
// unauthenticated requests is generous: it stops a source from sweeping
// MAC addresses or image URLs at full speed, not a fleet from booting.
var (
	DefaultUnauthenticated = Rate{PerSecond: 20, Burst: 400}
	DefaultAuthFailures    = Rate{PerSecond: 1, Burst: 60}
)

// WithDefaults returns b with its zero fields set to their defaults.
func (b Budgets) WithDefaults() Budgets {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&b.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	def(&b.ReadTimeout, DefaultReadTimeout)
	def(&b.IdleTimeout, DefaultIdleTimeout)
	def(&b.WriteStallTimeout, DefaultWriteStallTimeout)
	if b.MaxHeaderBytes == 0 {
		b.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if b.MaxBodyBytes == 0 {
		b.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if b.Unauthenticated == (Rate{}) {
		b.Unauthenticated = DefaultUnauthenticated
	}
	if b.AuthFailures == (Rate{}) {
		b.AuthFailures = DefaultAuthFailures
	}
	if b.MaxSources == 0 {
		b.MaxSources = DefaultMaxSources
	}
	return b
}

// Validate says what is wrong with b (after WithDefaults).
func (b Budgets) Validate() error {
	var errs []error
	for name, d := range map[string]time.Duration{"read header timeout": b.ReadHeaderTimeout, "read timeout": b.ReadTimeout,
		"idle timeout": b.IdleTimeout, "write stall timeout": b.WriteStallTimeout} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("the %s %s is negative", name, d))
		}
	}
	if b.MaxHeaderBytes < 0 || b.MaxBodyBytes < 0 || b.MaxSources < 0 {
		errs = append(errs, errors.New("header, body and source caps must not be negative"))
	}
	for name, r := range map[string]Rate{"unauthenticated requests": b.Unauthenticated, "failed authentications": b.AuthFailures} {
		if r.PerSecond < 0 || r.Burst < 0 || (r.Burst == 0 && !math.IsInf(r.PerSecond, 1)) {
			errs = append(errs, fmt.Errorf("the rate of %s needs a positive burst (or an unlimited rate)", name))
		}
	}
	return errors.Join(errs...)
}

// Options configure a machine-facing server.
type Options struct {
	// Name names the server in logs and metrics, e.g. "deploy-server".
	Name string
	// Budgets are its limits; zero fields are defaults.
	Budgets Budgets
	// Unauthenticated tells the requests that carry no credential bound to
	// one host (signed image URLs, boot scripts by MAC address, lookups,
	// registrations with an InfraEnv's key, events): those count against
	// Budgets.Unauthenticated. Nil means none.
	Unauthenticated func(*http.Request) bool
	// Log receives a line when a source starts being refused; the zero
	// Logger means ctrl.Log.
	Log logr.Logger
}

// NewServer returns an http.Server serving h within o.Budgets, its
// handler wrapped by Handler. Set its Addr, or serve it on a listener.
func NewServer(h http.Handler, o Options) (*http.Server, error) {
	b := o.Budgets.WithDefaults()
	if err := b.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", o.Name, err)
	}
	return &http.Server{
		Handler:           Handler(h, o),
		ReadHeaderTimeout: b.ReadHeaderTimeout,
		ReadTimeout:       b.ReadTimeout,
		// The first write deadline; the handler moves it on as the
		// response makes progress.
		WriteTimeout:   b.WriteStallTimeout,
		IdleTimeout:    b.IdleTimeout,
		MaxHeaderBytes: b.MaxHeaderBytes,
	}, nil
}

// Handler wraps h with the per-request budgets of o: the rate limits, the
// body cap and the write deadline that moves while a response makes
// progress. NewServer uses it; the timeouts and the header cap are the
// http.Server's.
func Handler(h http.Handler, o Options) http.Handler {
	b := o.Budgets.WithDefaults()
	log := o.Log
	if log.GetSink() == nil {
		log = ctrl.Log.WithName(o.Name)
	}
	return &guard{next: h, name: o.Name, b: b, unauthenticated: o.Unauthenticated, log: log,
		requests: newLimits(b.Unauthenticated, b.MaxSources), failures: newLimits(b.AuthFailures, b.MaxSources)}
}

type guard struct {
	next            http.Handler
	name            string
	b               Budgets
	unauthenticated func(*http.Request) bool
	requests        *limits // unauthenticated requests per source
	failures        *limits // failed authentications per source
	log             logr.Logger
}

func (g *guard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	src := Source(r)
	now := time.Now()
	failures := g.failures.of(src)
	if wait, ok := failures.waitFor(now); !ok {
		g.refuse(w, failures, src, wait, reasonAuthFailures, "too many failed authentications from this address")
		return
	}
	if g.unauthenticated != nil && g.unauthenticated(r) {
		requests := g.requests.of(src)
		if wait, ok := requests.take(now); !ok {
			g.refuse(w, requests, src, wait, reasonRateLimited, "too many requests from this address")
			return
		}
	}
	if r.ContentLength > g.b.MaxBodyBytes {
		refused.WithLabelValues(g.name, reasonBodyTooLarge).Inc()
		w.Header().Set("Connection", "close") // the body stays unread
		http.Error(w, fmt.Sprintf("the request body is larger than %d bytes", g.b.MaxBodyBytes), http.StatusRequestEntityTooLarge)
		return
	}
	rw := &responseWriter{ResponseWriter: w, rc: http.NewResponseController(w), stall: g.b.WriteStallTimeout}
	rw.progress()
	if r.Body != nil && r.Body != http.NoBody {
		rw.body = &cappedBody{ReadCloser: http.MaxBytesReader(w, r.Body, g.b.MaxBodyBytes)}
		r.Body = rw.body
	}
	g.next.ServeHTTP(rw, r)
	if rw.body != nil && rw.body.exceeded.Load() {
		refused.WithLabelValues(g.name, reasonBodyTooLarge).Inc()
	}
	if rw.status == http.StatusUnauthorized || rw.status == http.StatusForbidden {
		failures.charge(now)
	}
}

// refuse answers 429 with the seconds to wait.
func (g *guard) refuse(w http.ResponseWriter, l *limit, src string, wait time.Duration, reason, msg string) {
	refused.WithLabelValues(g.name, reason).Inc()
	if l.startRefusing() {
		g.log.Info("Refusing a source for a while", "source", src, "reason", msg, "retryAfter", wait.Round(time.Second))
	}
	w.Header().Set("Retry-After", strconv.FormatInt(int64(math.Ceil(max(wait, time.Second).Seconds())), 10))
	http.Error(w, msg+": try again later", http.StatusTooManyRequests)
}

// writeChunk is the most a single write may carry: each part of a large
// write gets the whole stall timeout.
const writeChunk = 32 << 10

// responseWriter moves the connection's write deadline on with each write
// and notes the status: a failed authentication, or a body past its cap
// (which turns the handler's status into 413).
type responseWriter struct {
	http.ResponseWriter
	rc     *http.ResponseController
	stall  time.Duration
	body   *cappedBody
	status int
}

func (w *responseWriter) progress() {
	_ = w.rc.SetWriteDeadline(time.Now().Add(w.stall)) // not every writer supports deadlines (tests' recorders)
}

func (w *responseWriter) WriteHeader(code int) {
	if code >= 200 && w.status == 0 {
		if w.body != nil && w.body.exceeded.Load() {
			code = http.StatusRequestEntityTooLarge
		}
		w.status = code
	}
	w.progress()
	w.ResponseWriter.WriteHeader(code)
}

func (w *responseWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	n := 0
	for n < len(p) {
		w.progress()
		m, err := w.ResponseWriter.Write(p[n:min(len(p), n+writeChunk)])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// Flush sends what is buffered, for handlers that stream.
func (w *responseWriter) Flush() {
	w.progress()
	_ = w.rc.Flush()
}

// Unwrap lets http.ResponseController reach the server's writer.
func (w *responseWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// cappedBody is a request body cut at the cap (http.MaxBytesReader), which
// notes that the client sent more.
type cappedBody struct {
	io.ReadCloser
	exceeded atomic.Bool
}

func (b *cappedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		b.exceeded.Store(true)
	}
	return n, err
}

// Matching tells the requests that one of patterns (http.ServeMux's
// patterns, e.g. "GET /images/") matches, for Options.Unauthenticated.
func Matching(patterns ...string) func(*http.Request) bool {
	mux := http.NewServeMux()
	for _, p := range patterns {
		mux.Handle(p, http.NotFoundHandler())
	}
	return func(r *http.Request) bool {
		_, pattern := mux.Handler(r)
		return pattern != ""
	}
}
