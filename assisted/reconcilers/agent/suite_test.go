package agent_test

import (
	"context"
	"os"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	"github.com/metalshift/metalshift/assisted/pkg/record"
	"github.com/metalshift/metalshift/assisted/reconcilers/agent"
	"github.com/metalshift/metalshift/component"
	"github.com/metalshift/metalshift/internal/testenv"
)

var (
	env *testenv.Env
	// clk is the hub's clock: agents' last contacts are stamped at its
	// time, which only the tests move.
	clk = clocktesting.NewFakeClock(time.Date(2025, 6, 2, 12, 0, 0, 0, time.UTC))
	// serviceStart is when the agent service started serving, for the
	// running reconciler: the clock's start.
	serviceStart = clk.Now()
)

// TestMain starts envtest with the Agent reconciler alone, and the index
// of Agents by ClusterDeployment it reads bound Agents through (the agent
// service registers both).
func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, &env, testenv.Options{
		Clock: clk,
		Components: []component.Component{{Name: "agent", Setup: func(ctx context.Context, hub *component.Hub) error {
			mgr := hub.Manager
			if err := mgr.GetFieldIndexer().IndexField(ctx, &agentinstallv1.Agent{}, record.ClusterDeploymentIndex, record.IndexClusterDeployment); err != nil {
				return err
			}
			return (&agent.Reconciler{Client: mgr.GetClient(), Clock: hub.Clock, ServiceStart: serviceStart}).SetupWithManager(mgr, controller.Options{})
		}}},
	}))
}
