package deploy

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	deployapi "github.com/metalshift/metalshift/api/deploy/v1"
)

// fakeEngine speaks the engine's side of deployapi v1 for one host and
// one inspect request, and records what the agent sent.
type fakeEngine struct {
	mu sync.Mutex
	// tokenAnswers are the status codes of the token endpoint's first
	// answers; after them it hands out the token.
	tokenAnswers []int
	tokenAsks    int
	// session the token was handed to.
	session string
	// bearers of the instructions and status calls.
	bearers []string
	reports []deployapi.StatusReport
	done    bool
	// open: the engine has not acted on the final report yet (the
	// request goes on, repeated reports are accepted); else a done
	// request ends at once.
	open bool
	// ins, when set, are the instructions (else an inspect request).
	ins *deployapi.Instructions
	// onReport, when set, sees every report.
	onReport func(deployapi.StatusReport)
}

const (
	testTicket = "0000000000000001.1800000000.ticket-signature"
	testToken  = "the-agent-token"
)

func (f *fakeEngine) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /deploy/v1/hosts/ns~h~1/token", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.tokenAsks++
		if r.Header.Get("Authorization") != "Bearer "+testTicket {
			http.Error(w, "bad ticket", http.StatusUnauthorized)
			return
		}
		if len(f.tokenAnswers) > 0 {
			code := f.tokenAnswers[0]
			f.tokenAnswers = f.tokenAnswers[1:]
			http.Error(w, "no", code)
			return
		}
		var tr deployapi.TokenRequest
		_ = json.NewDecoder(r.Body).Decode(&tr)
		f.session = tr.Session
		_ = json.NewEncoder(w).Encode(deployapi.TokenResponse{Token: testToken, Generation: "0000000000000001"})
	})
	mux.HandleFunc("GET /deploy/v1/hosts/ns~h~1/instructions", func(w http.ResponseWriter, r *http.Request) {
		if !f.authorized(w, r) {
			return
		}
		ins := deployapi.Instructions{Action: deployapi.ActionInspect, Generation: "0000000000000001"}
		if f.ins != nil {
			ins = *f.ins
		}
		_ = json.NewEncoder(w).Encode(ins)
	})
	mux.HandleFunc("POST /deploy/v1/hosts/ns~h~1/status", func(w http.ResponseWriter, r *http.Request) {
		if !f.authorized(w, r) {
			return
		}
		var rep deployapi.StatusReport
		_ = json.NewDecoder(r.Body).Decode(&rep)
		f.mu.Lock()
		defer f.mu.Unlock()
		f.reports = append(f.reports, rep)
		f.done = rep.Phase != deployapi.PhaseRunning
		if f.onReport != nil {
			f.onReport(rep)
		}
		w.WriteHeader(http.StatusAccepted)
	})
	return mux
}

// authorized records the bearer and refuses all but the token, and the
// token once the request ended, as the deploy server does.
func (f *fakeEngine) authorized(w http.ResponseWriter, r *http.Request) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	bearer := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	f.bearers = append(f.bearers, bearer)
	switch {
	case bearer != testToken:
		http.Error(w, "invalid agent token", http.StatusUnauthorized)
		return false
	case f.done && !f.open:
		http.Error(w, "request ended", http.StatusGone)
		return false
	}
	return true
}

func (f *fakeEngine) calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.bearers)
}

// logLines is an Options.Logf that keeps the lines.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

func (l *logLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// runAgent runs the agent against f until the test stops it.
func runAgent(t *testing.T, f *fakeEngine, edits ...func(*Options)) (*logLines, func()) {
	t.Helper()
	ts := httptest.NewServer(f.handler())
	t.Cleanup(ts.Close)
	logs := &logLines{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	opts := Options{Config: deployapi.BootConfig{EngineURL: ts.URL, HostID: "ns~h~1", Ticket: testTicket},
		PollInterval: time.Millisecond, Logf: logs.logf,
		Inventory: func() (*deployapi.Inventory, error) { return &deployapi.Inventory{}, nil }}
	for _, edit := range edits {
		edit(&opts)
	}
	go func() { done <- Run(ctx, opts) }()
	stop := func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}
	return logs, stop
}

// TestAgentExchangesItsTicketOnce: the agent asks for its token with the
// ticket (again while the engine cannot answer), then uses only the
// token, from the session it asked with, and stops asking once its final
// report is accepted.
func TestAgentExchangesItsTicketOnce(t *testing.T) {
	g := NewWithT(t)
	f := &fakeEngine{tokenAnswers: []int{http.StatusServiceUnavailable, http.StatusServiceUnavailable}}
	logs, stop := runAgent(t, f)
	g.Eventually(logs.String).Should(ContainSubstring("The engine has the outcome of request 0000000000000001"))
	calls := f.calls()
	stop()

	f.mu.Lock()
	defer f.mu.Unlock()
	g.Expect(f.tokenAsks).To(Equal(3), "asked again while the engine could not answer, then once")
	g.Expect(f.bearers).NotTo(BeEmpty())
	for _, b := range f.bearers {
		g.Expect(b).To(Equal(testToken), "the ticket is used for the token only")
	}
	g.Expect(f.reports).To(HaveLen(2))
	g.Expect(f.reports[0].Phase).To(Equal(deployapi.PhaseRunning))
	g.Expect(f.reports[1].Phase).To(Equal(deployapi.PhaseDone))
	for _, rep := range f.reports {
		g.Expect(rep.Session).To(Equal(f.session), "reports come from the session the token was handed to")
	}
	g.Expect(len(f.bearers)).To(Equal(calls), "nothing asked after the final report was accepted")
	g.Expect(logs.String()).NotTo(ContainSubstring(testToken), "the token is not logged")
}

// TestAgentReportsItsOutcomeToARestoredEngine: the engine accepted the
// final report, then lost it (its state was restored from a backup taken
// before); the agent, waiting for the engine to act on it, sends it again,
// and stops once the engine says the request ended.
func TestAgentReportsItsOutcomeToARestoredEngine(t *testing.T) {
	g := NewWithT(t)
	f := &fakeEngine{open: true}
	logs, stop := runAgent(t, f, func(o *Options) { o.ProgressInterval = 10 * time.Millisecond })
	defer stop()
	g.Eventually(logs.String).WithTimeout(10 * time.Second).Should(ContainSubstring("The engine has the outcome of request 0000000000000001"))
	// Restored from a backup: the request runs, no final report recorded.
	f.mu.Lock()
	f.done, f.reports = false, nil
	f.mu.Unlock()
	g.Eventually(func(g Gomega) {
		f.mu.Lock()
		defer f.mu.Unlock()
		g.Expect(f.reports).NotTo(BeEmpty())
		g.Expect(f.reports[0].Phase).To(Equal(deployapi.PhaseDone))
		g.Expect(f.reports[0].Session).To(Equal(f.session))
	}).WithTimeout(10 * time.Second).Should(Succeed())
	// The engine acted on it: the request ended, and the agent stops.
	f.mu.Lock()
	f.open = false
	f.mu.Unlock()
	g.Eventually(func(g Gomega) {
		before := f.calls()
		time.Sleep(50 * time.Millisecond) // five report intervals: none more is sent
		g.Expect(f.calls()).To(Equal(before))
	}).WithTimeout(10 * time.Second).Should(Succeed())
}

// TestAgentStopsWhenItsTicketIsRefused: a ticket the engine refuses (its
// token was handed out to someone else, it expired, its request is gone)
// ends the agent's work: it asks for nothing else.
func TestAgentStopsWhenItsTicketIsRefused(t *testing.T) {
	for _, code := range []int{http.StatusConflict, http.StatusUnauthorized, http.StatusGone} {
		t.Run(http.StatusText(code), func(t *testing.T) {
			g := NewWithT(t)
			f := &fakeEngine{tokenAnswers: []int{code, code, code}}
			logs, stop := runAgent(t, f)
			g.Eventually(logs.String).Should(ContainSubstring("the engine refused this boot's ticket; nothing more to do until the host is booted again"))
			stop()
			f.mu.Lock()
			defer f.mu.Unlock()
			g.Expect(f.tokenAsks).To(Equal(1))
			g.Expect(f.bearers).To(BeEmpty())
		})
	}
}

// TestAgentReportsProgress: while the agent writes an image it sends
// running reports with the bytes written (its heartbeat); the image's
// server holds the second MiB until the engine has heard of the first.
func TestAgentReportsProgress(t *testing.T) {
	g := NewWithT(t)
	img := make([]byte, 2<<20)
	_, _ = rand.Read(img)
	heard := make(chan struct{})
	var once sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(img)))
		_, _ = w.Write(img[:1<<20])
		w.(http.Flusher).Flush()
		select {
		case <-heard:
		case <-r.Context().Done():
			return
		}
		_, _ = w.Write(img[1<<20:])
	}))
	defer srv.Close()
	f := &fakeEngine{ins: &deployapi.Instructions{Action: deployapi.ActionDeploy, Generation: "0000000000000001",
		Image:           &deployapi.Image{URL: srv.URL + "/os.raw", Checksum: sha256Hex(img), ChecksumType: "sha256"},
		RootDeviceHints: &deployapi.RootDeviceHints{DeviceName: "/dev/mem"}}}
	f.onReport = func(rep deployapi.StatusReport) {
		if rep.Phase == deployapi.PhaseRunning && rep.BytesWritten == 1<<20 {
			once.Do(func() { close(heard) })
		}
	}
	disk := &simDisk{&memDisk{b: make([]byte, diskSize)}}
	logs, stop := runAgent(t, f, func(o *Options) {
		o.Devices, o.ProgressInterval = []BlockDevice{disk}, time.Millisecond
		o.HTTP = &http.Client{Transport: srv.Client().Transport}
	})
	g.Eventually(logs.String, 10*time.Second).Should(ContainSubstring("The engine has the outcome of request 0000000000000001"))
	stop()
	f.mu.Lock()
	defer f.mu.Unlock()
	last := f.reports[len(f.reports)-1]
	g.Expect(last.Phase).To(Equal(deployapi.PhaseDone), "%s", logs)
	g.Expect(last.BytesWritten).To(BeEquivalentTo(len(img)))
	g.Expect(f.reports[0].BytesWritten).To(BeZero(), "the claim")
	g.Expect(f.reports).To(ContainElement(And(HaveField("Phase", deployapi.PhaseRunning), HaveField("BytesWritten", BeEquivalentTo(1<<20)))))
	for _, rep := range f.reports[:len(f.reports)-1] {
		g.Expect(rep.Phase).To(Equal(deployapi.PhaseRunning))
	}
	g.Expect(disk.b[:len(img)]).To(Equal(img))
}
