package testenv

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Metrics is one scrape of a metrics endpoint: the metric families by name.
type Metrics map[string]*dto.MetricFamily

// Scrape GETs a Prometheus metrics endpoint (e.g. Env.MetricsURL) and
// parses its text exposition.
func Scrape(ctx context.Context, url string) (Metrics, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(resp.Body)
}

// Counts returns the values of the gauge family name, keyed by the values
// of labels joined with "/", leaving out the zeros; nil when the family is
// missing.
func (m Metrics) Counts(name string, labels ...string) map[string]float64 {
	f, ok := m[name]
	if !ok {
		return nil
	}
	out := map[string]float64{}
	for _, metric := range f.GetMetric() {
		if v := metric.GetGauge().GetValue(); v != 0 {
			out[labelValues(metric, labels)] += v
		}
	}
	return out
}

// Series returns the label values (joined as in Counts) of every series of
// the family name, zeros included.
func (m Metrics) Series(name string, labels ...string) []string {
	var out []string
	for _, metric := range m[name].GetMetric() {
		out = append(out, labelValues(metric, labels))
	}
	return out
}

// Histogram returns the sample count and sum of the histogram name
// (zeros when it is missing).
func (m Metrics) Histogram(name string) (count uint64, sum float64) {
	for _, metric := range m[name].GetMetric() {
		count += metric.GetHistogram().GetSampleCount()
		sum += metric.GetHistogram().GetSampleSum()
	}
	return count, sum
}

func labelValues(metric *dto.Metric, labels []string) string {
	values := make([]string, len(labels))
	for _, lp := range metric.GetLabel() {
		for i, l := range labels {
			if lp.GetName() == l {
				values[i] = lp.GetValue()
			}
		}
	}
	return strings.Join(values, "/")
}
