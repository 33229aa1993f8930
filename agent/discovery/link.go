package discovery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// DefaultServiceWait is how long a call of the install role keeps trying
// while the service does not answer, when Options.ServiceWait is not set:
// long enough for a hub restart or a rolling update of its manager, and
// within the time a host may take to install.
const DefaultServiceWait = time.Hour

// maxRetryInterval is the longest pause between attempts of a request
// that failed for a reason that may pass (network, 5xx).
const maxRetryInterval = 30 * time.Second

// maxRetryAfter bounds the pause a Retry-After header asks for.
const maxRetryAfter = 5 * time.Minute

// errUnreachable is the error of a call that gave up because the service
// did not answer for Options.ServiceWait. The install role does not report
// it as a failure of the install: the service could not hear it, and
// when it is back it hands the install step out again.
var errUnreachable = errors.New("the agent service did not answer")

// link follows whether the agent service answers, so that losing it and
// getting it back are logged once each whatever number of calls wait for
// it, and so that the waiting calls try again as soon as one gets through.
type link struct {
	mu sync.Mutex
	// since is when the service stopped answering; zero while it answers.
	since time.Time
	// back is closed when the service answers again (nil while it
	// answers).
	back chan struct{}
}

// lost tells the link that a request got no answer (err).
func (a *agent) lost(err error) {
	l := &a.link
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.since.IsZero() {
		return
	}
	l.since, l.back = time.Now(), make(chan struct{})
	a.opts.Logf("Lost the agent service: %v; trying again until it answers", err)
}

// answered tells the link that the service answered a request.
func (a *agent) answered() {
	l := &a.link
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.since.IsZero() {
		return
	}
	a.opts.Logf("Reconnected to the agent service after %s", time.Since(l.since).Round(time.Second))
	close(l.back)
	l.since, l.back = time.Time{}, nil
}

// reconnected is closed when the service answers again; nil while it
// answers.
func (a *agent) reconnected() <-chan struct{} {
	a.link.mu.Lock()
	defer a.link.mu.Unlock()
	return a.link.back
}

// statusError is an answer of the service other than 2xx.
type statusError struct {
	method, url string
	code        int
	status      string
	body        string
	// retryAfter is what a Retry-After header asked for (0: none).
	retryAfter time.Duration
}

func (e *statusError) Error() string {
	if e.body == "" {
		return fmt.Sprintf("%s %s: %s", e.method, e.url, e.status)
	}
	return fmt.Sprintf("%s %s: %s: %s", e.method, e.url, e.status, e.body)
}

// parseRetryAfter reads a Retry-After header: seconds or an HTTP date.
func parseRetryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	var d time.Duration
	if s, err := strconv.Atoi(v); err == nil {
		d = time.Duration(s) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = time.Until(t)
	}
	return min(max(d, 0), maxRetryAfter)
}

// statusIs tells whether err is an answer with one of codes.
func statusIs(err error, codes ...int) bool {
	var se *statusError
	if !errors.As(err, &se) {
		return false
	}
	for _, c := range codes {
		if se.code == c {
			return true
		}
	}
	return false
}

// transient tells whether a request that failed with err may succeed when
// tried again: no answer (a network error, a timeout, an answer cut
// short), 5xx, 408 and 429. Other answers (4xx) and answers that are not
// what the API says are final. The callers check whether their own
// context ended.
func transient(err error) bool {
	var se *statusError
	if errors.As(err, &se) {
		return se.code >= 500 || se.code == http.StatusRequestTimeout || se.code == http.StatusTooManyRequests
	}
	var f final
	if errors.As(err, &f) {
		return false
	}
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	if errors.As(err, &syntax) || errors.As(err, &typ) {
		return false
	}
	return !errors.Is(err, context.Canceled)
}

// unanswered tells whether a transient err means the service is not
// there: no answer, or a gateway's 502, 503 or 504 in its stead.
func unanswered(err error) bool {
	var se *statusError
	if errors.As(err, &se) {
		return se.code == http.StatusBadGateway || se.code == http.StatusServiceUnavailable || se.code == http.StatusGatewayTimeout
	}
	return transient(err)
}

// retry runs f until it succeeds, fails for good, or ctx ends. Transient
// failures are tried again after a pause that doubles from 1s to 30s, with
// jitter (capped by PollInterval), or as long as a Retry-After asked; a
// call waiting for the service tries again as soon as another call gets
// through. When wait > 0 and the service has not answered for that long,
// retry gives up with errUnreachable; a service that answers with an
// error (500, 429) for that long gets its last error returned. Losing the
// service is logged once by the link; another transient failure once per
// call, as what.
func (a *agent) retry(ctx context.Context, wait time.Duration, what string, f func() error) error {
	pause := time.Second
	var start time.Time
	for logged := false; ; {
		err := f()
		if err == nil || !transient(err) || ctx.Err() != nil {
			return err
		}
		if start.IsZero() {
			start = time.Now()
		}
		if wait > 0 && time.Since(start) >= wait {
			if unanswered(err) {
				return fmt.Errorf("%w for %s: %w", errUnreachable, wait, err)
			}
			return err
		}
		if !unanswered(err) && !logged {
			a.opts.Logf("%s: %v; trying again", what, err)
			logged = true
		}
		d, wake := a.cap(jitter(pause)), a.reconnected()
		var se *statusError
		if errors.As(err, &se) && se.retryAfter > 0 {
			// The service asked for this pause: no waking earlier.
			d, wake = max(d, se.retryAfter), nil
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		case <-wake:
			t.Stop()
		}
		pause = min(2*pause, maxRetryInterval)
	}
}

// jitter returns a pause between d/2 and d, so that the agents of many
// hosts do not come back to the service at the same instant.
func jitter(d time.Duration) time.Duration {
	return d/2 + rand.N(d/2+1) //nolint:gosec // spreads retries; nothing secret
}

// final marks an error as not transient.
type final struct{ error }

func (f final) Unwrap() error { return f.error }

// networkError tells whether err is a network error: no connection, one
// reset or cut short, or a timeout.
func networkError(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}
