package clusterdeployment_test

import (
	"context"
	"errors"
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
	// starts numbers the service's managers: each needs a name of its own
	// (it names their informers).
	starts int
)

// TestMain starts envtest with the admission webhooks only: each test
// runs the agent service itself (startService), so that a test can stop
// it and see what deleting looks like while it is down.
func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, &env, testenv.Options{}))
}

// startService runs the agent service as the hub does (assisted.Setup: its
// server and every controller, with their finalizers) in a manager of its
// own, until the returned function or the test's end stops it.
func startService(t *testing.T) (stop func()) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	c := component.Component{Name: "agent-service", AddToScheme: assisted.AddToScheme, Setup: func(ctx context.Context, hub *component.Hub) error {
		return assisted.Setup(ctx, hub, assisted.Options{ListenAddr: addr, Key: []byte("teardown-test-signing-key-32byte")})
	}}
	ctx, cancel := context.WithCancel(context.Background())
	starts++
	mgr, err := component.NewManager(ctx, env.Config, fmt.Sprintf("agent-service-%d", starts), component.Options{RestartableInProcess: true}, []component.Component{c})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		cancel()
		t.Fatal("the agent service's caches did not sync")
	}
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("the agent service stopped with: %v", err)
		}
	}
	t.Cleanup(stop)
	return stop
}
