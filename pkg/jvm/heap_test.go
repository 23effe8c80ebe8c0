package jvm

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The JVM's own sizing of a heap no -Xmx sets, at several memory limits.
func TestHeapBytesErgonomic(t *testing.T) {
	def := Heap{kind: heapErgonomic, maxPct: 25, minPct: 50}
	tests := map[string]struct {
		heap  Heap
		limit int64
		want  int64
	}{
		"25% of 2Gi":           {heap: def, limit: 2 * GiB, want: 512 * MiB},
		"25% of 8Gi":           {heap: def, limit: 8 * GiB, want: 2 * GiB},
		"25%, aligned up":      {heap: def, limit: 3*GiB + 4*MiB + 4, want: 770 * MiB},
		"62.5% of 2Gi":         {heap: PercentHeap(62.5), limit: 2 * GiB, want: 1280 * MiB},
		"50.5% of 1Gi":         {heap: PercentHeap(50.5), limit: GiB, want: 518 * MiB}, // 542239621 bytes, up to 2 MiB
		"small: 50% of 200Mi":  {heap: def, limit: 200 * MiB, want: 100 * MiB},
		"small: 80% of 200Mi":  {heap: PercentHeap(80), limit: 200 * MiB, want: 100 * MiB},
		"mid: 124.8Mi at 400":  {heap: def, limit: 400 * MiB, want: 126 * MiB},
		"mid: at least 124.8":  {heap: PercentHeap(1), limit: GiB, want: 126 * MiB},
		"MinRAMPercentage=10":  {heap: Heap{kind: heapErgonomic, maxPct: 25, minPct: 10}, limit: 200 * MiB, want: 20 * MiB},
		"-Xms above the share": {heap: Heap{kind: heapErgonomic, maxPct: 25, minPct: 50, initial: GiB}, limit: 2 * GiB, want: GiB},
		"-Xms below the share": {heap: Heap{kind: heapErgonomic, maxPct: 25, minPct: 50, initial: 128 * MiB}, limit: 2 * GiB, want: 512 * MiB},
		"MaxRAM, not the limit": {heap: Heap{kind: heapErgonomic, maxPct: 50, minPct: 50, maxRAM: 4 * GiB},
			limit: 16 * GiB, want: 2 * GiB},
		"100% of 64Gi, 32 MiB alignment": {heap: PercentHeap(100), limit: 64*GiB + 1, want: 64*GiB + 32*MiB},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := tt.heap.Bytes(tt.limit)
			require.NoError(t, err)
			assert.Equal(t, formatBytes(tt.want), formatBytes(got))
		})
	}
}

func TestHeapBytesErrors(t *testing.T) {
	_, err := PercentHeap(25).Bytes(0)
	require.ErrorIs(t, err, ErrNoLimit, "a share of no limit")
	_, err = PercentHeap(25).Bytes(MaxSize + 1)
	require.ErrorContains(t, err, "larger than")
	_, err = Heap{}.Bytes(GiB)
	require.Error(t, err, "the zero Heap is no heap")

	got, err := Heap{kind: heapErgonomic, maxPct: 25, minPct: 50, maxRAM: 4 * GiB}.Bytes(0)
	require.NoError(t, err, "MaxRAM needs no limit")
	assert.Equal(t, GiB, got)

	got, err = FixedHeap(GiB).Bytes(0)
	require.NoError(t, err, "a fixed heap needs no limit")
	assert.Equal(t, GiB, got)
}

func TestHeapDescribes(t *testing.T) {
	assert.Equal(t, "1Gi", FixedHeap(GiB).String())
	assert.Equal(t, "62.5% of the memory limit at start", PercentHeap(62.5).String())
	assert.Equal(t, "25% of 4Gi (-XX:MaxRAM)", Heap{kind: heapErgonomic, maxPct: 25, maxRAM: 4 * GiB}.String())
	assert.Equal(t, "50% of the memory limit at start, at least 1Gi, at most 5Gi",
		Heap{kind: heapStrimzi, maxPct: 50, initial: GiB, size: 5 * GiB}.String())
	assert.Equal(t, "no heap", Heap{}.String())

	assert.True(t, PercentHeap(50).FromLimit())
	assert.False(t, FixedHeap(GiB).FromLimit())
	assert.False(t, Heap{kind: heapErgonomic, maxPct: 25, maxRAM: GiB}.FromLimit(), "sized from MaxRAM")
	assert.Equal(t, 50.0, PercentHeap(50).Percent())
	assert.Equal(t, 0.0, FixedHeap(GiB).Percent())
	assert.True(t, Heap{}.IsZero())
}
