package serving

import (
	"math"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	"k8s.io/utils/lru"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Reasons of the refused requests counted by the metric.
const (
	reasonRateLimited  = "rate_limited"
	reasonAuthFailures = "auth_failures"
	reasonBodyTooLarge = "body_too_large"
)

// refused counts the requests the budgets refused, on the manager's
// metrics endpoint.
var refused = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "metalshift_machine_server_refused_requests_total",
	Help: "Requests a machine-facing server refused for its budgets, by server and reason " +
		"(rate_limited: unauthenticated requests of one source; auth_failures: failed authentications of one source; body_too_large).",
}, []string{"server", "reason"})

func init() { ctrlmetrics.Registry.MustRegister(refused) }

// Source is the address a request is limited by: the client's IP address,
// or for IPv6 its /64, which one machine can hop within. Proxies' headers
// are not read: machines reach the servers directly.
func Source(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	ip = ip.Unmap()
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.String()
	}
	return ip.String()
}

// limits is a token bucket per source, for the most recently seen
// MaxSources sources: a source forgotten starts again with a full bucket.
type limits struct {
	rate Rate

	mu      sync.Mutex
	sources *lru.Cache
}

func newLimits(r Rate, size int) *limits {
	return &limits{rate: r, sources: lru.New(size)}
}

// of returns src's bucket.
func (l *limits) of(src string) *limit {
	l.mu.Lock()
	defer l.mu.Unlock()
	if v, ok := l.sources.Get(src); ok {
		return v.(*limit)
	}
	lim := &limit{}
	if !math.IsInf(l.rate.PerSecond, 1) {
		lim.bucket = rate.NewLimiter(rate.Limit(l.rate.PerSecond), l.rate.Burst)
	}
	l.sources.Add(src, lim)
	return lim
}

// limit is one source's bucket; a nil bucket limits nothing.
type limit struct {
	bucket *rate.Limiter

	mu       sync.Mutex
	refusing bool // since the last allowed request: log once
}

// take spends a token, or says how long until there is one.
func (l *limit) take(now time.Time) (time.Duration, bool) {
	if l.bucket == nil || l.bucket.AllowN(now, 1) {
		l.allowed()
		return 0, true
	}
	return l.wait(now), false
}

// waitFor tells whether a token is left, without spending it, or how long
// until there is one.
func (l *limit) waitFor(now time.Time) (time.Duration, bool) {
	if l.bucket == nil || l.bucket.TokensAt(now) >= 1 {
		l.allowed()
		return 0, true
	}
	return l.wait(now), false
}

// charge spends a token if one is left.
func (l *limit) charge(now time.Time) {
	if l.bucket != nil {
		l.bucket.AllowN(now, 1)
	}
}

func (l *limit) wait(now time.Time) time.Duration {
	r := l.bucket.ReserveN(now, 1)
	if !r.OK() {
		return time.Hour
	}
	defer r.CancelAt(now)
	return r.DelayFrom(now)
}

func (l *limit) allowed() {
	l.mu.Lock()
	l.refusing = false
	l.mu.Unlock()
}

// startRefusing notes a refusal and tells whether it is the first since a
// request was allowed.
func (l *limit) startRefusing() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	first := !l.refusing
	l.refusing = true
	return first
}
