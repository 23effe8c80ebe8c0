package metricstext

import (
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The percentiles of the calls between two scrapes, interpolated inside a
// bucket as histogram_quantile does.
func TestDelta(t *testing.T) {
	before := Hist{0.005: 10, 0.025: 10, 0.1: 10, math.Inf(1): 10}
	// 100 calls more: 50 under 5 ms, 40 in (5, 25] ms, 10 in (25, 100] ms.
	after := Hist{0.005: 60, 0.025: 100, 0.1: 110, math.Inf(1): 110}
	calls, p50, p99, buckets := Delta(before, after)
	assert.Equal(t, uint64(100), calls)
	assert.InDelta(t, 0.005, p50, 1e-9, "the 50th call is the last under 5 ms")
	assert.InDelta(t, 0.025+0.075*0.9, p99, 1e-9, "the 99th call is 9/10 into the (25, 100] ms bucket")
	assert.Equal(t, "≤0.005s: 50, ≤0.025s: 90, ≤0.1s: 100", buckets)

	calls, p50, p99, _ = Delta(Hist{}, Hist{})
	assert.Zero(t, calls)
	assert.Zero(t, p50+p99)
}

const exposition = `# TYPE apiserver_request_duration_seconds histogram
apiserver_request_duration_seconds_bucket{verb="PATCH",resource="pods",subresource="resize",scope="resource",le="0.05"} 3
apiserver_request_duration_seconds_bucket{verb="PATCH",resource="pods",subresource="resize",scope="resource",le="+Inf"} 4
apiserver_request_duration_seconds_sum{verb="PATCH",resource="pods",subresource="resize",scope="resource"} 0.3
apiserver_request_duration_seconds_count{verb="PATCH",resource="pods",subresource="resize",scope="resource"} 4
apiserver_request_duration_seconds_bucket{verb="PATCH",resource="pods",subresource="resize",scope="namespace",le="0.05"} 1
apiserver_request_duration_seconds_bucket{verb="PATCH",resource="pods",subresource="resize",scope="namespace",le="+Inf"} 1
apiserver_request_duration_seconds_sum{verb="PATCH",resource="pods",subresource="resize",scope="namespace"} 0.01
apiserver_request_duration_seconds_count{verb="PATCH",resource="pods",subresource="resize",scope="namespace"} 1
apiserver_request_duration_seconds_bucket{verb="GET",resource="pods",subresource="",scope="resource",le="0.05"} 7
apiserver_request_duration_seconds_bucket{verb="GET",resource="pods",subresource="",scope="resource",le="+Inf"} 7
apiserver_request_duration_seconds_sum{verb="GET",resource="pods",subresource="",scope="resource"} 0.1
apiserver_request_duration_seconds_count{verb="GET",resource="pods",subresource="",scope="resource"} 7
# TYPE apiserver_current_inflight_requests gauge
apiserver_current_inflight_requests{request_kind="mutating"} 5
apiserver_current_inflight_requests{request_kind="readOnly"} 2
`

// Samples are selected by their labels and summed across the rest.
func TestFamiliesSelectByLabels(t *testing.T) {
	f, err := Parse([]byte(exposition))
	require.NoError(t, err)
	resize := Labels{"verb": "PATCH", "resource": "pods", "subresource": "resize"}
	assert.Equal(t, Hist{0.05: 4, math.Inf(1): 5}, f.Hist("apiserver_request_duration_seconds", resize),
		"both scopes of the resize patches, not the GETs")
	v, ok := f.Sum("apiserver_current_inflight_requests", Labels{"request_kind": "mutating"})
	assert.True(t, ok)
	assert.Equal(t, 5.0, v)
	v, ok = f.Sum("apiserver_current_inflight_requests", nil)
	assert.True(t, ok)
	assert.Equal(t, 7.0, v)
	_, ok = f.Sum("apiserver_flowcontrol_current_inqueue_requests", nil)
	assert.False(t, ok, "an absent family says so")
}

// An exposition past MaxSize is refused before it is parsed.
func TestParseBoundsItsInput(t *testing.T) {
	_, err := Parse([]byte(strings.Repeat("#", MaxSize+1)))
	assert.Error(t, err)
}
