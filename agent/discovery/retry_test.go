package discovery_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/metalshift/metalshift/agent/discovery"
	assistedapi "github.com/metalshift/metalshift/api/assisted/v2"
	"github.com/metalshift/metalshift/internal/ports"
)

// countingTransport counts the requests that got no answer.
type countingTransport struct {
	mu     sync.Mutex
	errors int
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil {
		c.mu.Lock()
		c.errors++
		c.mu.Unlock()
	}
	return resp, err
}

func (c *countingTransport) failures() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.errors
}

// serveOn moves the service to addr: the server it ran on, if any, is
// closed (its listener and connections), and a new one serves the same
// API and state on addr.
func (s *service) serveOn(t *testing.T, addr string) {
	t.Helper()
	s.server.Close()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(s.handler)
	_ = srv.Listener.Close()
	srv.Listener = l
	s.mu.Lock()
	s.down = false
	s.server = srv
	s.mu.Unlock()
	srv.Start()
}

// logsWith returns the machine's log lines that start with prefix.
func (m *machine) logsWith(prefix string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, l := range m.logs {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return out
}

// TestServiceRestart: the service goes away in the middle of the install's
// Ignition download, again in the middle of a progress report, and again
// in the middle of the OS image download (the same server serves it here),
// and comes back on the same address after the agent found it gone each
// time. The agent waits for it, says once that it lost it and once that it
// is back, and the install completes: every stage recorded, the one whose
// report was cut short included, no Failed, the image on the disk.
func TestServiceRestart(t *testing.T) {
	g := NewWithT(t)
	r, err := ports.Reserve(0)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(r.Release)
	s := newService(t)
	s.serveOn(t, r.Addr())

	req := s.installRequest(assistedapi.RoleMaster, assistedapi.HighAvailabilityFull)
	cuts := make(chan string, 3)
	done := map[string]bool{}
	s.hook = func(what string) answer {
		switch what {
		case "file " + req.IgnitionFileName, "progress " + string(wr), "image":
			if !done[what] {
				done[what] = true
				cuts <- what
				return answer{code: cut}
			}
		}
		return answer{}
	}
	s.queue(batch(step(assistedapi.StepInstall, "install-1", req)))
	tr := &countingTransport{}
	m, ran, _ := start(t, s, func(o *discovery.Options) { o.HTTP = &http.Client{Transport: tr} })

	for i, want := range []string{"file " + req.IgnitionFileName, "progress " + string(wr), "image"} {
		g.Eventually(cuts, 10*time.Second).Should(Receive(Equal(want)))
		s.server.Close()
		n := tr.failures()
		// Well past the few attempts an agent that gives up would make.
		g.Eventually(tr.failures, 10*time.Second).Should(BeNumerically(">=", n+20), "the agent keeps calling while the service is away")
		// The image download is not a call of the service: the
		// heartbeat's polls find the service gone.
		g.Eventually(func() []string { return m.logsWith("Lost the agent service") }).Should(HaveLen(i + 1))
		s.serveOn(t, r.Addr())
	}

	g.Eventually(ran, 10*time.Second).Should(Receive(BeNil()))
	g.Expect(m.rebootCount()).To(Equal(1))
	g.Expect(s.getStages()).To(Equal([]assistedapi.HostStage{st, in, wr, cp, rb}))
	g.Expect(s.getReplies()).To(Equal([]assistedapi.StepReply{{StepType: assistedapi.StepInstall, StepID: "install-1"}}))
	s.mu.Lock()
	g.Expect(s.fileRequests).To(Equal(2), "the cut download, then one after the service came back")
	s.mu.Unlock()
	g.Expect(m.logsWith("Lost the agent service")).To(HaveLen(3))
	reconnected := m.logsWith("Reconnected to the agent service")
	g.Expect(reconnected).To(HaveLen(3))
	g.Expect(m.logsWith("Writing the OS image to /dev/sda: ")).To(HaveExactElements(
		MatchRegexp(`^Writing the OS image to /dev/sda: downloading the image: Get ".*": .*; trying again$`),
		"Writing the OS image to /dev/sda: the image server answered again"))
	disk := m.disk.b // Run returned: nothing writes it any more
	g.Expect(disk[512:len(s.image)]).To(Equal(s.image[512:]), "the image is on the disk")
	g.Expect(reconnected).To(HaveEach(MatchRegexp(`^Reconnected to the agent service after [0-9hms.]+$`)))
}

// TestServiceRefusals: answers other than the service's absence keep their
// meaning: a 404 of a file download fails the install at once (stage
// Failed), a 403 of a progress report is logged and not sent again, and a
// 503 with Retry-After is tried again no sooner than it asks.
func TestServiceRefusals(t *testing.T) {
	t.Run("file 404", func(t *testing.T) {
		g := NewWithT(t)
		s := newService(t)
		req := s.installRequest(assistedapi.RoleMaster, assistedapi.HighAvailabilityFull)
		s.hook = func(what string) answer {
			if what == "file "+req.IgnitionFileName {
				return answer{code: http.StatusNotFound}
			}
			return answer{}
		}
		s.queue(batch(step(assistedapi.StepInstall, "install-1", req)))
		m, _, _ := start(t, s, nil)
		g.Eventually(s.getReplies, 10*time.Second).Should(HaveLen(1))
		g.Expect(s.getReplies()[0].ExitCode).To(Equal(1))
		g.Expect(s.getReplies()[0].Error).To(ContainSubstring("404"))
		g.Expect(s.getStages()).To(Equal([]assistedapi.HostStage{st, in, assistedapi.StageFailed}))
		s.mu.Lock()
		defer s.mu.Unlock()
		g.Expect(s.fileRequests).To(Equal(1), "a 404 is not tried again")
		g.Expect(m.rebootCount()).To(BeZero())
	})
	t.Run("progress 403", func(t *testing.T) {
		g := NewWithT(t)
		s := newService(t)
		req := s.installRequest(assistedapi.RoleMaster, assistedapi.HighAvailabilityFull)
		s.hook = func(what string) answer {
			if what == "progress "+string(wr) {
				return answer{code: http.StatusForbidden}
			}
			return answer{}
		}
		s.queue(batch(step(assistedapi.StepInstall, "install-1", req)))
		m, ran, _ := start(t, s, nil)
		g.Eventually(ran, 10*time.Second).Should(Receive(BeNil()))
		g.Expect(m.rebootCount()).To(Equal(1), "a refused report does not fail the install")
		g.Expect(s.getStages()).To(Equal([]assistedapi.HostStage{st, in, cp, rb}))
		s.mu.Lock()
		defer s.mu.Unlock()
		g.Expect(s.progressRequests).To(Equal(5), "one request a stage: the 403 is not tried again")
		g.Expect(m.logsWith(`Reporting stage "Writing image to disk"`)).To(HaveLen(1))
	})
	t.Run("503 with Retry-After", func(t *testing.T) {
		g := NewWithT(t)
		s := newService(t)
		req := s.installRequest(assistedapi.RoleMaster, assistedapi.HighAvailabilityFull)
		var at []time.Time
		s.hook = func(what string) answer {
			if what != "file "+req.IgnitionFileName {
				return answer{}
			}
			at = append(at, time.Now())
			if len(at) == 1 {
				return answer{code: http.StatusServiceUnavailable, retryAfter: "1"}
			}
			return answer{}
		}
		s.queue(batch(step(assistedapi.StepInstall, "install-1", req)))
		m, ran, _ := start(t, s, nil)
		g.Eventually(ran, 10*time.Second).Should(Receive(BeNil()))
		g.Expect(m.rebootCount()).To(Equal(1))
		s.mu.Lock()
		defer s.mu.Unlock()
		g.Expect(at).To(HaveLen(2))
		g.Expect(at[1].Sub(at[0])).To(BeNumerically(">=", time.Second), "PollInterval (10ms) does not shorten a Retry-After")
	})
}

// TestServiceWait: a service that stays away longer than ServiceWait
// makes the agent leave the install step without a reply and without
// reporting Failed; it goes on polling, and runs the step again when the
// service, back, hands it out again.
func TestServiceWait(t *testing.T) {
	g := NewWithT(t)
	s := newService(t)
	req := s.installRequest(assistedapi.RoleMaster, assistedapi.HighAvailabilityFull)
	away := true
	s.hook = func(what string) answer {
		if away && what == "file "+req.IgnitionFileName {
			return answer{code: http.StatusServiceUnavailable} // a gateway's, with the service away
		}
		return answer{}
	}
	s.queue(batch(step(assistedapi.StepInstall, "install-1", req)))
	m, ran, _ := start(t, s, func(o *discovery.Options) { o.ServiceWait = 200 * time.Millisecond })

	g.Eventually(func() []string { return m.logsWith("Step install (install-1) left") }, 10*time.Second).Should(HaveLen(1))
	polls := func() int { s.mu.Lock(); defer s.mu.Unlock(); return s.polls }
	n := polls()
	g.Eventually(polls).Should(BeNumerically(">", n), "the agent goes on polling")
	g.Expect(s.getReplies()).To(BeEmpty())
	g.Expect(s.getStages()).To(Equal([]assistedapi.HostStage{st, in}))

	s.mu.Lock()
	away = false
	s.mu.Unlock()
	s.queue(batch(step(assistedapi.StepInstall, "install-1", req)))
	g.Eventually(ran, 10*time.Second).Should(Receive(BeNil()))
	g.Expect(m.rebootCount()).To(Equal(1))
	g.Expect(s.getStages()).To(Equal([]assistedapi.HostStage{st, in, st, in, wr, cp, rb}))
	g.Expect(s.getReplies()).To(Equal([]assistedapi.StepReply{{StepType: assistedapi.StepInstall, StepID: "install-1"}}))
}
