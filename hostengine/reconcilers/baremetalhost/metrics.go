package baremetalhost

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
	"github.com/metalshift/metalshift/internal/metrics"
)

var (
	stateTransitions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "metalshift_baremetalhost_state_transitions_total",
		Help: "BareMetalHost state transitions written by this process, by from and to state.",
	}, []string{"from", "to"})

	provisionDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "metalshift_baremetalhost_provision_duration_seconds",
		Help:    "How long BareMetalHosts took from provisioning to provisioned (status.operationHistory.provision), observed once per provisioning by the replica that wrote the transition.",
		Buckets: metrics.InstallBuckets,
	})
)

func init() {
	ctrlmetrics.Registry.MustRegister(stateTransitions, provisionDuration)
}

// recordWrittenTransition counts a transition from → to that the status
// write just stored, and observes a provisioning's duration from the
// host's operation history.
func recordWrittenTransition(host *metal3v1.BareMetalHost, from, to metal3v1.ProvisioningState) {
	stateTransitions.WithLabelValues(string(from), string(to)).Inc()
	if from == metal3v1.StateProvisioning && to == metal3v1.StateProvisioned {
		op := host.Status.OperationHistory.Provision
		metrics.ObserveDuration(provisionDuration, op.Start.Time, op.End.Time)
	}
}

// The gauges of hosts, counted from the cache at scrape time.
const (
	gaugeState = iota
	gaugeOperational
	gaugeErrors
)

// hostGauges are the gauges of newHostCollector, in the gauge* order.
func (r *Reconciler) hostGauges() []metrics.Gauge {
	var states [][]string
	for s := range r.stateMachine() {
		states = append(states, []string{metrics.StateLabel(string(s))})
	}
	operational := [][]string{}
	for _, s := range []metal3v1.OperationalStatus{metal3v1.OperationalStatusOK, metal3v1.OperationalStatusDiscovered, metal3v1.OperationalStatusError,
		metal3v1.OperationalStatusDelayed, metal3v1.OperationalStatusDetached, metal3v1.OperationalStatusServicing} {
		operational = append(operational, []string{string(s)})
	}
	errorTypes := [][]string{}
	for _, t := range []metal3v1.ErrorType{metal3v1.ProvisionedRegistrationError, metal3v1.RegistrationError, metal3v1.InspectionError,
		metal3v1.PreparationError, metal3v1.ProvisioningError, metal3v1.PowerManagementError, metal3v1.DetachError, metal3v1.ServicingError} {
		errorTypes = append(errorTypes, []string{string(t)})
	}
	return []metrics.Gauge{
		gaugeState: {Name: "metalshift_baremetalhosts", Help: "BareMetalHosts by provisioning state (status.provisioning.state; none before the first).",
			Labels: []string{"state"}, Known: states},
		gaugeOperational: {Name: "metalshift_baremetalhosts_operational_status", Help: "BareMetalHosts by operational status (status.operationalStatus; none before the first).",
			Labels: []string{"status"}, Known: operational},
		gaugeErrors: {Name: "metalshift_baremetalhosts_errors", Help: "BareMetalHosts in error, by error type (status.errorType).",
			Labels: []string{"type"}, Known: errorTypes},
	}
}

// newHostCollector counts the hosts the engine manages (those with its
// watch-filter label, when it has one) from reader.
func (r *Reconciler) newHostCollector(reader client.Reader) *metrics.StateCollector {
	var opts []client.ListOption
	if r.WatchFilterValue != "" {
		opts = append(opts, client.MatchingLabels{clusterv1.WatchLabel: r.WatchFilterValue})
	}
	opts = append(opts, client.UnsafeDisableDeepCopy)
	return metrics.NewStateCollector(reader, func(ctx context.Context, c client.Reader, add func(int, ...string)) error {
		hosts := &metal3v1.BareMetalHostList{}
		if err := c.List(ctx, hosts, opts...); err != nil {
			return err
		}
		for i := range hosts.Items {
			st := &hosts.Items[i].Status
			add(gaugeState, metrics.StateLabel(string(st.Provisioning.State)))
			add(gaugeOperational, metrics.StateLabel(string(st.OperationalStatus)))
			if st.ErrorType != "" {
				add(gaugeErrors, string(st.ErrorType))
			}
		}
		return nil
	}, r.hostGauges()...)
}
