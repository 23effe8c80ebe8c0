package shard

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/sharding"
)

// The FNV-1a test vectors of the hash's reference suite (the empty string,
// "a", "b", "foobar"), and namespaces the API server hashes: the API
// server's own function (k8s.io/apimachinery/pkg/sharding.HashField) and
// Go's hash/fnv must agree with each.
func TestHashIsTheAPIServers(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want uint64
	}{
		{"", 0xcbf29ce484222325},
		{"a", 0xaf63dc4c8601ec8c},
		{"b", 0xaf63df4c8601f1a5},
		{"foobar", 0x85944171f73967e8},
		{"default", 0xebada5168620c5fe},
		{"kube-system", 0xdf65c7bc1d82b35e},
	} {
		t.Run(strconv.Quote(tc.in), func(t *testing.T) {
			assert.Equal(t, tc.want, Hash(tc.in))
			assert.Equal(t, fmt.Sprintf("%016x", tc.want), sharding.HashField(tc.in), "the API server's hash")
			h := fnv.New64a()
			_, _ = h.Write([]byte(tc.in))
			assert.Equal(t, tc.want, h.Sum64(), "hash/fnv")
		})
	}
	for i := range 1000 {
		ns := fmt.Sprintf("tenant-%d", i)
		require.Equal(t, sharding.HashField(ns), fmt.Sprintf("%016x", Hash(ns)), ns)
	}
}

func TestNewLayoutBoundsTheShards(t *testing.T) {
	for _, n := range []int{0, -1, MaxShards + 1} {
		_, err := NewLayout(n)
		assert.Error(t, err, n)
	}
	for _, n := range []int{1, 16, MaxShards} {
		l, err := NewLayout(n)
		require.NoError(t, err)
		assert.Equal(t, n, l.Shards())
	}
}

// The bounds of the API's own examples (ListOptions.shardSelector): two and
// four shards.
func TestSelectorRendersTheAPIsExamples(t *testing.T) {
	for _, tc := range []struct {
		shards int
		span   Span
		want   string
	}{
		{1, Span{0, 1}, "shardRange(object.metadata.namespace, '0x0000000000000000', '0x10000000000000000')"},
		{2, Span{0, 1}, "shardRange(object.metadata.namespace, '0x0000000000000000', '0x8000000000000000')"},
		{2, Span{1, 2}, "shardRange(object.metadata.namespace, '0x8000000000000000', '0x10000000000000000')"},
		{4, Span{1, 2}, "shardRange(object.metadata.namespace, '0x4000000000000000', '0x8000000000000000')"},
		{4, Span{2, 3}, "shardRange(object.metadata.namespace, '0x8000000000000000', '0xc000000000000000')"},
		{4, Span{1, 3}, "shardRange(object.metadata.namespace, '0x4000000000000000', '0xc000000000000000')"},
		{3, Span{1, 2}, "shardRange(object.metadata.namespace, '0x5555555555555555', '0xaaaaaaaaaaaaaaaa')"},
	} {
		t.Run(fmt.Sprintf("%d/%s", tc.shards, tc.span), func(t *testing.T) {
			l, err := NewLayout(tc.shards)
			require.NoError(t, err)
			assert.Equal(t, tc.want, l.Selector(tc.span))
		})
	}
}

func TestSelectorOfJoinsTheSpans(t *testing.T) {
	l, err := NewLayout(4)
	require.NoError(t, err)
	assert.Empty(t, l.SelectorOf(nil))
	assert.Equal(t, "shardRange(object.metadata.namespace, '0x0000000000000000', '0x4000000000000000') || "+
		"shardRange(object.metadata.namespace, '0xc000000000000000', '0x10000000000000000')",
		l.SelectorOf([]Span{{0, 1}, {3, 4}}))
}

// Every namespace falls in exactly one shard, the one whose bounds the API
// server's own selector matches, whatever the number of shards (powers of
// two and not): the bounds are contiguous and cover the hash space.
func TestEveryNamespaceIsInTheShardTheAPIServerPutsItIn(t *testing.T) {
	for _, n := range []int{1, 2, 3, 5, 7, 12, 16, 100, MaxShards} {
		l, err := NewLayout(n)
		require.NoError(t, err)
		selectors := make([]sharding.Selector, n)
		for i := range n {
			start, end := l.Bounds(Span{i, i + 1})
			selectors[i] = sharding.NewSelector(sharding.ShardRangeRequirement{Key: Key, Start: start, End: end})
		}
		for j := range 300 {
			ns := fmt.Sprintf("ns-%d", j)
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p"}}
			in := l.Of(ns)
			for i, sel := range selectors {
				matched, err := sel.Matches(pod)
				require.NoError(t, err)
				require.Equal(t, i == in, matched, "%d shards: namespace %s in shard %d, API server's shard %d matches: %v", n, ns, in, i, matched)
				require.Equal(t, i == in, l.Has(Span{i, i + 1}, ns))
			}
		}
	}
}

// The hashes at the bounds: a bound belongs to the shard it starts, the
// hash just below it to the one before, whether floor(h*n/2^64) lands on
// the shard or one before it.
func TestOfHashAtTheBounds(t *testing.T) {
	for _, n := range []int{3, 7, 12, 100, MaxShards} {
		l, err := NewLayout(n)
		require.NoError(t, err)
		assert.Equal(t, 0, l.OfHash(0))
		assert.Equal(t, n-1, l.OfHash(^uint64(0)))
		for i := 1; i < n; i++ {
			b := l.start(i)
			require.Equal(t, i, l.OfHash(b), "%d shards, bound of %d", n, i)
			require.Equal(t, i-1, l.OfHash(b-1), "%d shards, below the bound of %d", n, i)
		}
	}
}

func TestMerge(t *testing.T) {
	l, err := NewLayout(8)
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		held []int
		want []Span
	}{
		{"none", nil, nil},
		{"one", []int{3}, []Span{{3, 4}}},
		{"adjacent merge", []int{2, 3, 4}, []Span{{2, 5}}},
		{"out of order and repeated", []int{4, 2, 3, 3}, []Span{{2, 5}}},
		{"gaps keep spans apart", []int{0, 1, 3, 6, 7}, []Span{{0, 2}, {3, 4}, {6, 8}}},
		{"all", []int{0, 1, 2, 3, 4, 5, 6, 7}, []Span{{0, 8}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := l.Merge(tc.held)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
	for _, bad := range [][]int{{-1}, {8}, {1, 9}} {
		_, err := l.Merge(bad)
		assert.Error(t, err, bad)
	}
}

func TestMergedSpansSelectWhatTheirShardsDo(t *testing.T) {
	l, err := NewLayout(12)
	require.NoError(t, err)
	spans, err := l.Merge([]int{4, 5, 6})
	require.NoError(t, err)
	require.Len(t, spans, 1)
	start, end := l.Bounds(spans[0])
	sel := sharding.NewSelector(sharding.ShardRangeRequirement{Key: Key, Start: start, End: end})
	for j := range 500 {
		ns := fmt.Sprintf("team-%d", j)
		matched, err := sel.Matches(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns}})
		require.NoError(t, err)
		s := l.Of(ns)
		require.Equal(t, s >= 4 && s <= 6, matched, ns)
		require.Equal(t, matched, l.Has(spans[0], ns), ns)
	}
}

func TestSpanString(t *testing.T) {
	assert.Equal(t, "3", Span{3, 4}.String())
	assert.Equal(t, "3-5", Span{3, 6}.String())
	assert.Equal(t, []int{3, 4, 5}, Span{3, 6}.Shards())
}
