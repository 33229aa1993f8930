package installtest

import (
	"context"
	"crypto/rand"
	"net"
	"os"
	"testing"
	"time"

	"github.com/metalshift/metalshift/assisted"
	"github.com/metalshift/metalshift/component"
	"github.com/metalshift/metalshift/internal/testenv"
)

var (
	env *testenv.Env
	// serviceAddr is where the agent service listens.
	serviceAddr string
)

// TestMain starts envtest with the agent service on a free port; agents
// poll every second and are disconnected after 6 seconds of silence.
func TestMain(m *testing.M) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	serviceAddr = l.Addr().String()
	l.Close()
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	c := assisted.Component()
	c.Flags, c.Complete = nil, nil
	c.Setup = func(ctx context.Context, hub *component.Hub) error {
		return assisted.Setup(ctx, hub, assisted.Options{ListenAddr: serviceAddr, PollInterval: time.Second, Key: key,
			DisconnectedAfter: 6 * time.Second})
	}
	os.Exit(testenv.Run(m, &env, testenv.Options{Components: []component.Component{c}}))
}
