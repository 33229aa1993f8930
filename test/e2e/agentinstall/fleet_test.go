package agentinstall

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	hivev1 "github.com/metalshift/metalshift/api/hive/v1"
	hiveextv1 "github.com/metalshift/metalshift/api/hiveext/v1beta1"
	"github.com/metalshift/metalshift/internal/testenv"
	"github.com/metalshift/metalshift/sim"
	"github.com/metalshift/metalshift/sim/cluster"
	"github.com/metalshift/metalshift/sim/machine"
)

// Environment of BenchmarkAgentSNO.
const (
	// benchSNOEnv is the number of single-node installs (default 100).
	benchSNOEnv = "METALSHIFT_BENCH_SNO"
	// benchPollEnv are how often discovery agents poll, a run for each,
	// comma-separated (default 10s,60s: a lab's and upstream's default,
	// which is also the hub's).
	benchPollEnv = "METALSHIFT_BENCH_POLL"
	// benchTimeoutEnv bounds the wait for the installs (default 5m plus
	// 2s an install plus 10 polls); those left are reported stuck.
	benchTimeoutEnv = "METALSHIFT_BENCH_TIMEOUT"
	// benchStallEnv ends the wait when, after the first install completed,
	// no install moved to a state it had not been in for that long while
	// some are left (default 1m plus 2 polls); those are reported stuck.
	benchStallEnv = "METALSHIFT_BENCH_STALL"
	// benchDirEnv, when set, keeps the hub's and the simulator's logs in
	// a new directory under it (else they go with the benchmark).
	benchDirEnv = "METALSHIFT_BENCH_DIR"
)

// labSize is how many machines share a lab (a /24 of loopback addresses).
const labSize = 200

// fleet is N single-node installs run side by side: their objects in a
// namespace each, a machine each, installed clusters served by the
// in-memory twin (cluster.InMemoryAPIServer).
type fleet struct {
	n      int
	prefix string
	// dir keeps the simulator's log.
	dir string
	// timeout bounds the wait for the installs; stall ends it early when
	// none completed for that long while some are left.
	timeout, stall time.Duration
	// onCompleted, when set, is called as each install completes.
	onCompleted func()
	// shards labels install i for shard i mod shards (shard_test.go).
	shards int
}

// fleetResult is what a fleet run measured.
type fleetResult struct {
	// setup is the time to create the objects and get every ISO URL.
	setup time.Duration
	// wall is from the first ISO boot to the last Completed.
	wall time.Duration
	// perInstall is each completed install's time from its boot to its
	// Completed.
	perInstall []time.Duration
	// milestones are, by name, the times from boot at which each install
	// was first seen in a state ("cluster <state>", "host <stage>").
	milestones map[string][]time.Duration
	// stuck are the installs not Completed within the timeout, with the
	// states they were left in.
	stuck []string
	// approveRetries are approvals the API server did not answer in time.
	approveRetries int
}

// fleetRun is a fleet's run in progress.
type fleetRun struct {
	fleet
	tb    testing.TB
	g     *WithT
	cache cache.Cache
	// names are the installs' names (and namespaces), index their numbers.
	names []string
	index map[string]int
	// machines[i] installs names[i]; boot[i] is when it was powered on.
	machines []*machine.Machine
	boot     []time.Time
	// seen are, by install, when it was first seen in each state; done
	// when it was seen Completed.
	seen []map[string]time.Duration
	done []time.Duration
	// last are, by install, its cluster's and host's last seen states.
	last     [][2]string
	approved map[string]bool
	// approveRetries counts approvals the API server did not answer in
	// time (asked again).
	approveRetries int
	// progress is when an install was last seen in a state it had not
	// been in.
	progress time.Time
}

// run creates the installs, boots every machine from its InfraEnv's ISO,
// approves the Agents as they register and waits until every
// AgentClusterInstall is Completed (or the timeout passes, or none
// completes for the stall time: the installs left are stuck). The machines (and their clusters) run until the test
// ends.
func (f fleet) run(tb testing.TB, g *WithT) fleetResult {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := &fleetRun{fleet: f, tb: tb, g: g, index: map[string]int{}, approved: map[string]bool{}}
	for i := range f.n {
		r.names = append(r.names, fmt.Sprintf("%s-%d", f.prefix, i))
		r.index[r.names[i]] = i
	}
	r.startMachines()
	var err error
	r.cache, err = cache.New(env.Config, cache.Options{Scheme: env.Client.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())
	go func() { _ = r.cache.Start(ctx) }()
	g.Expect(r.cache.WaitForCacheSync(ctx)).To(BeTrue())
	start := time.Now()
	isos := r.create(ctx)
	res := fleetResult{setup: time.Since(start), milestones: map[string][]time.Duration{}}
	r.bootAll(isos)
	r.follow(ctx)
	res.approveRetries = r.approveRetries
	for i, d := range r.done {
		if d == 0 {
			res.stuck = append(res.stuck, fmt.Sprintf("%s (cluster %s, host %s)", r.names[i], r.last[i][0], r.last[i][1]))
			continue
		}
		res.perInstall = append(res.perInstall, d)
		res.wall = max(res.wall, r.boot[i].Add(d).Sub(r.boot[0]))
		for k, d := range r.seen[i] {
			res.milestones[k] = append(res.milestones[k], d)
		}
	}
	return res
}

// startMachines starts the simulated world and the machines, powered off,
// in labs of labSize.
func (r *fleetRun) startMachines() {
	logFile, err := os.Create(filepath.Join(r.dir, "sim.log"))
	r.g.Expect(err).NotTo(HaveOccurred())
	r.tb.Cleanup(func() { logFile.Close() })
	console := stampWriter{logFile}
	// client-go's own messages (a simulated cluster's reporter meeting a
	// closed connection prints a stack) go to the log, not the report.
	klog.SetLogger(funcr.New(func(prefix, args string) { fmt.Fprintf(console, "client-go %s %s\n", prefix, args) }, funcr.Options{}))
	r.tb.Cleanup(klog.ClearLogger)
	// So do the hub's admission webhooks' (served by this process) when
	// the loaded API server breaks a call off.
	r.tb.Cleanup(testenv.RedirectLog(console))
	w, err := cluster.New(cluster.Options{APIServer: cluster.InMemoryAPIServer,
		Logf: func(format string, args ...any) { fmt.Fprintf(console, format+"\n", args...) }})
	r.g.Expect(err).NotTo(HaveOccurred())
	r.tb.Cleanup(w.Close)
	for j := 0; j*labSize < r.n; j++ {
		lab := sim.NewLab(sim.LabOptions{Hosts: min(labSize, r.n-j*labSize), World: w, Subnet: fmt.Sprintf("127.78.%d", j),
			MACOctet: byte(0x80 + j), NamePrefix: fmt.Sprintf("%s-%d", r.prefix, j), AgentPollInterval: time.Second, Console: console})
		r.machines = append(r.machines, lab.Machines...)
	}
	r.tb.Cleanup(func() {
		for _, m := range r.machines {
			m.PowerOff()
		}
	})
}

// create creates the service's objects and every install's, and returns
// the InfraEnvs' ISO URLs once they all have one.
func (r *fleetRun) create(ctx context.Context) []string {
	fleetServiceObjects(r.tb, r.g)
	r.g.Expect(parallel(r.n, 8, func(i int) error {
		for _, o := range installObjects(r.names[i], r.names[i], 1, 0, "", "") {
			labelShard(o, i, r.shards)
			if err := env.Client.Create(ctx, o); err != nil {
				return fmt.Errorf("%s: %w", r.names[i], err)
			}
		}
		return nil
	})).To(Succeed())
	isos := make([]string, r.n)
	r.g.Eventually(func() int {
		list := &agentinstallv1.InfraEnvList{}
		r.g.Expect(r.cache.List(ctx, list)).To(Succeed())
		n := 0
		for _, ie := range list.Items {
			if i, ok := r.index[ie.Namespace]; ok && ie.Status.ISODownloadURL != "" {
				isos[i] = ie.Status.ISODownloadURL
				n++
			}
		}
		return n
	}, r.timeout, time.Second).Should(Equal(r.n), "InfraEnvs with an ISO")
	return isos
}

// bootAll boots machine i from isos[i], as a person does at its BMC.
func (r *fleetRun) bootAll(isos []string) {
	for i, m := range r.machines {
		r.g.Expect(m.InsertMedia(isos[i])).To(Succeed())
		m.SetOverride(machine.BootOverride{Target: machine.BootCd, UEFI: true})
		r.boot = append(r.boot, time.Now())
		m.PowerOn()
	}
}

// follow approves Agents as they register and records the installs'
// states until all are Completed, the timeout passes or they stall.
func (r *fleetRun) follow(ctx context.Context) {
	r.seen, r.done, r.last = make([]map[string]time.Duration, r.n), make([]time.Duration, r.n), make([][2]string, r.n)
	for i := range r.seen {
		r.seen[i] = map[string]time.Duration{}
	}
	left := r.n
	r.progress = time.Now()
	// The stall clock runs from the first install completed: the first
	// one takes some polls.
	stalled := func() bool { return r.stall > 0 && left < r.n && time.Since(r.progress) > r.stall }
	for deadline := time.Now().Add(r.timeout); left > 0 && time.Now().Before(deadline) && !stalled(); time.Sleep(250 * time.Millisecond) {
		r.agents(ctx)
		acis := &hiveextv1.AgentClusterInstallList{}
		r.g.Expect(r.cache.List(ctx, acis)).To(Succeed())
		for _, aci := range acis.Items {
			i, ok := r.index[aci.Namespace]
			if !ok || r.done[i] != 0 {
				continue
			}
			r.last[i][0] = aci.Status.DebugInfo.State
			r.mark(i, "cluster "+aci.Status.DebugInfo.State)
			if condTrue(&aci, "Completed") {
				r.done[i] = time.Since(r.boot[i])
				left--
				if r.onCompleted != nil {
					r.onCompleted()
				}
			}
		}
	}
}

// agents approves the Agents not approved yet and records their states.
func (r *fleetRun) agents(ctx context.Context) {
	agents := &agentinstallv1.AgentList{}
	r.g.Expect(r.cache.List(ctx, agents)).To(Succeed())
	for _, a := range agents.Items {
		i, ok := r.index[a.Namespace]
		if !ok {
			continue
		}
		r.last[i][1] = a.Status.DebugInfo.State
		r.mark(i, "agent registered")
		r.mark(i, "host "+a.Status.DebugInfo.State)
		if a.Status.Progress.CurrentStage != "" {
			r.mark(i, "host stage "+a.Status.Progress.CurrentStage)
		}
		if !a.Spec.Approved && !r.approved[a.Namespace+"/"+a.Name] {
			// kubectl patch agents.agent-install.openshift.io <id> -p '{"spec":{"approved":true}}' --type merge
			// An API server too loaded to answer in time is asked again on
			// the next pass, as a user would run kubectl again.
			if err := env.Client.Patch(ctx, &a, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"approved":true}}`))); err != nil {
				r.g.Expect(apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) || apierrors.IsTooManyRequests(err)).To(BeTrue(), "approving Agent %s/%s: %v", a.Namespace, a.Name, err)
				r.approveRetries++
				continue
			}
			r.approved[a.Namespace+"/"+a.Name] = true
		}
	}
}

// mark records the first time install i was seen in a state: progress.
func (r *fleetRun) mark(i int, what string) {
	if _, ok := r.seen[i][what]; !ok && !strings.HasSuffix(what, " ") {
		r.seen[i][what] = time.Since(r.boot[i])
		r.progress = time.Now()
	}
}

// stampWriter writes lines with the time they were written.
type stampWriter struct{ f *os.File }

func (w stampWriter) Write(p []byte) (int, error) {
	if _, err := fmt.Fprintf(w.f, "%s %s", time.Now().Format("15:04:05.000"), p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// parallel runs f(0..n-1) on workers goroutines and returns their errors.
func parallel(n, workers int, f func(i int) error) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	next := make(chan int)
	for range workers {
		wg.Go(func() {
			for i := range next {
				if err := f(i); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return errors.Join(errs...)
}

// fleetServiceObjects are serviceObjects with a small OS image (1 MiB):
// every machine keeps what it writes to its disk in memory.
func fleetServiceObjects(tb testing.TB, g *WithT) {
	ctx := context.Background()
	data := make([]byte, 1<<20)
	_, _ = rand.Read(data)
	sum := sha256.Sum256(data)
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "os.raw", time.Time{}, bytes.NewReader(data))
	}))
	tb.Cleanup(s.Close)
	for _, o := range []client.Object{
		&hivev1.ClusterImageSet{ObjectMeta: metav1.ObjectMeta{Name: "openshift-v4.16.3"},
			Spec: hivev1.ClusterImageSetSpec{ReleaseImage: "quay.io/openshift-release-dev/ocp-release:4.16.3-x86_64"}},
		&agentinstallv1.AgentServiceConfig{ObjectMeta: metav1.ObjectMeta{Name: "agent"}},
	} {
		_ = env.Client.Delete(ctx, o)
		g.Eventually(func() error { return env.Client.Create(ctx, o.DeepCopyObject().(client.Object)) }).Should(Succeed())
	}
	asc := &agentinstallv1.AgentServiceConfig{}
	g.Expect(env.Client.Get(ctx, types.NamespacedName{Name: "agent"}, asc)).To(Succeed())
	asc.Spec.OSImages = []agentinstallv1.OSImage{{OpenshiftVersion: "4.16", Version: "416.94", URL: s.URL + "/os.raw", CPUArchitecture: "x86_64",
		Checksum: "sha256:" + hex.EncodeToString(sum[:])}}
	g.Expect(env.Client.Update(ctx, asc)).To(Succeed())
}

// TestFleet: two single nodes install side by side with their clusters
// served by the in-memory twin; the hub follows them through their admin
// kubeconfigs as it follows real kube-apiservers, and sees them through.
func TestFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	g := NewWithT(t)
	res := fleet{n: 2, prefix: "fleet", dir: t.TempDir(), timeout: 2 * time.Minute}.run(t, g)
	g.Expect(res.stuck).To(BeEmpty())
	for i := range 2 {
		ns := fmt.Sprintf("fleet-%d", i)
		aci := waitCompleted(g, ns, ns)
		g.Expect(condMessage(aci, "Completed")).To(Equal("The installation has completed: Cluster is installed"))
		sec := &corev1.Secret{}
		g.Expect(env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: ns + "-admin-kubeconfig"}, sec)).To(Succeed())
		cfg, err := clientcmd.RESTConfigFromKubeConfig(sec.Data["kubeconfig"])
		g.Expect(err).NotTo(HaveOccurred())
		spoke, err := client.New(cfg, client.Options{Scheme: env.Client.Scheme()})
		g.Expect(err).NotTo(HaveOccurred())
		nodes := &corev1.NodeList{}
		g.Expect(spoke.List(context.Background(), nodes)).To(Succeed())
		g.Expect(nodes.Items).To(HaveLen(1))
	}
}

// BenchmarkAgentSNO installs $METALSHIFT_BENCH_SNO (default 100)
// single-node clusters at once through the agent-based install on one
// hub, once for each agent poll interval of $METALSHIFT_BENCH_POLL: the
// hub is envtest's kube-apiserver and etcd, and the agent service with its
// controllers in a manager process of its own. The machines and their
// installed clusters (the in-memory twin) run in this process. It reports
// the wall time from the first ISO boot to the last Completed, each
// install's time, the hub's peak memory and CPU, and the hub API's
// requests per agent (writes by resource).
func BenchmarkAgentSNO(b *testing.B) {
	n := envInt(b, benchSNOEnv, 100)
	polls := envDurations(b, benchPollEnv, []time.Duration{10 * time.Second, time.Minute})
	shards := envInt(b, benchShardsEnv, 1)
	g := NewWithT(b)
	// The tests' hub, when tests ran before, stops for the benchmark's
	// own and starts again after it.
	if stopHub != nil {
		g.Expect(stopHub()).To(Succeed())
		stopHub = nil
		b.Cleanup(func() {
			var err error
			if stopHub, err = startHub(); err != nil {
				b.Errorf("restarting the in-process hub: %v", err)
			}
		})
	}
	for _, poll := range polls {
		b.Run(fmt.Sprintf("poll=%s", poll), func(b *testing.B) { benchAgentSNO(b, n, poll, shards) })
	}
}

// benchAgentSNO is BenchmarkAgentSNO's run of n installs whose agents
// poll every poll, split between shards managers.
func benchAgentSNO(b *testing.B, n int, poll time.Duration, shards int) {
	timeout := envDuration(b, benchTimeoutEnv, 5*time.Minute+time.Duration(n)*2*time.Second+10*poll)
	stall := envDuration(b, benchStallEnv, time.Minute+2*poll)
	g := NewWithT(b)
	dir := b.TempDir()
	if parent := os.Getenv(benchDirEnv); parent != "" {
		var err error
		dir, err = os.MkdirTemp(parent, "agent-sno-")
		g.Expect(err).NotTo(HaveOccurred())
	}
	hubs := startHubProcesses(b, g, poll, dir, shards)
	hub := hubs[0]
	b.Cleanup(func() {
		if err := hub.stop(); err != nil {
			b.Errorf("stopping the hub process: %v", err)
		}
	})
	procs := shardProcs(hubs)
	pids := []int{os.Getpid()}
	for _, p := range procs {
		pids = append(pids, p.pid)
	}
	b.ResetTimer()
	for iter := range b.N {
		before := requestCounts(g)
		cpuBefore := map[int]float64{}
		for _, pid := range pids {
			cpuBefore[pid] = cpuSeconds(pid)
		}
		sampler := sampleRSS(pids, 500*time.Millisecond)
		// CPU is counted until the last install completed (not while
		// waiting for stuck ones).
		cpu := map[int]float64{}
		untilLast := func() {
			for _, pid := range pids {
				cpu[pid] = cpuSeconds(pid) - cpuBefore[pid]
			}
		}
		profiles := startProfiles(b, dir)
		res := fleet{n: n, prefix: fmt.Sprintf("sno%d", iter), dir: dir, timeout: timeout, stall: stall, onCompleted: untilLast, shards: shards}.run(b, g)
		profiles()
		figures := hubFigures{procs: procs, peaks: sampler.finish(), cpu: cpu}
		report(b, n, poll, res, figures, before, requestCounts(g))
		fmt.Fprintf(os.Stdout, "Logs (kept with $%s): the hub manager's %s, the simulator's %s\n", benchDirEnv, hub.log, filepath.Join(dir, "sim.log"))
		if len(res.stuck) > 0 {
			b.Errorf("%d of %d installs not Completed (timeout %s, stall %s): %s", len(res.stuck), n, timeout, stall, strings.Join(res.stuck, ", "))
		}
	}
}

// report prints and reports a run's figures.
func report(b *testing.B, n int, poll time.Duration, res fleetResult, hub hubFigures, before, after map[requestKey]float64) {
	per := slices.Sorted(slices.Values(res.perInstall))
	q := func(p float64) time.Duration {
		if len(per) == 0 {
			return 0
		}
		return per[int(p*float64(len(per)-1))].Round(time.Millisecond)
	}
	var s strings.Builder
	fmt.Fprintf(&s, "%d single-node installs (agent poll %s, %d CPUs): setup (objects, ISOs) %s; first boot to last Completed %s; "+
		"per install p50 %s, p90 %s, max %s\n", n, poll, runtime.NumCPU(), res.setup.Round(time.Millisecond), res.wall.Round(time.Millisecond),
		q(.5), q(.9), q(1))
	if len(res.stuck) > 0 {
		fmt.Fprintf(&s, "NOT COMPLETED: %d installs (the figures are of the others): %s\n", len(res.stuck), strings.Join(res.stuck, ", "))
	}
	if res.approveRetries > 0 {
		fmt.Fprintf(&s, "Approvals the hub's API server did not answer in time, asked again: %d\n", res.approveRetries)
	}
	peak, cpu := hub.write(&s)
	writes, conflicts := writeRequests(&s, n, before, after)
	writeMilestones(&s, res.milestones)
	// b.Log would cut the report at ten lines without -v.
	fmt.Fprintf(os.Stdout, "--- %s report:\n%s", b.Name(), s.String())
	b.ReportMetric(res.wall.Seconds(), "wall-s")
	b.ReportMetric(q(.5).Seconds(), "p50-s")
	b.ReportMetric(q(.9).Seconds(), "p90-s")
	b.ReportMetric(peak, "hub-peak-MiB")
	b.ReportMetric(cpu/float64(n), "hub-cpu-s/agent")
	b.ReportMetric(writes, "writes/agent")
	b.ReportMetric(conflicts, "conflicts/agent")
}

// hubFigures are the memory and CPU of the hub's processes and of this one.
type hubFigures struct {
	procs []proc
	// peaks is the peak RSS in KiB by pid during the run (this process too).
	peaks map[int]int64
	// cpu is the CPU seconds by pid during the run (this process too).
	cpu map[int]float64
}

// write prints the figures and returns the hub's peak memory (MiB) and CPU seconds.
func (h hubFigures) write(s *strings.Builder) (peakMiB, cpu float64) {
	var peak, hwm int64
	s.WriteString("Hub processes (peak RSS during the run / VmHWM since start / CPU until the last install completed):\n")
	for _, p := range h.procs {
		m := status(p.pid, "VmHWM")
		peak, hwm, cpu = peak+h.peaks[p.pid], hwm+m, cpu+h.cpu[p.pid]
		fmt.Fprintf(s, "  %-15s %6.0f MiB / %6.0f MiB / %7.1f s\n", p.name, kib(h.peaks[p.pid]), kib(m), h.cpu[p.pid])
	}
	fmt.Fprintf(s, "  %-15s %6.0f MiB / %6.0f MiB / %7.1f s\n", "hub total", kib(peak), kib(hwm), cpu)
	fmt.Fprintf(s, "Simulator and driver (this process: machines, agents, installed clusters, admission webhooks): peak RSS %.0f MiB, CPU %.1f s\n",
		kib(h.peaks[os.Getpid()]), h.cpu[os.Getpid()])
	return kib(peak), cpu
}

// requestCount is the requests of one verb on one resource.
type requestCount struct {
	verb, res    string
	n, conflicts float64
}

// writeRequests prints the hub API's requests per agent during the run
// and returns the writes and the conflicts per agent.
func writeRequests(s *strings.Builder, n int, before, after map[requestKey]float64) (writes, conflicts float64) {
	byRes := map[[2]string]*requestCount{}
	var reads float64
	for k, v := range after {
		d := v - before[k]
		if d <= 0 {
			continue
		}
		c := byRes[[2]string{k.verb, k.resource}]
		if c == nil {
			c = &requestCount{verb: k.verb, res: k.resource}
			byRes[[2]string{k.verb, k.resource}] = c
		}
		c.n += d
		if k.code == "409" {
			c.conflicts += d
		}
	}
	var w, r []*requestCount
	for _, c := range byRes {
		if isWrite(c.verb) {
			w, writes, conflicts = append(w, c), writes+c.n, conflicts+c.conflicts
		} else {
			r, reads = append(r, c), reads+c.n
		}
	}
	for _, l := range [][]*requestCount{w, r} {
		sort.Slice(l, func(i, j int) bool { return l[i].n > l[j].n || l[i].n == l[j].n && l[i].res < l[j].res })
	}
	per := func(x float64) float64 { return x / float64(n) }
	fmt.Fprintf(s, "Hub API requests per agent: %.1f writes (%.1f of them refused with 409 Conflict), %.1f reads (gets, lists, watches).\n",
		per(writes), per(conflicts), per(reads))
	s.WriteString("Writes by resource, per agent (of which conflicts):\n")
	for _, c := range w {
		fmt.Fprintf(s, "  %7.2f  %-6s %-55s (%.2f)\n", per(c.n), c.verb, c.res, per(c.conflicts))
	}
	s.WriteString("Reads by resource, per agent (top 8):\n")
	for _, c := range r[:min(8, len(r))] {
		fmt.Fprintf(s, "  %7.2f  %-6s %s\n", per(c.n), c.verb, c.res)
	}
	return per(writes), per(conflicts)
}

// writeMilestones prints when installs were first seen in each state.
func writeMilestones(s *strings.Builder, milestones map[string][]time.Duration) {
	s.WriteString("Where the time goes: median (p90) time from boot at which an install was first seen in a state [installs seen in it]:\n")
	type ms struct {
		name     string
		p50, p90 time.Duration
		count    int
	}
	var mss []ms
	for k, ds := range milestones {
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		mss = append(mss, ms{k, ds[len(ds)/2], ds[int(.9*float64(len(ds)-1))], len(ds)})
	}
	sort.Slice(mss, func(i, j int) bool {
		return mss[i].p50 < mss[j].p50 || mss[i].p50 == mss[j].p50 && mss[i].name < mss[j].name
	})
	for _, m := range mss {
		fmt.Fprintf(s, "  %8s (%8s)  %-45s [%d]\n", m.p50.Round(100*time.Millisecond), m.p90.Round(100*time.Millisecond), m.name, m.count)
	}
}

func kib(k int64) float64 { return float64(k) / 1024 }

func envInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("$%s: want a positive number, got %q", name, v)
	}
	return n
}

// envDurations reads a comma-separated list of durations.
func envDurations(b *testing.B, name string, def []time.Duration) []time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	var ds []time.Duration
	for _, f := range strings.Split(v, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(f))
		if err != nil || d <= 0 {
			b.Fatalf("$%s: want durations such as 10s,60s, got %q", name, v)
		}
		ds = append(ds, d)
	}
	return ds
}

func envDuration(b *testing.B, name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		b.Fatalf("$%s: want a duration such as 30s, got %q", name, v)
	}
	return d
}
