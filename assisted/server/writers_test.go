package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	assistedapi "github.com/metalshift/metalshift/api/assisted/v2"
	"github.com/metalshift/metalshift/assisted/pkg/hoststate"
	"github.com/metalshift/metalshift/assisted/pkg/record"
	agentreconciler "github.com/metalshift/metalshift/assisted/reconcilers/agent"
)

// TestReportWhileReconciling plays the two writers of an Agent at once:
// the agent reports its inventory to the service while the Agent
// reconciler computes the host's status from the copy it read before, and
// then the service records a report on its cached copy after the
// reconciler wrote. Each writes only its own fields, without a
// resourceVersion: no write gets a conflict, none is lost, and the
// reconciler's patches name none of the service's fields.
func TestReportWhileReconciling(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	in := newInstall(t, g)
	cred := newHost(g, in.ie, hostA)
	key := client.ObjectKeyFromObject(agent(g, in.ns, hostA))
	instr := assistedapi.Path(assistedapi.InstructionsPath, in.ie.UID, hostA)
	report := func(hostname string) {
		a := call(g, http.MethodPost, instr, jsonBody(g, assistedapi.StepReply{StepType: assistedapi.StepInventory, StepID: "inv",
			Output: `{"hostname":"` + hostname + `","cpu":{"count":8,"architecture":"x86_64"}}`}), assistedapi.HostKeyHeader, cred)
		g.Expect(a.code).To(Equal(http.StatusNoContent), a.body)
	}
	c := &interleaved{Client: cached}
	const eventsURL = "https://hub.example.com/events"
	r := &agentreconciler.Reconciler{Client: c, Clock: clock.RealClock{}, EventsURL: func(...string) string { return eventsURL }}
	reconcile := func() {
		_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key})
		g.Expect(err).NotTo(HaveOccurred(), "no conflict, no error")
	}
	reconcile() // its finalizer first
	seen(g, agent(g, in.ns, hostA))

	// The service records the report between the reconciler's read and its writes.
	c.hook = func() { report("master-0") }
	reconcile()
	got := agent(g, in.ns, hostA)
	g.Expect(got.Status.Inventory.Hostname).To(Equal("master-0"), "the service's write was kept")
	g.Expect(got.Status.DebugInfo.EventsURL).To(Equal(eventsURL), "the reconciler's write landed")
	g.Expect(got.Status.DebugInfo.State).To(Equal(hoststate.StatusDiscovering), "the registration applied")
	g.Expect(got.Annotations).To(HaveKeyWithValue(record.RegistrationAppliedAnnotation, got.Annotations[record.RegisteredAnnotation]))
	g.Expect(got.Annotations).To(HaveKey(record.LastContactAnnotation), "the service's annotation was kept")

	// The service records a report on the copy its cache has, which may
	// be older than the reconciler's write.
	report("master-1")
	got = agent(g, in.ns, hostA)
	g.Expect(got.Status.Inventory.Hostname).To(Equal("master-1"))
	g.Expect(got.Status.DebugInfo.EventsURL).To(Equal(eventsURL), "the reconciler's write was kept")
	g.Expect(got.Status.DebugInfo.State).To(Equal(hoststate.StatusDiscovering))

	g.Expect(c.statusPatches).NotTo(BeEmpty())
	for _, p := range c.statusPatches {
		g.Expect(string(p)).NotTo(ContainSubstring("resourceVersion"), "no optimistic lock")
		var m struct {
			Status map[string]json.RawMessage `json:"status"`
		}
		g.Expect(json.Unmarshal(p, &m)).To(Succeed())
		for _, theirs := range []string{"inventory", "ntpSources", "progress", "bootstrap", "csrStatus"} {
			g.Expect(m.Status).NotTo(HaveKey(theirs), "the reconciler writes its own fields only: %s", p)
		}
	}
}

// interleaved is a client that runs hook once, before its next write, and
// keeps the status patches it sends.
type interleaved struct {
	client.Client
	hook          func()
	mu            sync.Mutex
	statusPatches [][]byte
}

func (c *interleaved) before() {
	if h := c.hook; h != nil {
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
	if data, err := patch.Data(obj); err == nil {
		s.c.mu.Lock()
		s.c.statusPatches = append(s.c.statusPatches, data)
		s.c.mu.Unlock()
	}
	return s.SubResourceWriter.Patch(ctx, obj, patch, opts...)
}
