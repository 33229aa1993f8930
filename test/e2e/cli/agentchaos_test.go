package cli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/metalshift/metalshift/internal/testenv"
	"github.com/metalshift/metalshift/localcp"
	"github.com/metalshift/metalshift/test/e2e/ztp"
)

// ztpRun is zero-touch agent-based installs on one embedded hub
// (`metalshift hub up`), SIGKILLed at the kills' instants (after the
// previous hub process started) and started again on its directory.
type ztpRun struct {
	name  string
	opts  ztp.Options
	kills []time.Duration
}

// ztpOutcome is what a ztpRun measured.
type ztpOutcome struct {
	ztp.Outcome
	took      time.Duration
	completed bool
	kills     int
}

// installZTP runs r: every install completes, nothing is orphaned, no disk
// is written twice.
func installZTP(t *testing.T, r ztpRun) (o ztpOutcome) {
	t.Helper()
	g := NewWithT(t)
	hubDir := filepath.Join(t.TempDir(), "hub")
	hubOut := &ztp.Buffer{}
	lab := &ztp.Lab{Bin: metalshiftBin, Tools: toolsDir, HubDir: hubDir, Kubeconfig: localcp.KubeconfigPath(hubDir)}
	var hub *exec.Cmd
	var hubDone chan struct{}
	startHub := func() {
		hub = exec.Command(metalshiftBin, "hub", "up", "--dir", hubDir, "--bin-dir", toolsDir)
		hub.Stdout, hub.Stderr = hubOut, hubOut
		g.Expect(hub.Start()).To(Succeed())
		hubDone = make(chan struct{})
		go func(c *exec.Cmd, done chan struct{}) { _ = c.Wait(); close(done) }(hub, hubDone)
	}
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := lab.Kubectl("", "get", "agentclusterinstalls,agents,bmh", "-A", "-o", "wide")
			t.Logf("%s: hub:\n%s\nhub processes printed:\n%s", r.name, out, tailOf(hubOut.String(), 8000))
			if data, err := os.ReadFile(filepath.Join(hubDir, "logs", "manager.log")); err == nil {
				t.Logf("%s: manager.log (tail):\n%s", r.name, tailOf(string(data), 20000))
			}
			if lab.Console != nil {
				t.Logf("%s: simulators (tail):\n%s", r.name, tailOf(lab.Console.String(), 20000))
			}
		}
		_, _ = metalshift(t, "hub", "down", "--dir", hubDir)
		if hub != nil {
			_ = hub.Process.Kill()
			<-hubDone
		}
	})
	start := time.Now()
	startHub()
	out, err := metalshift(t, "hub", "status", "--dir", hubDir, "--wait", "3m")
	g.Expect(err).NotTo(HaveOccurred(), "%s\n%s", out, hubOut)
	lab.Start(t, r.opts)

	for i, after := range r.kills {
		time.Sleep(after) // the instant of the kill: the point of the test, not a wait for a state
		if lab.Completed() == len(lab.Names) {
			break
		}
		g.Expect(hub.Process.Signal(syscall.SIGKILL)).To(Succeed())
		<-hubDone
		o.kills++
		t.Logf("%s: kill %d of %d, %s after the hub process started, %s into the run", r.name, i+1, len(r.kills), after, time.Since(start).Round(time.Second))
		_, _ = fmt.Fprintf(hubOut, "--- SIGKILLed after %s; hub up\n", after)
		startHub()
	}
	o.Outcome = lab.WaitAndCheck(t, 15*time.Minute)
	o.took = time.Since(start)
	o.completed = true
	return o
}

func tailOf(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// reportZTP runs base (fault-free), then runs made by next, and reports
// them as one scenario of `make chaos`. With minKills > 0, more runs
// follow (up to twice runs in all) until that many kills were done
// before an install completed: a kill planned after the end is not one.
func reportZTP(t *testing.T, scenario string, runs, minKills int, base ztpRun, next func(seed uint64) ztpRun) {
	// A subtest each, so that each run's hub and simulators stop before
	// the next starts.
	var free ztpOutcome
	t.Run("fault-free", func(t *testing.T) { free = installZTP(t, base) })
	row := testenv.ChaosRow{Scenario: scenario, FaultFree: free.took}
	var took time.Duration
	kills := 0
	for i := 0; i < runs || (kills < minKills && i < 2*runs); i++ {
		seed := ztp.Seed(t)
		r := next(seed)
		var o ztpOutcome
		ok := t.Run(fmt.Sprintf("run-%d-seed-%d", i+1, seed), func(t *testing.T) {
			t.Logf("%s: seed %d (replay: METALSHIFT_CHAOS_SEED=%d METALSHIFT_CHAOS_RUNS=1)", scenario, seed, seed)
			o = installZTP(t, r)
		})
		row.Runs++
		kills += o.kills
		row.Faults += o.Faults + o.kills
		row.BMCTrouble += o.BMCTrouble
		row.Orphans += len(o.Orphans)
		row.DoubleWrites += len(o.Twice)
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

// TestZTPUnderFaultsAndAKill is the short run of the fault suite in make
// test: a single-node ZTP install whose BMC fails about one request in
// ten, with the hub SIGKILLed once at a random instant: it completes,
// nothing is orphaned, the disk is written once.
func TestZTPUnderFaultsAndAKill(t *testing.T) {
	t.Parallel()
	seed := ztp.Seed(t)
	t.Logf("seed %d (replay: METALSHIFT_CHAOS_SEED=%d)", seed, seed)
	o := installZTP(t, ztpRun{name: "sno under BMC faults and a kill", kills: ztp.Kills(seed, 1),
		opts: ztp.Options{Clusters: 1, Masters: 1, Faults: ztp.BMCFaults, Seed: seed, Subnet: 44}})
	t.Logf("completed in %s with %d faults and %d kills", o.took.Round(time.Second), o.Faults, o.kills)
}

// TestChaosZTPUnderBMCFaults (make chaos): 10 single-node clusters installed
// zero-touch at once while about one BMC request in ten fails, against the
// same run without faults measured first.
func TestChaosZTPUnderBMCFaults(t *testing.T) {
	testenv.RequireChaos(t)
	reportZTP(t, "ztp-10-sno-bmc-faults-10%", ztp.Runs(t, 1), 0,
		ztpRun{name: "10 sno fault-free", opts: ztp.Options{Clusters: 10, Masters: 1, Subnet: 45}},
		func(seed uint64) ztpRun {
			return ztpRun{name: "10 sno under BMC faults", opts: ztp.Options{Clusters: 10, Masters: 1, Faults: ztp.BMCFaults, Seed: seed, Subnet: 45}}
		})
}

// TestChaosZTPHubKilledAnywhere (make chaos): a compact cluster (three
// control-plane hosts, converged flow) installed zero-touch while the hub
// is SIGKILLed at 4 random instants and started again each time, over 5
// runs by default. The install completes 10 to 15 s after its objects are
// written on an idle machine, so the instants are 1 to 6 s after the
// install's start or the hub's last start: most fall before the end, and
// runs are added until 4 per run (20 by default) did.
func TestChaosZTPHubKilledAnywhere(t *testing.T) {
	testenv.RequireChaos(t)
	runs := ztp.Runs(t, 5)
	reportZTP(t, "ztp-compact-hub-killed-anywhere", runs, 4*runs,
		ztpRun{name: "compact fault-free", opts: ztp.Options{Clusters: 1, Masters: 3, Subnet: 46}},
		func(seed uint64) ztpRun {
			return ztpRun{name: "compact, hub killed anywhere", kills: ztp.KillsBetween(seed, 4, time.Second, 6*time.Second),
				opts: ztp.Options{Clusters: 1, Masters: 3, Subnet: 46}}
		})
}

// TestHubRestoredMidInstall: the hub's machine dies during a single-node
// ZTP install. A backup taken while the install ran (`hub backup` of the
// running hub), restored into a new directory (`hub restore`), started
// there (`hub up`, the same ports and CA, so the machines reach it): the
// install completes from what the backup held and what the machine reports
// since, nothing is orphaned, the disk is written once.
func TestHubRestoredMidInstall(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	work := t.TempDir()
	hubDir, restored := filepath.Join(work, "hub"), filepath.Join(work, "restored")
	hub := hubUp(t, hubDir)
	lab := &ztp.Lab{Bin: metalshiftBin, Tools: toolsDir, HubDir: hubDir, Kubeconfig: localcp.KubeconfigPath(hubDir)}
	// What the hub and the machines say when the test fails, once: before
	// the hub that runs then stops (cleanups run last first).
	dumped := false
	dump := func() {
		if !t.Failed() || lab.Console == nil || dumped {
			return
		}
		dumped = true
		out, _ := lab.Kubectl("", "get", "agentclusterinstalls,agents,bmh", "-A", "-o", "wide")
		t.Logf("hub:\n%s\nsimulators (tail):\n%s", out, tailOf(lab.Console.String(), 20000))
		if data, err := os.ReadFile(filepath.Join(filepath.Dir(lab.Kubeconfig), "logs", "manager.log")); err == nil {
			t.Logf("manager.log of the hub in %s (tail):\n%s", filepath.Dir(lab.Kubeconfig), tailOf(string(data), 30000))
		}
	}
	t.Cleanup(dump)
	lab.Start(t, ztp.Options{Clusters: 1, Masters: 1, Subnet: 48})
	name := lab.Names[0]
	g.Eventually(func() string {
		out, _ := lab.Kubectl("", "-n", name, "get", "agentclusterinstall", name, "-o", "jsonpath={.status.debugInfo.state}")
		return out
	}, 5*time.Minute, 200*time.Millisecond).Should(Or(Equal("preparing-for-installation"), Equal("installing")), "the install started")

	backup := filepath.Join(work, "hub.backup")
	out, err := metalshift(t, "hub", "backup", "--dir", hubDir, "--out", backup)
	g.Expect(err).NotTo(HaveOccurred(), out)
	state, _ := lab.Kubectl("", "-n", name, "get", "agentclusterinstall,agents", "-o", "wide")
	t.Logf("backed up with the install at:\n%s", state)
	// The hub's machine dies: its processes with it.
	pids := childPIDs(t, hubDir)
	g.Expect(hub.cmd.Process.Signal(syscall.SIGKILL)).To(Succeed())
	g.Expect(hub.wait(t, time.Minute)).To(HaveOccurred())
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	expectGone(g, pids)

	out, err = metalshift(t, "hub", "restore", "--from", backup, "--dir", restored)
	g.Expect(err).NotTo(HaveOccurred(), out)
	hubUp(t, restored)
	t.Cleanup(func() { _, _ = metalshift(t, "hub", "down", "--dir", restored) })
	t.Cleanup(dump)
	lab.Kubeconfig = localcp.KubeconfigPath(restored)
	o := lab.WaitAndCheck(t, 10*time.Minute)
	t.Logf("the install completed on the restored hub; %d faults", o.Faults)
}
