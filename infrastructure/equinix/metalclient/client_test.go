package metalclient

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clocktesting "k8s.io/utils/clock/testing"

	equinixapi "github.com/metalshift/metalshift/api/equinixmetal/v1"
	"github.com/metalshift/metalshift/sim/equinix"
	"github.com/metalshift/metalshift/sim/fault"
)

var timings = equinix.Timings{Queued: time.Second, Provisioning: time.Minute, Deprovisioning: 5 * time.Second, Power: time.Second}

type env struct {
	sim     *equinix.Server
	clock   *clocktesting.FakeClock
	url     string
	token   string
	project string
	c       *Client
}

func newEnv(t *testing.T, opts equinix.Options) *env {
	t.Helper()
	e := &env{clock: clocktesting.NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))}
	opts.Clock, opts.Timings = e.clock, timings
	e.sim = equinix.New(opts)
	srv := httptest.NewServer(e.sim.Handler())
	t.Cleanup(srv.Close)
	e.url = srv.URL + equinixapi.APIPrefix
	e.token = e.sim.NewToken()
	p, err := e.sim.CreateProject(e.token, "client")
	if err != nil {
		t.Fatal(err)
	}
	e.project = p.ID
	e.c = e.client(t, e.token, 0)
	return e
}

func (e *env) client(t *testing.T, token string, perPage int) *Client {
	t.Helper()
	c, err := New(Options{BaseURL: e.url, Token: token, PerPage: perPage, UserAgent: "metalshift-test"})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func ipxeDevice(hostname string, tags ...string) equinixapi.DeviceCreateInput {
	return equinixapi.DeviceCreateInput{Metro: "da", Plan: "c3.small.x86", OperatingSystem: equinixapi.OSCustomIPXE, Hostname: hostname,
		IPXEScriptURL: "http://127.0.0.1:1/boot.ipxe", Tags: tags}
}

// TestListDevicesReadsEveryPage: 25 devices at 10 a page are read whole,
// in three requests; a tag filter reads every page of its matches.
func TestListDevicesReadsEveryPage(t *testing.T) {
	g := NewWithT(t)
	e := newEnv(t, equinix.Options{})
	ctx := context.Background()
	for i := range 25 {
		tags := []string{"cluster:x"}
		if i%2 == 0 {
			tags = append(tags, "even")
		}
		_, err := e.c.CreateDevice(ctx, e.project, ipxeDevice(fmt.Sprintf("d-%02d", i), tags...))
		g.Expect(err).NotTo(HaveOccurred())
		e.clock.Step(time.Millisecond)
	}
	c := e.client(t, e.token, 10)
	before := e.sim.Requests()["GET /metal/v1/projects/{id}/devices"]
	all, err := c.ListDevices(ctx, e.project, DeviceFilter{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(all).To(HaveLen(25))
	seen := map[string]bool{}
	for _, d := range all {
		seen[d.Hostname] = true
	}
	g.Expect(seen).To(HaveLen(25), "every device once")
	g.Expect(e.sim.Requests()["GET /metal/v1/projects/{id}/devices"] - before).To(Equal(3))

	even, err := c.ListDevices(ctx, e.project, DeviceFilter{Tag: "even"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(even).To(HaveLen(13), "two pages of matches")
	for _, d := range even {
		g.Expect(d.Tags).To(ContainElement("even"))
	}
	one, err := c.ListDevices(ctx, e.project, DeviceFilter{Hostname: "d-07"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(one).To(HaveLen(1))
	none, err := c.ListDevices(ctx, e.project, DeviceFilter{Tag: "nothing"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(none).To(BeEmpty())
}

// TestLifecycle: a device through create, active, power, reinstall and
// delete; an elastic address reserved, assigned, unassigned and released;
// the ledger empty at the end.
func TestLifecycle(t *testing.T) {
	g := NewWithT(t)
	e := newEnv(t, equinix.Options{})
	ctx := context.Background()
	d, err := e.c.CreateDevice(ctx, e.project, ipxeDevice("life-0", "cluster:l"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.State).To(Equal(equinixapi.StateQueued))
	e.clock.Step(timings.Queued + timings.Provisioning)
	d, err = e.c.GetDevice(ctx, d.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.State).To(Equal(equinixapi.StateActive))

	g.Expect(e.c.PowerOff(ctx, d.ID)).To(Succeed())
	e.clock.Step(timings.Power)
	g.Expect(e.c.PowerOn(ctx, d.ID)).To(Succeed())
	err = e.c.Reboot(ctx, d.ID)
	g.Expect(IsUnprocessable(err)).To(BeTrue(), "powering on: %v", err)
	e.clock.Step(timings.Power)
	g.Expect(e.c.Reboot(ctx, d.ID)).To(Succeed())
	g.Expect(e.c.DeviceAction(ctx, d.ID, equinixapi.DeviceActionInput{Type: equinixapi.ActionReinstall})).To(Succeed())
	d, _ = e.c.GetDevice(ctx, d.ID)
	g.Expect(d.State).To(Equal(equinixapi.StateReinstalling))
	e.clock.Step(timings.Provisioning)

	tags := []string{"cluster:l", "user:tag"}
	d, err = e.c.UpdateDevice(ctx, d.ID, equinixapi.DeviceUpdateInput{Tags: &tags})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.Tags).To(Equal(tags))

	res, err := e.c.RequestIPReservation(ctx, e.project, equinixapi.IPReservationRequest{Type: equinixapi.IPTypePublicIPv4, Quantity: 1, Metro: "da",
		Tags: []string{"cluster:l:api"}, FailOnApprovalRequired: true})
	g.Expect(err).NotTo(HaveOccurred())
	found, err := e.c.ListIPReservations(ctx, e.project, IPFilter{Tag: "cluster:l:api"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(HaveLen(1))
	a, err := e.c.AssignIP(ctx, d.ID, res.Address)
	g.Expect(err).NotTo(HaveOccurred())
	ips, err := e.c.ListDeviceIPs(ctx, d.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ips).To(ContainElement(HaveField("ID", a.ID)))
	err = e.c.ReleaseIPReservation(ctx, res.ID)
	g.Expect(IsUnprocessable(err)).To(BeTrue(), "assigned: %v", err)
	got, err := e.c.GetIPAssignment(ctx, a.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.AssignedTo.ID).To(Equal(d.ID))
	g.Expect(e.c.Unassign(ctx, a.ID)).To(Succeed())
	g.Expect(e.c.ReleaseIPReservation(ctx, res.ID)).To(Succeed())
	_, err = e.c.GetIPReservation(ctx, res.ID)
	g.Expect(IsNotFound(err)).To(BeTrue(), "%v", err)

	g.Expect(e.c.DeleteDevice(ctx, d.ID, true)).To(Succeed())
	d, err = e.c.GetDevice(ctx, d.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.State).To(Equal(equinixapi.StateDeprovisioning))
	e.clock.Step(timings.Deprovisioning)
	_, err = e.c.GetDevice(ctx, d.ID)
	g.Expect(IsNotFound(err)).To(BeTrue(), "%v", err)
	g.Expect(e.sim.Ledger().Empty()).To(BeTrue())
	g.Expect(e.c.DeleteProject(ctx, e.project)).To(Succeed())

	plans, err := e.c.ListPlans(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(plans).NotTo(BeEmpty())
	metros, err := e.c.ListMetros(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(metros).NotTo(BeEmpty())
	oses, err := e.c.ListOperatingSystems(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(oses).To(ContainElement(HaveField("Slug", equinixapi.OSCustomIPXE)))
	p, err := e.c.CreateProject(ctx, "second")
	g.Expect(err).NotTo(HaveOccurred())
	for range 3 {
		_, err := e.sim.AddHardwareReservation(p.ID, "am", "m3.small.x86")
		g.Expect(err).NotTo(HaveOccurred())
	}
	hws, err := e.client(t, e.token, 2).ListHardwareReservations(ctx, p.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(hws).To(HaveLen(3), "both pages")
	onHW, err := e.c.CreateDevice(ctx, p.ID, equinixapi.DeviceCreateInput{Metro: "am", Plan: "m3.small.x86", OperatingSystem: "rocky_9", HardwareReservationID: hws[1].ID})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(onHW.HardwareReservation.ID).To(Equal(hws[1].ID))
	hw, err := e.c.GetHardwareReservation(ctx, hws[1].ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(hw.Device.ID).To(Equal(onHW.ID))
	g.Expect(err).NotTo(HaveOccurred())
	projects, err := e.c.ListProjects(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(projects).To(ConsistOf(HaveField("ID", p.ID)))
}

// TestErrors: answers other than success are typed, carry the API's
// messages and the rate limit, and never show the key.
func TestErrors(t *testing.T) {
	g := NewWithT(t)
	e := newEnv(t, equinix.Options{RateLimit: 5, RateWindow: time.Minute, Faults: fault.MustParse("equinix.5xx=@5:503")})
	ctx := context.Background()

	_, err := e.c.GetDevice(ctx, "7f0c7a0e-1111-4222-8333-944455556666")
	g.Expect(IsNotFound(err)).To(BeTrue(), "%v", err)
	_, err = e.c.CreateDevice(ctx, e.project, equinixapi.DeviceCreateInput{Metro: "da", Plan: "c3.small.x86", OperatingSystem: equinixapi.OSCustomIPXE})
	g.Expect(IsUnprocessable(err)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring("ipxe_script_url"), "names the field")
	var ae *APIError
	g.Expect(err).To(BeAssignableToTypeOf(ae))
	g.Expect(e.c.RateLimit().Limit).To(Equal(5))
	g.Expect(e.c.RateLimit().Remaining).To(Equal(3))

	other := e.client(t, e.sim.NewToken(), 0)
	_, err = other.GetProject(ctx, e.project)
	g.Expect(IsForbidden(err)).To(BeTrue(), "%v", err)

	bad := e.client(t, "secret-key-that-is-wrong", 0)
	_, err = bad.ListPlans(ctx)
	g.Expect(IsUnauthorized(err)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).NotTo(ContainSubstring("secret-key-that-is-wrong"))

	// The API's 5th authenticated request is the fault; the key's 6th
	// call is over its limit of 5.
	_, err = e.c.ListPlans(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = e.c.ListPlans(ctx)
	g.Expect(IsServerError(err)).To(BeTrue(), "%v", err)
	g.Expect(statusOf(err)).To(Equal(503))
	g.Expect(Backoff(err, e.clock.Now())).To(Equal(5 * time.Second))
	_, err = e.c.ListPlans(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = e.c.ListPlans(ctx)
	g.Expect(IsRateLimited(err)).To(BeTrue(), "%v", err)
	g.Expect(RetryAfter(err, e.clock.Now())).To(Equal(time.Minute))
	g.Expect(Backoff(err, e.clock.Now())).To(Equal(time.Minute), "as long as the window")
	g.Expect(e.c.RateLimit().Remaining).To(Equal(0))
	e.clock.Step(time.Minute)
	_, err = e.c.ListPlans(ctx)
	g.Expect(err).NotTo(HaveOccurred(), "a new window")
	g.Expect(RetryAfter(fmt.Errorf("other"), e.clock.Now())).To(BeZero())
	_, err = e.c.GetDevice(ctx, "7f0c7a0e-1111-4222-8333-944455556666")
	g.Expect(Backoff(err, e.clock.Now())).To(BeZero(), "a 404 is not called again")
}

// TestKeyOnlyInTheHeader: the key travels in X-Auth-Token only, to the
// base URL's host only (a redirect elsewhere is refused), and is in no
// String, error or URL.
func TestKeyOnlyInTheHeader(t *testing.T) {
	g := NewWithT(t)
	const key = "k3y-0f-the-test-f0r-leaks"
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		if r.Header.Get(equinixapi.AuthHeader) != "" {
			t.Errorf("the key went to another host")
		}
	}))
	defer other.Close()
	var headers http.Header
	var target string
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		headers, target = r.Header.Clone(), r.URL.String()
		if strings.HasSuffix(r.URL.Path, "/plans") {
			http.Redirect(w, r, other.URL+"/steal", http.StatusFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte(`{"errors":["boom"]}`))
	}))
	c, err := New(Options{BaseURL: api.URL + "/metal/v1", Token: key, HTTPClient: api.Client(), ConsumerToken: "metalshift"})
	g.Expect(err).NotTo(HaveOccurred())
	ctx := context.Background()

	_, err = c.GetDevice(ctx, "x")
	g.Expect(headers.Get(equinixapi.AuthHeader)).To(Equal(key))
	g.Expect(headers.Get(equinixapi.ConsumerTokenHeader)).To(Equal("metalshift"))
	g.Expect(headers.Get("Authorization")).To(BeEmpty())
	g.Expect(target).To(Equal("/metal/v1/devices/x"))
	g.Expect(err.Error()).To(Equal("equinix metal: GET /devices/x: 500: boom"))

	_, err = c.ListPlans(ctx)
	g.Expect(err).To(MatchError(ContainSubstring("redirect")))
	g.Expect(elsewhere.Load()).To(BeZero(), "not followed")

	api.Close()
	_, err = c.GetDevice(ctx, "x")
	g.Expect(err).To(HaveOccurred())
	for _, s := range []string{err.Error(), c.String(), fmt.Sprintf("%v %+v %#v %s", c, c, c, c)} {
		g.Expect(s).NotTo(ContainSubstring(key))
	}
	_, err = New(Options{BaseURL: "ftp://x", Token: key})
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).NotTo(ContainSubstring(key))
	_, err = New(Options{BaseURL: api.URL})
	g.Expect(err).To(MatchError(ContainSubstring("no API key")))
}
