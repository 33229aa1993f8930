package redfish

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/metalshift/metalshift/hostengine/pkg/egress"
	"github.com/metalshift/metalshift/sim/machine"
	simredfish "github.com/metalshift/metalshift/sim/redfish"
)

const canary = "pa55-CANARY-9f3"

func newSim(t *testing.T, tlsServer bool) (*simredfish.Server, *httptest.Server) {
	t.Helper()
	s := simredfish.New("admin", canary)
	s.Add(machine.New("node-0", "uuid-0", machine.Hardware{
		Manufacturer: "Sim", Model: "M1", CPUArch: "x86_64", CPUModel: "Sim CPU", CPUCount: 8, CPUMHz: 3000, RAMMiB: 32768,
		NICs:  []machine.NIC{{Name: "eno1", MAC: "52:54:00:aa:bb:01", SpeedGbps: 25}},
		Disks: []*machine.Disk{{Name: "/dev/sda", SizeBytes: 1 << 40, Model: "Disk", Vendor: "V", SerialNumber: "S1", WWN: "0x5000", Type: "SSD"}},
	}))
	var ts *httptest.Server
	if tlsServer {
		ts = httptest.NewTLSServer(s.Handler())
	} else {
		ts = httptest.NewServer(s.Handler())
	}
	t.Cleanup(ts.Close)
	return s, ts
}

func newClient(t *testing.T, endpoint, password string, insecure bool) *Client {
	t.Helper()
	c, err := New(Options{Endpoint: endpoint, Username: "admin", Password: password, InsecureSkipVerify: insecure,
		Timeout: 2 * time.Second, Egress: egress.Policy{AllowLoopback: true}}) // the simulator listens on loopback
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestPowerBootMediaInventory(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s, ts := newSim(t, false)
	c := newClient(t, ts.URL, canary, false)

	paths, err := c.SystemPaths(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(paths).To(ConsistOf("/redfish/v1/Systems/node-0"))
	sysPath := paths[0]
	m := s.Machine("node-0")
	// done checks that a change finished without a background task.
	done := func(monitor string, err error) {
		t.Helper()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(monitor).To(BeEmpty(), "a task monitor for an immediate change")
	}

	done(c.SetBoot(ctx, sysPath, Boot{BootSourceOverrideTarget: "Cd", BootSourceOverrideEnabled: "Once", BootSourceOverrideMode: "UEFI"}))
	g.Expect(m.Override()).To(Equal(machine.BootOverride{Target: machine.BootCd, UEFI: true}))

	sys, _, err := c.System(ctx, sysPath)
	g.Expect(err).NotTo(HaveOccurred())
	cd, err := c.CDPath(ctx, sys)
	g.Expect(err).NotTo(HaveOccurred())
	done(c.InsertMedia(ctx, cd, "http://192.0.2.9/a.iso"))
	done(c.InsertMedia(ctx, cd, "http://192.0.2.9/b.iso")) // replacing media ejects first
	g.Expect(m.Media()).To(Equal("http://192.0.2.9/b.iso"))
	done(c.EjectMedia(ctx, cd))
	done(c.EjectMedia(ctx, cd)) // ejecting an empty drive is a no-op
	g.Expect(m.Media()).To(BeEmpty())

	// Slow power runs behind a task monitor, which the client returns
	// without waiting; Task reads it once per call.
	m.SetPowerLag(200 * time.Millisecond)
	monitor, err := c.Reset(ctx, sysPath, ResetOn)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(monitor).To(HavePrefix("/redfish/v1/TaskService/Tasks/"))
	running, err := c.Task(ctx, monitor)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(running).To(BeTrue(), "the task runs while the power lags")
	g.Expect(m.PoweredOn()).To(BeFalse())
	g.Eventually(func() (bool, error) { return c.Task(ctx, monitor) }).WithTimeout(5 * time.Second).Should(BeFalse())
	g.Expect(m.PoweredOn()).To(BeTrue())

	inv, err := c.Inventory(ctx, sysPath)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(inv.System.ProcessorSummary.Count).To(Equal(8))
	g.Expect(inv.System.MemorySummary.TotalSystemMemoryGiB).To(BeNumerically("==", 32))
	g.Expect(inv.NICs).To(ConsistOf(HaveField("MACAddress", "52:54:00:aa:bb:01")))
	g.Expect(inv.Drives).To(ConsistOf(HaveField("CapacityBytes", int64(1<<40))))
	g.Expect(inv.Processors).To(ConsistOf(HaveField("MaxSpeedMHz", float64(3000))))
	g.Expect(c.Close(ctx)).To(Succeed())
}

// exchange is one request as the BMC received it.
type exchange struct {
	Method, Path string
	Token        string // the X-Auth-Token sent
	Basic        bool   // Basic credentials sent
	Status       int
	NewToken     string // the X-Auth-Token answered: a session was created
}

// recorder serves the emulator and logs every exchange.
type recorder struct {
	h   http.Handler
	mu  sync.Mutex
	log []exchange
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	_, _, basic := req.BasicAuth()
	sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
	r.h.ServeHTTP(sw, req)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.log = append(r.log, exchange{Method: req.Method, Path: req.URL.Path, Token: req.Header.Get("X-Auth-Token"), Basic: basic,
		Status: sw.status, NewToken: sw.Header().Get("X-Auth-Token")})
}

func (r *recorder) exchanges() []exchange {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]exchange(nil), r.log...)
}

// TestSessionExpiryIsRecovered: when the BMC ends the session, the client
// logs in again and goes on with the new session's token; it never falls
// back to sending the password with every request (Basic auth).
func TestSessionExpiryIsRecovered(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s, _ := newSim(t, false)
	rec := &recorder{h: s.Handler()}
	ts := httptest.NewServer(rec)
	t.Cleanup(ts.Close)
	c := newClient(t, ts.URL, canary, false)
	const sessions = "/redfish/v1/SessionService/Sessions"

	_, err := c.SystemPaths(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	before := rec.exchanges()
	g.Expect(before).NotTo(BeEmpty())
	g.Expect(before[0]).To(And(HaveField("Method", http.MethodPost), HaveField("Path", sessions), HaveField("Status", http.StatusCreated)),
		"the client logs in first")
	first := before[0].NewToken
	g.Expect(first).NotTo(BeEmpty())
	for _, e := range before[1:] {
		g.Expect(e.Token).To(Equal(first), "%s %s", e.Method, e.Path)
	}

	s.SetCredentials("admin", canary) // ends every session
	_, err = c.SystemPaths(ctx)
	g.Expect(err).NotTo(HaveOccurred(), "the client logs in again")
	after := rec.exchanges()[len(before):]
	g.Expect(len(after)).To(BeNumerically(">=", 3), "%+v", after)
	g.Expect(after[0].Token).To(Equal(first))
	g.Expect(after[0].Status).To(Equal(http.StatusUnauthorized), "the old session is gone")
	g.Expect(after[1]).To(And(HaveField("Method", http.MethodPost), HaveField("Path", sessions), HaveField("Status", http.StatusCreated)),
		"a new session")
	second := after[1].NewToken
	g.Expect(second).NotTo(BeEmpty())
	g.Expect(second).NotTo(Equal(first))
	for _, e := range after[2:] {
		g.Expect(e.Token).To(Equal(second), "%s %s goes on with the new session", e.Method, e.Path)
		g.Expect(e.Status).To(BeNumerically("<", 300), "%s %s", e.Method, e.Path)
	}

	g.Expect(c.Close(ctx)).To(Succeed())
	all := rec.exchanges()
	last := all[len(all)-1]
	g.Expect(last).To(And(HaveField("Method", http.MethodDelete), HaveField("Token", second), HaveField("Status", http.StatusNoContent)),
		"Close ends the new session")
	logins := 0
	for _, e := range all {
		g.Expect(e.Basic).To(BeFalse(), "no Basic auth once the BMC has sessions: %s %s", e.Method, e.Path)
		if e.Method == http.MethodPost && e.Path == sessions {
			logins++
		}
	}
	g.Expect(logins).To(Equal(2))
}

func TestErrors(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s, ts := newSim(t, false)

	_, err := newClient(t, ts.URL, "wrong-"+canary, false).SystemPaths(ctx)
	g.Expect(errors.Is(err, ErrUnauthorized)).To(BeTrue(), "got %v", err)
	g.Expect(err.Error()).NotTo(ContainSubstring(canary))

	_, _, err = newClient(t, ts.URL, canary, false).System(ctx, "/redfish/v1/Systems/nope")
	g.Expect(errors.Is(err, ErrNotFound)).To(BeTrue(), "got %v", err)

	s.SetFaults(simredfish.Faults{ErrorRate: 1})
	_, err = newClient(t, ts.URL, canary, false).SystemPaths(ctx)
	var he *HTTPError
	g.Expect(errors.As(err, &he)).To(BeTrue(), "got %v", err)
	g.Expect(he.Status).To(Equal(500))

	s.SetFaults(simredfish.Faults{Down: true})
	_, err = newClient(t, ts.URL, canary, false).SystemPaths(ctx)
	g.Expect(err).To(HaveOccurred())

	s.SetFaults(simredfish.Faults{Hang: true})
	_, err = newClient(t, ts.URL, canary, false).SystemPaths(ctx)
	var ne net.Error
	g.Expect(errors.As(err, &ne)).To(BeTrue(), "got %v", err)
	g.Expect(ne.Timeout()).To(BeTrue(), "a BMC that never answers ends in the client's timeout: %v", err)
	s.SetFaults(simredfish.Faults{})
}

func TestTLSIsVerifiedUnlessDisabled(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	_, ts := newSim(t, true)
	_, err := newClient(t, ts.URL, canary, false).SystemPaths(ctx)
	g.Expect(err).To(HaveOccurred())
	g.Expect(strings.ToLower(err.Error())).To(ContainSubstring("certificate"))
	_, err = newClient(t, ts.URL, canary, true).SystemPaths(ctx)
	g.Expect(err).NotTo(HaveOccurred())
}

// TestEgressPolicyRefusesBeforeAnythingIsSent: with the production policy
// a BMC on loopback, by address or by a name that resolves there, gets no
// request: the connection is refused before the login sends the password.
func TestEgressPolicyRefusesBeforeAnythingIsSent(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s, _ := newSim(t, false)
	rec := &recorder{h: s.Handler()}
	ts := httptest.NewServer(rec)
	t.Cleanup(ts.Close)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(ts.URL, "http://"))
	for _, endpoint := range []string{ts.URL, "http://localhost:" + port, "http://[::1]:" + port} {
		c, err := New(Options{Endpoint: endpoint, Username: "admin", Password: canary, Timeout: 2 * time.Second})
		g.Expect(err).NotTo(HaveOccurred())
		_, err = c.SystemPaths(ctx)
		g.Expect(errors.Is(err, egress.ErrRefused)).To(BeTrue(), "%s: got %v", endpoint, err)
		g.Expect(err.Error()).To(ContainSubstring("is a loopback address"))
		g.Expect(err.Error()).NotTo(ContainSubstring(canary))
	}
	g.Expect(rec.exchanges()).To(BeEmpty(), "the BMC saw no request")
}
