package jvm

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseSize(t *testing.T) {
	tests := []struct {
		in      string
		want    int64
		wantErr string
	}{
		{in: "1073741824", want: GiB},
		{in: "1048576k", want: GiB},
		{in: "1048576K", want: GiB},
		{in: "1024m", want: GiB},
		{in: "1024M", want: GiB},
		{in: "1g", want: GiB},
		{in: "1G", want: GiB},
		{in: "2t", want: 2 * TiB},
		{in: "2T", want: 2 * TiB},
		{in: "0x40000000", want: GiB},
		{in: "0X10m", want: 16 * MiB},
		{in: "0xfM", want: 15 * MiB},
		{in: "007m", want: 7 * MiB},
		{in: "0", want: 0},
		{in: "1024t", want: MaxSize},
		{in: "1025t", wantErr: "larger than"},
		{in: "1180591620717411303424", wantErr: "larger than"}, // 2^70
		{in: "99999999999999999999999999999999999999", wantErr: "larger than"},
		{in: "0x" + strings.Repeat("f", 40), wantErr: "larger than"},
		{in: "1048577g", wantErr: "larger than"},
		{in: "", wantErr: "no digits"},
		{in: "g", wantErr: "no digits"},
		{in: "0x", wantErr: "want digits"},
		{in: "-1g", wantErr: "no digits"},
		{in: " 1g", wantErr: "no digits"},
		{in: "1gb", wantErr: "want digits and one of"},
		{in: "1.5g", wantErr: "want digits and one of"},
		{in: "1 g", wantErr: "want digits and one of"},
		{in: "1Gi", wantErr: "want digits and one of"},
		{in: "1e9", wantErr: "want digits and one of"},
		{in: "1b", wantErr: "want digits and one of"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseSize(tt.in)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestParsePercent(t *testing.T) {
	tests := []struct {
		in      string
		want    float64
		wantErr bool
	}{
		{in: "50", want: 50},
		{in: "62.5", want: 62.5},
		{in: "0.5", want: 0.5},
		{in: ".5", want: 0.5},
		{in: "75.", want: 75},
		{in: "+25", want: 25},
		{in: "5e1", want: 50},
		{in: "2.5E+1", want: 25},
		{in: "0", want: 0},
		{in: "100", want: 100},
		{in: "100.0001", wantErr: true},
		{in: "150", wantErr: true},
		{in: "-5", wantErr: true},
		{in: "abc", wantErr: true},
		{in: "50%", wantErr: true},
		{in: "", wantErr: true},
		{in: ".", wantErr: true},
		{in: "0x32", wantErr: true},
		{in: "inf", wantErr: true},
		{in: "NaN", wantErr: true},
		{in: "1e9999", wantErr: true},
		{in: "5_0", wantErr: true},
		{in: strings.Repeat("1", 40), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parsePercent(tt.in)
			if tt.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.InDelta(t, tt.want, got, 1e-9)
		})
	}
}

func TestParseScriptSize(t *testing.T) {
	tests := []struct {
		in      string
		want    int64
		wantErr bool
	}{
		{in: "5368709120", want: 5 * GiB},
		{in: "5g", want: 5 * GiB},
		{in: "5G", want: 5 * GiB},
		{in: "1.5G", want: 3 * GiB / 2},
		{in: "512m", want: 512 * MiB},
		{in: "2048K", want: 2 * MiB},
		{in: "0.3333k", want: 341}, // truncated as the image's script does
		{in: "", wantErr: true},
		{in: "5Gi", wantErr: true},
		{in: "-5g", wantErr: true},
		{in: "abc", wantErr: true},
		{in: "1..2g", wantErr: true},
		{in: "2000t", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseScriptSize(tt.in)
			if tt.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

// The JVM prints 1.46G for 1500Mi (half-even to two decimals), which the
// image reads back as 1.46 GiB: a little less than what was printed from.
func TestPrintedHeap(t *testing.T) {
	tests := map[string]struct {
		in, want int64
	}{
		"whole GiB":                {in: GiB, want: GiB},
		"1500Mi prints 1.46G":      {in: 1500 * MiB, want: 1567663063},
		"under 1Gi prints in M":    {in: 1000 * MiB, want: 1000 * MiB},
		"1.125G is 1.12G":          {in: GiB + GiB/8, want: 1202590842},
		"1.375G is 1.38G":          {in: GiB + 3*GiB/8, want: 1481763717},
		"1.996G is 2.00G":          {in: 2*GiB - 4*GiB/1000, want: 2 * GiB},
		"1.994G is 1.99G":          {in: 2*GiB - 6*GiB/1000, want: 2136746229},
		"under 1Mi prints in K":    {in: 1000 * KiB, want: 1000 * KiB},
		"1Ti prints in T":          {in: TiB, want: TiB},
		"a few bytes print as 0 K": {in: 5, want: 0},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tt.want, printedHeap(tt.in))
		})
	}
}

func TestAlignHeap(t *testing.T) {
	assert.Equal(t, GiB, alignHeap(GiB))
	assert.Equal(t, 1002*MiB, alignHeap(1001*MiB), "2 MiB up to 4 GiB of heap")
	assert.Equal(t, int64(1000341504), alignHeap(1_000_000_000))
	assert.Equal(t, 8*GiB+4*MiB, alignHeap(8*GiB+1), "4 MiB for 8 GiB")
	assert.Equal(t, 64*GiB+32*MiB, alignHeap(64*GiB+1), "32 MiB at most")
	assert.Equal(t, MaxSize, alignHeap(MaxSize))
}
