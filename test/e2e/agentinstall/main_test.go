package agentinstall

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
	"github.com/metalshift/metalshift/assisted"
	"github.com/metalshift/metalshift/component"
	"github.com/metalshift/metalshift/hostengine"
	"github.com/metalshift/metalshift/hostengine/pkg/egress"
	"github.com/metalshift/metalshift/internal/ports"
	"github.com/metalshift/metalshift/internal/testenv"
)

var (
	env *testenv.Env
	// serviceAddr is where the agent service listens, deployAddr the host
	// engine's deploy server, metricsAddr the hub's metrics endpoint.
	serviceAddr, deployAddr, metricsAddr string
	// key signs the agents' tokens and the image URLs; every hub the tests
	// start shares it, as the replicas of one hub share the signing key.
	key = make([]byte, 32)
	// stopHub stops the running hub.
	stopHub func() error
	// hubs counts the hubs started: each manager in a process needs a
	// name of its own (it names the informers' metrics).
	hubs int
	// convergedFlow is the hub's ConvergedFlow: off (the other ZTP flow)
	// but in TestZTPConverged, which restarts the hub with it.
	convergedFlow bool
	// disconnectedAfter is the hub's DisconnectedAfter; a test that keeps
	// the hub away longer restarts it with more.
	disconnectedAfter = 6 * time.Second
)

// TestMain starts envtest (the admission webhooks included) and the hub:
// the agent service and its controllers in a manager of their own, which
// TestHubRestart stops and starts again. Agents poll every second and are
// disconnected after 6 seconds of silence. Started with hubProcessEnv set,
// the test binary is BenchmarkAgentSNO's hub manager instead.
func TestMain(m *testing.M) {
	if os.Getenv(hubProcessEnv) != "" {
		os.Exit(hubProcess()) // BenchmarkAgentSNO's hub
	}
	flag.Parse()
	os.Exit(run(m))
}

func run(m *testing.M) int {
	// TestHubRestart starts the servers again on the same addresses:
	// reserved for the whole run, so that nothing takes them in between.
	for _, addr := range []*string{&serviceAddr, &deployAddr, &metricsAddr} {
		r, err := ports.Reserve(0)
		if err != nil {
			panic(err)
		}
		defer r.Release()
		*addr = r.Addr()
	}
	_, _ = rand.Read(key)
	var err error
	if env, err = testenv.Start(testenv.Options{}); err != nil {
		fmt.Fprintln(os.Stderr, "testenv:", err)
		return 1
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "testenv: stopping:", err)
		}
	}()
	// Benchmarks alone (make bench's -run '^$') run their own hub
	// process: the tests' hub is not started, so that its start and stop
	// around them print nothing into their report.
	if !benchmarksOnly() {
		if stopHub, err = startHub(); err != nil {
			fmt.Fprintln(os.Stderr, "starting the hub:", err)
			return 1
		}
	}
	code := m.Run()
	if stopHub != nil {
		if err := stopHub(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the hub:", err)
			code = 1
		}
	}
	return code
}

// benchmarksOnly tells whether the run asks for no test (-run '^$').
func benchmarksOnly() bool {
	f := flag.Lookup("test.run")
	return f != nil && f.Value.String() == "^$"
}

// startHub starts a manager running the agent service and its
// controllers; stop stops it and returns once it has.
func startHub() (stop func() error, err error) {
	c := assisted.Component()
	c.Flags, c.Complete = nil, nil
	c.Setup = func(ctx context.Context, hub *component.Hub) error {
		return assisted.Setup(ctx, hub, assisted.Options{ListenAddr: serviceAddr, PollInterval: time.Second, Key: key,
			DisconnectedAfter: disconnectedAfter, ConvergedFlow: convergedFlow, DeployURL: "http://" + deployAddr})
	}
	// The host engine, for the BareMetalHosts of ZTP installs.
	engine := component.Component{Name: "host-engine", AddToScheme: metal3v1.AddToScheme, Setup: func(ctx context.Context, hub *component.Hub) error {
		return hostengine.Setup(ctx, hub.Manager, hostengine.Options{DeployListenAddr: deployAddr, SigningKey: key, BackoffBase: 200 * time.Millisecond,
			PowerPollInterval: 2 * time.Second, BMCEgress: egress.Policy{AllowLoopback: true}}) // the lab's BMCs listen on loopback
	}}
	ctx, cancel := context.WithCancel(context.Background())
	hubs++
	mgr, err := component.NewManager(ctx, env.Config, fmt.Sprintf("agent-service-%d", hubs), component.Options{RestartableInProcess: true, MetricsAddr: metricsAddr}, []component.Component{c, engine})
	if err != nil {
		cancel()
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		cancel()
		return nil, errors.Join(errors.New("the hub's caches did not sync"), <-done)
	}
	return func() error {
		cancel()
		return <-done
	}, nil
}
