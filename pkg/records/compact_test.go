package records

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vpa-inplace/vpa-inplace/pkg/resources"
)

func TestCompactRoundTrip(t *testing.T) {
	records := map[types.UID]*Record{
		goodUID: rec(KindNodeCapacity, "8", "no room", t0),
		"b":     rec(KindNodeCapacity, "8", "no room", t0.Add(time.Minute)),
		"c":     {Kind: KindJobRejected, Attempted: resources.Resources{"app": res("250m", "200Mi", "", "")}, RecordedAt: t0, Generation: 3},
		"d":     {Kind: KindInvalid, Attempted: resources.Resources{"app": res("1", "", "", "")}},
	}
	value, left, err := EncodeCompact(records, DefaultMaxCompactBytes)
	require.NoError(t, err)
	assert.Empty(t, left)
	assert.Contains(t, value, `"pods":"b:`+fmt.Sprint(t0.Add(time.Minute).Unix())+" "+goodUID+":"+fmt.Sprint(t0.Unix())+`"`,
		"pods sharing an attempt share it, newest first")
	d, err := DecodeCompact(value, DecodeOptions{})
	require.NoError(t, err)
	assert.Empty(t, d.Dropped)
	require.Len(t, d.Records, len(records))
	for uid, want := range records {
		got := d.Records[uid]
		require.NotNil(t, got, uid)
		assert.Equal(t, want.Kind, got.Kind, uid)
		assert.Equal(t, Same, got.Compare(want.Attempted), uid)
		assert.True(t, want.RecordedAt.Equal(got.RecordedAt), "%s: %v, want %v", uid, got.RecordedAt, want.RecordedAt)
		assert.Equal(t, want.Generation, got.Generation, uid)
		assert.Equal(t, want.Message, got.Message, uid)
	}
	again, _, err := EncodeCompact(d.Records, DefaultMaxCompactBytes)
	require.NoError(t, err)
	assert.Equal(t, value, again, "the same records give the same value")
}

func TestCompactHoldsTenThousandPodsInAConfigMap(t *testing.T) {
	records := map[types.UID]*Record{}
	for i := range 10000 {
		records[uuid(0, i)] = rec(KindNodeCapacity, "8", "0/1 nodes are available: 1 Insufficient cpu.", t0.Add(time.Duration(i)*time.Second))
	}
	value, left, err := EncodeCompact(records, DefaultMaxCompactBytes)
	require.NoError(t, err)
	assert.Empty(t, left, "every record is kept")
	assert.Less(t, len(value), 500_000, "about 48 bytes a pod")
	t.Logf("10,000 records: %d bytes (%.1f a pod)", len(value), float64(len(value))/10000)

	// Past the bound the oldest are left out, never the value refused.
	value, left, err = EncodeCompact(records, 100_000)
	require.NoError(t, err)
	assert.LessOrEqual(t, len(value), 100_000)
	assert.NotEmpty(t, left)
	d, err := DecodeCompact(value, DecodeOptions{})
	require.NoError(t, err)
	for _, uid := range left {
		_, written := d.Records[uid]
		require.False(t, written, uid)
		require.True(t, records[uid].RecordedAt.Before(records[uuid(0, 9999)].RecordedAt))
	}
	assert.Contains(t, d.Records, uuid(0, 9999), "the newest is kept")
}

func compactDocOf(attempt, pods string) string {
	return `{"version":2,"attempts":[` + strings.TrimSuffix(attempt, "}") + `,"pods":"` + pods + `"}]}`
}

func TestDecodeCompactDropsMalformedRecords(t *testing.T) {
	good := goodUID + ":1777629600"
	tests := []struct {
		name string
		pods string
		drop DropReason
	}{
		{"a key that is no UID", "a/b:1777629600", DropBadUID},
		{"no time", goodUID, DropBadTime},
		{"a time that is no number", goodUID + ":soon", DropBadTime},
		{"a negative time", goodUID + ":-5", DropBadTime},
		{"a time of too many digits", goodUID + ":" + strings.Repeat("9", 40), DropBadTime},
		{"a generation of too many digits", goodUID + ":1777629600:" + strings.Repeat("9", 40), DropBadTime},
		{"a generation that is no number", goodUID + ":1777629600:x", DropBadTime},
		{"a time far in the future", goodUID + ":4070908800", DropFuture},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := DecodeCompact(compactDocOf(goodAttempt, good+" "+tt.pods), DecodeOptions{Now: t0})
			require.NoError(t, err)
			assert.Equal(t, map[DropReason]int{tt.drop: 1}, d.Dropped)
			assert.Len(t, d.Records, 1, "the good record is kept")
		})
	}
}

func TestDecodeCompactBounds(t *testing.T) {
	var pods []string
	for i := range 30 {
		pods = append(pods, fmt.Sprintf("pod-%d:1777629600", i))
	}
	d, err := DecodeCompact(compactDocOf(goodAttempt, strings.Join(pods, " ")), DecodeOptions{MaxEntries: 10})
	require.NoError(t, err)
	assert.Len(t, d.Records, 10)
	assert.Equal(t, map[DropReason]int{DropTooMany: 20}, d.Dropped)

	_, err = DecodeCompact(compactDocOf(goodAttempt, strings.Join(pods, " ")), DecodeOptions{MaxBytes: 100})
	require.Error(t, err, "a value over the bound is refused unread")

	d, err = DecodeCompact(doc(goodAttempt, `"`+goodUID+`":{"attempt":0}`), DecodeOptions{})
	require.Error(t, err, "an annotation (version 1) is no compact value")
	assert.Equal(t, map[DropReason]int{DropUnreadable: 1}, d.Dropped)

	d, err = DecodeCompact(compactDocOf(`{"kind":"Infeasible","resources":{"c":{"requests":{"cpu":"1e-99999999"}}}}`, goodCompactEntry()), DecodeOptions{})
	require.NoError(t, err)
	assert.Equal(t, map[DropReason]int{DropBadResources: 1}, d.Dropped, "quantities are bounded before they are parsed")
}

func goodCompactEntry() string { return goodUID + ":1777629600" }

// memoryRecord is a memory record as the kubelet's refusals make them: the
// message names the pod's usage, so that every pod has an attempt of its
// own.
func memoryRecord(i int) *Record {
	return &Record{
		Kind:       KindMemoryLimitRefused,
		Attempted:  resources.Resources{"app": res("", "", "", fmt.Sprintf("%dMi", 100+i%50))},
		Message:    fmt.Sprintf("cannot decrease memory limits: the container uses %d bytes", 100_000_000+i),
		RecordedAt: t0.Add(time.Duration(i) * time.Second),
	}
}

// canaryFrom is a canary record whose pod was lowered from values of its
// own: an attempt per pod, its From counted in the value's size.
func canaryFrom(i int) *Record {
	r := canaryRecord(t0.Add(time.Duration(i) * time.Second))
	r.From = resources.Resources{"app": res("", fmt.Sprintf("%dMi", 2048+i), "", "")}
	return r
}

// Whatever an encoder writes, its decoder reads back whole: the bounds of
// the two are the same, for records and for attempts (issue #32, item 3:
// 21,000 records written and 20,000 read; 1,000 memory records written,
// one attempt each, and 256 read). What the encoder leaves out is returned,
// oldest first, never silently lost.
func TestEncodersWriteNoMoreThanTheirDecodersRead(t *testing.T) {
	shared := func(i int) *Record {
		return rec(KindNodeCapacity, "8", "0/1 nodes are available: 1 Insufficient cpu.", t0.Add(time.Duration(i)*time.Second))
	}
	type codec struct {
		encode func(map[types.UID]*Record, int) (string, []types.UID, error)
		decode func(string, DecodeOptions) (Decoded, error)
	}
	compact, annotation := codec{EncodeCompact, DecodeCompact}, codec{EncodeAnnotation, DecodeAnnotation}
	tests := []struct {
		name     string
		codec    codec
		n        int
		record   func(int) *Record
		maxBytes int
	}{
		{"compact: 21,000 records of one attempt", compact, 21000, shared, DefaultMaxCompactBytes},
		{"compact: 1,000 records of an attempt each", compact, 1000, memoryRecord, DefaultMaxCompactBytes},
		{"compact: 10,000 records of an attempt each", compact, 10000, memoryRecord, DefaultMaxCompactBytes},
		{"compact: 21,000 canary records lowered from values of their own", compact, 21000, canaryFrom, DefaultMaxCompactBytes},
		{"annotation: 300 records of an attempt each", annotation, 300, memoryRecord, 1 << 20},
		{"annotation: 5,000 records of one attempt", annotation, 5000, shared, 1 << 20},
		{"annotation: 2,000 records of one attempt, default size", annotation, 2000, shared, DefaultMaxAnnotationBytes},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			records := make(map[types.UID]*Record, tt.n)
			for i := range tt.n {
				records[uuid(0, i)] = tt.record(i)
			}
			value, left, err := tt.codec.encode(records, tt.maxBytes)
			require.NoError(t, err)
			require.LessOrEqual(t, len(value), tt.maxBytes)
			d, err := tt.codec.decode(value, DecodeOptions{MaxBytes: tt.maxBytes})
			require.NoError(t, err)
			assert.Empty(t, d.Dropped, "the decoder reads all the encoder wrote")
			assert.Equal(t, tt.n, len(d.Records)+len(left), "every record is either written or returned as left out")
			oldestKept := t0.Add(time.Duration(tt.n) * time.Second)
			for _, r := range d.Records {
				if r.RecordedAt.Before(oldestKept) {
					oldestKept = r.RecordedAt
				}
			}
			for _, uid := range left {
				_, written := d.Records[uid]
				require.False(t, written, uid)
				require.False(t, records[uid].RecordedAt.After(oldestKept), "the oldest are left out")
			}
			t.Logf("%d records: %d written in %d bytes, %d left out", tt.n, len(d.Records), len(value), len(left))
		})
	}
}

// Records of attempts past the bound are counted, not lost silently.
func TestDecodeCompactCountsTheRecordsOfAttemptsPastTheBound(t *testing.T) {
	value := `{"version":2,"attempts":[` +
		strings.TrimSuffix(goodAttempt, "}") + `,"pods":"a:1777629600"},` +
		`{"kind":"Invalid","resources":{"app":{"requests":{"cpu":"1"}}},"pods":"b:1777629600 c:1777629600"}]}`
	d, err := DecodeCompact(value, DecodeOptions{MaxAttempts: 1})
	require.NoError(t, err)
	assert.Len(t, d.Records, 1)
	assert.Equal(t, map[DropReason]int{DropTooMany: 2}, d.Dropped)
}

// A record the decoder would refuse (more containers than MaxContainers, a
// resource other than cpu and memory, no value) is not written to be dropped at the next load: the
// encoder leaves it out and returns it, held in memory only.
func TestEncodersLeaveOutWhatTheirDecodersRefuse(t *testing.T) {
	many := resources.Resources{}
	for i := range MaxContainers + 1 {
		many[fmt.Sprintf("c%d", i)] = res("100m", "", "", "")
	}
	gpu := res("1", "", "", "")
	gpu.Requests["nvidia.com/gpu"] = resource.MustParse("1")
	records := map[types.UID]*Record{
		goodUID:    rec(KindNodeCapacity, "8", "no room", t0),
		"too-many": {Kind: KindInvalid, Attempted: many, RecordedAt: t0},
		"a-gpu":    {Kind: KindInvalid, Attempted: resources.Resources{"app": gpu}, RecordedAt: t0},
		"no-value": {Kind: KindInvalid, Attempted: resources.Resources{"app": {}}, RecordedAt: t0},
	}
	for _, c := range []struct {
		name   string
		encode func(map[types.UID]*Record, int) (string, []types.UID, error)
		decode func(string, DecodeOptions) (Decoded, error)
	}{{"compact", EncodeCompact, DecodeCompact}, {"annotation", EncodeAnnotation, DecodeAnnotation}} {
		t.Run(c.name, func(t *testing.T) {
			value, left, err := c.encode(records, 1<<20)
			require.NoError(t, err)
			d, err := c.decode(value, DecodeOptions{MaxBytes: 1 << 20})
			require.NoError(t, err)
			assert.Empty(t, d.Dropped, "the decoder reads all the encoder wrote")
			assert.Equal(t, map[types.UID]bool{goodUID: true}, keys(d.Records))
			assert.ElementsMatch(t, []types.UID{"too-many", "a-gpu", "no-value"}, left)
		})
	}
}

func keys(records map[types.UID]*Record) map[types.UID]bool {
	out := map[types.UID]bool{}
	for uid := range records {
		out[uid] = true
	}
	return out
}
