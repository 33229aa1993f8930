package baremetalhost

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var stateTransitions = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "metalshift_baremetalhost_state_transitions_total",
	Help: "BareMetalHost state transitions, by from and to state.",
}, []string{"from", "to"})

func init() {
	metrics.Registry.MustRegister(stateTransitions)
}
