package admissionburst

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The percentiles of the calls between two scrapes, interpolated inside a
// bucket as histogram_quantile does.
func TestDelta(t *testing.T) {
	before := hist{0.005: 10, 0.025: 10, 0.1: 10, math.Inf(1): 10}
	// 100 calls more: 50 under 5 ms, 40 in (5, 25] ms, 10 in (25, 100] ms.
	after := hist{0.005: 60, 0.025: 100, 0.1: 110, math.Inf(1): 110}
	calls, p50, p99, buckets := delta(before, after)
	assert.Equal(t, uint64(100), calls)
	assert.InDelta(t, 0.005, p50, 1e-9, "the 50th call is the last under 5 ms")
	assert.InDelta(t, 0.025+0.075*0.9, p99, 1e-9, "the 99th call is 9/10 into the (25, 100] ms bucket")
	assert.Equal(t, "≤0.005s: 50, ≤0.025s: 90, ≤0.1s: 100", buckets)

	calls, p50, p99, _ = delta(hist{}, hist{})
	assert.Zero(t, calls)
	assert.Zero(t, p50+p99)
}
