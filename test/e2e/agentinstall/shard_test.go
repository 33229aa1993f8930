package agentinstall

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/metalshift/metalshift/internal/shard"
	"github.com/metalshift/metalshift/internal/testenv"
)

// benchShardsEnv is how many manager processes BenchmarkAgentSNO splits
// the fleet between (default 1, unsharded): manager i runs with
// --watch-filter shard-<i> and an agent service of its own, and install j
// is labelled shard-<j mod k>. The report has a line per manager.
const benchShardsEnv = "METALSHIFT_BENCH_SHARDS"

// shardName is the --watch-filter value of shard i of k; none when the
// fleet is not sharded.
func shardName(i, k int) string {
	if k <= 1 {
		return ""
	}
	return fmt.Sprintf("shard-%d", i%k)
}

// startHubProcesses starts k manager processes: with k = 1 the unsharded
// one of startHubProcess, else one per shard, the first with its agent
// service at serviceAddr, the others at addresses reserved for the
// benchmark, which stops them when it ends (after the first, which the
// caller stops).
func startHubProcesses(tb testing.TB, g *WithT, poll time.Duration, dir string, k int) []*hubChild {
	if k <= 1 {
		return []*hubChild{startHubProcess(g, poll, dir)}
	}
	hubs := []*hubChild{startHubProcessAt(g, poll, dir, serviceAddr, shardName(0, k))}
	for i := 1; i < k; i++ {
		h := startHubProcessAt(g, poll, dir, testenv.ReservedAddr(tb), shardName(i, k))
		tb.Cleanup(func() {
			if err := h.stop(); err != nil {
				tb.Errorf("stopping the hub process of %s: %v", shardName(i, k), err)
			}
		})
		hubs = append(hubs, h)
	}
	return hubs
}

// shardProcs are the hub's processes (hubProcs) with every manager,
// named by its shard when there are several.
func shardProcs(hubs []*hubChild) []proc {
	ps := hubProcs(hubs[0].cmd.Process.Pid)
	if len(hubs) == 1 {
		return ps
	}
	for i := range ps {
		if ps[i].name == "manager" {
			ps[i].name = "manager " + shardName(0, len(hubs))
		}
	}
	for i, h := range hubs[1:] {
		ps = append(ps, proc{"manager " + shardName(i+1, len(hubs)), h.cmd.Process.Pid})
	}
	return ps
}

// labelShard puts install i's object o in its shard of k; none when the
// fleet is not sharded.
func labelShard(o client.Object, i, k int) {
	if k <= 1 {
		return
	}
	labels := o.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[shard.Label] = shardName(i, k)
	o.SetLabels(labels)
}
