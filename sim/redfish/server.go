package redfish

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/metalshift/metalshift/sim/fault"
	"github.com/metalshift/metalshift/sim/machine"
)

// Faults are injected into every request while set, besides those of the
// fault plan (SetPlan).
type Faults struct {
	// Latency delays every response.
	Latency time.Duration
	// ErrorRate is the fraction (0..1) of authenticated requests answered 500.
	ErrorRate float64
	// Down closes every connection without an answer, as an unreachable BMC.
	Down bool
	// Hang holds every request until the client gives up.
	Hang bool
}

// Server is the emulator. Create it with New, add machines, and serve
// Handler on a listener.
type Server struct {
	mu       sync.Mutex
	username string
	password string
	machines map[string]*machine.Machine
	faults   Faults
	plan     *fault.Plan
	power    map[string]*sync.Mutex // per machine: power actions in turn
	sessions map[string]string      // token → session id
	nextID   int
	tasks    map[string]*task
	version  map[string]int // per-system state version, for ETags
	requests int
}

type task struct {
	id      string
	machine string // whose BMC runs it
	state   string // Running, Completed, Exception
	msg     string
}

// New returns an emulator that accepts username / password.
func New(username, password string) *Server {
	return &Server{
		username: username, password: password,
		machines: map[string]*machine.Machine{}, sessions: map[string]string{},
		tasks: map[string]*task{}, version: map[string]int{}, power: map[string]*sync.Mutex{},
	}
}

// Add serves m as /redfish/v1/Systems/<m.ID>.
func (s *Server) Add(m *machine.Machine) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.machines[m.ID] = m
}

// Machine returns the machine with id.
func (s *Server) Machine(id string) *machine.Machine {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.machines[id]
}

// SetCredentials changes the accepted credentials and ends every session.
func (s *Server) SetCredentials(username, password string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.username, s.password = username, password
	s.sessions = map[string]string{}
}

// SetFaults replaces the injected faults.
func (s *Server) SetFaults(f Faults) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = f
}

// SetPlan replaces the fault plan (nil: none). Each machine's BMC (its
// System, its Manager and their tasks) decides with plan.For(machine ID);
// the service root and sessions, shared by every machine, with
// plan.For(EndpointID). Requests to a BMC may end in a connection reset
// (fault.RedfishReset), be held until the client gives up
// (fault.RedfishHang) or answered with a 5xx (fault.Redfish5xx), in that
// order when several fire; power actions may change the power state late
// (fault.RedfishSlowPower) or never, behind a task that never finishes
// (fault.RedfishTask); virtual-media inserts may fail (fault.RedfishMedia).
func (s *Server) SetPlan(p *fault.Plan) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.plan = p
}

// EndpointID is the fault plan's ID for requests to no machine's BMC (the
// service root, sessions).
const EndpointID = "redfish-endpoint"

// decider is the fault plan's decider for the BMC that path is for.
func (s *Server) decider(path string) *fault.Decider {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.plan == nil {
		return nil
	}
	id := EndpointID
	parts := strings.Split(strings.TrimPrefix(path, "/redfish/v1/"), "/")
	if len(parts) >= 2 {
		switch parts[0] {
		case "Systems":
			id = parts[1]
		case "Managers":
			id = strings.TrimPrefix(parts[1], "BMC-")
		case "TaskService":
			if len(parts) >= 3 && s.tasks[parts[2]] != nil {
				id = s.tasks[parts[2]].machine
			}
		}
	}
	return s.plan.For(id)
}

// Requests counts the requests served.
func (s *Server) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

// Handler returns the HTTP handler of the emulator.
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(s.serve)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	f := s.faults
	s.requests++
	s.mu.Unlock()
	if f.Down {
		closeConn(w)
		return
	}
	if f.Hang {
		// Consume the body so that the server notices the client hanging up.
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-time.After(time.Minute):
		}
		return
	}
	if f.Latency > 0 {
		time.Sleep(f.Latency)
	}
	path := strings.TrimSuffix(r.URL.Path, "/")
	if s.planned(w, r, path) {
		return
	}
	if path == "/redfish" {
		writeJSON(w, http.StatusOK, map[string]any{"v1": "/redfish/v1/"})
		return
	}
	if path == "/redfish/v1" || path == "/redfish/v1/odata" || path == "/redfish/v1/$metadata" {
		s.serviceRoot(w, r, path)
		return
	}
	if path == "/redfish/v1/SessionService/Sessions" && r.Method == http.MethodPost {
		s.login(w, r)
		return
	}
	if !s.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Basic realm="metalshift-sim"`)
		writeError(w, http.StatusUnauthorized, "Base.1.8.NoValidSession", "The credentials are not valid or the session has expired.")
		return
	}
	if f.ErrorRate > 0 && mrand.Float64() < f.ErrorRate { //nolint:gosec // fault injection, not security
		writeError(w, http.StatusInternalServerError, "Base.1.8.InternalError", "Injected fault.")
		return
	}
	s.route(w, r, path)
}

// planned injects what the fault plan decides for a request, and says
// whether that answered it. Every kind is decided on every request, so that
// each kind's sequence depends on the requests only.
func (s *Server) planned(w http.ResponseWriter, r *http.Request, path string) bool {
	d := s.decider(path)
	if d == nil {
		return false
	}
	reset, hang, fail := d.Decide(fault.RedfishReset), d.Decide(fault.RedfishHang), d.Decide(fault.Redfish5xx)
	switch {
	case reset.Fired():
		closeConn(w)
	case hang.Fired():
		// Consume the body so that the server notices the client hanging up.
		_, _ = io.Copy(io.Discard, r.Body)
		t := time.NewTimer(hang.Duration)
		defer t.Stop()
		select {
		case <-r.Context().Done():
		case <-t.C:
			closeConn(w)
		}
	case fail.Fired():
		writeError(w, fail.Status, "Base.1.8.InternalError", "Injected fault.")
	default:
		return false
	}
	return true
}

func (s *Server) authorized(r *http.Request) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if tok := r.Header.Get("X-Auth-Token"); tok != "" {
		_, ok := s.sessions[tok]
		return ok
	}
	u, p, ok := r.BasicAuth()
	return ok && s.credentialsMatch(u, p)
}

func (s *Server) credentialsMatch(u, p string) bool {
	return subtle.ConstantTimeCompare([]byte(u), []byte(s.username)) == 1 &&
		subtle.ConstantTimeCompare([]byte(p), []byte(s.password)) == 1
}

func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	var body struct{ UserName, Password string }
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		writeError(w, http.StatusBadRequest, "Base.1.8.MalformedJSON", "The request body is not valid JSON.")
		return
	}
	s.mu.Lock()
	if !s.credentialsMatch(body.UserName, body.Password) {
		s.mu.Unlock()
		writeError(w, http.StatusUnauthorized, "Base.1.8.NoValidSession", "The credentials are not valid.")
		return
	}
	s.nextID++
	id := fmt.Sprintf("%d", s.nextID)
	tok := token()
	s.sessions[tok] = id
	s.mu.Unlock()
	loc := "/redfish/v1/SessionService/Sessions/" + id
	w.Header().Set("X-Auth-Token", tok)
	w.Header().Set("Location", loc)
	writeJSON(w, http.StatusCreated, map[string]any{
		"@odata.id": loc, "@odata.type": "#Session.v1_1_0.Session", "Id": id, "Name": "Session", "UserName": body.UserName,
	})
}

func (s *Server) serviceRoot(w http.ResponseWriter, r *http.Request, path string) {
	if path != "/redfish/v1" {
		writeJSON(w, http.StatusOK, map[string]any{"value": []any{}})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"@odata.id": "/redfish/v1", "@odata.type": "#ServiceRoot.v1_5_0.ServiceRoot",
		"Id": "RootService", "Name": "metalshift simulated BMC", "RedfishVersion": "1.11.0",
		"UUID":           "92384634-2938-2342-8820-489239905423",
		"Systems":        odataID("/redfish/v1/Systems"),
		"Managers":       odataID("/redfish/v1/Managers"),
		"Chassis":        odataID("/redfish/v1/Chassis"),
		"SessionService": odataID("/redfish/v1/SessionService"),
		"TaskService":    odataID("/redfish/v1/TaskService"),
		"Links":          map[string]any{"Sessions": odataID("/redfish/v1/SessionService/Sessions")},
	})
}

func (s *Server) route(w http.ResponseWriter, r *http.Request, path string) {
	parts := strings.Split(strings.TrimPrefix(path, "/redfish/v1/"), "/")
	switch {
	case parts[0] == "SessionService":
		s.sessionService(w, r, parts[1:])
	case parts[0] == "Systems" && len(parts) == 1:
		s.collection(w, "/redfish/v1/Systems", "#ComputerSystemCollection.ComputerSystemCollection", "Computer System Collection", "")
	case parts[0] == "Systems":
		s.system(w, r, parts[1], parts[2:])
	case parts[0] == "Managers" && len(parts) == 1:
		s.collection(w, "/redfish/v1/Managers", "#ManagerCollection.ManagerCollection", "Manager Collection", "BMC-")
	case parts[0] == "Managers":
		s.manager(w, r, strings.TrimPrefix(parts[1], "BMC-"), parts[2:])
	case parts[0] == "Chassis" && len(parts) == 1:
		writeJSON(w, http.StatusOK, collectionBody("/redfish/v1/Chassis", "#ChassisCollection.ChassisCollection", "Chassis Collection", nil))
	case parts[0] == "TaskService":
		s.taskService(w, parts[1:])
	default:
		notFound(w)
	}
}

func (s *Server) collection(w http.ResponseWriter, base, typ, name, prefix string) {
	s.mu.Lock()
	ids := make([]string, 0, len(s.machines))
	for id := range s.machines {
		ids = append(ids, id)
	}
	s.mu.Unlock()
	sort.Strings(ids)
	members := make([]any, 0, len(ids))
	for _, id := range ids {
		members = append(members, odataID(base+"/"+prefix+id))
	}
	writeJSON(w, http.StatusOK, collectionBody(base, typ, name, members))
}

func (s *Server) sessionService(w http.ResponseWriter, r *http.Request, rest []string) {
	switch {
	case len(rest) == 0:
		writeJSON(w, http.StatusOK, map[string]any{
			"@odata.id": "/redfish/v1/SessionService", "@odata.type": "#SessionService.v1_1_8.SessionService",
			"Id": "SessionService", "Name": "Session Service", "ServiceEnabled": true, "SessionTimeout": 1800,
			"Sessions": odataID("/redfish/v1/SessionService/Sessions"),
		})
	case len(rest) == 1 && rest[0] == "Sessions":
		s.mu.Lock()
		var members []any
		for _, id := range s.sessions {
			members = append(members, odataID("/redfish/v1/SessionService/Sessions/"+id))
		}
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, collectionBody("/redfish/v1/SessionService/Sessions", "#SessionCollection.SessionCollection", "Session Collection", members))
	case len(rest) == 2 && rest[0] == "Sessions":
		s.mu.Lock()
		var found string
		for tok, id := range s.sessions {
			if id == rest[1] {
				found = tok
			}
		}
		if found != "" && r.Method == http.MethodDelete {
			delete(s.sessions, found)
		}
		s.mu.Unlock()
		if found == "" {
			notFound(w)
			return
		}
		if r.Method == http.MethodDelete {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"@odata.id": "/redfish/v1/SessionService/Sessions/" + rest[1], "Id": rest[1], "Name": "Session"})
	default:
		notFound(w)
	}
}

func (s *Server) taskService(w http.ResponseWriter, rest []string) {
	if len(rest) == 0 {
		writeJSON(w, http.StatusOK, map[string]any{"@odata.id": "/redfish/v1/TaskService", "Id": "TaskService", "Name": "Tasks", "Tasks": odataID("/redfish/v1/TaskService/Tasks")})
		return
	}
	if len(rest) != 2 || rest[0] != "Tasks" {
		notFound(w)
		return
	}
	s.mu.Lock()
	t, ok := s.tasks[rest[1]]
	var state, msg string
	if ok {
		state, msg = t.state, t.msg
	}
	s.mu.Unlock()
	if !ok {
		notFound(w)
		return
	}
	status := http.StatusAccepted
	if state != "Running" {
		status = http.StatusOK
	}
	writeJSON(w, status, map[string]any{
		"@odata.id": "/redfish/v1/TaskService/Tasks/" + rest[1], "@odata.type": "#Task.v1_4_3.Task",
		"Id": rest[1], "Name": "Task " + rest[1], "TaskState": state,
		"TaskStatus": map[bool]string{true: "OK", false: "Critical"}[state != "Exception"],
		"Messages":   []any{map[string]any{"Message": msg}},
	})
}

// startTask runs fn in the background behind a task monitor of machine's
// BMC and answers 202; a nil fn never finishes.
func (s *Server) startTask(w http.ResponseWriter, machine string, fn func() error) {
	s.mu.Lock()
	s.nextID++
	t := &task{id: fmt.Sprintf("%d", s.nextID), machine: machine, state: "Running"}
	s.tasks[t.id] = t
	s.mu.Unlock()
	go func() {
		if fn == nil {
			return
		}
		err := fn()
		s.mu.Lock()
		defer s.mu.Unlock()
		t.state, t.msg = "Completed", "The task completed."
		if err != nil {
			t.state, t.msg = "Exception", err.Error()
		}
	}()
	loc := "/redfish/v1/TaskService/Tasks/" + t.id
	w.Header().Set("Location", loc)
	writeJSON(w, http.StatusAccepted, map[string]any{"@odata.id": loc, "Id": t.id, "TaskState": "Running"})
}

// powerLock is the lock that orders the power actions of machine id.
func (s *Server) powerLock(id string) *sync.Mutex {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.power[id]
	if l == nil {
		l = &sync.Mutex{}
		s.power[id] = l
	}
	return l
}

func (s *Server) bump(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.version[id]++
}

func (s *Server) etag(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprintf(`W/"%d"`, s.version[id])
}

func token() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func odataID(id string) map[string]any { return map[string]any{"@odata.id": id} }

func collectionBody(id, typ, name string, members []any) map[string]any {
	if members == nil {
		members = []any{}
	}
	return map[string]any{"@odata.id": id, "@odata.type": typ, "Name": name, "Members": members, "Members@odata.count": len(members)}
}

func writeJSON(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("OData-Version", "4.0")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

func writeError(w http.ResponseWriter, status int, id, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]any{
		"code": id, "message": msg,
		"@Message.ExtendedInfo": []any{map[string]any{"MessageId": id, "Message": msg}},
	}})
}

func notFound(w http.ResponseWriter) {
	writeError(w, http.StatusNotFound, "Base.1.8.ResourceMissingAtURI", "The resource does not exist.")
}

func closeConn(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			if tc, ok := conn.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
			_ = conn.Close()
			return
		}
	}
	w.WriteHeader(http.StatusServiceUnavailable)
}
