package hub

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/metalshift/metalshift/internal/testenv"
	"github.com/metalshift/metalshift/localcp"
	"github.com/metalshift/metalshift/test/e2e/ztp"
)

// capiRun is one install through Cluster API on the embedded hub (the
// `create cluster` process), on simulated Redfish hosts.
type capiRun struct {
	name             string
	masters, workers int
	// faults is the simulator's fault plan ("" for none); seed its seed.
	faults string
	seed   uint64
	// kills are the instants, after the previous hub process started, at
	// which the hub is SIGKILLed and `hub up` started on its directory.
	kills []time.Duration
}

// capiOutcome is what a capiRun measured.
type capiOutcome struct {
	took      time.Duration
	completed bool
	// faults fired in the simulator, kills done before the install was
	// complete.
	faults, kills int
	orphans       []string
	twice         []string
	// bmcTrouble counts the hosts whose BMCReachable condition was set:
	// the engine met BMC trouble on them.
	bmcTrouble int
}

// installCAPI runs r: the simulator with --console (and --faults), an
// install-config, `create cluster`, the kills, then waits for the install
// to complete (Ready Nodes as many as machines) and checks the hub for
// orphans and the consoles for disks written twice. It reports failures
// through t, and returns what it measured either way.
func installCAPI(t *testing.T, r capiRun) (o capiOutcome) {
	t.Helper()
	g := NewWithT(t)
	args := []string{"--console"}
	if r.faults != "" {
		args = append(args, "--faults", fmt.Sprintf("seed=%d,%s", r.seed, r.faults))
	}
	hostsYAML, imageURL, imageSum, console := startSimWith(t, r.masters+r.workers+1, args...)
	dir := t.TempDir()
	hubDir := filepath.Join(dir, "hub")
	var hubProc *exec.Cmd
	var hubDone chan struct{}
	hubOut := &syncBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := kubectl(filepath.Join(hubDir, "kubeconfig"), "-n", "e2e", "get", "machines,metalmachines,bmh", "-o", "wide")
			t.Logf("%s: hub:\n%s\nhub processes printed:\n%s", r.name, out, tail(hubOut.String(), 8000))
			if data, err := os.ReadFile(filepath.Join(hubDir, "logs", "manager.log")); err == nil {
				t.Logf("%s: manager.log (tail):\n%s", r.name, tail(string(data), 20000))
			}
			t.Logf("%s: simulator (tail):\n%s", r.name, tail(console.String(), 20000))
		}
		_, _ = run(t, "hub", "down", "--dir", hubDir)
		if hubProc != nil {
			_ = hubProc.Process.Kill()
			<-hubDone
		}
	})
	vip := fmt.Sprintf("127.%d.%d.10", 100+rand.IntN(100), rand.IntN(250))
	out, err := run(t, "create", "install-config", "--dir", dir, "--name", "e2e", "--api-vip", vip,
		"--masters", strconv.Itoa(r.masters), "--workers", strconv.Itoa(r.workers),
		"--hosts-from", hostsYAML, "--os-image-url", imageURL, "--os-image-checksum", imageSum)
	g.Expect(err).NotTo(HaveOccurred(), "%s", out)

	start := time.Now()
	startHubProc := func(args ...string) {
		hubProc = exec.Command(metalshiftBin, args...)
		hubProc.Stdout, hubProc.Stderr = hubOut, hubOut
		g.Expect(hubProc.Start()).To(Succeed())
		hubDone = make(chan struct{})
		go func(c *exec.Cmd, done chan struct{}) { _ = c.Wait(); close(done) }(hubProc, hubDone)
	}
	startHubProc("create", "cluster", "--dir", dir, "--timeout", "20m")
	if len(r.kills) > 0 {
		// The first instant counts from the install's start: the
		// manifests applied (before, `hub up` has no install to resume).
		g.Eventually(hubOut.String, 3*time.Minute, 100*time.Millisecond).Should(MatchRegexp(`Applied \d+ objects`), "%s", r.name)
	}
	for i, after := range r.kills {
		select {
		case <-hubDone:
		case <-time.After(after):
		}
		if isClosed(hubDone) {
			// create cluster finished, the install complete: later kills
			// would not be mid-install.
			g.Expect(o.kills).To(BeZero(), "%s: a hub up ended:\n%s", r.name, hubOut)
			break
		}
		// The hub's process and the one the test started (create
		// cluster, which started the hub as a process of its own, or
		// the last hub up): the hub's machine died.
		g.Expect(hubProc.Process.Signal(syscall.SIGKILL)).To(Succeed())
		<-hubDone
		if localcp.Running(hubDir) {
			killHub(g, hubDir)
		}
		o.kills++
		t.Logf("%s: kill %d of %d, %s after the hub process started, %s into the install", r.name, i+1, len(r.kills), after, time.Since(start).Round(time.Second))
		_, _ = fmt.Fprintf(hubOut, "--- SIGKILLed after %s; hub up\n", after)
		startHubProc("hub", "up", "--dir", hubDir)
	}
	if o.kills > 0 {
		// The install goes on on the last hub up: wait for it there, as
		// a person does after a crash.
		out, err = run(t, "hub", "status", "--dir", hubDir, "--wait", "3m")
		g.Expect(err).NotTo(HaveOccurred(), "%s: %s", r.name, out)
		out, err = run(t, "wait-for", "install-complete", "--dir", dir, "--timeout", "15m")
		g.Expect(err).NotTo(HaveOccurred(), "%s: %s", r.name, out)
		g.Expect(out).To(ContainSubstring("Reached install-complete"))
	} else {
		select {
		case <-hubDone:
		case <-time.After(20 * time.Minute):
			t.Fatalf("%s: create cluster did not finish:\n%s", r.name, hubOut)
		}
		g.Expect(hubProc.ProcessState.Success()).To(BeTrue(), "%s: create cluster:\n%s", r.name, hubOut) // set once hubDone closed
		g.Expect(hubOut.String()).To(ContainSubstring("Reached install-complete"))
	}
	o.took = time.Since(start)
	out, err = kubectl(filepath.Join(dir, "auth", "kubeconfig"), "get", "nodes", "--no-headers")
	g.Expect(err).NotTo(HaveOccurred(), "%s", out)
	g.Expect(strings.Count(out, " Ready ")).To(Equal(r.masters+r.workers), "%s: %s", r.name, out)
	o.completed = true

	// Nothing orphaned on the hub (create cluster leaves its hub running;
	// a hub up the test started may have ended with a kill's timing).
	if !localcp.Running(hubDir) {
		startHubProc("hub", "up", "--dir", hubDir)
		out, err = run(t, "hub", "status", "--dir", hubDir, "--wait", "3m")
		g.Expect(err).NotTo(HaveOccurred(), "%s", out)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(hubDir, "kubeconfig"))
	g.Expect(err).NotTo(HaveOccurred())
	// Dependents of a deleted owner (the bootstrap node's Secrets) are the
	// garbage collector's to remove: an orphan is one it has not removed
	// within a minute.
	g.Eventually(func() ([]string, error) {
		o.orphans, err = testenv.Orphans(context.Background(), cfg, "e2e")
		return o.orphans, err
	}, time.Minute, time.Second).Should(BeEmpty(), "%s: objects left orphaned on the hub", r.name)
	o.bmcTrouble = ztp.BMCTroubleCleared(g, cfg, "e2e")
	o.twice = testenv.WrittenTwice(testenv.DiskWrites(console.String()))
	o.faults = o.kills + len(ztp.FiredFault.FindAllString(console.String(), -1))
	g.Expect(o.twice).To(BeEmpty(), "%s: disks written twice for one request", r.name)
	return o
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// reportCAPI runs the fault-free install, then runs installs made by
// next, and reports them as one scenario.
func reportCAPI(t *testing.T, scenario string, runs int, masters, workers int, next func(i int, seed uint64) capiRun) {
	// A subtest each, so that each run's hub and simulator stop before the
	// next starts.
	var base capiOutcome
	t.Run("fault-free", func(t *testing.T) {
		base = installCAPI(t, capiRun{name: scenario + " fault-free", masters: masters, workers: workers})
	})
	row := testenv.ChaosRow{Scenario: scenario, FaultFree: base.took}
	var took time.Duration
	for i := range runs {
		seed := ztp.Seed(t)
		r := next(i, seed)
		var o capiOutcome
		ok := t.Run(fmt.Sprintf("run-%d-seed-%d", i+1, seed), func(t *testing.T) {
			t.Logf("%s: seed %d (replay: METALSHIFT_CHAOS_SEED=%d METALSHIFT_CHAOS_RUNS=1)", scenario, seed, seed)
			o = installCAPI(t, r)
		})
		row.Runs++
		row.Faults += o.faults
		row.BMCTrouble += o.bmcTrouble
		row.Orphans += len(o.orphans)
		row.DoubleWrites += len(o.twice)
		if ok && o.completed {
			row.Completed++
			took += o.took
		} else {
			row.Seeds = append(row.Seeds, strconv.FormatUint(seed, 10))
		}
	}
	if row.Completed > 0 {
		row.Took = took / time.Duration(row.Completed)
	}
	testenv.ReportChaos(t, row)
}

// TestInstallUnderBMCFaults is the fault-rate suite's short run, in make
// test: 1 master and 1 worker (and the bootstrap node) installed through
// Cluster API while about one BMC request in ten fails. The install
// completes, nothing is orphaned, no disk is written twice for a request.
func TestInstallUnderBMCFaults(t *testing.T) {
	t.Parallel()
	seed := ztp.Seed(t)
	t.Logf("seed %d (replay: METALSHIFT_CHAOS_SEED=%d)", seed, seed)
	o := installCAPI(t, capiRun{name: "1+1 under BMC faults", masters: 1, workers: 1, faults: ztp.BMCFaults, seed: seed})
	NewWithT(t).Expect(o.faults).To(BeNumerically(">", 0), "the BMCs did fail requests")
	t.Logf("completed in %s with %d faults; the BMCReachable condition named BMC trouble on %d hosts, and cleared", o.took.Round(time.Second), o.faults, o.bmcTrouble)
}

// TestChaosCAPIUnderBMCFaults (make chaos): 3 masters and 2 workers through
// Cluster API while about one BMC request in ten fails, against the same
// install without faults measured first.
func TestChaosCAPIUnderBMCFaults(t *testing.T) {
	testenv.RequireChaos(t)
	t.Parallel()
	reportCAPI(t, "capi-3+2-bmc-faults-10%", ztp.Runs(t, 2), 3, 2, func(_ int, seed uint64) capiRun {
		return capiRun{name: "3+2 under BMC faults", masters: 3, workers: 2, faults: ztp.BMCFaults, seed: seed}
	})
}

// TestChaosCAPIHubKilledAnywhere (make chaos): the embedded hub SIGKILLed
// at random instants of a Cluster API install (1 master, 1 worker) and
// `hub up` on its directory each time, 4 kills per run over 5 runs by
// default: every install completes, nothing orphaned, no disk written
// twice.
func TestChaosCAPIHubKilledAnywhere(t *testing.T) {
	testenv.RequireChaos(t)
	t.Parallel()
	reportCAPI(t, "capi-1+1-hub-killed-anywhere", ztp.Runs(t, 5), 1, 1, func(_ int, seed uint64) capiRun {
		return capiRun{name: "1+1 hub killed anywhere", masters: 1, workers: 1, seed: seed, kills: ztp.Kills(seed, 4)}
	})
}
