// Package metricstext reads Prometheus text expositions (the API server's
// /metrics, an updater's): the samples of a family whose labels match,
// summed, and histograms with their percentiles between two scrapes.
package metricstext

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"sort"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/kubernetes"
)

// MaxSize bounds an exposition read: the API server's is a few MiB.
const MaxSize = 64 << 20

// Families are the metric families of one exposition, by name.
type Families map[string]*dto.MetricFamily

// Labels selects samples: every label named must have that value.
type Labels map[string]string

// Parse reads an exposition in the text format.
func Parse(raw []byte) (Families, error) {
	if len(raw) > MaxSize {
		return nil, fmt.Errorf("metrics of %d bytes, more than %d", len(raw), MaxSize)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("parsing metrics: %w", err)
	}
	return families, nil
}

// ScrapeAPIServer reads the API server's /metrics (kube's credentials must
// allow it: the cluster admin's do).
func ScrapeAPIServer(ctx context.Context, kube kubernetes.Interface) (Families, error) {
	raw, err := kube.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the API server's metrics: %w", err)
	}
	return Parse(raw)
}

// Match reports whether m carries every label of want.
func (want Labels) Match(m *dto.Metric) bool {
	for name, value := range want {
		if Label(m, name) != value {
			return false
		}
	}
	return true
}

// Label returns the value of m's label name, "" when absent.
func Label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// Sum adds up the values of the samples of family name whose labels match
// (counters, gauges, untyped); false when the family is absent.
func (f Families) Sum(name string, match Labels) (float64, bool) {
	fam, ok := f[name]
	if !ok {
		return 0, false
	}
	sum := 0.0
	for _, m := range fam.GetMetric() {
		if match.Match(m) {
			sum += value(m)
		}
	}
	return sum, true
}

// Each calls fn with the value of every sample of family name whose labels
// match.
func (f Families) Each(name string, match Labels, fn func(m *dto.Metric, v float64)) {
	for _, m := range f[name].GetMetric() {
		if match.Match(m) {
			fn(m, value(m))
		}
	}
}

func value(m *dto.Metric) float64 {
	switch {
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	case m.GetUntyped() != nil:
		return m.GetUntyped().GetValue()
	}
	return math.NaN()
}

// Hist is a cumulative histogram: upper bound to count.
type Hist map[float64]uint64

// Hist adds up the buckets of the histograms of family name whose labels
// match.
func (f Families) Hist(name string, match Labels) Hist {
	out := Hist{}
	f.Each(name, match, func(m *dto.Metric, _ float64) {
		for _, b := range m.GetHistogram().GetBucket() {
			out[b.GetUpperBound()] += b.GetCumulativeCount()
		}
	})
	return out
}

// Delta returns the observations between two scrapes and their 50th and
// 99th percentiles, interpolated linearly inside a bucket as Prometheus'
// histogram_quantile does, and the buckets' counts.
func Delta(before, after Hist) (calls uint64, p50, p99 float64, buckets string) {
	bounds := make([]float64, 0, len(after))
	for b := range after {
		bounds = append(bounds, b)
	}
	sort.Float64s(bounds)
	counts := make([]uint64, len(bounds))
	var parts []string
	for i, b := range bounds {
		counts[i] = after[b] - before[b]
		if !math.IsInf(b, 1) {
			parts = append(parts, fmt.Sprintf("≤%gs: %d", b, counts[i]))
		}
	}
	if len(bounds) == 0 {
		return 0, 0, 0, ""
	}
	calls = counts[len(counts)-1]
	q := func(p float64) float64 {
		rank := p * float64(calls)
		lower, prev := 0.0, uint64(0)
		for i, b := range bounds {
			if float64(counts[i]) >= rank {
				if math.IsInf(b, 1) {
					return lower
				}
				if counts[i] == prev {
					return b
				}
				return lower + (b-lower)*(rank-float64(prev))/float64(counts[i]-prev)
			}
			lower, prev = b, counts[i]
		}
		return lower
	}
	return calls, q(0.5), q(0.99), strings.Join(parts, ", ")
}
