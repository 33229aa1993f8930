package deployserver_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deployapi "github.com/metalshift/metalshift/api/deploy/v1"
	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
	"github.com/metalshift/metalshift/hostengine/deployserver"
	"github.com/metalshift/metalshift/internal/reconciler"
)

// laggingCache reads a host as a cache that has not seen its later writes
// yet: the copy it was told to hold, once held; its writes, and its reads
// of anything else, are the API's.
type laggingCache struct {
	client.Client

	mu   sync.Mutex
	held map[types.NamespacedName]*metal3v1.BareMetalHost
}

func (c *laggingCache) hold(host *metal3v1.BareMetalHost) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.held[client.ObjectKeyFromObject(host)] = host.DeepCopy()
}

func (c *laggingCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.mu.Lock()
	held := c.held[key]
	c.mu.Unlock()
	if h, ok := obj.(*metal3v1.BareMetalHost); ok && held != nil {
		held.DeepCopyInto(h)
		return nil
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

// TestReportOnACacheBehind: an agent reports while the server's cache is
// behind the engine's last write of the host. With the engine's writes
// recorded in the server's Writes, the report is written at once, and the
// engine's write stays. A write of another writer that the cache has not
// seen still refuses the report's first write, which overwrites nothing:
// the report is checked again on the API's copy, and written or refused
// as that copy says.
func TestReportOnACacheBehind(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	writes := reconciler.NewWrites(&metal3v1.BareMetalHost{})
	cache := &laggingCache{Client: env.Client, held: map[types.NamespacedName]*metal3v1.BareMetalHost{}}
	s, err := deployserver.New(deployserver.Options{Client: cache, APIReader: env.Client, Writes: writes, Key: key, BaseURL: "http://deploy.example:6180"})
	g.Expect(err).NotTo(HaveOccurred())
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	base := ts.URL

	host := newHost(t, ns, "host-a", "52:54:00:aa:00:11", "0000000000000001")
	id := deployserver.HostID(host)
	code, tr := exchange(t, base, id, deployapi.SignTicket(key, id, "0000000000000001", time.Now().Add(time.Hour)), "agent-session")
	g.Expect(code).To(Equal(http.StatusOK))

	// The cache has the token's record; the engine then marks the request
	// booted, which the cache has not seen.
	cache.hold(get(g, host))
	engine := writes.Client(env.Client)
	before := host.DeepCopy()
	booted := metav1.NewTime(time.Now().Truncate(time.Second))
	host.Status.DeployAgent.Request.BootedAt = &booted
	g.Expect(engine.Status().Patch(ctx, host, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))).To(Succeed())

	running := deployapi.StatusReport{Action: deployapi.ActionDeploy, Generation: tr.Generation, Phase: deployapi.PhaseRunning, Session: "agent-session"}
	code, body := report(t, base, id, tr.Token, running)
	g.Expect(code).To(Equal(http.StatusAccepted), body)
	get(g, host)
	g.Expect(host.Status.DeployAgent.Report).NotTo(BeNil())
	g.Expect(host.Status.DeployAgent.Report.Phase).To(Equal(deployapi.PhaseRunning))
	g.Expect(host.Status.DeployAgent.Request.BootedAt).NotTo(BeNil(), "the engine's write stays")

	// Another writer, whose writes are not recorded, changes the host
	// after the copy the cache holds: the heartbeat's first write is
	// refused, and it is checked and written again on the API's copy,
	// with the other writer's change kept.
	cache.hold(host)
	editStatus(t, host, func(h *metal3v1.BareMetalHost) { h.Status.ErrorMessage = "written by another writer" })
	beat := running
	beat.BytesWritten = 1 << 20
	code, body = report(t, base, id, tr.Token, beat)
	g.Expect(code).To(Equal(http.StatusAccepted), body)
	get(g, host)
	g.Expect(host.Status.ErrorMessage).To(Equal("written by another writer"))
	g.Expect(host.Status.DeployAgent.Report.BytesWritten).To(BeEquivalentTo(1 << 20))

	// Another replica records the agent's failure after the copy the
	// cache holds: a heartbeat checked again on the API's copy finds the
	// request ended, and the failure stays.
	cache.hold(host)
	editStatus(t, host, func(h *metal3v1.BareMetalHost) { h.Status.DeployAgent.Report.Phase = deployapi.PhaseFailed })
	beat.BytesWritten = 2 << 20
	code, _ = report(t, base, id, tr.Token, beat)
	g.Expect(code).To(Equal(http.StatusGone))
	get(g, host)
	g.Expect(host.Status.DeployAgent.Report.Phase).To(Equal(deployapi.PhaseFailed))
	g.Expect(host.Status.DeployAgent.Report.BytesWritten).To(BeEquivalentTo(1 << 20))
}
