package jvm

import (
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFloor(t *testing.T) {
	tests := map[string]struct {
		heap     int64
		overhead Overhead
		want     int64
	}{
		"1Gi, the default":         {heap: GiB, overhead: DefaultOverhead, want: 1690 * MiB},
		"5Gi, the default":         {heap: 5 * GiB, overhead: DefaultOverhead, want: 6400 * MiB},
		"no heap, the default":     {heap: 0, overhead: DefaultOverhead, want: 512 * MiB},
		"fixed only":               {heap: GiB, overhead: Overhead{Fixed: 256 * MiB}, want: 1280 * MiB},
		"share only, rounded up":   {heap: 1000 * MiB, overhead: Overhead{Percent: 33.3}, want: 1333 * MiB},
		"rounded up to a MiB":      {heap: GiB + 1, overhead: Overhead{}, want: GiB + MiB},
		"the largest heap":         {heap: MaxSize, overhead: Overhead{Fixed: MaxSize, Percent: MaxOverheadPercent}, want: 3 * MaxSize},
		"a share of a small heap":  {heap: 3, overhead: Overhead{Percent: 10}, want: MiB},
		"zero overhead, zero heap": {heap: 0, overhead: Overhead{}, want: 0},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := Floor(tt.heap, tt.overhead)
			require.NoError(t, err)
			assert.Equal(t, formatBytes(tt.want), formatBytes(got))
		})
	}
}

func TestFloorRefuses(t *testing.T) {
	for name, tt := range map[string]struct {
		heap     int64
		overhead Overhead
	}{
		"negative heap":          {heap: -1, overhead: DefaultOverhead},
		"heap beyond MaxSize":    {heap: MaxSize + 1, overhead: DefaultOverhead},
		"negative fixed":         {heap: GiB, overhead: Overhead{Fixed: -1}},
		"fixed beyond MaxSize":   {heap: GiB, overhead: Overhead{Fixed: MaxSize + 1}},
		"share beyond 100%":      {heap: GiB, overhead: Overhead{Percent: 101}},
		"negative share":         {heap: GiB, overhead: Overhead{Percent: -1}},
		"share not a number":     {heap: GiB, overhead: Overhead{Percent: math.NaN()}},
		"share beyond any float": {heap: GiB, overhead: Overhead{Percent: math.Inf(1)}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Floor(tt.heap, tt.overhead)
			require.Error(t, err)
		})
	}
}

// The floor of what Inspect found, at the memory limit the container
// started with.
func TestResultFloor(t *testing.T) {
	c := kafkaRun("KAFKA_HEAP_OPTS", "-Xms1g -Xmx1g")
	f, err := Inspect(&c, nil).Floor(2*GiB, DefaultOverhead)
	require.NoError(t, err)
	assert.Equal(t, 1690*MiB, f)

	c = kafkaRun("STRIMZI_DYNAMIC_HEAP_PERCENTAGE", "50")
	r := Inspect(&c, nil)
	f, err = r.Floor(2*GiB, DefaultOverhead)
	require.NoError(t, err)
	assert.Equal(t, 1690*MiB, f, "1Gi of heap at 2Gi")
	f, err = r.Floor(4*GiB, DefaultOverhead)
	require.NoError(t, err)
	assert.Equal(t, 2868*MiB, f, "2Gi of heap at 4Gi: the limit it started with decides")
	_, err = r.Floor(0, DefaultOverhead)
	require.ErrorIs(t, err, ErrNoLimit)

	c = fromConfigMap(java("Main"), "JAVA_TOOL_OPTIONS")
	_, err = Inspect(&c, nil).Floor(2*GiB, DefaultOverhead)
	require.ErrorContains(t, err, "unknown")
}

func TestParseOverhead(t *testing.T) {
	tests := []struct {
		in      string
		want    Overhead
		wantErr string
	}{
		{in: "512Mi", want: Overhead{Fixed: 512 * MiB}},
		{in: "1Gi", want: Overhead{Fixed: GiB}},
		{in: "1G", want: Overhead{Fixed: 1_000_000_000}},
		{in: "20%", want: Overhead{Percent: 20}},
		{in: "12.5%", want: Overhead{Percent: 12.5}},
		{in: "512Mi+15%", want: DefaultOverhead},
		{in: "15%+512Mi", want: DefaultOverhead},
		{in: "0", want: Overhead{}},
		{in: "0.5Ki", want: Overhead{Fixed: 512}},
		{in: "", wantErr: "empty"},
		{in: "+", wantErr: "empty"},
		{in: "512Mi+1Gi", wantErr: "two sizes"},
		{in: "10%+20%", wantErr: "two percentages"},
		{in: "101%", wantErr: "between 0 and 100"},
		{in: "-1Gi", wantErr: "negative"},
		{in: "2Pi", wantErr: "larger than"},
		{in: "1e-99999999", wantErr: "exponent"},
		{in: "512Mb", wantErr: "quantities must match"},
		{in: "lots", wantErr: "quantities must match"},
		{in: strings.Repeat("1", 65), wantErr: "more than 64"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseOverhead(tt.in)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			again, err := ParseOverhead(got.String())
			require.NoError(t, err, got.String())
			assert.Equal(t, got, again, "String reads back")
		})
	}
}
