package metrics

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// InstallBuckets are the upper bounds, in seconds, of the install duration
// histograms: from seconds (a simulated host) to six hours (a large
// cluster on slow hardware).
var InstallBuckets = []float64{1, 5, 15, 30, 60, 120, 300, 600, 900, 1200, 1800, 2700, 3600, 5400, 7200, 10800, 14400, 21600}

// ObserveDuration observes end − start in seconds on h, and tells whether
// it did: not when either time is unset or end is before start.
func ObserveDuration(h prometheus.Observer, start, end time.Time) bool {
	if start.IsZero() || end.IsZero() || end.Before(start) {
		return false
	}
	h.Observe(end.Sub(start).Seconds())
	return true
}

// NoState is the state label of an object that has none yet (an empty
// status field): an empty label value would read as no label at all.
const NoState = "none"

// StateLabel is s as a label value: NoState when empty.
func StateLabel(s string) string {
	if s == "" {
		return NoState
	}
	return s
}

// Gauge is one gauge family of a StateCollector: a number of objects per
// combination of label values.
type Gauge struct {
	// Name and Help are the family's.
	Name, Help string
	// Labels are the family's label names.
	Labels []string
	// Known are the combinations of label values reported even when no
	// object has them (as 0), so that dashboards see stable series.
	Known [][]string
}

// Count lists the objects a StateCollector counts from r (the manager's
// cache) and calls add once per object and gauge, with the index of the
// gauge in the collector's and the object's label values, in the order of
// the gauge's Labels.
type Count func(ctx context.Context, r client.Reader, add func(gauge int, values ...string)) error

// StateCollector is a prometheus.Collector of objects counted by state at
// scrape time from the manager's informer cache.
type StateCollector struct {
	reader client.Reader
	gauges []Gauge
	descs  []*prometheus.Desc
	count  Count
}

var _ prometheus.Collector = &StateCollector{}

// NewStateCollector returns a collector of gauges, each counted by count
// from r.
func NewStateCollector(r client.Reader, count Count, gauges ...Gauge) *StateCollector {
	c := &StateCollector{reader: r, gauges: gauges, count: count}
	for _, g := range gauges {
		c.descs = append(c.descs, prometheus.NewDesc(g.Name, g.Help, g.Labels, nil))
	}
	return c
}

// Describe sends the gauges' descriptions.
func (c *StateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

// scrapeTimeout bounds a scrape's lists: a cache lists at once, but waits
// for an informer that has not synced yet.
const scrapeTimeout = 10 * time.Second

// labelSep joins label values into a map key; it cannot be part of one.
const labelSep = "\xff"

// Collect lists the objects and sends one value per gauge and combination
// of label values seen or known. When the list fails it sends nothing
// (the series go stale) and logs why: the other collectors of the
// endpoint still report.
func (c *StateCollector) Collect(ch chan<- prometheus.Metric) {
	counts := make([]map[string]float64, len(c.gauges))
	for i, g := range c.gauges {
		counts[i] = map[string]float64{}
		for _, values := range g.Known {
			counts[i][strings.Join(values, labelSep)] = 0
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	err := c.count(ctx, c.reader, func(gauge int, values ...string) {
		counts[gauge][strings.Join(values, labelSep)]++
	})
	if err != nil {
		ctrl.Log.WithName("metrics").Error(err, "Counting objects by state", "gauge", c.gauges[0].Name)
		return
	}
	for i, byValues := range counts {
		for key, n := range byValues {
			ch <- prometheus.MustNewConstMetric(c.descs[i], prometheus.GaugeValue, n, strings.Split(key, labelSep)...)
		}
	}
}

// Add registers collectors with controller-runtime's registry, which the
// manager's metrics endpoint serves, for as long as mgr runs, on every
// replica, leader or not. Before it registers them it starts the cache's
// informers of watched (the kinds the collectors list), which a replica
// that is not the leader would not have started otherwise. A process runs
// one manager's collectors at a time: those of a second manager running
// at once are not registered (it logs so), and those of a stopped manager
// are unregistered, so that a restarted one registers its own.
func Add(mgr manager.Manager, watched []client.Object, collectors ...prometheus.Collector) error {
	return mgr.Add(&registration{cache: mgr.GetCache(), watched: watched, collectors: collectors})
}

type registration struct {
	cache      cache.Cache
	watched    []client.Object
	collectors []prometheus.Collector
}

// NeedLeaderElection is false: every replica reports.
func (*registration) NeedLeaderElection() bool { return false }

// Start starts the informers, registers the collectors, and unregisters
// them when ctx ends.
func (r *registration) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithName("metrics")
	for _, obj := range r.watched {
		if _, err := r.cache.GetInformer(ctx, obj); err != nil {
			if ctx.Err() != nil {
				return nil // stopped before the informer synced
			}
			return fmt.Errorf("starting the informer of %T for the metrics: %w", obj, err)
		}
	}
	var registered []prometheus.Collector
	for _, c := range r.collectors {
		if err := ctrlmetrics.Registry.Register(c); err != nil {
			if are := (prometheus.AlreadyRegisteredError{}); errors.As(err, &are) {
				log.Error(err, "Another manager of this process reports these metrics already")
				continue
			}
			return err
		}
		registered = append(registered, c)
	}
	<-ctx.Done()
	for _, c := range registered {
		ctrlmetrics.Registry.Unregister(c)
	}
	return nil
}
