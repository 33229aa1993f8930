package redfish

import (
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/metalshift/metalshift/sim/fault"
)

// The fault plan's Redfish kinds, seen through real clients: Go's HTTP
// client, and DMTF's redfishtool.

// reply is what do got: the status and the headers.
type reply struct {
	StatusCode int
	Header     http.Header
}

func do(t *testing.T, c *http.Client, method, url, body string) (reply, error) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth("admin", "s3cret-canary")
	resp, err := c.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return reply{StatusCode: resp.StatusCode, Header: resp.Header}, nil
}

// TestPlanned5xxAtTheRate: a BMC answers 500 exactly on the decisions the
// plan's seed gives its machine, about at the planned rate; the other
// machine's BMC has its own sequence.
func TestPlanned5xxAtTheRate(t *testing.T) {
	g := NewWithT(t)
	const plan = "seed=1234,redfish.5xx=20%"
	s, ts := startServer(t, 2)
	s.SetPlan(fault.MustParse(plan))
	want := fault.MustParse(plan).For("sys-1")
	failed := 0
	for i := range 200 {
		resp, err := do(t, ts.Client(), http.MethodGet, ts.URL+"/redfish/v1/Systems/sys-1", "")
		g.Expect(err).NotTo(HaveOccurred())
		if want.Decide(fault.Redfish5xx).Fired() {
			g.Expect(resp.StatusCode).To(Equal(http.StatusInternalServerError), "request %d", i+1)
			failed++
		} else {
			g.Expect(resp.StatusCode).To(Equal(http.StatusOK), "request %d", i+1)
		}
	}
	g.Expect(failed).To(BeNumerically("~", 40, 15))

	s.SetPlan(fault.MustParse("redfish.5xx=@2:503"))
	for i, status := range []int{200, 503, 200} {
		resp, err := do(t, ts.Client(), http.MethodGet, ts.URL+"/redfish/v1/Systems/sys-2", "")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(resp.StatusCode).To(Equal(status), "request %d", i+1)
	}
	s.SetPlan(fault.MustParse("redfish.5xx=100%"))
	out, err := redfishtool(t, hostPort(ts), "admin", "s3cret-canary", "raw", "GET", "/redfish/v1/Systems/sys-2")
	g.Expect(err).To(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("500"))
}

// TestPlannedHangEndsInTheClientsTimeout: the held request ends when the
// client gives up; the next one is answered.
func TestPlannedHangEndsInTheClientsTimeout(t *testing.T) {
	g := NewWithT(t)
	s, ts := startServer(t, 1)
	s.SetPlan(fault.MustParse("redfish.hang=@2"))
	c := &http.Client{Timeout: 300 * time.Millisecond}
	resp, err := do(t, c, http.MethodGet, ts.URL+"/redfish/v1/Systems/sys-1", "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	start := time.Now()
	_, err = do(t, c, http.MethodGet, ts.URL+"/redfish/v1/Systems/sys-1", "")
	var ne net.Error
	g.Expect(errors.As(err, &ne) && ne.Timeout()).To(BeTrue(), "got %v", err)
	g.Expect(time.Since(start)).To(BeNumerically(">=", 300*time.Millisecond))
	resp, err = do(t, c, http.MethodGet, ts.URL+"/redfish/v1/Systems/sys-1", "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
}

// TestPlannedResetIsAConnectionError: the connection closes without an
// answer.
func TestPlannedResetIsAConnectionError(t *testing.T) {
	g := NewWithT(t)
	s, ts := startServer(t, 1)
	s.SetPlan(fault.MustParse("redfish.reset=@1"))
	_, err := do(t, ts.Client(), http.MethodGet, ts.URL+"/redfish/v1/Managers/BMC-sys-1", "")
	g.Expect(err).To(HaveOccurred())
	g.Expect(errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) || strings.Contains(err.Error(), "EOF")).To(BeTrue(), "got %v", err)
	resp, err := do(t, ts.Client(), http.MethodGet, ts.URL+"/redfish/v1/Managers/BMC-sys-1", "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
}

// TestPlannedPowerAndMediaFaults: a slow power action is accepted but
// changes the state late; a stuck task never finishes nor acts; a failed
// insert leaves the drive empty.
func TestPlannedPowerAndMediaFaults(t *testing.T) {
	g := NewWithT(t)
	s, ts := startServer(t, 1)
	m := s.Machine("sys-1")
	s.SetPlan(fault.MustParse("redfish.slowpower=@1:300ms,redfish.task=@2,redfish.media=@1"))
	reset := ts.URL + "/redfish/v1/Systems/sys-1/Actions/ComputerSystem.Reset"

	resp, err := do(t, ts.Client(), http.MethodPost, reset, `{"ResetType": "On"}`)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.StatusCode).To(Equal(http.StatusNoContent))
	accepted := time.Now()
	g.Expect(m.PoweredOn()).To(BeFalse(), "not yet")
	g.Eventually(m.PoweredOn, 5*time.Second, 10*time.Millisecond).Should(BeTrue())
	g.Expect(time.Since(accepted)).To(BeNumerically(">=", 250*time.Millisecond))

	resp, err = do(t, ts.Client(), http.MethodPost, reset, `{"ResetType": "ForceOff"}`)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.StatusCode).To(Equal(http.StatusAccepted))
	monitor := resp.Header.Get("Location")
	g.Expect(monitor).To(HavePrefix("/redfish/v1/TaskService/Tasks/"))
	for range 3 {
		resp, err = do(t, ts.Client(), http.MethodGet, ts.URL+monitor, "")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(resp.StatusCode).To(Equal(http.StatusAccepted), "still running")
	}
	g.Expect(m.PoweredOn()).To(BeTrue(), "the stuck task did not act")

	insert := ts.URL + "/redfish/v1/Managers/BMC-sys-1/VirtualMedia/Cd/Actions/VirtualMedia.InsertMedia"
	resp, err = do(t, ts.Client(), http.MethodPost, insert, `{"Image": "http://192.0.2.1/a.iso"}`)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.StatusCode).To(Equal(http.StatusInternalServerError))
	g.Expect(m.Media()).To(BeEmpty())
	resp, err = do(t, ts.Client(), http.MethodPost, insert, `{"Image": "http://192.0.2.1/a.iso"}`)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.StatusCode).To(Equal(http.StatusNoContent))
	g.Expect(m.Media()).To(Equal("http://192.0.2.1/a.iso"))
}
