package records

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vpa-inplace/vpa-inplace/pkg/quantity"
	"github.com/vpa-inplace/vpa-inplace/pkg/resources"
)

// FuzzDecodeAnnotation feeds random and adversarial annotations to the
// decoder: it never panics, keeps only records that hold to its bounds,
// and what it keeps encodes and decodes to the same records. The work of
// each decode is bounded (counted below); BenchmarkDecodeAnnotation gives
// the figures.
func FuzzDecodeAnnotation(f *testing.F) {
	valid, _, err := EncodeAnnotation(map[types.UID]*Record{
		goodUID: rec(KindNodeCapacity, "8", "no room", t0),
		"b":     {Kind: KindJobRejected, Attempted: resources.Resources{"app": res("250m", "200Mi", "", "")}, RecordedAt: t0, Generation: 3},
		"c":     {Kind: KindMemoryLimitRefused, Attempted: resources.Resources{"app": res("", "", "", "100Mi")}, RecordedAt: t0},
	}, DefaultMaxAnnotationBytes)
	require.NoError(f, err)
	for _, seed := range []string{
		valid,
		"",
		"{",
		"null",
		`{"version":1}`,
		`{"version":1,"attempts":null,"pods":null}`,
		doc(goodAttempt, `"a":{"attempt":0,"recordedAt":"2026-05-01T10:00:00Z"}`),
		doc(`{"kind":"Infeasible","resources":{}}`, `"`+goodUID+`":{"attempt":0,"recordedAt":"2099-01-01T00:00:00Z"}`),
		doc(`{"kind":"Infeasible","resources":{"c":{"requests":{"cpu":"1e-99999999"}}}}`, `"a":{"attempt":0}`),
		doc(`{"kind":"Infeasible","resources":{"c":{"limits":{"memory":"1e-9999999"}}}}`, `"a":{"attempt":0}`),
		doc(`{"kind":"Infeasible","resources":{"c":{"requests":{"cpu":"`+strings.Repeat("9", 60)+`"}}}}`, `"a":{"attempt":0}`),
		doc(`{"kind":"Infeasible","resources":{"c":{"requests":{"cpu":"0.`+strings.Repeat("0", 28)+`1"}}}}`, `"a":{"attempt":0}`),
		doc(goodAttempt, `"a":{"attempt":-1},"b":{"attempt":99999999999},"c":{"attempt":0,"generation":-1}`),
		doc(goodAttempt, `"a":{"attempt":0,"recordedAt":"+275760-09-13T00:00:00Z"}`),
		`{"version":1,"attempts":[` + strings.Repeat(`{"kind":"Invalid","resources":{"c":{"requests":{"cpu":"1"}}}},`, 300) + goodAttempt + `],"pods":{"a":{"attempt":300}}}`,
		strings.Repeat("[", 10000),
	} {
		f.Add(seed)
	}
	fuzzDecoder(f, DecodeAnnotation, EncodeAnnotation, MaxEntries)
}

// FuzzDecodeCompact is FuzzDecodeAnnotation for the compact format the
// ConfigMaps hold.
func FuzzDecodeCompact(f *testing.F) {
	valid, _, err := EncodeCompact(map[types.UID]*Record{
		goodUID: rec(KindNodeCapacity, "8", "no room", t0),
		"b":     {Kind: KindJobRejected, Attempted: resources.Resources{"app": res("250m", "200Mi", "", "")}, RecordedAt: t0, Generation: 3},
		"c":     {Kind: KindMemoryLimitRefused, Attempted: resources.Resources{"app": res("", "", "", "100Mi")}, RecordedAt: t0},
		"d":     canaryRecord(t0),
		"e":     watchRecord(t0, 2),
	}, DefaultMaxCompactBytes)
	require.NoError(f, err)
	for _, seed := range []string{
		valid,
		"",
		`{"version":2}`,
		`{"version":2,"attempts":[{"pods":"a:1"}]}`,
		compactDocOf(goodAttempt, "a:1 b:2:3  c: :: d:99999999999999999999 e:-1 f:1:-1"),
		compactDocOf(`{"kind":"Infeasible","resources":{"c":{"requests":{"cpu":"1e-99999999"}}}}`, "a:1"),
		compactDocOf(goodAttempt, strings.Repeat("x:1 ", 1000)),
		compactDocOf(`{"kind":"Canary","resources":{"c":{"requests":{"memory":"1Gi"}}},"from":{"c":{"requests":{"memory":"1e-99999999"}}}}`, "a:1"),
		compactDocOf(`{"kind":"HarmHold","resources":{"c":{"limits":{"memory":"1Gi"}}},"from":{"`+strings.Repeat("c", 100)+`":{}}}`, "a:1"),
		compactDocOf(`{"kind":"Watch","resources":{"c":{"requests":{"memory":"1Gi"}}},"watch":{"began":-9,"restarts":{"c":1},"lowered":[{"since":-9,"canary":true},{"to":{"c":{"requests":{"cpu":"1"}}},"from":{"c":{"requests":{"cpu":"2"}}}}]}}`, "a:1777629600"),
		compactDocOf(`{"kind":"Watch","resources":{"c":{"requests":{"memory":"1Gi"}}},"watch":{"began":99999999999999,"restarts":{"c":-1},"lowered":null}}`, "a:1"),
		compactDocOf(`{"kind":"Canary","resources":{"c":{"requests":{"memory":"1Gi"}}},"watch":{"lowered":[`+strings.Repeat(`{"to":{"c":{"requests":{"cpu":"1e-99999999"}}}},`, 9)+`{}]}}`, "a:1"),
	} {
		f.Add(seed)
	}
	fuzzDecoder(f, DecodeCompact, EncodeCompact, MaxCompactEntries)
}

// fuzzDecoder checks what decode keeps of each fuzzed value against the
// decoder's bounds, and that it encodes and decodes to the same records.
func fuzzDecoder(f *testing.F, decode func(string, DecodeOptions) (Decoded, error),
	encode func(map[types.UID]*Record, int) (string, []types.UID, error), maxEntries int) {
	now := t0.Add(time.Hour)
	// The work of a decode is bounded by counting: every quantity parsed
	// has passed quantity.Check (which bounds the cost of one parse), and
	// at most four are parsed per container of an attempt, each of which
	// takes a few bytes of the value. The wall clock bound only catches a
	// decode gone badly wrong (seconds), never a busy machine.
	parsed, refused := 0, 0
	parseQuantity = func(s string) (resource.Quantity, error) {
		parsed++
		if quantity.Check(s) != nil {
			refused++
		}
		return resource.ParseQuantity(s)
	}
	f.Cleanup(func() { parseQuantity = resource.ParseQuantity })
	f.Fuzz(func(t *testing.T, value string) {
		parsed, refused = 0, 0
		start := time.Now()
		d, err := decode(value, DecodeOptions{Now: now, Keep: func(uid types.UID) bool { return !strings.HasPrefix(string(uid), "x") }})
		if elapsed := time.Since(start); elapsed > 5*time.Second {
			t.Fatalf("decoding %d bytes took %s", len(value), elapsed)
		}
		require.Zero(t, refused, "a quantity parsed without passing quantity.Check")
		require.LessOrEqual(t, parsed, len(value)/4, "more quantities parsed than the value can hold")
		if err != nil {
			require.Empty(t, d.Records)
			require.Equal(t, 1, d.DroppedTotal())
			return
		}
		require.LessOrEqual(t, len(d.Records), maxEntries)
		for uid, r := range d.Records {
			require.True(t, uidShaped(string(uid)), "uid %q", uid)
			require.False(t, strings.HasPrefix(string(uid), "x"), "kept a record Keep refused")
			require.True(t, knownKind(r.Kind), "kind %q", r.Kind)
			require.False(t, r.RecordedAt.After(now.Add(FutureSkew)))
			require.GreaterOrEqual(t, r.Generation, int64(0))
			require.LessOrEqual(t, len(r.Message), maxMessageBytes)
			require.NotEmpty(t, r.Attempted)
			require.LessOrEqual(t, len(r.Attempted), MaxContainers)
			values := 0
			resources.ForEachValue(r.Attempted, nil, func(_, _ string, _ corev1.ResourceName, q, _ *resource.Quantity) {
				if q != nil {
					values++
					require.NoError(t, quantity.Check(q.String()))
				}
			})
			require.Positive(t, values)
			require.LessOrEqual(t, len(r.From), MaxContainers)
			require.Equal(t, r.Kind == KindWatch, r.Kind == KindWatch && r.Watch != nil, "a watch record has its watch")
			if w := r.Watch; w != nil {
				require.LessOrEqual(t, len(w.Lowered), MaxWatchLowerings)
				require.LessOrEqual(t, len(w.Restarts), MaxWatchRestarts)
				require.False(t, w.latest().After(now.Add(FutureSkew)))
				for _, l := range w.Lowered {
					require.NotEmpty(t, l.To)
				}
			}
			resources.ForEachValue(r.From, nil, func(_, _ string, _ corev1.ResourceName, q, _ *resource.Quantity) {
				if q != nil {
					require.NoError(t, quantity.Check(q.String()))
				}
			})
		}
		// What is kept is written back as it was read.
		again, left, err := encode(d.Records, 1<<30)
		require.NoError(t, err)
		require.Empty(t, left)
		if len(d.Records) == 0 {
			return
		}
		back, err := decode(again, DecodeOptions{MaxBytes: 1 << 30, MaxEntries: maxEntries, Now: now})
		require.NoError(t, err)
		require.Len(t, back.Records, len(d.Records))
		for uid, r := range d.Records {
			require.Equal(t, Same, back.Records[uid].Compare(r.Attempted))
			require.Equal(t, r.Kind, back.Records[uid].Kind)
			require.True(t, resources.Equal(r.From, back.Records[uid].From))
			if w := r.Watch; w != nil {
				b := back.Records[uid].Watch
				require.NotNil(t, b)
				require.True(t, w.Began.Equal(b.Began))
				require.Equal(t, len(w.Restarts), len(b.Restarts))
				require.Len(t, b.Lowered, len(w.Lowered))
				for i, l := range w.Lowered {
					require.True(t, l.Since.Equal(b.Lowered[i].Since))
					require.True(t, resources.Equal(l.To, b.Lowered[i].To))
				}
			}
		}
	})
}
