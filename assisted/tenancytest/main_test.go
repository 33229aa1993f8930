package tenancytest

import (
	"context"
	"fmt"
	"net"
	"os"
	"testing"

	"github.com/metalshift/metalshift/assisted"
	"github.com/metalshift/metalshift/component"
	"github.com/metalshift/metalshift/internal/testenv"
)

var (
	env *testenv.Env
	// serviceAddr is where the agent service serves the images.
	serviceAddr string
)

// TestMain starts envtest without metalshift's validating webhooks and the
// agent service as the hub runs it (assisted.Setup): its server and its
// controllers, BMAC among them.
func TestMain(m *testing.M) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	serviceAddr = l.Addr().String()
	_ = l.Close()
	os.Exit(testenv.Run(m, &env, testenv.Options{
		WithoutAdmission: true,
		Components: []component.Component{{Name: "agent-service", Setup: func(ctx context.Context, hub *component.Hub) error {
			return assisted.Setup(ctx, hub, assisted.Options{ListenAddr: serviceAddr, Key: []byte("tenancy-test-signing-key-32bytes")})
		}}},
	}))
}
