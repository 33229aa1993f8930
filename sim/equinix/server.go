package equinix

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"k8s.io/utils/clock"

	equinixapi "github.com/metalshift/metalshift/api/equinixmetal/v1"
	"github.com/metalshift/metalshift/sim/fault"
)

// Timings are how long a device stays in each transitional state.
type Timings struct {
	// Queued is the time from a create to provisioning.
	Queued time.Duration
	// Provisioning is the time from provisioning (or reinstalling) to
	// active.
	Provisioning time.Duration
	// Deprovisioning is the time from a delete to the device's end.
	Deprovisioning time.Duration
	// Power is the time of a power_on or power_off.
	Power time.Duration
}

// DefaultTimings are the timings when Options.Timings is zero.
var DefaultTimings = Timings{Queued: 2 * time.Second, Provisioning: 10 * time.Second, Deprovisioning: 3 * time.Second, Power: 2 * time.Second}

// Default address blocks: loopback, so that simulated machines can use
// their devices' addresses as source addresses on this host, and a ULA
// block for IPv6, only reported.
var (
	DefaultPrivateBlock = netip.MustParsePrefix("127.64.0.0/16")
	DefaultPublicBlock  = netip.MustParsePrefix("127.65.0.0/16")
	DefaultElasticBlock = netip.MustParsePrefix("127.66.0.0/16")
	DefaultIPv6Block    = netip.MustParsePrefix("fd6d:6574:616c::/48")
)

// Defaults of the limits.
const (
	DefaultRateLimit       = 6000
	DefaultRateWindow      = time.Minute
	DefaultIPQuota         = 8
	DefaultMaxUserdata     = 64 << 10
	maxPerPage             = 1000
	defaultPerPage         = 10
	defaultIPPerPage       = 250
	maxBody                = 1 << 20
	ledgerPath             = "/_ledger"
	requestsPath           = "/_requests"
	unmatchedRequestsLabel = "unmatched"
)

// EndpointID is the fault plan's ID for requests to the API (equinix.5xx).
// Device faults are decided on the device's hostname.
const EndpointID = "equinix-api"

// Machines is told what happens to devices, to boot machines for them.
// Its methods are called in the order things happen, outside the
// emulator's lock (they may call the emulator), and must not block long.
type Machines interface {
	// Provision: the device starts provisioning (a create, or a
	// reinstall).
	Provision(m Machine)
	// Power: a power action on the device (equinixapi.ActionPowerOn,
	// ActionPowerOff or ActionReboot).
	Power(id, action string)
	// Deprovision: the device is being deleted; the machine goes.
	Deprovision(id string)
}

// Machine is what a machine needs to boot as a device.
type Machine struct {
	ID              string
	Hostname        string
	OperatingSystem string
	// MACs are the NICs' MAC addresses, in order (eth0, eth1).
	MACs []string
	// Addresses are the device's own addresses (private and public IPv4,
	// public IPv6), each with its prefix.
	Addresses     []netip.Prefix
	IPXEScriptURL string
	Userdata      string
	AlwaysPXE     bool
	// Reinstall says it is a reinstall, not a first provisioning.
	Reinstall bool
}

// Options configure the emulator. The zero value works.
type Options struct {
	// Clock drives the state machine and the rate-limit windows (default
	// the real clock).
	Clock clock.PassiveClock
	// Timings of the state machine (DefaultTimings when zero).
	Timings Timings
	// PrivateBlock, PublicBlock and ElasticBlock are the IPv4 blocks of
	// devices' private and public addresses and of reservations'
	// (public and global) addresses; IPv6Block is the IPv6 one.
	PrivateBlock, PublicBlock, ElasticBlock, IPv6Block netip.Prefix
	// IPQuota is how many public addresses a project may hold in
	// reservations before a request needs approval (DefaultIPQuota when 0;
	// negative: no quota).
	IPQuota int
	// RateLimit is how many requests a key may make in a RateWindow
	// before it gets 429 (DefaultRateLimit, DefaultRateWindow when 0).
	RateLimit  int
	RateWindow time.Duration
	// MaxUserdata is the largest userdata accepted, in bytes
	// (DefaultMaxUserdata when 0).
	MaxUserdata int
	// SSHKeys are the public keys the metadata service lists for every
	// device.
	SSHKeys []string
	// Faults is the fault plan (nil: none).
	Faults *fault.Plan
	// Machines, when set, is told when devices provision, change power
	// and go.
	Machines Machines
	// ForbidFailed answers a GET of a failed device with 403, as the
	// archived Cluster API provider assumed the API does (it took 403 for
	// a failed provisioning): a provider can be tested against both.
	ForbidFailed bool
}

// Server is the emulator. Create it with New; serve Handler (the API and
// the ledger) and MetadataHandler, or Start both on listeners.
type Server struct {
	opts  Options
	clock clock.PassiveClock

	mu        sync.Mutex
	tokens    map[string]bool
	projects  map[string]*project
	devices   map[string]*device
	ips       map[string]*reservation // by reservation ID
	assigned  map[string]*assignment  // by assignment ID (devices' own addresses too)
	hardware  map[string]*hardware
	private   *pool
	public    *pool
	elastic   *pool
	ipv6      *pool
	windows   map[string]*window
	requests  map[string]int
	pending   []func() // Machines calls, made once the lock is released
	macSerial uint32

	apiURL, metadataURL string
	servers             []*http.Server
	stop                chan struct{}
	done                sync.WaitGroup
	closeOnce           sync.Once
}

type window struct {
	start time.Time
	n     int
}

// New returns an emulator without keys or projects.
func New(opts Options) *Server {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Timings == (Timings{}) {
		opts.Timings = DefaultTimings
	}
	for _, b := range []struct {
		p   *netip.Prefix
		def netip.Prefix
	}{{&opts.PrivateBlock, DefaultPrivateBlock}, {&opts.PublicBlock, DefaultPublicBlock}, {&opts.ElasticBlock, DefaultElasticBlock}, {&opts.IPv6Block, DefaultIPv6Block}} {
		if !b.p.IsValid() {
			*b.p = b.def
		}
	}
	if opts.IPQuota == 0 {
		opts.IPQuota = DefaultIPQuota
	}
	if opts.RateLimit == 0 {
		opts.RateLimit = DefaultRateLimit
	}
	if opts.RateWindow == 0 {
		opts.RateWindow = DefaultRateWindow
	}
	if opts.MaxUserdata == 0 {
		opts.MaxUserdata = DefaultMaxUserdata
	}
	return &Server{
		opts: opts, clock: opts.Clock,
		tokens: map[string]bool{}, projects: map[string]*project{}, devices: map[string]*device{},
		ips: map[string]*reservation{}, assigned: map[string]*assignment{}, hardware: map[string]*hardware{},
		private: newPool(opts.PrivateBlock), public: newPool(opts.PublicBlock),
		elastic: newPool(opts.ElasticBlock), ipv6: newPool(opts.IPv6Block),
		windows: map[string]*window{}, requests: map[string]int{},
	}
}

// AddToken lets a key in. A key owns the projects it creates.
func (s *Server) AddToken(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokens[token] = true
}

// NewToken adds a random key and returns it.
func (s *Server) NewToken() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	tok := fmt.Sprintf("%x", b)
	s.AddToken(tok)
	return tok
}

// CreateProject creates a project owned by token, which must be known.
func (s *Server) CreateProject(token, name string) (equinixapi.Project, error) {
	s.lock()
	defer s.unlock()
	if !s.tokens[token] {
		return equinixapi.Project{}, errors.New("unknown API key")
	}
	return s.createProjectLocked(token, name).api(), nil
}

// Advance carries out the state changes that are due by the clock's time.
// Every request does so first; Start calls it every 100ms of the clock.
func (s *Server) Advance() {
	s.lock()
	s.unlock()
}

// lock takes the lock and brings the state machine up to now.
func (s *Server) lock() {
	s.mu.Lock()
	s.advanceLocked(s.clock.Now())
}

// unlock releases the lock, then makes the Machines calls that are due.
func (s *Server) unlock() {
	calls := s.pending
	s.pending = nil
	s.mu.Unlock()
	for _, c := range calls {
		c()
	}
}

// Requests counts the API's requests by method and path template (e.g.
// "GET /metal/v1/devices/{id}"; "unmatched" for paths it does not serve).
func (s *Server) Requests() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := make(map[string]int, len(s.requests))
	for k, v := range s.requests {
		m[k] = v
	}
	return m
}

// Handler serves the API under /metal/v1, the ledger at /_ledger and the
// request counts (Requests) at /_requests.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	p := equinixapi.APIPrefix
	mux.HandleFunc("GET "+p+"/projects", s.listProjects)
	mux.HandleFunc("POST "+p+"/projects", s.createProject)
	mux.HandleFunc("GET "+p+"/projects/{id}", s.getProject)
	mux.HandleFunc("DELETE "+p+"/projects/{id}", s.deleteProject)
	mux.HandleFunc("GET "+p+"/projects/{id}/devices", s.listDevices)
	mux.HandleFunc("POST "+p+"/projects/{id}/devices", s.createDevice)
	mux.HandleFunc("GET "+p+"/devices/{id}", s.getDevice)
	mux.HandleFunc("PUT "+p+"/devices/{id}", s.updateDevice)
	mux.HandleFunc("DELETE "+p+"/devices/{id}", s.deleteDevice)
	mux.HandleFunc("POST "+p+"/devices/{id}/actions", s.deviceAction)
	mux.HandleFunc("GET "+p+"/devices/{id}/ips", s.listDeviceIPs)
	mux.HandleFunc("POST "+p+"/devices/{id}/ips", s.assignIP)
	mux.HandleFunc("GET "+p+"/projects/{id}/ips", s.listReservations)
	mux.HandleFunc("POST "+p+"/projects/{id}/ips", s.requestReservation)
	mux.HandleFunc("GET "+p+"/ips/{id}", s.getIP)
	mux.HandleFunc("PATCH "+p+"/ips/{id}", s.updateIP)
	mux.HandleFunc("DELETE "+p+"/ips/{id}", s.deleteIP)
	mux.HandleFunc("GET "+p+"/projects/{id}/hardware-reservations", s.listHardware)
	mux.HandleFunc("GET "+p+"/hardware-reservations/{id}", s.getHardware)
	mux.HandleFunc("GET "+p+"/plans", s.listPlans)
	mux.HandleFunc("GET "+p+"/locations/metros", s.listMetros)
	mux.HandleFunc("GET "+p+"/operating-systems", s.listOperatingSystems)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == ledgerPath && r.Method == http.MethodGet {
			writeJSON(w, http.StatusOK, s.Ledger())
			return
		}
		if r.URL.Path == requestsPath && r.Method == http.MethodGet {
			writeJSON(w, http.StatusOK, s.Requests())
			return
		}
		_, pattern := mux.Handler(r)
		label := pattern
		if label == "" {
			label = unmatchedRequestsLabel
		}
		token := r.Header.Get(equinixapi.AuthHeader)
		s.mu.Lock()
		s.requests[label]++
		known := s.tokens[token]
		limited := s.rateLimitLocked(w.Header(), token)
		s.mu.Unlock()
		switch {
		case limited:
			writeErrors(w, http.StatusTooManyRequests, "rate limit exceeded: retry after "+w.Header().Get(equinixapi.RateLimitResetHeader))
			return
		case !known:
			writeErrors(w, http.StatusUnauthorized, "invalid authentication token")
			return
		}
		if f := s.opts.Faults.For(EndpointID).Decide(fault.Equinix5xx); f.Fired() {
			writeErrors(w, f.Status, "internal server error (injected)")
			return
		}
		if pattern == "" {
			writeErrors(w, http.StatusNotFound, "Not found")
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// rateLimitLocked counts a request of token, sets the rate-limit headers
// and says whether the request is over the limit.
func (s *Server) rateLimitLocked(h http.Header, token string) bool {
	now := s.clock.Now()
	win := s.windows[token]
	if win == nil || !now.Before(win.start.Add(s.opts.RateWindow)) {
		win = &window{start: now}
		s.windows[token] = win
	}
	win.n++
	remaining := max(s.opts.RateLimit-win.n, 0)
	reset := win.start.Add(s.opts.RateWindow)
	h.Set(equinixapi.RateLimitLimitHeader, strconv.Itoa(s.opts.RateLimit))
	h.Set(equinixapi.RateLimitRemainingHeader, strconv.Itoa(remaining))
	h.Set(equinixapi.RateLimitResetHeader, strconv.FormatInt(reset.Unix(), 10))
	return win.n > s.opts.RateLimit
}

// Start serves the API on apiAddr and the metadata service on
// metadataAddr ("127.0.0.1:0" picks ports), and advances the state
// machine every 100ms of the clock.
func (s *Server) Start(apiAddr, metadataAddr string) error {
	apiL, err := net.Listen("tcp", apiAddr)
	if err != nil {
		return err
	}
	mdL, err := net.Listen("tcp", metadataAddr)
	if err != nil {
		apiL.Close()
		return err
	}
	s.mu.Lock()
	s.apiURL = "http://" + apiL.Addr().String() + equinixapi.APIPrefix
	s.metadataURL = "http://" + mdL.Addr().String()
	s.stop = make(chan struct{})
	s.mu.Unlock()
	for _, x := range []struct {
		l net.Listener
		h http.Handler
	}{{apiL, s.Handler()}, {mdL, s.MetadataHandler()}} {
		srv := &http.Server{Handler: x.h, ReadHeaderTimeout: 10 * time.Second}
		s.servers = append(s.servers, srv)
		s.done.Add(1)
		go func() {
			defer s.done.Done()
			_ = srv.Serve(x.l)
		}()
	}
	if c, ok := s.clock.(clock.WithTicker); ok {
		t := c.NewTicker(100 * time.Millisecond)
		s.done.Add(1)
		go func() {
			defer s.done.Done()
			defer t.Stop()
			for {
				select {
				case <-s.stop:
					return
				case <-t.C():
					s.Advance()
				}
			}
		}()
	}
	return nil
}

// APIURL is the API's base URL (…/metal/v1) once started.
func (s *Server) APIURL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.apiURL
}

// MetadataURL is the metadata service's base URL once started.
func (s *Server) MetadataURL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.metadataURL
}

// Close stops the listeners Start started.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		if s.stop != nil {
			close(s.stop)
		}
		for _, srv := range s.servers {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = srv.Shutdown(ctx)
			cancel()
		}
		s.done.Wait()
	})
}

func newID() string { return uuid.NewString() }

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeErrors(w http.ResponseWriter, status int, msgs ...string) {
	writeJSON(w, status, equinixapi.ErrorResponse{Errors: msgs})
}

// httpError is an answer other than success, made under the lock and
// written after.
type httpError struct {
	status int
	msgs   []string
}

func (e *httpError) Error() string { return fmt.Sprint(e.status, e.msgs) }

func errorf(status int, format string, args ...any) *httpError {
	return &httpError{status: status, msgs: []string{fmt.Sprintf(format, args...)}}
}

func notFound() *httpError { return errorf(http.StatusNotFound, "Not found") }
func forbidden() *httpError {
	return errorf(http.StatusForbidden, "You are not authorized to view this resource")
}

func unprocessable(msgs ...string) *httpError {
	return &httpError{status: http.StatusUnprocessableEntity, msgs: msgs}
}

// answer writes v with status, or the error.
func answer(w http.ResponseWriter, status int, v any, err *httpError) {
	if err != nil {
		writeErrors(w, err.status, err.msgs...)
		return
	}
	if v == nil {
		w.WriteHeader(status)
		return
	}
	writeJSON(w, status, v)
}

// do runs f under the lock (the state brought up to now first) and
// writes its answer once the lock is released.
func (s *Server) do(w http.ResponseWriter, status int, f func() (any, *httpError)) {
	s.lock()
	v, err := f()
	s.unlock()
	answer(w, status, v, err)
}

// decode reads a JSON body into v.
func decode(r *http.Request, v any) *httpError {
	data, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return errorf(http.StatusBadRequest, "reading the body: %v", err)
	}
	if len(data) > maxBody {
		return errorf(http.StatusRequestEntityTooLarge, "the body is over %d bytes", maxBody)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return errorf(http.StatusUnprocessableEntity, "the body is not valid JSON: %v", err)
	}
	return nil
}

// page is a request's page and page size.
type page struct {
	number, size int
}

func readPage(r *http.Request, defaultSize int) (page, *httpError) {
	p := page{number: 1, size: defaultSize}
	q := r.URL.Query()
	if v := q.Get("page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100000 {
			return p, unprocessable("page must be a number from 1 to 100000")
		}
		p.number = n
	}
	if v := q.Get("per_page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return p, unprocessable("per_page must be a number from 1 to 1000")
		}
		p.size = min(n, maxPerPage)
	}
	return p, nil
}

// paginate returns the page's slice of n items (as bounds) and its meta
// block, whose links keep the request's other query parameters.
func paginate(r *http.Request, p page, n int) (from, to int, meta equinixapi.Meta) {
	last := max((n+p.size-1)/p.size, 1)
	link := func(number int) *equinixapi.Href {
		q := url.Values{}
		for k, v := range r.URL.Query() {
			q[k] = slices.Clone(v)
		}
		q.Set("page", strconv.Itoa(number))
		q.Set("per_page", strconv.Itoa(p.size))
		return &equinixapi.Href{Href: r.URL.Path + "?" + q.Encode()}
	}
	meta = equinixapi.Meta{First: link(1), Last: link(last), Self: link(p.number), Total: n, CurrentPage: p.number, LastPage: last}
	if p.number < last {
		meta.Next = link(p.number + 1)
	}
	if p.number > 1 {
		meta.Previous = link(min(p.number-1, last))
	}
	from = min((p.number-1)*p.size, n)
	to = min(from+p.size, n)
	return from, to, meta
}

// created is what every object of the emulator has: when it was made,
// and its ID.
type created interface{ madeAt() (time.Time, string) }

func (p *project) madeAt() (time.Time, string)     { return p.created, p.id }
func (d *device) madeAt() (time.Time, string)      { return d.created, d.id }
func (a *assignment) madeAt() (time.Time, string)  { return a.created, a.id }
func (r *reservation) madeAt() (time.Time, string) { return r.created, r.id }
func (h *hardware) madeAt() (time.Time, string)    { return h.created, h.id }

// sortByCreation orders objects as the API lists them: oldest first, by
// ID among those made in the same instant.
func sortByCreation[T created](list []T) {
	slices.SortFunc(list, func(a, b T) int {
		at, aid := a.madeAt()
		bt, bid := b.madeAt()
		if c := at.Compare(bt); c != 0 {
			return c
		}
		return strings.Compare(aid, bid)
	})
}
