package redfish

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/metalshift/metalshift/hostengine/pkg/egress"
)

// These tests play a hostile BMC: one that links, redirects and points
// task monitors at a second server, sends endless replies and huge
// collections. The second server stands for whatever the BMC would have
// the client reach (the hub's own services, a metadata endpoint); it
// records what it gets, and must get nothing.

// witness is the server a hostile BMC points elsewhere at.
type witness struct {
	*httptest.Server
	mu   sync.Mutex
	seen []string
}

func newWitness(t *testing.T) *witness {
	t.Helper()
	w := &witness{}
	w.Server = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.mu.Lock()
		w.seen = append(w.seen, fmt.Sprintf("%s %s token=%q auth=%q body=%q", r.Method, r.URL, r.Header.Get("X-Auth-Token"), r.Header.Get("Authorization"), body))
		w.mu.Unlock()
		rw.Header().Set("Content-Type", "application/json")
		_, _ = rw.Write([]byte(`{"@odata.id":"/redfish/v1/Systems/1","Id":"1","PowerState":"On","TaskState":"Completed","Members":[]}`))
	}))
	t.Cleanup(w.Close)
	return w
}

func (w *witness) requests() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.seen...)
}

// hostileBMC logs in like a Redfish service and answers the rest with
// routes; it counts the requests it serves.
type hostileBMC struct {
	*httptest.Server
	// sessionLocation is the Location of the session it creates.
	sessionLocation string
	routes          map[string]http.HandlerFunc
	mu              sync.Mutex
	requests        int
}

const hostileToken = "session-token-CANARY"

func newHostileBMC(t *testing.T, routes map[string]http.HandlerFunc) *hostileBMC {
	t.Helper()
	b := &hostileBMC{routes: routes, sessionLocation: "/redfish/v1/SessionService/Sessions/1"}
	b.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		b.requests++
		b.mu.Unlock()
		if r.Method == http.MethodPost && r.URL.Path == "/redfish/v1/SessionService/Sessions" {
			w.Header().Set("X-Auth-Token", hostileToken)
			w.Header().Set("Location", b.sessionLocation)
			w.WriteHeader(http.StatusCreated)
			return
		}
		if r.Header.Get("X-Auth-Token") != hostileToken {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if h, ok := b.routes[r.Method+" "+r.URL.Path]; ok {
			h(w, r)
			return
		}
		dir, _ := path.Split(r.URL.Path)
		if h, ok := b.routes[r.Method+" "+dir+"*"]; ok {
			h(w, r)
			return
		}
		w.WriteHeader(http.StatusNotFound)
	}))
	t.Cleanup(b.Close)
	return b
}

func (b *hostileBMC) served() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.requests
}

func jsonReply(v any) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}
}

func labClient(t *testing.T, endpoint string) *Client {
	t.Helper()
	c, err := New(Options{Endpoint: endpoint, Username: "admin", Password: canary, Timeout: 5 * time.Second,
		Egress: egress.Policy{AllowLoopback: true}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestLinksOffOriginAreRefused: links the BMC gives to another origin are
// not followed, whether @odata.id members, a task monitor or the
// session's Location; the other server gets no request, so neither the
// session token nor the password.
func TestLinksOffOriginAreRefused(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	w := newWitness(t)
	elsewhere := w.URL + "/redfish/v1/Systems/1"
	bmc := newHostileBMC(t, map[string]http.HandlerFunc{
		"GET /redfish/v1/Systems": jsonReply(map[string]any{"Members": []any{map[string]string{"@odata.id": elsewhere}}}),
		"GET /redfish/v1/Systems/1": jsonReply(map[string]any{
			"@odata.id": "/redfish/v1/Systems/1", "Id": "1",
			"EthernetInterfaces": map[string]string{"@odata.id": "/redfish/v1/Systems/1/EthernetInterfaces"},
			"Links":              map[string]any{"ManagedBy": []any{map[string]string{"@odata.id": "//" + strings.TrimPrefix(w.URL, "http://") + "/redfish/v1/Managers/1"}}},
		}),
		"GET /redfish/v1/Systems/1/EthernetInterfaces": jsonReply(map[string]any{"Members": []any{
			map[string]string{"@odata.id": "/redfish/v1/Systems/1/EthernetInterfaces/1"},
			map[string]string{"@odata.id": elsewhere + "/EthernetInterfaces/2"},
		}}),
		"GET /redfish/v1/Systems/1/EthernetInterfaces/1": jsonReply(map[string]any{"Id": "1", "MACAddress": "52:54:00:00:00:01"}),
		"POST /redfish/v1/Systems/1/Actions/ComputerSystem.Reset": func(rw http.ResponseWriter, _ *http.Request) {
			rw.Header().Set("Location", w.URL+"/redfish/v1/TaskService/Tasks/1")
			rw.WriteHeader(http.StatusAccepted)
		},
	})
	bmc.sessionLocation = w.URL + "/redfish/v1/SessionService/Sessions/1"
	c := labClient(t, bmc.URL)

	paths, err := c.SystemPaths(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	_, _, err = c.System(ctx, paths[0])
	g.Expect(errors.Is(err, ErrOffOrigin)).To(BeTrue(), "a member elsewhere: got %v", err)

	sys, _, err := c.System(ctx, "/redfish/v1/Systems/1")
	g.Expect(err).NotTo(HaveOccurred())
	_, err = c.Inventory(ctx, "/redfish/v1/Systems/1")
	g.Expect(errors.Is(err, ErrOffOrigin)).To(BeTrue(), "a NIC elsewhere: got %v", err)
	_, err = c.CDPath(ctx, sys)
	g.Expect(errors.Is(err, ErrOffOrigin)).To(BeTrue(), "a scheme-relative manager link: got %v", err)

	monitor, err := c.Reset(ctx, "/redfish/v1/Systems/1", ResetOn)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(monitor).To(HavePrefix(w.URL))
	_, err = c.Task(ctx, monitor)
	g.Expect(errors.Is(err, ErrOffOrigin)).To(BeTrue(), "a task monitor elsewhere: got %v", err)

	g.Expect(c.Close(ctx)).To(Succeed(), "a session elsewhere is not the client's to delete")
	g.Expect(bmc.served()).To(BeNumerically(">", 5))
	g.Expect(w.requests()).To(BeEmpty(), "nothing reaches another origin")
}

// TestOtherOriginsOnTheSameHost: another port or scheme of the BMC's own
// host is another origin; the BMC's origin written differently is not.
func TestOtherOriginsOnTheSameHost(t *testing.T) {
	g := NewWithT(t)
	c, err := New(Options{Endpoint: "https://BMC.example.com"})
	g.Expect(err).NotTo(HaveOccurred())
	for _, link := range []string{"/redfish/v1/Systems/1", "Systems/1", "https://bmc.example.com/redfish/v1", "https://bmc.example.com:443/redfish/v1", "HTTPS://Bmc.Example.Com/x"} {
		u, err := c.resolve(link)
		g.Expect(err).NotTo(HaveOccurred(), link)
		g.Expect(u.Host).To(Equal("BMC.example.com"), "%s: the request goes to the endpoint's host", link)
	}
	for _, link := range []string{"http://bmc.example.com/redfish/v1", "https://bmc.example.com:8443/redfish/v1", "https://evil.example.com/redfish/v1",
		"//evil.example.com/redfish/v1", "https://admin:pw@bmc.example.com/redfish/v1", "file:///etc/passwd", "https://bmc.example.com.evil.example.com/"} {
		_, err := c.resolve(link)
		g.Expect(errors.Is(err, ErrOffOrigin)).To(BeTrue(), "%s: got %v", link, err)
		g.Expect(err.Error()).NotTo(ContainSubstring("pw@"))
	}
}

// TestRedirectsOffOriginAreRefused: a redirect to another origin is not
// followed (the request carries the token); one on the BMC's origin is.
func TestRedirectsOffOriginAreRefused(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	w := newWitness(t)
	bmc := newHostileBMC(t, map[string]http.HandlerFunc{
		"GET /redfish/v1/Systems/1": func(rw http.ResponseWriter, r *http.Request) {
			http.Redirect(rw, r, w.URL+"/redfish/v1/Systems/1", http.StatusTemporaryRedirect)
		},
		"GET /redfish/v1/Systems/2": func(rw http.ResponseWriter, r *http.Request) {
			http.Redirect(rw, r, "/redfish/v1/Systems/3", http.StatusMovedPermanently)
		},
		"GET /redfish/v1/Systems/3": jsonReply(map[string]any{"Id": "3"}),
		"GET /redfish/v1/Systems/4": func(rw http.ResponseWriter, r *http.Request) {
			http.Redirect(rw, r, "/redfish/v1/Systems/4", http.StatusFound)
		},
	})
	c := labClient(t, bmc.URL)
	_, _, err := c.System(ctx, "/redfish/v1/Systems/1")
	g.Expect(errors.Is(err, ErrOffOrigin)).To(BeTrue(), "got %v", err)
	sys, _, err := c.System(ctx, "/redfish/v1/Systems/2")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sys.ID).To(Equal("3"))
	_, _, err = c.System(ctx, "/redfish/v1/Systems/4")
	g.Expect(err).To(MatchError(ContainSubstring("redirects")), "a redirect loop ends")
	g.Expect(w.requests()).To(BeEmpty())
}

// TestEndlessRepliesAreCut: a reply longer than MaxReplyBytes is an error
// once that much is read, whether it announces its length or streams.
func TestEndlessRepliesAreCut(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	var streamed sync.Map
	stream := func(announce bool) http.HandlerFunc {
		return func(rw http.ResponseWriter, r *http.Request) {
			const total = 1 << 30
			if announce {
				rw.Header().Set("Content-Length", fmt.Sprint(total))
			}
			rw.Header().Set("Location", "/redfish/v1/TaskService/Tasks/1")
			rw.WriteHeader(http.StatusOK)
			chunk := []byte(`{"Members":[` + strings.Repeat(`{"@odata.id":"/x"},`, 3000))
			n := 0
			for n < total {
				k, err := rw.Write(chunk)
				n += k
				if err != nil {
					break
				}
			}
			streamed.Store(r.URL.Path, n)
		}
	}
	bmc := newHostileBMC(t, map[string]http.HandlerFunc{
		"GET /redfish/v1/Systems":                 stream(false),
		"GET /redfish/v1/Systems/1":               stream(true),
		"GET /redfish/v1/TaskService/Tasks/1":     stream(false),
		"POST /redfish/v1/Systems/1/Actions/Stop": stream(false),
	})
	c := labClient(t, bmc.URL)
	_, err := c.SystemPaths(ctx)
	g.Expect(errors.Is(err, ErrTooLarge)).To(BeTrue(), "got %v", err)
	g.Expect(err.Error()).To(ContainSubstring("longer than 4194304 bytes"))
	_, _, err = c.System(ctx, "/redfish/v1/Systems/1")
	g.Expect(errors.Is(err, ErrTooLarge)).To(BeTrue(), "got %v", err)
	g.Expect(err.Error()).To(ContainSubstring("the reply is 1073741824 bytes"))
	_, err = c.Task(ctx, "/redfish/v1/TaskService/Tasks/1")
	g.Expect(errors.Is(err, ErrTooLarge)).To(BeTrue(), "got %v", err)
	_, err = c.Post(ctx, "/redfish/v1/Systems/1/Actions/Stop", map[string]string{})
	g.Expect(err).NotTo(HaveOccurred(), "an action's reply is not needed: it is not read to its end")

	bmc.Close() // waits for the handlers, which end when the client hangs up
	streamed.Range(func(path, n any) bool {
		g.Expect(n).To(BeNumerically("<", 1<<30), "%s: the client hung up", path)
		return true
	})
}

// TestHugeCollectionsAreRefused: a collection of more than MaxMembers
// members, in one page or endless pages, and links within links beyond
// MaxMembers resources are errors saying so.
func TestHugeCollectionsAreRefused(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	many := func(n int, id func(int) string) []any {
		out := make([]any, n)
		for i := range out {
			out[i] = map[string]string{"@odata.id": id(i)}
		}
		return out
	}
	var pages sync.Map
	bmc := newHostileBMC(t, map[string]http.HandlerFunc{
		"GET /redfish/v1/Systems": jsonReply(map[string]any{"Members": many(100_000, func(i int) string { return fmt.Sprintf("/redfish/v1/Systems/%d", i) })}),
		"GET /redfish/v1/Managers/1/VirtualMedia": func(rw http.ResponseWriter, r *http.Request) {
			n, _ := pages.LoadOrStore("n", new(int))
			*n.(*int)++
			jsonReply(map[string]any{"Members": many(1, func(int) string { return "/redfish/v1/Managers/1/VirtualMedia/Floppy" }),
				"Members@odata.nextLink": "/redfish/v1/Managers/1/VirtualMedia?page=next"})(rw, r)
		},
		"GET /redfish/v1/Managers/1": jsonReply(map[string]any{"VirtualMedia": map[string]string{"@odata.id": "/redfish/v1/Managers/1/VirtualMedia"}}),
		"GET /redfish/v1/Systems/1": jsonReply(map[string]any{
			"@odata.id": "/redfish/v1/Systems/1", "Storage": map[string]string{"@odata.id": "/redfish/v1/Systems/1/Storage"},
			"Links": map[string]any{"ManagedBy": many(1, func(int) string { return "/redfish/v1/Managers/1" })},
		}),
		"GET /redfish/v1/Systems/1/Storage": jsonReply(map[string]any{"Members": many(600, func(i int) string { return fmt.Sprintf("/redfish/v1/Systems/1/Storage/%d", i) })}),
	})
	bmc.routes["GET /redfish/v1/Systems/1/Storage/*"] = jsonReply(map[string]any{
		"Drives": many(600, func(i int) string { return fmt.Sprintf("/redfish/v1/Systems/1/Drives/%d", i) }),
	})
	c := labClient(t, bmc.URL)

	_, err := c.SystemPaths(ctx)
	g.Expect(errors.Is(err, ErrTooLarge)).To(BeTrue(), "got %v", err)
	g.Expect(err.Error()).To(ContainSubstring("collection /redfish/v1/Systems has more than 1024 members"))

	sys, _, err := c.System(ctx, "/redfish/v1/Systems/1")
	g.Expect(err).NotTo(HaveOccurred())
	_, err = c.CDPath(ctx, sys)
	g.Expect(errors.Is(err, ErrTooLarge)).To(BeTrue(), "endless pages: got %v", err)
	n, _ := pages.Load("n")
	g.Expect(*n.(*int)).To(Equal(MaxMembers+1), "one member a page: the page that exceeds the cap is the last read")

	before := bmc.served()
	_, err = c.Inventory(ctx, "/redfish/v1/Systems/1")
	g.Expect(errors.Is(err, ErrTooLarge)).To(BeTrue(), "got %v", err)
	g.Expect(err.Error()).To(ContainSubstring("inventory of /redfish/v1/Systems/1: the BMC links more than 1024 resources"))
	g.Expect(bmc.served()-before).To(Equal(1+1+600), "the system, its storage collection and each storage; no drive")
}
