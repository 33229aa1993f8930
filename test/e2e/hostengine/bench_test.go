package hostengine

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/zap/zapcore"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
	"github.com/metalshift/metalshift/component"
	"github.com/metalshift/metalshift/hostengine"
	"github.com/metalshift/metalshift/hostengine/pkg/egress"
	"github.com/metalshift/metalshift/internal/serving"
	"github.com/metalshift/metalshift/internal/testenv"
	"github.com/metalshift/metalshift/sim"
)

// writeKey is one kind of API write: the verb and the resource, with its
// subresource ("baremetalhosts/status").
type writeKey struct{ verb, resource string }

// conflictKey is a kind of API write refused with 409 Conflict and the
// writer that made it (writer).
type conflictKey struct {
	writeKey
	writer string
}

// writeCounter counts the API writes of the engine (its controllers, its
// deploy server and its Event recorders) by verb and resource, and the
// ones refused with 409 Conflict, also by writer.
type writeCounter struct {
	rt          http.RoundTripper
	mu          sync.Mutex
	writes      map[writeKey]int
	conflicts   map[writeKey]int
	conflictsBy map[conflictKey]int
}

func (w *writeCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return w.rt.RoundTrip(r)
	}
	k := writeKey{r.Method, requestResource(r.URL.Path)}
	resp, err := w.rt.RoundTrip(r)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes[k]++
	if err == nil && resp.StatusCode == http.StatusConflict {
		w.conflicts[k]++
		w.conflictsBy[conflictKey{k, writer()}]++
	}
	return resp, err
}

// closure matches the suffix of a function literal's name (".func1.2"),
// which writer leaves out: the function it is in names the writer.
var closure = regexp.MustCompile(`(\.func\d+)+(\.\d+)*$`)

// writer names the engine's function whose API request the calling
// goroutine makes (client-go sends a request on its caller's goroutine):
// the innermost caller in the engine's packages, such as
// deployserver.(*Server).report, or the Event recorder.
func writer() string {
	pcs := make([]uintptr, 64)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(3, pcs)])
	for {
		f, more := frames.Next()
		const engine = "/metalshift/hostengine/"
		if i := strings.Index(f.Function, engine); i >= 0 && !strings.Contains(f.Function, "hostenginetest") {
			return closure.ReplaceAllString(f.Function[i+len(engine):], "")
		}
		if strings.Contains(f.Function, "k8s.io/client-go/tools/events") {
			return "Event recorder"
		}
		if !more {
			return "other"
		}
	}
}

// requestResource is the resource (and subresource) an API path names:
// /apis/metal3.io/v1alpha1/namespaces/a/baremetalhosts/h/status is
// baremetalhosts/status.
func requestResource(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	}
	if len(parts) > 2 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	switch len(parts) {
	case 0:
		return path
	case 1, 2:
		return parts[0]
	}
	return parts[0] + "/" + parts[2]
}

// benchLog sends the engine's and client-go's logs to a file, so that the
// report stays readable; it returns the file's path, the engine's logger
// and a function that restores the logger of the suite.
func benchLog(b *testing.B) (string, logr.Logger, func()) {
	dir, err := os.MkdirTemp("", "provision-bench-")
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(dir, "engine.log")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	logger := zap.New(zap.WriteTo(f), zap.Level(zapcore.InfoLevel))
	klog.SetLogger(logger)
	return path, logger, func() {
		klog.SetLogger(ctrl.Log)
		_ = f.Close()
	}
}

// BenchmarkProvision1000 takes BENCH_HOSTS (default 1000) hosts from
// creation to provisioned through the Redfish emulator and the deploy
// agent, with no injected latency. Its report: the wall time, when hosts
// reached each state, the engine's API writes per host by verb and
// resource (and the 409 Conflicts among them), and the peak RSS of the
// process (engine, simulator and every deploy agent together).
func BenchmarkProvision1000(b *testing.B) {
	n := 1000
	if v, err := strconv.Atoi(os.Getenv("BENCH_HOSTS")); err == nil && v > 0 {
		n = v
	}
	for range b.N {
		b.StopTimer()
		logPath, logger, restoreLog := benchLog(b)
		ns := env.Namespace(b)
		counter := &writeCounter{writes: map[writeKey]int{}, conflicts: map[writeKey]int{}, conflictsBy: map[conflictKey]int{}}
		cfg := rest.CopyConfig(env.Config)
		cfg.QPS, cfg.Burst = 500, 1000
		cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { counter.rt = rt; return counter }
		scheme, _ := component.NewScheme(hostengine.Component())
		mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme, Logger: logger, Metrics: metricsserver.Options{BindAddress: "0"},
			Controller: ctrlConfigSkipNameValidation()})
		if err != nil {
			b.Fatal(err)
		}
		key := make([]byte, 32)
		_, _ = rand.Read(key)
		ln := testenv.Listen(b)
		addr := ln.Addr().String()
		ctx, cancel := context.WithCancel(ctrl.LoggerInto(context.Background(), logger))
		// Every simulated machine calls from 127.0.0.1: the deploy server's
		// limits per source, made for one machine an address, would take
		// the fleet for one client (the agents of provisioned hosts, whose
		// requests ended, are answered 401 until they stop).
		budgets := serving.Budgets{Unauthenticated: serving.Unlimited, AuthFailures: serving.Unlimited}
		if err := hostengine.Setup(ctx, mgr, hostengine.Options{DeployListener: ln, SigningKey: key, Concurrency: 50,
			BMCEgress: egress.Policy{AllowLoopback: true}, Budgets: budgets}); err != nil {
			b.Fatal(err)
		}
		go func() { _ = mgr.Start(ctx) }()
		lab := sim.NewLab(sim.LabOptions{Hosts: n, Password: canary, BootURL: "http://" + addr, AgentPollInterval: 500 * time.Millisecond, DiskSizeBytes: 64 << 30})
		if err := lab.Start("127.0.0.1:0"); err != nil {
			b.Fatal(err)
		}
		img := newImageServer(b, 256<<10, false)
		writer, _ := client.New(env.Config, client.Options{Scheme: scheme})
		start := time.Now()
		b.StartTimer()

		createHosts(ctx, b, writer, lab, ns, img.Image())
		created := time.Since(start)
		seen, recorded := waitProvisioned(ctx, b, scheme, ns, n, start)
		b.StopTimer()
		elapsed := time.Since(start)
		counter.mu.Lock()
		provisionReport(b, n, elapsed, created, seen, recorded, counter, logPath)
		counter.mu.Unlock()
		cancel()
		lab.Close()
		restoreLog()
		b.StartTimer()
	}
}

// createHosts creates the lab's hosts, to be provisioned with image, with
// their credentials and one user data Secret.
func createHosts(ctx context.Context, b *testing.B, writer client.Client, lab *sim.Lab, ns string, image *metal3v1.Image) {
	var eg errgroup.Group
	eg.SetLimit(20)
	for i := range lab.Machines {
		eg.Go(func() error {
			host, secret := lab.Host(lab.Machines[i], ns, true)
			host.Spec.Image, host.Spec.Online = image, true
			host.Spec.UserData = &corev1.SecretReference{Name: "user-data"}
			if err := writer.Create(ctx, secret); err != nil {
				return err
			}
			return writer.Create(ctx, host)
		})
	}
	ud := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "user-data", Namespace: ns}, StringData: map[string]string{"userData": "{}"}}
	if err := writer.Create(ctx, ud); err != nil {
		b.Fatal(err)
	}
	if err := eg.Wait(); err != nil {
		b.Fatal(err)
	}
}

// waitProvisioned waits for n hosts to be provisioned and returns, by
// state, when each host was first seen in it, and when each host's status
// says its provisioning ended (operationHistory.provision.end, the
// engine's clock to the second: what the benchmark sees lags it on a
// machine the engine, the simulator and the agents keep busy). It follows the hosts with a
// watch (an informer), as a user's kubectl get -w does: listing a thousand
// hosts over and over loads the API server the engine writes to, and a
// loaded one breaks such lists off.
func waitProvisioned(ctx context.Context, b *testing.B, scheme *kruntime.Scheme, ns string, n int, start time.Time) (map[metal3v1.ProvisioningState][]time.Duration, []time.Duration) {
	c, err := cache.New(env.Config, cache.Options{Scheme: scheme, DefaultNamespaces: map[string]cache.Config{ns: {}}})
	if err != nil {
		b.Fatal(err)
	}
	inf, err := c.GetInformer(ctx, &metal3v1.BareMetalHost{})
	if err != nil {
		b.Fatal(err)
	}
	var mu sync.Mutex
	firstSeen := map[string]map[metal3v1.ProvisioningState]time.Duration{}
	provisioned := 0
	var recorded []time.Duration
	done := make(chan struct{})
	see := func(o any) {
		h, ok := o.(*metal3v1.BareMetalHost)
		if !ok {
			return
		}
		now := time.Since(start)
		mu.Lock()
		defer mu.Unlock()
		st := h.Status.Provisioning.State
		if firstSeen[h.Name] == nil {
			firstSeen[h.Name] = map[metal3v1.ProvisioningState]time.Duration{}
		}
		if _, ok := firstSeen[h.Name][st]; ok || st == "" {
			return
		}
		firstSeen[h.Name][st] = now
		if st == metal3v1.StateProvisioned {
			recorded = append(recorded, h.Status.OperationHistory.Provision.End.Sub(start))
			if provisioned++; provisioned == n {
				close(done)
			}
		}
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: see, UpdateFunc: func(_, o any) { see(o) }}); err != nil {
		b.Fatal(err)
	}
	watchCtx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { _ = c.Start(watchCtx) }()
	select {
	case <-done:
	case <-time.After(20 * time.Minute):
		mu.Lock()
		defer mu.Unlock()
		b.Fatalf("only %d of %d hosts provisioned after 20 minutes", provisioned, n)
	}
	mu.Lock()
	defer mu.Unlock()
	seen := map[metal3v1.ProvisioningState][]time.Duration{}
	for _, states := range firstSeen {
		for st, d := range states {
			seen[st] = append(seen[st], d)
		}
	}
	return seen, recorded
}

// writeConflictsByWriter adds to s the 409 Conflicts per host by the
// writer whose write was refused, most first.
func writeConflictsByWriter(s *strings.Builder, c *writeCounter, per func(int) float64) {
	if len(c.conflictsBy) == 0 {
		return
	}
	keys := make([]conflictKey, 0, len(c.conflictsBy))
	for k := range c.conflictsBy {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		return c.conflictsBy[a] > c.conflictsBy[b] || c.conflictsBy[a] == c.conflictsBy[b] && a.writer < b.writer
	})
	s.WriteString("409 Conflicts per host by the writer refused:\n")
	for _, k := range keys {
		fmt.Fprintf(s, "  %6.2f  %-6s %-28s %s\n", per(c.conflictsBy[k]), k.verb, k.resource, k.writer)
	}
}

// provisionReport prints the benchmark's figures to stdout (b.Log would
// cut them at ten lines without -v) and reports the main ones as metrics.
func provisionReport(b *testing.B, n int, elapsed, created time.Duration, seen map[metal3v1.ProvisioningState][]time.Duration, recorded []time.Duration, c *writeCounter, logPath string) {
	per := func(x int) float64 { return float64(x) / float64(n) }
	var writes, conflicts int
	keys := make([]writeKey, 0, len(c.writes))
	for k, v := range c.writes {
		keys = append(keys, k)
		writes += v
		conflicts += c.conflicts[k]
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		return c.writes[a] > c.writes[b] || c.writes[a] == c.writes[b] && (a.resource < b.resource || a.resource == b.resource && a.verb < b.verb)
	})
	var s strings.Builder
	fmt.Fprintf(&s, "%d hosts from creation to provisioned (%d CPUs, Redfish virtual media, deploy agent poll 500ms): %s (hosts created in %s)\n",
		n, runtime.NumCPU(), elapsed.Round(time.Millisecond), created.Round(time.Millisecond))
	fmt.Fprintf(&s, "Engine API writes per host: %.2f (%.2f of them refused with 409 Conflict)\n", per(writes), per(conflicts))
	for _, k := range keys {
		fmt.Fprintf(&s, "  %6.2f  %-6s %-40s (409: %.2f)\n", per(c.writes[k]), k.verb, k.resource, per(c.conflicts[k]))
	}
	writeConflictsByWriter(&s, c, per)
	s.WriteString("When hosts were first seen in each state, from the start: median (p90, last):\n")
	states := make([]metal3v1.ProvisioningState, 0, len(seen))
	for st, ds := range seen {
		slices.Sort(ds)
		states = append(states, st)
	}
	sort.Slice(states, func(i, j int) bool {
		return seen[states[i]][len(seen[states[i]])/2] < seen[states[j]][len(seen[states[j]])/2]
	})
	for _, st := range states {
		ds := seen[st]
		fmt.Fprintf(&s, "  %-14s %8s (%8s, %8s) [%d hosts]\n", st, ds[len(ds)/2].Round(100*time.Millisecond),
			ds[int(.9*float64(len(ds)-1))].Round(100*time.Millisecond), ds[len(ds)-1].Round(100*time.Millisecond), len(ds))
	}
	slices.Sort(recorded)
	last := recorded[len(recorded)-1]
	fmt.Fprintf(&s, "Provisioned as the hosts' status records it (operationHistory.provision.end, to the second): median %s, p90 %s, last %s\n",
		recorded[len(recorded)/2].Round(100*time.Millisecond), recorded[int(.9*float64(len(recorded)-1))].Round(100*time.Millisecond), last.Round(100*time.Millisecond))
	fmt.Fprintf(&s, "Peak RSS of the process (engine, simulator, agents): %.0f MiB\n", peakRSSMiB())
	fmt.Fprintf(&s, "Engine and client logs: %s\n", logPath)
	fmt.Fprintf(os.Stdout, "--- %s report:\n%s", b.Name(), s.String())
	b.ReportMetric(elapsed.Seconds(), "s/all-hosts")
	b.ReportMetric(last.Seconds(), "s/all-hosts-recorded")
	b.ReportMetric(per(writes), "api-writes/host")
	b.ReportMetric(per(conflicts), "conflicts/host")
	b.ReportMetric(peakRSSMiB(), "peak-rss-MiB")
}
