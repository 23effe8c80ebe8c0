package records

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vpa-inplace/vpa-inplace/pkg/resources"
)

// A canary's watch start is kept in one place: the Since of its lowering,
// flagged Canary, in its record's Watch. Records written by earlier
// versions kept it beside the watch too ("since", seconds since the
// epoch), or kept no watch at all: they are read into this shape, counted
// as Legacy so that their value is written again, and written without
// "since".
func TestCanaryRecordsOfEarlierShapesAreReadIntoTheWatch(t *testing.T) {
	at := time.Unix(1777629600, 0).UTC()
	entry := goodUID + ":1777629600"
	from := resources.Resources{"app": res("", "2Gi", "", "")}
	to := resources.Resources{"app": res("", "1Gi", "", "")}
	const base = `{"kind":"Canary","resources":{"app":{"requests":{"memory":"1Gi"}}},"from":{"app":{"requests":{"memory":"2Gi"}}}`
	for _, tc := range []struct {
		name   string
		extra  string
		legacy int
		// want: the watch read.
		want *Watch
	}{
		{"since, no watch (its watch had begun)", `,"since":1777629660`, 1,
			&Watch{Began: at.Add(time.Minute), Lowered: []Lowering{{From: from, To: to, Since: at.Add(time.Minute), Canary: true}}}},
		{"no since, no watch (its resize under way)", ``, 1,
			&Watch{Lowered: []Lowering{{From: from, To: to, Canary: true}}}},
		{"since and a watch that agrees", `,"since":1777629660,"watch":{"began":60,"restarts":{"app":0},"lowered":[{"since":60,"canary":true}]}`, 1,
			&Watch{Began: at.Add(time.Minute), Restarts: map[string]int32{"app": 0}, Lowered: []Lowering{{From: from, To: to, Since: at.Add(time.Minute), Canary: true}}}},
		{"since and a watch saved while its resize was under way", `,"since":1777629660,"watch":{"restarts":{"app":2},"lowered":[{"canary":true}]}`, 1,
			&Watch{Began: at.Add(time.Minute), Restarts: map[string]int32{"app": 2}, Lowered: []Lowering{{From: from, To: to, Since: at.Add(time.Minute), Canary: true}}}},
		{"since and a watch whose canary lowering passed", `,"since":1777629660,"watch":{"began":60,"restarts":{"app":0},"lowered":[{"since":120}]}`, 1,
			&Watch{Began: at.Add(time.Minute), Restarts: map[string]int32{"app": 0}, Lowered: []Lowering{{From: from, To: to, Since: at.Add(2 * time.Minute)}}}},
		{"this version's shape", `,"watch":{"began":60,"restarts":{"app":0},"lowered":[{"since":60,"canary":true}]}`, 0,
			&Watch{Began: at.Add(time.Minute), Restarts: map[string]int32{"app": 0}, Lowered: []Lowering{{From: from, To: to, Since: at.Add(time.Minute), Canary: true}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := DecodeCompact(compactDocOf(base+tc.extra+`}`, entry), DecodeOptions{})
			require.NoError(t, err)
			require.Empty(t, d.Dropped)
			assert.Equal(t, tc.legacy, d.Legacy)
			r := d.Records[goodUID]
			require.NotNil(t, r)
			assertWatch(t, tc.want, r.Watch)

			// Written again: one shape, read back as it was read.
			value, _, err := EncodeCompact(d.Records, DefaultMaxCompactBytes)
			require.NoError(t, err)
			assert.NotContains(t, value, `"since":1777629660`, "no watch start beside the watch")
			again, err := DecodeCompact(value, DecodeOptions{})
			require.NoError(t, err)
			assert.Zero(t, again.Legacy)
			assertWatch(t, tc.want, again.Records[goodUID].Watch)
		})
	}
	t.Run("a since on a record of another kind is not read", func(t *testing.T) {
		d, err := DecodeCompact(compactDocOf(`{"kind":"Revert","resources":{"app":{"requests":{"memory":"1Gi"}}},"since":1777629660}`, entry), DecodeOptions{})
		require.NoError(t, err)
		assert.Zero(t, d.Legacy)
		assert.Nil(t, d.Records[goodUID].Watch)
	})
	t.Run("a since in the future is dropped as the watch's times are", func(t *testing.T) {
		d, err := DecodeCompact(compactDocOf(base+`,"since":4070908800}`, entry), DecodeOptions{Now: at})
		require.NoError(t, err)
		assert.Equal(t, map[DropReason]int{DropFuture: 1}, d.Dropped)
		assert.Zero(t, d.Legacy)
	})
}

func assertWatch(t *testing.T, want, got *Watch) {
	t.Helper()
	require.NotNil(t, got)
	assert.True(t, want.Began.Equal(got.Began), "began %s, want %s", got.Began, want.Began)
	assert.Equal(t, want.Restarts, got.Restarts)
	require.Len(t, got.Lowered, len(want.Lowered))
	for i, l := range want.Lowered {
		g := got.Lowered[i]
		assert.True(t, resources.Equal(l.From, g.From), "lowering %d from %s", i, g.From)
		assert.True(t, resources.Equal(l.To, g.To), "lowering %d to %s", i, g.To)
		assert.True(t, l.Since.Equal(g.Since), "lowering %d since %s, want %s", i, g.Since, l.Since)
		assert.Equal(t, l.Canary, g.Canary, "lowering %d canary", i)
	}
}

// The canary's lowering in a watch: sent (under way), then begun; one
// lowering flagged Canary, the newest; a resize under way replaced by the
// next one sent.
func TestWithCanary(t *testing.T) {
	gi := func(n string) resources.Resources { return resources.Resources{"app": res("", n, "", "")} }
	older := &Watch{Began: t0, Restarts: map[string]int32{"app": 1}, Lowered: []Lowering{{From: gi("4Gi"), To: gi("3Gi"), Since: t0, Canary: true}}}

	sent := older.WithCanary(gi("3Gi"), gi("2Gi"), time.Time{})
	assertWatch(t, &Watch{Began: t0, Restarts: map[string]int32{"app": 1}, Lowered: []Lowering{
		{From: gi("4Gi"), To: gi("3Gi"), Since: t0}, {From: gi("3Gi"), To: gi("2Gi"), Canary: true}}}, sent)
	assert.True(t, older.Lowered[0].Canary, "the watch given is not changed")
	assert.True(t, (&Record{Watch: sent}).CanarySince().IsZero(), "under way")

	resent := sent.WithCanary(gi("3Gi"), gi("1Gi"), time.Time{})
	require.Len(t, resent.Lowered, 2, "the resize under way replaced")
	assert.True(t, resources.Equal(gi("1Gi"), resent.Lowered[1].To))

	begun := resent.WithCanary(gi("3Gi"), gi("1Gi"), t0.Add(time.Minute))
	require.Len(t, begun.Lowered, 2)
	assert.Equal(t, t0.Add(time.Minute), (&Record{Watch: begun}).CanarySince())
	assert.Equal(t, t0, begun.Began, "the watch began with its first lowering")

	fresh := (*Watch)(nil).WithCanary(gi("2Gi"), gi("1Gi"), t0)
	assertWatch(t, &Watch{Began: t0, Lowered: []Lowering{{From: gi("2Gi"), To: gi("1Gi"), Since: t0, Canary: true}}}, fresh)

	full := &Watch{Began: t0}
	for i := range MaxWatchLowerings {
		full.Lowered = append(full.Lowered, Lowering{From: gi("9Gi"), To: gi("8Gi"), Since: t0.Add(time.Duration(i) * time.Second)})
	}
	bounded := full.WithCanary(gi("8Gi"), gi("7Gi"), time.Time{})
	require.Len(t, bounded.Lowered, MaxWatchLowerings, "bounded, the oldest dropped")
	assert.Equal(t, t0.Add(time.Second), bounded.Lowered[0].Since)
	assert.True(t, bounded.Lowered[MaxWatchLowerings-1].Canary)
}

// A safety store that loads canary records of an earlier shape writes
// them again in this one's, without waiting for a change of its VPA's
// records.
func TestConfigMapStoreWritesCanaryRecordsOfAnEarlierShapeAgain(t *testing.T) {
	old := compactDocOf(`{"kind":"Canary","resources":{"app":{"requests":{"memory":"1Gi"}}},"from":{"app":{"requests":{"memory":"2Gi"}}},"since":1777629660}`,
		goodUID+":1777629600")
	cm := recordsConfigMap(StoreSafety, webVPA, nil)
	cm.Data = map[string]string{ConfigMapDataKey: old}
	f := newCMFixture(t, []runtime.Object{cm}, vpa("web"))
	s, _ := f.startCM(ConfigMapStoreConfig{Store: StoreSafety, NoAnnotation: true, Now: func() time.Time { return t0 },
		Live: liveIn(map[string][]types.UID{"default": {goodUID}})})
	r, ok := s.Get(goodUID)
	require.True(t, ok)
	assert.Equal(t, time.Unix(1777629660, 0).UTC(), r.CanarySince())
	require.Eventually(t, func() bool {
		got, err := f.kube.CoreV1().ConfigMaps(recordsNamespace).Get(f.ctx, cm.Name, metav1.GetOptions{})
		// The watch's times are relative to the record's own: its start is
		// 60 seconds in; the epoch's seconds are gone.
		return err == nil && !strings.Contains(got.Data[ConfigMapDataKey], "1777629660") &&
			strings.Contains(got.Data[ConfigMapDataKey], `"lowered":[{"since":60,"canary":true}]`)
	}, wait, tick, "written again in one shape")
	rs := f.cmRecordsOf(StoreSafety, webVPA.UID)
	require.Contains(t, rs, types.UID(goodUID))
	assert.Equal(t, time.Unix(1777629660, 0).UTC(), rs[goodUID].CanarySince())
}
