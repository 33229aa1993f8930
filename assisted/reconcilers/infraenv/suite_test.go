package infraenv_test

import (
	"context"
	"fmt"
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
	// clk is the hub's clock: image URLs are minted, stamped and checked
	// at its time, which only the tests move.
	clk = clocktesting.NewFakeClock(time.Date(2025, 6, 2, 12, 0, 0, 0, time.UTC))
	// serviceAddr is where the agent service serves the images.
	serviceAddr string
)

// TestMain starts envtest and the agent service as the hub runs it
// (assisted.Setup): its server, which serves the images, and its
// controllers, the InfraEnv reconciler among them.
func TestMain(m *testing.M) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	serviceAddr = l.Addr().String()
	_ = l.Close()
	os.Exit(testenv.Run(m, &env, testenv.Options{
		Clock: clk,
		Components: []component.Component{{Name: "agent-service", Setup: func(ctx context.Context, hub *component.Hub) error {
			return assisted.Setup(ctx, hub, assisted.Options{ListenAddr: serviceAddr, Key: []byte("infraenv-test-signing-key-32byte")})
		}}},
	}))
}
