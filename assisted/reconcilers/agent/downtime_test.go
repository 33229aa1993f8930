package agent_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	"github.com/metalshift/metalshift/assisted/pkg/hoststate"
	"github.com/metalshift/metalshift/assisted/pkg/record"
	"github.com/metalshift/metalshift/assisted/reconcilers/agent"
)

// TestSilenceBeforeServiceStart: an agent last heard from long before the
// agent service started serving (the hub was away, the agent could not
// reach it) is not disconnected until DisconnectedAfter after the start;
// then it is.
func TestSilenceBeforeServiceStart(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	// The clock at the service's start (the tests before moved it on).
	clk.SetTime(serviceStart)
	ie := newInfraEnv(g, ns, nil)
	a := register(g, ie, "8f000000-0000-4000-8000-000000000008", hostInventory("worker-0", 8))
	update(g, a, func(a *agentinstallv1.Agent) {
		record.SetLastContact(a, serviceStart.Add(-2*agentDisconnectedAfter))
	})
	key := client.ObjectKeyFromObject(a)
	// A reconciler called here, as the running one (the same start), so
	// that each step's result is read after a reconcile at that time.
	r := &agent.Reconciler{Client: env.Client, Clock: clk, DisconnectedAfter: agentDisconnectedAfter, ServiceStart: serviceStart}
	stateAt := func() string {
		_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key})
		g.Expect(err).NotTo(HaveOccurred())
		got := &agentinstallv1.Agent{}
		g.Expect(env.Client.Get(ctx, key, got)).To(Succeed())
		return got.Status.DebugInfo.State
	}

	// The first reconciles add the finalizer and apply the registration;
	// at the service's start the host is known although long silent.
	g.Eventually(stateAt).Should(Equal(hoststate.StatusKnownUnbound), "at the service's start")

	clk.Step(agentDisconnectedAfter - time.Second)
	g.Expect(stateAt()).To(Equal(hoststate.StatusKnownUnbound), "silent for 3×DisconnectedAfter, but the service serves for less than DisconnectedAfter")

	clk.Step(2 * time.Second)
	g.Expect(stateAt()).To(Equal(hoststate.StatusDisconnectedUnbound), "silent for DisconnectedAfter since the service started")
}
