package agentclusterinstall_test

import (
	"context"
	"net"
	"os"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/metalshift/metalshift/assisted"
	"github.com/metalshift/metalshift/component"
	"github.com/metalshift/metalshift/internal/testenv"
)

var (
	env *testenv.Env
	// clk is the hub's clock: agents' last contacts are stamped at its
	// time, which only TestStageTimeoutFailsInstall moves (past a stage's
	// limit; its agents are then silent too): the other tests' agents stay
	// connected.
	clk = clocktesting.NewFakeClock(time.Date(2025, 6, 2, 12, 0, 0, 0, time.UTC))
	// serviceAddr is where the agent service serves hosts' Ignition.
	serviceAddr string
	// signingKey signs the agent tokens.
	signingKey = []byte("aci-overrides-test-signing-key32")
)

// TestMain starts envtest and the agent service as the hub runs it
// (assisted.Setup): its server and its controllers, the
// AgentClusterInstall and Agent reconcilers among them.
func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, &env, testenv.Options{
		Clock: clk,
		Components: []component.Component{{Name: "agent-service", Setup: func(ctx context.Context, hub *component.Hub) error {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return err
			}
			serviceAddr = l.Addr().String()
			_ = l.Close()
			return assisted.Setup(ctx, hub, assisted.Options{ListenAddr: serviceAddr, Key: signingKey})
		}}},
	}))
}
