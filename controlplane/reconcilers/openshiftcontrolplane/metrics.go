package openshiftcontrolplane

import (
	"context"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	controlplanev1 "github.com/metalshift/metalshift/api/controlplane/v1alpha1"
	"github.com/metalshift/metalshift/internal/metrics"
)

var installDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
	Name: "metalshift_openshiftcontrolplane_install_duration_seconds",
	Help: "How long OpenShift control planes took from their creation to the bootstrap node removed (BootstrapRemoved condition True), " +
		"observed once per control plane by the replica that wrote the transition.",
	Buckets: metrics.InstallBuckets,
})

func init() {
	ctrlmetrics.Registry.MustRegister(installDuration)
}

// completesInstall tells whether the status about to be written completes
// the control plane's install: its bootstrap phase goes from from to
// Removed, and the API does not hold Removed already (the cache may show
// an older copy than the API holds, and the transition is written once).
func (r *Reconciler) completesInstall(ctx context.Context, cp *controlplanev1.OpenShiftControlPlane, from string) bool {
	if from == controlplanev1.BootstrapPhaseRemoved || cp.Status.BootstrapPhase != controlplanev1.BootstrapPhaseRemoved {
		return false
	}
	stored := &controlplanev1.OpenShiftControlPlane{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(cp), stored); err != nil {
		return false
	}
	return stored.Status.BootstrapPhase != controlplanev1.BootstrapPhaseRemoved
}

// observeInstalled observes the install of a control plane whose status
// write just completed it: from its creation to the transition time of
// BootstrapRemoved.
func observeInstalled(cp *controlplanev1.OpenShiftControlPlane) {
	if c := conditions.Get(cp, controlplanev1.BootstrapRemovedCondition); c != nil && c.Status == metav1.ConditionTrue {
		metrics.ObserveDuration(installDuration, cp.CreationTimestamp.Time, c.LastTransitionTime.Time)
	}
}

// bootstrapPhases are every status.bootstrapPhase.
var bootstrapPhases = []string{controlplanev1.BootstrapPhasePending, controlplanev1.BootstrapPhaseProvisioning,
	controlplanev1.BootstrapPhaseServing, controlplanev1.BootstrapPhaseRemoving, controlplanev1.BootstrapPhaseRemoved}

// controlPlaneGauge is the gauge of newControlPlaneCollector: every
// bootstrap phase, available or not, reported.
func controlPlaneGauge() metrics.Gauge {
	var known [][]string
	for _, p := range bootstrapPhases {
		known = append(known, []string{p, "true"}, []string{p, "false"})
	}
	return metrics.Gauge{Name: "metalshift_openshiftcontrolplanes",
		Help:   "OpenShiftControlPlanes by bootstrap phase (status.bootstrapPhase; none before the first) and whether their Available condition is True.",
		Labels: []string{"bootstrap_phase", "available"}, Known: known}
}

// newControlPlaneCollector counts the control planes the reconciler
// manages (those with its watch-filter label, when it has one) in reader
// at scrape time.
func (r *Reconciler) newControlPlaneCollector(reader client.Reader) *metrics.StateCollector {
	opts := []client.ListOption{client.UnsafeDisableDeepCopy}
	if r.WatchFilterValue != "" {
		opts = append(opts, client.MatchingLabels{clusterv1.WatchLabel: r.WatchFilterValue})
	}
	return metrics.NewStateCollector(reader, func(ctx context.Context, c client.Reader, add func(int, ...string)) error {
		cps := &controlplanev1.OpenShiftControlPlaneList{}
		if err := c.List(ctx, cps, opts...); err != nil {
			return err
		}
		for i := range cps.Items {
			cp := &cps.Items[i]
			add(0, metrics.StateLabel(cp.Status.BootstrapPhase), strconv.FormatBool(conditions.IsTrue(cp, controlplanev1.AvailableCondition)))
		}
		return nil
	}, controlPlaneGauge())
}
