package agentclusterinstall

import (
	"context"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	hiveextv1 "github.com/metalshift/metalshift/api/hiveext/v1beta1"
	"github.com/metalshift/metalshift/assisted/pkg/clusterstate"
	"github.com/metalshift/metalshift/assisted/pkg/conditions"
	"github.com/metalshift/metalshift/internal/metrics"
	"github.com/metalshift/metalshift/internal/shard"
)

var installDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
	Name: "metalshift_agentclusterinstall_install_duration_seconds",
	Help: "How long agent-based installs took, from the install's start (its install-state Secret created) to installed (Completed condition True), " +
		"observed once per install by the replica that wrote the transition.",
	Buckets: metrics.InstallBuckets,
})

func init() {
	ctrlmetrics.Registry.MustRegister(installDuration)
}

// installedStates are those of a cluster that completed its install.
var installedStates = []string{clusterstate.StatusInstalled, clusterstate.StatusAddingHosts}

// observeInstalled observes the install's duration when the status write
// that just succeeded moved the cluster from state from to installed: from
// the creation of its install-state Secret (which starts the install) to
// the transition time of its Completed condition. An imported cluster,
// which has no install state, was not installed here.
func (in *install) observeInstalled(from string) {
	aci := in.c.ACI
	if in.state == nil || slices.Contains(installedStates, from) || !slices.Contains(installedStates, aci.Status.DebugInfo.State) {
		return
	}
	for _, c := range aci.Status.Conditions {
		if c.Type == conditions.TypeCompleted {
			metrics.ObserveDuration(installDuration, in.state.CreationTimestamp.Time, c.LastTransitionTime.Time)
		}
	}
}

// aciGauge is the gauge of newACICollector: every cluster status reported.
func aciGauge() metrics.Gauge {
	var known [][]string
	for _, s := range clusterstate.Statuses {
		known = append(known, []string{s})
	}
	return metrics.Gauge{Name: "metalshift_agentclusterinstalls", Help: "AgentClusterInstalls by cluster state (status.debugInfo.state; none before the first).",
		Labels: []string{"state"}, Known: known}
}

// newACICollector counts the AgentClusterInstalls in reader by state at
// scrape time: those of the manager's shard (package shard).
func newACICollector(reader client.Reader, watchFilterValue string) *metrics.StateCollector {
	return metrics.NewStateCollector(reader, func(ctx context.Context, c client.Reader, add func(int, ...string)) error {
		acis := &hiveextv1.AgentClusterInstallList{}
		if err := c.List(ctx, acis, append(shard.ListOptions(watchFilterValue), client.UnsafeDisableDeepCopy)...); err != nil {
			return err
		}
		for i := range acis.Items {
			add(0, metrics.StateLabel(acis.Items[i].Status.DebugInfo.State))
		}
		return nil
	}, aciGauge())
}
