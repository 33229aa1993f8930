package agentinstall

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// Profiles of a benchmark run: with $METALSHIFT_BENCH_PROFILE set to a
// duration, BenchmarkAgentSNO takes CPU profiles of the hub's
// kube-apiserver (its /debug/pprof/profile), of the manager process and of
// its own process (the simulated machines, agents and installed
// clusters) for that long from the run's start, into the run's directory.
const benchProfileEnv = "METALSHIFT_BENCH_PROFILE"

// hubProfileEnv tells the manager process where to write its CPU
// profile, and for how long: "<path>,<duration>".
const hubProfileEnv = "METALSHIFT_INSTALLTEST_HUB_PROFILE"

// cpuProfile profiles this process into path for d, or until the stop it
// returns is called. A failure to start is written to stderr and profiles
// nothing: a profile is a diagnosis, not a figure.
func cpuProfile(path string, d time.Duration) (stop func()) {
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "cpu profile:", err)
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		fmt.Fprintln(os.Stderr, "cpu profile:", err)
		f.Close()
		return func() {}
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			pprof.StopCPUProfile()
			f.Close()
		})
	}
	time.AfterFunc(d, stop)
	return stop
}

// hubProcessProfile starts the manager process's profile when
// $hubProfileEnv asks for one.
func hubProcessProfile() (stop func()) {
	v := os.Getenv(hubProfileEnv)
	if v == "" {
		return func() {}
	}
	path, ds, _ := strings.Cut(v, ",")
	d, err := time.ParseDuration(ds)
	if err != nil {
		fmt.Fprintln(os.Stderr, "hub process: profile:", err)
		return func() {}
	}
	return cpuProfile(path, d)
}

// apiServerProfile writes a CPU profile of the hub's kube-apiserver over
// d into path, then a profile of its heap beside it (heap instead of cpu in
// the name), in the background; wait waits for them and returns their
// error.
func apiServerProfile(cfg *rest.Config, path string, d time.Duration) (wait func() error) {
	done := make(chan error, 1)
	go func() {
		err := fetchProfile(cfg, fmt.Sprintf("profile?seconds=%d", int(d.Seconds())), path, d+time.Minute)
		if err == nil {
			err = fetchProfile(cfg, "heap", strings.Replace(path, ".cpu.", ".heap.", 1), time.Minute)
		}
		done <- err
	}()
	return func() error { return <-done }
}

// fetchProfile writes the kube-apiserver's /debug/pprof/<what> into path.
func fetchProfile(cfg *rest.Config, what, path string, timeout time.Duration) error {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	u := strings.TrimSuffix(cfg.Host, "/") + "/debug/pprof/" + what
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("kube-apiserver /debug/pprof/%s: %s", what, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// startProfiles starts the profiles of a run into dir when
// $METALSHIFT_BENCH_PROFILE asks for them (the manager process started
// its own); the function it returns ends them and says where they are.
func startProfiles(tb testing.TB, dir string) (finish func()) {
	v := os.Getenv(benchProfileEnv)
	if v == "" {
		return func() {}
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < time.Second {
		tb.Fatalf("$%s=%q: want a duration of a second or more", benchProfileEnv, v)
	}
	api, self := filepath.Join(dir, "kube-apiserver.cpu.pprof"), filepath.Join(dir, "sim.cpu.pprof")
	stop := cpuProfile(self, d)
	wait := apiServerProfile(env.Config, api, d)
	return func() {
		stop()
		if err := wait(); err != nil {
			tb.Logf("kube-apiserver profile: %v", err)
		}
		fmt.Fprintf(os.Stdout, "CPU profiles of the first %s (go tool pprof -top <file>): kube-apiserver %s (and its heap at the end, kube-apiserver.heap.pprof), the simulator's %s, the manager's hub*.cpu.pprof in %s\n", d, api, self, dir)
	}
}
