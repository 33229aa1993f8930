package agent

import (
	"context"
	"strconv"

	"sigs.k8s.io/controller-runtime/pkg/client"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	"github.com/metalshift/metalshift/assisted/pkg/hoststate"
	"github.com/metalshift/metalshift/internal/metrics"
	"github.com/metalshift/metalshift/internal/shard"
)

// agentGauge is the gauge of newAgentCollector: every host status, approved
// or not, reported.
func agentGauge() metrics.Gauge {
	var known [][]string
	for _, s := range hoststate.Statuses {
		known = append(known, []string{s, "true"}, []string{s, "false"})
	}
	return metrics.Gauge{Name: "metalshift_agents", Help: "Agents by host state (status.debugInfo.state; none before the first) and approval (spec.approved).",
		Labels: []string{"state", "approved"}, Known: known}
}

// newAgentCollector counts the Agents in reader by state and approval at
// scrape time: those of the manager's shard (package shard).
func newAgentCollector(reader client.Reader, watchFilterValue string) *metrics.StateCollector {
	return metrics.NewStateCollector(reader, func(ctx context.Context, c client.Reader, add func(int, ...string)) error {
		agents := &agentinstallv1.AgentList{}
		if err := c.List(ctx, agents, append(shard.ListOptions(watchFilterValue), client.UnsafeDisableDeepCopy)...); err != nil {
			return err
		}
		for i := range agents.Items {
			a := &agents.Items[i]
			add(0, metrics.StateLabel(a.Status.DebugInfo.State), strconv.FormatBool(a.Spec.Approved))
		}
		return nil
	}, agentGauge())
}
