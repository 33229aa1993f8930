package agent_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	assistedapi "github.com/metalshift/metalshift/api/assisted/v2"
	"github.com/metalshift/metalshift/assisted/pkg/hoststate"
	"github.com/metalshift/metalshift/assisted/pkg/record"
	"github.com/metalshift/metalshift/assisted/reconcilers/agent"
)

// TestTwoWriters plays the agent service recording an agent's report
// (its inventory and time sources in the status, its contact in an
// annotation) while the Agent reconciler computes the host's status from
// the copy it read before, and the other way round: each writes its own
// fields as patches with no resourceVersion, so neither gets a conflict
// and neither undoes the other's write.
func TestTwoWriters(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	ie := newInfraEnv(g, ns, nil)
	a := register(g, ie, "7e000000-0000-4000-8000-000000000007", hostInventory("worker-0", 8))
	key := client.ObjectKeyFromObject(a)
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, key, a)).To(Succeed())
		g.Expect(a.Status.DebugInfo.State).To(Equal(hoststate.StatusKnownUnbound))
	}).Should(Succeed())

	// The service's write: a report taken on the Agent as it read it.
	report := func(read *agentinstallv1.Agent, hostname, ntp string) {
		before := read.DeepCopy()
		inv := read.Status.Inventory.DeepCopy()
		inv.Hostname = hostname
		now := metav1.NewTime(clk.Now())
		inv.ReportTime = &now
		read.Status.Inventory = *inv
		read.Status.NtpSources = []agentinstallv1.HostNTPSources{{SourceName: ntp, SourceState: assistedapi.NTPSourceSynced}}
		g.Expect(env.Client.Status().Patch(ctx, read, client.MergeFrom(before))).To(Succeed(), "no conflict for the service")
		before = read.DeepCopy()
		record.SetLastContact(read, clk.Now())
		g.Expect(env.Client.Patch(ctx, read, client.MergeFrom(before))).To(Succeed())
	}
	// A second Agent reconciler, called here, that signs events URLs (the
	// running one does not): a field only it changes. Its client lets the
	// service report between its read and its first write.
	reconcile := func(eventsURL string, between func()) {
		r := &agent.Reconciler{Client: &interleaved{Client: env.Client, hook: between}, Clock: clk,
			EventsURL: func(...string) string { return eventsURL }}
		_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key})
		g.Expect(err).NotTo(HaveOccurred(), "no conflict for the reconciler")
	}

	// The service reports while the reconciler computes from its older copy.
	reconcile("https://hub.example.com/events/1", func() {
		read := &agentinstallv1.Agent{}
		g.Expect(env.Client.Get(ctx, key, read)).To(Succeed())
		report(read, "worker-renamed", "ntp-1.example.com")
	})
	got := &agentinstallv1.Agent{}
	g.Expect(env.Client.Get(ctx, key, got)).To(Succeed())
	g.Expect(got.Status.DebugInfo.EventsURL).To(Equal("https://hub.example.com/events/1"), "the reconciler's write landed")
	g.Expect(got.Status.Inventory.Hostname).To(Equal("worker-renamed"), "the service's write was kept")
	g.Expect(got.Status.NtpSources).To(ConsistOf(HaveField("SourceName", "ntp-1.example.com")))
	g.Expect(record.LastContact(got)).To(BeTemporally("==", clk.Now()))

	// The service reports from a copy read before the reconciler wrote.
	stale := got.DeepCopy()
	reconcile("https://hub.example.com/events/2", nil)
	report(stale, "worker-renamed-again", "ntp-2.example.com")
	g.Expect(env.Client.Get(ctx, key, got)).To(Succeed())
	g.Expect(got.Status.DebugInfo.EventsURL).To(Equal("https://hub.example.com/events/2"), "the reconciler's write was kept")
	g.Expect(got.Status.Inventory.Hostname).To(Equal("worker-renamed-again"), "the service's write landed")
	g.Expect(got.Status.NtpSources).To(ConsistOf(HaveField("SourceName", "ntp-2.example.com")))

	// The reconcilers derive from what the service wrote: the new hostname
	// is validated and mirrored.
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, key, got)).To(Succeed())
		g.Expect(got.Status.ValidationsInfo["hardware"]).To(ContainElement(
			validation("hostname-valid", "success", "Hostname worker-renamed-again is allowed")))
	}).Should(Succeed())
}

// interleaved is a client that runs hook once, before its first write.
type interleaved struct {
	client.Client
	hook func()
}

func (c *interleaved) before() {
	if c.hook != nil {
		h := c.hook
		c.hook = nil
		h()
	}
}

func (c *interleaved) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	c.before()
	return c.Client.Patch(ctx, obj, patch, opts...)
}

func (c *interleaved) Status() client.SubResourceWriter {
	return interleavedStatus{SubResourceWriter: c.Client.Status(), c: c}
}

type interleavedStatus struct {
	client.SubResourceWriter
	c *interleaved
}

func (s interleavedStatus) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	s.c.before()
	return s.SubResourceWriter.Patch(ctx, obj, patch, opts...)
}
