package records

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vpa-inplace/vpa-inplace/pkg/resources"
)

// canaryRecord is a canary's record: its memory lowered from 2Gi to 1Gi,
// its resize under way.
func canaryRecord(at time.Time) *Record {
	r := &Record{Kind: KindCanary, Attempted: resources.Resources{"app": res("", "1Gi", "", "1Gi")},
		From: resources.Resources{"app": res("", "2Gi", "", "2Gi")}, RecordedAt: at}
	r.Watch = (*Watch)(nil).WithCanary(r.From, r.Attempted, time.Time{})
	return r
}

// The safety records keep what they were lowered from (From) beside what
// they were lowered to, and a hold is keyed by its VPA's own UID: both
// formats read back every field.
func TestSafetyRecordsRoundTrip(t *testing.T) {
	records := map[types.UID]*Record{
		goodUID: canaryRecord(t0),
		"pod-b": canaryRecord(time.Time{}), // under way: no time yet
		"pod-d": {Kind: KindCanary, Attempted: resources.Resources{"app": res("", "1Gi", "", "1Gi")},
			From: resources.Resources{"app": res("", "3Gi", "", "3Gi")}, RecordedAt: t0,
			Watch: (*Watch)(nil).WithCanary(resources.Resources{"app": res("", "3Gi", "", "3Gi")}, resources.Resources{"app": res("", "1Gi", "", "1Gi")}, t0.Add(time.Minute))},
		"pod-c": {Kind: KindRevert, Attempted: resources.Resources{"app": res("", "1Gi", "", "")},
			From: resources.Resources{"app": res("", "3Gi", "", "")}, Message: "OOMKilled", RecordedAt: t0},
		webVPA.UID: {Kind: KindHarmHold, Attempted: resources.Resources{"app": res("", "1Gi", "", "1Gi")},
			From: resources.Resources{"app": res("", "3Gi", "", "3Gi")}, Message: "pod-c: container app OOMKilled", RecordedAt: t0,
			Until: t0.Add(48 * time.Hour), Holds: 2},
	}
	for _, codec := range []struct {
		name   string
		encode func(map[types.UID]*Record, int) (string, []types.UID, error)
		decode func(string, DecodeOptions) (Decoded, error)
	}{{"compact", EncodeCompact, DecodeCompact}, {"annotation", EncodeAnnotation, DecodeAnnotation}} {
		t.Run(codec.name, func(t *testing.T) {
			value, left, err := codec.encode(records, DefaultMaxCompactBytes)
			require.NoError(t, err)
			require.Empty(t, left)
			assert.Equal(t, 4, strings.Count(value, `"kind":`),
				"two canaries lowered from the same values share an attempt; one lowered from other values does not")
			d, err := codec.decode(value, DecodeOptions{MaxBytes: DefaultMaxCompactBytes})
			require.NoError(t, err)
			require.Empty(t, d.Dropped)
			assert.Zero(t, d.Legacy, "written in this version's shape")
			require.Len(t, d.Records, len(records))
			for uid, want := range records {
				got := d.Records[uid]
				require.NotNil(t, got, uid)
				assert.Equal(t, want.Kind, got.Kind, uid)
				assert.True(t, resources.Equal(want.Attempted, got.Attempted), "%s: %s", uid, got.Attempted)
				assert.True(t, resources.Equal(want.From, got.From), "%s: from %s", uid, got.From)
				assert.Equal(t, len(want.From) == 0, len(got.From) == 0, uid)
				assert.True(t, want.RecordedAt.Equal(got.RecordedAt), uid)
				assert.Equal(t, want.Message, got.Message, uid)
				assert.True(t, want.CanarySince().Equal(got.CanarySince()), "%s: since %s", uid, got.CanarySince())
				assert.True(t, want.Until.Equal(got.Until), "%s: until %s", uid, got.Until)
				assert.Equal(t, want.Holds, got.Holds, uid)
			}
		})
	}
}

// The times and the count of the safety records are untrusted input too:
// a time out of range drops the record, a count past MaxHolds is read as
// MaxHolds.
func TestDecodeBoundsTheTimesAndCountsOfSafetyRecords(t *testing.T) {
	attempt := func(extra string) string {
		return `{"kind":"HarmHold","resources":{"app":{"requests":{"memory":"1Gi"}}}` + extra + `}`
	}
	for _, tt := range []struct {
		name, extra string
		drop        DropReason
		holds       int
	}{
		{"a negative time", `,"until":-5`, DropBadTime, 0},
		{"a time past the bound", `,"since":99999999999999`, DropBadTime, 0},
		{"a count past the bound", `,"holds":1000000`, "", MaxHolds},
		{"a negative count", `,"holds":-3`, "", 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d, err := DecodeCompact(compactDocOf(attempt(tt.extra), goodCompactEntry()), DecodeOptions{})
			require.NoError(t, err)
			if tt.drop != "" {
				assert.Empty(t, d.Records)
				assert.Equal(t, map[DropReason]int{tt.drop: 1}, d.Dropped)
				return
			}
			require.Len(t, d.Records, 1)
			assert.Equal(t, tt.holds, d.Records[goodUID].Holds)
		})
	}
}

// From is untrusted input as Attempted is: held to the same bounds, and a
// record the decoder would refuse is never written.
func TestDecodeDropsSafetyRecordsWithABadFrom(t *testing.T) {
	attempt := func(from string) string {
		return `{"kind":"Canary","resources":{"app":{"requests":{"memory":"1Gi"}}},"from":` + from + `}`
	}
	tests := []struct {
		name string
		from string
		drop DropReason
	}{
		{"a resource other than cpu and memory", `{"app":{"requests":{"nvidia.com/gpu":"1"}}}`, DropBadResources},
		{"a quantity refused before it is parsed", `{"app":{"requests":{"memory":"1e-99999999"}}}`, DropBadResources},
		{"more containers than an attempt may hold", "{" + containers(MaxContainers+1) + "}", DropBadResources},
		{"a container without any value", `{"app":{}}`, DropBadResources},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := DecodeCompact(compactDocOf(attempt(tt.from), goodCompactEntry()), DecodeOptions{})
			require.NoError(t, err)
			assert.Empty(t, d.Records)
			assert.Equal(t, map[DropReason]int{tt.drop: 1}, d.Dropped)
		})
	}
	t.Run("a well-formed one is kept", func(t *testing.T) {
		d, err := DecodeCompact(compactDocOf(attempt(`{"app":{"requests":{"memory":"2Gi"}}}`), goodCompactEntry()), DecodeOptions{})
		require.NoError(t, err)
		require.Len(t, d.Records, 1)
		assert.Equal(t, "app: requests memory=2Gi", d.Records[goodUID].From.String())
	})
	t.Run("the encoders leave out what the decoders would drop", func(t *testing.T) {
		bad := canaryRecord(t0)
		bad.From = resources.Resources{}
		for i := range MaxContainers + 1 {
			bad.From[fmt.Sprintf("c%d", i)] = res("1", "", "", "")
		}
		value, left, err := EncodeCompact(map[types.UID]*Record{goodUID: bad, "pod-b": canaryRecord(t0)}, DefaultMaxCompactBytes)
		require.NoError(t, err)
		assert.Equal(t, []types.UID{goodUID}, left)
		d, err := DecodeCompact(value, DecodeOptions{})
		require.NoError(t, err)
		assert.Empty(t, d.Dropped)
		assert.Len(t, d.Records, 1)
	})
}

// The safety store has no annotation of its own to move records from: it
// neither reads nor removes the infeasible store's, and its records, a
// hold keyed by the VPA's UID among them, survive a restart.
func TestSafetyStoreMigratesNothingAndKeepsHoldsAcrossARestart(t *testing.T) {
	infeasible := map[types.UID]*Record{"pod-a": rec(KindNodeCapacity, "8", "no room", t0)}
	f := newCMFixture(t, nil, annotated("web", infeasible))
	live := func(o Owner, uid types.UID) bool { return uid == o.UID || uid == goodUID }
	cfg := ConfigMapStoreConfig{Store: StoreSafety, NoAnnotation: true, Live: live}
	s, stop := f.startCM(cfg)
	assert.Zero(t, s.Len(), "the infeasible annotation is not read")
	hold := &Record{Kind: KindHarmHold, Attempted: resources.Resources{"app": res("", "1Gi", "", "")}, Message: "OOMKilled", RecordedAt: t0}
	s.Put(webVPA, webVPA.UID, hold)
	s.Put(webVPA, goodUID, canaryRecord(t0))
	require.Eventually(t, func() bool { return len(f.cmRecordsOf(StoreSafety, webVPA.UID)) == 2 }, wait, tick)
	stop()
	assert.Empty(t, f.patches(), "the VPA and its annotation are left alone")
	assert.NotEmpty(t, f.annotation("web"))

	again, _ := f.startCM(cfg)
	got := again.Of(webVPA)
	require.Len(t, got, 2)
	assert.Equal(t, KindHarmHold, got[webVPA.UID].Kind)
	assert.Equal(t, "app: requests memory=2Gi limits memory=2Gi", got[goodUID].From.String())
	r, ok := again.GetFor(webVPA, webVPA.UID)
	require.True(t, ok, "a hold is the VPA's own")
	assert.Equal(t, "OOMKilled", r.Message)
	_, ok = again.GetFor(Owner{Namespace: "default", Name: "db", UID: "uid-db"}, webVPA.UID)
	assert.False(t, ok, "nor believed for another VPA (and forgotten, as any record held for another)")
}
