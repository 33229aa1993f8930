package metrics

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestStateCollector: every known combination of label values is reported,
// as 0 when no object has it; objects in states not known are counted
// too; a failed count reports nothing rather than zeros.
func TestStateCollector(t *testing.T) {
	gauges := []Gauge{
		{Name: "test_things", Help: "Things by state and approval.", Labels: []string{"state", "approved"},
			Known: [][]string{{"ready", "true"}, {"ready", "false"}, {"done", "true"}, {"done", "false"}}},
		{Name: "test_things_errors", Help: "Things in error by type.", Labels: []string{"type"}, Known: [][]string{{"boot"}, {"disk"}}},
	}
	tests := []struct {
		name    string
		objects [][]string // state, approved, error type
		err     error
		want    string
	}{
		{name: "no object: every known series at 0", want: `
# HELP test_things Things by state and approval.
# TYPE test_things gauge
test_things{approved="false",state="done"} 0
test_things{approved="false",state="ready"} 0
test_things{approved="true",state="done"} 0
test_things{approved="true",state="ready"} 0
# HELP test_things_errors Things in error by type.
# TYPE test_things_errors gauge
test_things_errors{type="boot"} 0
test_things_errors{type="disk"} 0
`},
		{name: "counted, an unknown state and no state included", objects: [][]string{
			{"ready", "true", ""}, {"ready", "true", "disk"}, {"done", "false", ""}, {"weird", "true", "disk"}, {"", "false", "net"},
		}, want: `
# HELP test_things Things by state and approval.
# TYPE test_things gauge
test_things{approved="false",state="done"} 1
test_things{approved="false",state="none"} 1
test_things{approved="false",state="ready"} 0
test_things{approved="true",state="done"} 0
test_things{approved="true",state="ready"} 2
test_things{approved="true",state="weird"} 1
# HELP test_things_errors Things in error by type.
# TYPE test_things_errors gauge
test_things_errors{type="boot"} 0
test_things_errors{type="disk"} 2
test_things_errors{type="net"} 1
`},
		{name: "a failed list reports nothing", objects: [][]string{{"ready", "true", ""}}, err: errors.New("cache not synced"), want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			c := NewStateCollector(nil, func(_ context.Context, _ client.Reader, add func(int, ...string)) error {
				for _, o := range tt.objects {
					add(0, StateLabel(o[0]), o[1])
					if o[2] != "" {
						add(1, o[2])
					}
				}
				return tt.err
			}, gauges...)
			g.Expect(testutil.CollectAndCompare(c, strings.NewReader(tt.want))).To(Succeed())
		})
	}
}

func TestObserveDuration(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name       string
		start, end time.Time
		want       bool
		wantSum    float64
	}{
		{name: "an install of 95 minutes", start: t0, end: t0.Add(95 * time.Minute), want: true, wantSum: 5700},
		{name: "within the same second", start: t0, end: t0, want: true, wantSum: 0},
		{name: "no start recorded", end: t0, want: false},
		{name: "no end recorded", start: t0, want: false},
		{name: "end before start", start: t0, end: t0.Add(-time.Second), want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "test_duration_seconds", Help: "Test.", Buckets: InstallBuckets})
			g.Expect(ObserveDuration(h, tt.start, tt.end)).To(Equal(tt.want))
			m := &dto.Metric{}
			g.Expect(h.Write(m)).To(Succeed())
			var want uint64
			if tt.want {
				want = 1
			}
			g.Expect(m.GetHistogram().GetSampleCount()).To(Equal(want))
			g.Expect(m.GetHistogram().GetSampleSum()).To(Equal(tt.wantSum))
		})
	}
}
