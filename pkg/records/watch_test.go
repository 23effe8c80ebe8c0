package records

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vpa-inplace/vpa-inplace/pkg/resources"
)

// goodCompactTime is the time of goodCompactEntry.
const goodCompactTime = 1777629600

// watchRecord is the record of a pod whose memory a resize lowered from
// 2Gi to 1Gi, its watch begun at began with its container restarted
// restarts times.
func watchRecord(began time.Time, restarts int32) *Record {
	return NewWatchRecord(&Watch{Began: began, Restarts: map[string]int32{"app": restarts},
		Lowered: []Lowering{{From: resources.Resources{"app": res("", "2Gi", "", "")}, To: resources.Resources{"app": res("", "1Gi", "", "")}, Since: began}}}, began)
}

// Every open lowering watch is a record: its lowerings (each with its
// values, its start and its canary role) and its baseline read back, in
// both formats; pods lowered alike at different times share one attempt.
func TestWatchRecordsRoundTrip(t *testing.T) {
	two := &Watch{Began: t0, Restarts: map[string]int32{"app": 3, "init": 0}, Lowered: []Lowering{
		{From: resources.Resources{"app": res("", "2Gi", "", "")}, To: resources.Resources{"app": res("", "1Gi", "", "")}, Since: t0, Canary: true},
		{From: resources.Resources{"app": res("500m", "", "", "")}, To: resources.Resources{"app": res("200m", "", "", "")}, Since: t0.Add(2 * time.Minute)},
		{From: resources.Resources{"app": res("", "", "", "4Gi")}, To: resources.Resources{"app": res("", "", "", "3Gi")}}, // under way
	}}
	canary := canaryRecord(t0.Add(time.Minute))
	canary.Watch = &Watch{Began: t0, Restarts: map[string]int32{"app": 1}, Lowered: []Lowering{{From: canary.From, To: canary.Attempted, Since: t0.Add(time.Minute), Canary: true}}}
	passed := canaryRecord(t0)
	passed.Watch = &Watch{Began: t0, Restarts: map[string]int32{"app": 0}}
	records := map[types.UID]*Record{
		goodUID: watchRecord(t0, 0),
		"pod-b": watchRecord(t0.Add(time.Hour), 0),
		"pod-c": watchRecord(t0, 2),
		"pod-d": NewWatchRecord(two, t0),
		"pod-e": NewWatchRecord(&Watch{Restarts: map[string]int32{"app": 0}, Lowered: []Lowering{{From: resources.Resources{"app": res("", "2Gi", "", "")}, To: resources.Resources{"app": res("", "1Gi", "", "")}}}}, t0),
		"pod-f": canary,
		"pod-g": passed,
	}
	assert.Equal(t, "app: requests cpu=200m memory=1Gi limits memory=3Gi", records["pod-d"].Attempted.String(), "a watch record's values are its lowerings'")
	assert.Equal(t, "app: requests cpu=500m memory=2Gi limits memory=4Gi", records["pod-d"].From.String())
	for _, codec := range []struct {
		name   string
		encode func(map[types.UID]*Record, int) (string, []types.UID, error)
		decode func(string, DecodeOptions) (Decoded, error)
	}{{"compact", EncodeCompact, DecodeCompact}, {"annotation", EncodeAnnotation, DecodeAnnotation}} {
		t.Run(codec.name, func(t *testing.T) {
			value, left, err := codec.encode(records, DefaultMaxCompactBytes)
			require.NoError(t, err)
			require.Empty(t, left)
			assert.Equal(t, 6, strings.Count(value, `"kind":`), "pods lowered alike share an attempt, an hour apart: %s", value)
			d, err := codec.decode(value, DecodeOptions{MaxBytes: DefaultMaxCompactBytes, Now: t0.Add(2 * time.Hour)})
			require.NoError(t, err)
			require.Empty(t, d.Dropped)
			require.Len(t, d.Records, len(records))
			for uid, want := range records {
				got := d.Records[uid]
				require.NotNil(t, got, uid)
				assert.Equal(t, want.Kind, got.Kind, uid)
				assert.True(t, resources.Equal(want.Attempted, got.Attempted), "%s: %s", uid, got.Attempted)
				assert.True(t, want.RecordedAt.Equal(got.RecordedAt), uid)
				require.NotNil(t, got.Watch, uid)
				assert.True(t, want.Watch.Began.Equal(got.Watch.Began), "%s: began %s", uid, got.Watch.Began)
				assert.Equal(t, want.Watch.Restarts, got.Watch.Restarts, uid)
				require.Len(t, got.Watch.Lowered, len(want.Watch.Lowered), uid)
				for i, l := range want.Watch.Lowered {
					g := got.Watch.Lowered[i]
					assert.True(t, resources.Equal(l.From, g.From) && resources.Equal(l.To, g.To), "%s lowering %d: %s to %s", uid, i, g.From, g.To)
					assert.True(t, l.Since.Equal(g.Since), "%s lowering %d since %s", uid, i, g.Since)
					assert.Equal(t, l.Canary, g.Canary, uid)
				}
			}
		})
	}
}

// A watch is untrusted input as the rest of a value is: bounded before it
// is read, a record the decoder would refuse is never written.
func TestDecodeDropsBadWatches(t *testing.T) {
	attempt := func(kind, watch string) string {
		a := `{"kind":"` + kind + `","resources":{"app":{"requests":{"memory":"1Gi"}}},"from":{"app":{"requests":{"memory":"2Gi"}}}`
		if watch != "" {
			a += `,"watch":` + watch
		}
		return a + "}"
	}
	lowerings := func(n int) string {
		l := make([]string, n)
		for i := range l {
			l[i] = `{"since":0}`
		}
		return `{"lowered":[` + strings.Join(l, ",") + `]}`
	}
	restarts := func(n int) string {
		r := make([]string, n)
		for i := range r {
			r[i] = fmt.Sprintf(`"c%d":0`, i)
		}
		return `{"restarts":{` + strings.Join(r, ",") + `},"lowered":[]}`
	}
	tests := []struct {
		name, kind, watch string
		drop              DropReason
	}{
		{"a watch record without its watch", "Watch", "", DropBadWatch},
		{"a watch on a kind that has none", "NodeCapacity", `{"lowered":[]}`, DropBadWatch},
		{"more lowerings than a watch holds", "Watch", lowerings(MaxWatchLowerings + 1), DropBadWatch},
		{"more containers than a watch counts", "Watch", restarts(MaxWatchRestarts + 1), DropBadWatch},
		{"a negative restart count", "Watch", `{"restarts":{"app":-1},"lowered":[]}`, DropBadWatch},
		{"a container name longer than a DNS label", "Watch", `{"restarts":{"` + strings.Repeat("a", 64) + `":0},"lowered":[]}`, DropBadWatch},
		{"a time beyond any", "Watch", `{"began":99999999999,"lowered":[]}`, DropBadWatch},
		{"a time in the future", "Watch", `{"lowered":[{"since":86400}]}`, DropFuture},
		{"a lowering of another resource", "Watch", `{"lowered":[{"to":{"app":{"requests":{"nvidia.com/gpu":"1"}}}}]}`, DropBadResources},
		{"a lowering's quantity refused before it is parsed", "Watch", `{"lowered":[{"from":{"app":{"requests":{"memory":"1e-99999999"}}}}]}`, DropBadResources},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := DecodeCompact(compactDocOf(attempt(tt.kind, tt.watch), goodCompactEntry()), DecodeOptions{Now: time.Unix(goodCompactTime, 0)})
			require.NoError(t, err)
			assert.Empty(t, d.Records)
			assert.Equal(t, map[DropReason]int{tt.drop: 1}, d.Dropped)
		})
	}
	t.Run("a well-formed one is kept", func(t *testing.T) {
		d, err := DecodeCompact(compactDocOf(attempt("Watch", `{"began":-60,"restarts":{"app":2},"lowered":[{"since":-60,"canary":true}]}`), goodCompactEntry()),
			DecodeOptions{Now: time.Unix(goodCompactTime, 0)})
		require.NoError(t, err)
		require.Len(t, d.Records, 1)
		w := d.Records[goodUID].Watch
		require.NotNil(t, w)
		assert.Equal(t, time.Unix(goodCompactTime-60, 0).UTC(), w.Began)
		assert.Equal(t, map[string]int32{"app": 2}, w.Restarts)
		require.Len(t, w.Lowered, 1)
		assert.True(t, w.Lowered[0].Canary)
		assert.Equal(t, "app: requests memory=1Gi", w.Lowered[0].To.String(), "a lowering without its values has the record's")
	})
	t.Run("the encoders leave out what the decoders would drop", func(t *testing.T) {
		bad := watchRecord(t0, 0)
		for range MaxWatchLowerings {
			bad.Watch.Lowered = append(bad.Watch.Lowered, bad.Watch.Lowered[0])
		}
		noWatch := watchRecord(t0, 0)
		noWatch.Watch = nil
		value, left, err := EncodeCompact(map[types.UID]*Record{goodUID: bad, "pod-b": watchRecord(t0, 0), "pod-c": noWatch}, DefaultMaxCompactBytes)
		require.NoError(t, err)
		assert.ElementsMatch(t, []types.UID{goodUID, "pod-c"}, left)
		d, err := DecodeCompact(value, DecodeOptions{})
		require.NoError(t, err)
		assert.Empty(t, d.Dropped)
		assert.Len(t, d.Records, 1)
	})
}

// The watch records of 10,000 pods of one VPA, lowered a second apart by
// one recommendation, fit in its ConfigMap: they share one attempt.
func TestWatchRecordsOfTenThousandPodsFitAConfigMap(t *testing.T) {
	recs := map[types.UID]*Record{}
	for i := range 10000 {
		recs[types.UID(fmt.Sprintf("%08d-1b1e-4a83-9f4e-0d2c6a1d7e10", i))] = watchRecord(t0.Add(time.Duration(i)*time.Second), 0)
	}
	value, left, err := EncodeCompact(recs, DefaultMaxCompactBytes)
	require.NoError(t, err)
	assert.Empty(t, left)
	assert.Equal(t, 1, strings.Count(value, `"kind":`))
	t.Logf("%d bytes, %.1f a pod", len(value), float64(len(value))/float64(len(recs)))
}

// Update is one step: many workers changing one pod's record at once lose
// none of their changes (a Get followed by a Put would), in memory and in a
// durable store, whose ConfigMap then holds the last.
func TestUpdateIsOneStep(t *testing.T) {
	const workers, each = 16, 50
	count := func(r *Record) int {
		n := 0
		if r != nil {
			_, _ = fmt.Sscanf(r.Message, "%d", &n)
		}
		return n
	}
	run := func(t *testing.T, s Store) {
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for range each {
					s.Update(webVPA, goodUID, func(cur *Record, ok bool) *Record {
						next := watchRecord(t0, 0)
						next.Message = fmt.Sprint(count(cur) + 1)
						return next
					})
				}
			})
		}
		wg.Wait()
		r, ok := s.GetFor(webVPA, goodUID)
		require.True(t, ok)
		assert.Equal(t, workers*each, count(r))
		s.Update(Owner{}, goodUID, func(cur *Record, ok bool) *Record { return nil })
		_, ok = s.Get(goodUID)
		assert.False(t, ok, "nil forgets it")
		s.Update(Owner{}, goodUID, func(*Record, bool) *Record { return watchRecord(t0, 0) })
		_, ok = s.Get(goodUID)
		assert.False(t, ok, "a zero owner puts none where there is none")
	}
	t.Run("in memory", func(t *testing.T) { run(t, NewInMemoryStore()) })
	t.Run("in a ConfigMap", func(t *testing.T) {
		f := newCMFixture(t, nil, vpa("web"))
		s, _ := f.startCM(ConfigMapStoreConfig{Store: StoreSafety, NoAnnotation: true})
		run(t, s)
		s.Update(webVPA, goodUID, func(*Record, bool) *Record { return watchRecord(t0, 4) })
		require.Eventually(t, func() bool {
			r := f.cmRecordsOf(StoreSafety, webVPA.UID)[goodUID]
			return r != nil && r.Watch != nil && r.Watch.Restarts["app"] == 4
		}, wait, tick)
	})
}
