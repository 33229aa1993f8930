package preprovisioningimage_test

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
	key         = []byte("ppi-test-signing-key-of-32-bytes")
)

// deployURL is the host engine's deploy server the images name; no engine
// runs here: the tests make the hosts' PreprovisioningImages themselves,
// as the engine does.
const deployURL = "http://deploy.example.com:6180"

// TestMain starts envtest and the agent service with the converged flow.
func TestMain(m *testing.M) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	serviceAddr = l.Addr().String()
	_ = l.Close()
	os.Exit(testenv.Run(m, &env, testenv.Options{
		Components: []component.Component{{Name: "agent-service", Setup: func(ctx context.Context, hub *component.Hub) error {
			return assisted.Setup(ctx, hub, assisted.Options{ListenAddr: serviceAddr, Key: key, ConvergedFlow: true, DeployURL: deployURL})
		}}},
	}))
}
