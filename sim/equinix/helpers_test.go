package equinix

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clocktesting "k8s.io/utils/clock/testing"

	equinixapi "github.com/metalshift/metalshift/api/equinixmetal/v1"
)

var testTimings = Timings{Queued: 5 * time.Second, Provisioning: time.Minute, Deprovisioning: 10 * time.Second, Power: 3 * time.Second}

// env is an emulator in-process on a fake clock, with a key and a project.
type env struct {
	t        *testing.T
	s        *Server
	clock    *clocktesting.FakeClock
	api      *httptest.Server
	token    string
	project  string
	machines *recorder
}

func newEnv(t *testing.T, opts Options) *env {
	t.Helper()
	e := &env{t: t, clock: clocktesting.NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)), machines: &recorder{}}
	opts.Clock = e.clock
	if opts.Timings == (Timings{}) {
		opts.Timings = testTimings
	}
	if opts.Machines == nil {
		opts.Machines = e.machines
	}
	e.s = New(opts)
	e.api = httptest.NewServer(e.s.Handler())
	t.Cleanup(e.api.Close)
	e.token = e.s.NewToken()
	p, err := e.s.CreateProject(e.token, "test")
	if err != nil {
		t.Fatal(err)
	}
	e.project = p.ID
	return e
}

// call makes a request with the env's key and decodes a JSON answer into
// out (when not nil); it returns the status and the headers.
func (e *env) call(method, path string, in, out any) (int, http.Header) {
	return e.callAs(e.token, method, path, in, out)
}

func (e *env) callAs(token, method, path string, in, out any) (int, http.Header) {
	e.t.Helper()
	var body io.Reader
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			e.t.Fatal(err)
		}
		body = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, e.api.URL+path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set(equinixapi.AuthHeader, token)
	}
	resp, err := e.api.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			e.t.Fatalf("%s %s: %d %q: %v", method, path, resp.StatusCode, data, err)
		}
	}
	return resp.StatusCode, resp.Header
}

// create creates a custom_ipxe device and checks it was created.
func (e *env) create(hostname string, tags ...string) equinixapi.Device {
	e.t.Helper()
	var d equinixapi.Device
	status, _ := e.call("POST", "/metal/v1/projects/"+e.project+"/devices", equinixapi.DeviceCreateInput{
		Metro: "da", Plan: "c3.small.x86", OperatingSystem: equinixapi.OSCustomIPXE, Hostname: hostname,
		IPXEScriptURL: "http://127.0.0.1:8080/boot.ipxe", Tags: tags, Userdata: `{"ignition":{"version":"3.4.0"}}`,
	}, &d)
	NewWithT(e.t).Expect(status).To(Equal(http.StatusCreated), hostname)
	return d
}

func (e *env) device(id string) (equinixapi.Device, int) {
	var d equinixapi.Device
	status, _ := e.call("GET", "/metal/v1/devices/"+id, nil, &d)
	return d, status
}

// errorsOf decodes an error answer.
func (e *env) errorsOf(method, path string, in any) (int, []string) {
	var er equinixapi.ErrorResponse
	status, _ := e.call(method, path, in, &er)
	return status, er.Errors
}

// recorder records what the emulator tells machines.
type recorder struct {
	mu     sync.Mutex
	events []string
	last   map[string]Machine
}

func (r *recorder) Provision(m Machine) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, "provision "+m.Hostname)
	if r.last == nil {
		r.last = map[string]Machine{}
	}
	r.last[m.ID] = m
}

func (r *recorder) Power(id, action string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, action+" "+id)
}

func (r *recorder) Deprovision(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, "deprovision "+id)
}

func (r *recorder) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string{}, r.events...)
}
