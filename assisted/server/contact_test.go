package server_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	assistedapi "github.com/metalshift/metalshift/api/assisted/v2"
	"github.com/metalshift/metalshift/assisted/pkg/record"
	"github.com/metalshift/metalshift/assisted/server"
	"github.com/metalshift/metalshift/internal/reconciler"
)

// TestContactFromACacheBehind: an agent polling a server whose cache has
// not seen the contact the server recorded (a saturated hub's watch lags)
// has its contact recorded once a minute, not on every poll: the server
// reads its own writes (reconciler.OwnWrites, as setup wires it). Found at
// 1,000 installs, where every poll of every agent patched its Agent again,
// which kept the API server saturated and its watches behind.
func TestContactFromACacheBehind(t *testing.T) {
	g := NewWithT(t)
	in := newInstall(t, g)
	cred := newHost(g, in.ie, hostA)
	lagging := &laggingCache{Client: cached, held: agent(g, in.ns, hostA)}
	registered := record.LastContact(lagging.held)
	clock := clocktesting.NewFakePassiveClock(registered.Add(2 * time.Minute))
	serve := func(c client.Client) *httptest.Server {
		srv, err := server.New(server.Options{Client: c, APIReader: env.Client, Key: key, BaseURL: base, PollInterval: 1, Clock: clock})
		g.Expect(err).NotTo(HaveOccurred())
		ts := httptest.NewServer(srv.Handler())
		t.Cleanup(ts.Close)
		return ts
	}
	poll := func(ts *httptest.Server) {
		req, err := http.NewRequest(http.MethodGet, ts.URL+assistedapi.Path(assistedapi.InstructionsPath, in.ie.UID, hostA), nil)
		g.Expect(err).NotTo(HaveOccurred())
		req.Header.Set(assistedapi.HostKeyHeader, cred)
		resp, err := http.DefaultClient.Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	}

	ts := serve(reconciler.NewOwnWrites(lagging, &agentinstallv1.Agent{}))
	poll(ts)
	recorded := agent(g, in.ns, hostA)
	g.Expect(record.LastContact(recorded)).To(BeTemporally("==", clock.Now()), "the first poll a minute on records the contact")
	for range 5 {
		poll(ts)
	}
	g.Expect(agent(g, in.ns, hostA).ResourceVersion).To(Equal(recorded.ResourceVersion), "no more writes while the cache is behind")

	// A minute on, the contact is recorded again.
	clock.SetTime(clock.Now().Add(time.Minute))
	poll(ts)
	g.Expect(record.LastContact(agent(g, in.ns, hostA))).To(BeTemporally("==", clock.Now()))

	// What it guards against: a server deciding on the cache alone writes
	// on every poll.
	plain := serve(lagging)
	before := agent(g, in.ns, hostA).ResourceVersion
	clock.SetTime(clock.Now().Add(time.Second))
	poll(plain)
	g.Expect(agent(g, in.ns, hostA).ResourceVersion).NotTo(Equal(before))
}
