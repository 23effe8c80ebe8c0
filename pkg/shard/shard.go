// Package shard cuts the namespaces of a cluster into shards, as the API
// server's sharded list and watch (the shardSelector of ListOptions) cuts
// them: a namespace's place is the 64-bit FNV-1a hash of its name, and the
// hash space [0, 2^64) is cut into a fixed number of contiguous ranges, one
// per shard. A replica that holds adjacent shards watches one merged range
// (Merge), rendered as one shardRange term (Span.Selector).
//
// Everything the updater decides together lives in one namespace (a
// workload's pods, its PodDisruptionBudgets, its VPA and records, its canary
// and hold), so a namespace shard is a unit of work that needs nothing of
// another shard.
package shard

import (
	"fmt"
	"math/bits"
	"slices"
	"strings"
)

// Key is the field the shards hash, in the API server's shardSelector
// syntax.
const Key = "object.metadata.namespace"

// MaxShards bounds the number of shards: a Lease each, and a label value
// of a metric each.
const MaxShards = 256

// FNV-1a, 64 bits: the offset basis and the prime.
const (
	offset64 = 14695981039346656037
	prime64  = 1099511628211
)

// Hash returns the 64-bit FNV-1a hash of a namespace's name, the value the
// API server compares with the bounds of shardRange(object.metadata.namespace, ...).
func Hash(namespace string) uint64 {
	h := uint64(offset64)
	for i := 0; i < len(namespace); i++ {
		h ^= uint64(namespace[i])
		h *= prime64
	}
	return h
}

// Layout is a number of shards cutting the hash space into contiguous
// ranges: shard i covers [floor(i*2^64/n), floor((i+1)*2^64/n)), the last
// one up to 2^64.
type Layout struct {
	n int
}

// NewLayout returns the layout of n shards, 1 to MaxShards.
func NewLayout(n int) (Layout, error) {
	if n < 1 || n > MaxShards {
		return Layout{}, fmt.Errorf("the number of shards must be from 1 to %d, got %d", MaxShards, n)
	}
	return Layout{n: n}, nil
}

// Shards returns the number of shards.
func (l Layout) Shards() int { return l.n }

// start returns the lower bound of shard i, 0 <= i < n.
func (l Layout) start(i int) uint64 {
	q, _ := bits.Div64(uint64(i), 0, uint64(l.n))
	return q
}

// OfHash returns the shard whose range holds h.
func (l Layout) OfHash(h uint64) int {
	// floor(h*n/2^64) is never past the shard of h, at most one before it:
	// the bounds are rounded down.
	i, _ := bits.Mul64(h, uint64(l.n))
	s := int(i)
	for s+1 < l.n && l.start(s+1) <= h {
		s++
	}
	return s
}

// Of returns the shard of a namespace.
func (l Layout) Of(namespace string) int {
	return l.OfHash(Hash(namespace))
}

// Span is a run of adjacent shards of one Layout: From to To-1.
type Span struct {
	From, To int
}

// String names the span in logs and metrics: "3" or "3-5".
func (s Span) String() string {
	if s.To == s.From+1 {
		return fmt.Sprint(s.From)
	}
	return fmt.Sprintf("%d-%d", s.From, s.To-1)
}

// Shards returns the shards of the span.
func (s Span) Shards() []int {
	out := make([]int, 0, s.To-s.From)
	for i := s.From; i < s.To; i++ {
		out = append(out, i)
	}
	return out
}

// Bounds returns the span's range of hashes in the API server's notation:
// the inclusive lower bound and the exclusive upper bound, 0x and sixteen
// lowercase hex digits, the upper bound of the last shard being
// 0x10000000000000000 (2^64). Both are normalized: the API server compares
// them as strings of equal length.
func (l Layout) Bounds(s Span) (start, end string) {
	start = fmt.Sprintf("0x%016x", l.start(s.From))
	if s.To >= l.n {
		return start, "0x10000000000000000"
	}
	return start, fmt.Sprintf("0x%016x", l.start(s.To))
}

// Selector renders the shardSelector of the span: one shardRange term.
func (l Layout) Selector(s Span) string {
	start, end := l.Bounds(s)
	return fmt.Sprintf("shardRange(%s, '%s', '%s')", Key, start, end)
}

// SelectorOf renders the shardSelector of several spans, their terms
// joined by ||; empty for none.
func (l Layout) SelectorOf(spans []Span) string {
	terms := make([]string, 0, len(spans))
	for _, s := range spans {
		terms = append(terms, l.Selector(s))
	}
	return strings.Join(terms, " || ")
}

// Has tells whether the namespace's hash falls in the span.
func (l Layout) Has(s Span, namespace string) bool {
	i := l.Of(namespace)
	return i >= s.From && i < s.To
}

// Merge returns the spans of the shards held, adjacent shards merged into
// one span, in order. A shard out of the layout is an error: held shards
// come from Lease names this process made.
func (l Layout) Merge(held []int) ([]Span, error) {
	sorted := slices.Clone(held)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	var spans []Span
	for _, i := range sorted {
		if i < 0 || i >= l.n {
			return nil, fmt.Errorf("shard %d is not one of the %d shards", i, l.n)
		}
		if n := len(spans); n > 0 && spans[n-1].To == i {
			spans[n-1].To++
			continue
		}
		spans = append(spans, Span{From: i, To: i + 1})
	}
	return spans, nil
}
