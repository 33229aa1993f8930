package hub

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
	"github.com/metalshift/metalshift/test/e2e/ztp"
)

// TestChaosLeaderKilledAnywhereZTP (make chaos): a compact cluster (three
// control-plane hosts, converged flow) installed zero-touch on a hub whose
// controllers, agent service and servers run in two manager replicas
// (startReplicatedHub). At 4 random instants the leader is SIGKILLed and
// started again as a new process (as a Deployment replaces a pod): the
// other replica takes the Lease over each time, the install completes,
// nothing is orphaned, no disk is written twice. 3 runs by default, after
// a run without kills for the time.
func TestChaosLeaderKilledAnywhereZTP(t *testing.T) {
	testenv.RequireChaos(t)
	t.Parallel()
	managerBin := filepath.Join(t.TempDir(), "manager")
	out, err := exec.Command("go", "build", "-o", managerBin, "../../../cmd/manager").CombinedOutput()
	NewWithT(t).Expect(err).NotTo(HaveOccurred(), "building the manager: %s", out)

	run := func(t *testing.T, seed uint64, kills []time.Duration) (took time.Duration, o ztp.Outcome, killed int) {
		g := NewWithT(t)
		rh := startReplicatedHub(t, g, t.TempDir(), managerBin)
		lab := &ztp.Lab{Bin: metalshiftBin, Tools: toolsDir, HubDir: rh.dir, Kubeconfig: rh.kubeconfig}
		t.Cleanup(func() {
			if t.Failed() {
				out, _ := lab.Kubectl("", "get", "agentclusterinstalls,agents,bmh", "-A", "-o", "wide")
				t.Logf("hub:\n%s", out)
				for _, r := range rh.replicas {
					data, _ := os.ReadFile(r.log)
					t.Logf("%s log (tail):\n%s", r.name, tail(string(data), 15000))
				}
				if lab.Console != nil {
					t.Logf("simulators (tail):\n%s", tail(lab.Console.String(), 15000))
				}
			}
		})
		start := time.Now()
		lab.Start(t, ztp.Options{Clusters: 1, Masters: 3, Subnet: 47})
		for i, after := range kills {
			time.Sleep(after) // the instant of the kill: the point of the test, not a wait for a state
			if lab.Completed() == len(lab.Names) {
				break
			}
			leader, _ := rh.leader(g)
			g.Expect(leader.cmd.Process.Signal(syscall.SIGKILL)).To(Succeed())
			<-leader.done
			killed++
			t.Logf("kill %d of %d: SIGKILLed the leader %s, %s into the run", i+1, len(kills), leader.name, time.Since(start).Round(time.Second))
			for j := range rh.replicas {
				if rh.replicas[j] == leader {
					rh.restart(t, j)
				}
			}
		}
		o = lab.WaitAndCheck(t, 15*time.Minute)
		return time.Since(start), o, killed
	}

	// A subtest each, so that each run's hub, replicas and simulator stop
	// before the next starts.
	var base time.Duration
	t.Run("no-kills", func(t *testing.T) { base, _, _ = run(t, 0, nil) })
	row := testenv.ChaosRow{Scenario: "ztp-compact-leader-killed-anywhere", FaultFree: base}
	var took time.Duration
	for i := range ztp.Runs(t, 3) {
		seed := ztp.Seed(t)
		var d time.Duration
		var o ztp.Outcome
		var killed int
		ok := t.Run(fmt.Sprintf("run-%d-seed-%d", i+1, seed), func(t *testing.T) {
			t.Logf("seed %d (replay: METALSHIFT_CHAOS_SEED=%d METALSHIFT_CHAOS_RUNS=1)", seed, seed)
			d, o, killed = run(t, seed, ztp.Kills(seed, 4))
		})
		row.Runs++
		row.Faults += killed
		row.BMCTrouble += o.BMCTrouble
		row.Orphans += len(o.Orphans)
		row.DoubleWrites += len(o.Twice)
		if ok {
			row.Completed++
			took += d
		} else {
			row.Seeds = append(row.Seeds, strconv.FormatUint(seed, 10))
		}
	}
	if row.Completed > 0 {
		row.Took = took / time.Duration(row.Completed)
	}
	testenv.ReportChaos(t, row)
}
