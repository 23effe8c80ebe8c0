package owner

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/util/workqueue"
	testingclock "k8s.io/utils/clock/testing"
)

// observed is a histogram's count and sum.
type observed struct {
	count uint64
	sum   float64
}

// lagOf returns the lag histograms gathered from reg, by shard and queue.
func lagOf(t *testing.T, reg *prometheus.Registry) map[[2]string]observed {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	out := map[[2]string]observed{}
	for _, fam := range families {
		if fam.GetName() != MetricShardWorkLag {
			continue
		}
		for _, m := range fam.GetMetric() {
			var shard, queue string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "shard":
					shard = l.GetValue()
				case "queue":
					queue = l.GetValue()
				}
			}
			out[[2]string{shard, queue}] = observed{count: m.GetHistogram().GetSampleCount(), sum: m.GetHistogram().GetSampleSum()}
		}
	}
	return out
}

// A span's queue, as the controller builds it, reports how long each item
// waited for a worker and how long its longest running worker has been at
// its item, under each shard of the span and no other; once the span stops,
// no worker shows at work under its shards.
func TestASpansQueueReportsItsLagUnderEachOfItsShards(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg, 4)
	require.NoError(t, err)
	clk := testingclock.NewFakeClock(time.Unix(1_800_000_000, 0))
	work := m.Work([]int{1, 2})
	q := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "pods", Clock: clk, MetricsProvider: work.Queue("pod")})
	defer q.ShutDown()

	q.Add("team-a/web-0")
	clk.Step(3 * time.Second)
	key, _ := q.Get()
	lag := lagOf(t, reg)
	require.Len(t, lag, 2, "a series per shard of the span, none for the others: %v", lag)
	for _, shard := range []string{"1", "2"} {
		h, ok := lag[[2]string{shard, "pod"}]
		require.True(t, ok, "shard %s", shard)
		assert.Equal(t, uint64(1), h.count, "shard %s", shard)
		assert.InDelta(t, 3.0, h.sum, 1e-9, "shard %s: queued 3s before a worker took it", shard)
	}

	// The worker is at its item: the library's loop, every half second of
	// the queue's clock, reports for how long.
	longest := func(shard string) float64 { return testutil.ToFloat64(m.longest.WithLabelValues(shard, "pod")) }
	require.Eventually(t, func() bool {
		if longest("1") >= 7 && longest("2") >= 7 {
			return true
		}
		clk.Step(500 * time.Millisecond)
		return false
	}, 30*time.Second, time.Millisecond, "the longest running work, under both shards")
	assert.Zero(t, longest("0"))

	q.Done(key)
	q.ShutDown()
	work.Stop()
	assert.Zero(t, longest("1"), "a span stopped has no worker at work")
	assert.Zero(t, longest("2"))
}

// Without the shards' metrics (no --shards) a controller's queues get no
// provider: the library's default, which measures nothing.
func TestNoMetricsNoQueueMetrics(t *testing.T) {
	var m *Metrics
	work := m.Work([]int{0})
	assert.Nil(t, work)
	assert.Nil(t, work.Queue("pod"), "an untyped nil, so that the queue falls back to the library's default")
	work.Stop()
}
