package records

import (
	"github.com/vpa-inplace/vpa-inplace/pkg/resources"

	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
)

var t0 = time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)

func rec(kind Kind, cpu, msg string, at time.Time) *Record {
	return &Record{Kind: kind, Attempted: resources.Resources{"app": res(cpu, "100Mi", "", "")}, Message: msg, RecordedAt: at}
}

func TestAnnotationRoundTrip(t *testing.T) {
	tests := []struct {
		name    string
		records map[types.UID]*Record
	}{
		{"one record", map[types.UID]*Record{"a": rec(KindNodeCapacity, "8", "node didn't have enough allocatable resources: cpu", t0)}},
		{"every kind", map[types.UID]*Record{
			"a": rec(KindNodeCapacity, "8", "no room", t0),
			"b": rec(KindInfeasible, "4", `Resize is infeasible for Guaranteed Pods alongside CPU Manager policy "static"`, t0.Add(time.Minute)),
			"c": rec(KindInvalid, "300m", "the pod's QoS class would change from BestEffort to Burstable", t0.Add(2*time.Minute)),
		}},
		{"limits and several containers", map[types.UID]*Record{"a": {Kind: KindInfeasible, RecordedAt: t0,
			Attempted: resources.Resources{"app": res("1", "1Gi", "2", "2Gi"), "sidecar": res("10m", "", "", "64Mi")}}}},
		{"sub-second times are kept to the second", map[types.UID]*Record{"a": rec(KindNodeCapacity, "8", "x", t0.Add(700*time.Millisecond))}},
		{"no time", map[types.UID]*Record{"a": rec(KindNodeCapacity, "8", "x", time.Time{})}},
		{"job records keep their generation", map[types.UID]*Record{
			"job": {Kind: KindJobRejected, Attempted: resources.Resources{"app": res("250m", "200Mi", "", "")}, Message: "field is immutable", RecordedAt: t0, Generation: 3},
			"old": {Kind: KindJobUnsupported, Attempted: resources.Resources{"app": res("250m", "200Mi", "", "")}, Message: "Kubernetes 1.34", RecordedAt: t0, Generation: 1},
			"pod": rec(KindNodeCapacity, "8", "x", t0),
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			value, left, err := EncodeAnnotation(tc.records, DefaultMaxAnnotationBytes)
			require.NoError(t, err)
			assert.Empty(t, left)
			got, err := decode(value)
			require.NoError(t, err)
			require.Len(t, got, len(tc.records))
			for uid, want := range tc.records {
				r := got[uid]
				require.NotNil(t, r, "pod %s", uid)
				assert.Equal(t, want.Kind, r.Kind)
				assert.True(t, resources.Equal(want.Attempted, r.Attempted), "%s vs %s", want.Attempted, r.Attempted)
				assert.Equal(t, want.Message, r.Message)
				assert.Equal(t, want.Generation, r.Generation)
				assert.True(t, want.RecordedAt.Truncate(time.Second).Equal(r.RecordedAt), "%s vs %s", want.RecordedAt, r.RecordedAt)
				assert.Equal(t, Same, r.Compare(want.Attempted), "a loaded record stops the same attempt")
			}
		})
	}
}

func TestAnnotationEncoding(t *testing.T) {
	t.Run("no records is no annotation", func(t *testing.T) {
		value, left, err := EncodeAnnotation(nil, DefaultMaxAnnotationBytes)
		require.NoError(t, err)
		assert.Empty(t, value)
		assert.Empty(t, left)
	})

	t.Run("pods with the same attempt share it", func(t *testing.T) {
		records := map[types.UID]*Record{}
		for i := range 5 {
			records[types.UID(fmt.Sprintf("pod-%d", i))] = rec(KindNodeCapacity, "8", "no room", t0.Add(time.Duration(i)*time.Second))
		}
		records["other"] = rec(KindInvalid, "1", "qos", t0)
		value, _, err := EncodeAnnotation(records, DefaultMaxAnnotationBytes)
		require.NoError(t, err)
		var doc annotationDoc
		require.NoError(t, json.Unmarshal([]byte(value), &doc))
		assert.Len(t, doc.Attempts, 2)
		assert.Len(t, doc.Pods, 6)
		assert.Equal(t, 1, strings.Count(value, "no room"))
	})

	t.Run("the same records give the same value", func(t *testing.T) {
		records := map[types.UID]*Record{}
		for i := range 20 {
			records[types.UID(fmt.Sprintf("pod-%d", i))] = rec(KindNodeCapacity, fmt.Sprintf("%d", i%3+4), "no room", t0)
		}
		first, _, err := EncodeAnnotation(records, DefaultMaxAnnotationBytes)
		require.NoError(t, err)
		for range 10 {
			again, _, err := EncodeAnnotation(records, DefaultMaxAnnotationBytes)
			require.NoError(t, err)
			require.Equal(t, first, again)
		}
	})

	t.Run("long messages are cut on a character boundary", func(t *testing.T) {
		msg := strings.Repeat("é", 600)
		value, _, err := EncodeAnnotation(map[types.UID]*Record{"a": rec(KindInfeasible, "4", msg, t0)}, DefaultMaxAnnotationBytes)
		require.NoError(t, err)
		got, err := decode(value)
		require.NoError(t, err)
		assert.LessOrEqual(t, len(got["a"].Message), maxMessageBytes)
		assert.True(t, utf8.ValidString(got["a"].Message))
		assert.True(t, strings.HasSuffix(got["a"].Message, "..."))
	})
}

func TestAnnotationBudget(t *testing.T) {
	records := map[types.UID]*Record{}
	for i := range 200 {
		// Distinct attempts, so that nothing is shared.
		records[types.UID(fmt.Sprintf("pod-%03d", i))] = rec(KindNodeCapacity, fmt.Sprintf("%dm", 1000+i), "no room", t0.Add(time.Duration(i)*time.Minute))
	}
	full, left, err := EncodeAnnotation(records, DefaultMaxAnnotationBytes)
	require.NoError(t, err)
	require.Empty(t, left)

	tests := []struct {
		name     string
		maxBytes int
	}{
		{"half", len(full) / 2},
		{"a tenth", len(full) / 10},
		{"just below", len(full) - 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			value, left, err := EncodeAnnotation(records, tc.maxBytes)
			require.NoError(t, err)
			assert.LessOrEqual(t, len(value), tc.maxBytes)
			require.NotEmpty(t, left)
			got, err := decode(value)
			require.NoError(t, err)
			assert.Equal(t, len(records), len(got)+len(left), "every record is either written or reported as left out")
			// The newest are kept: every written record is newer than every one left out.
			oldestKept := t0.Add(time.Hour * 1000)
			for _, r := range got {
				if r.RecordedAt.Before(oldestKept) {
					oldestKept = r.RecordedAt
				}
			}
			for _, uid := range left {
				assert.True(t, records[uid].RecordedAt.Before(oldestKept), "left out %s is older than what is kept", uid)
			}
		})
	}

	t.Run("not even one record fits", func(t *testing.T) {
		value, left, err := EncodeAnnotation(records, 10)
		require.NoError(t, err)
		assert.Empty(t, value)
		assert.Len(t, left, len(records))
	})
}

// decode reads every well-formed record of an annotation.
func decode(value string) (map[types.UID]*Record, error) {
	d, err := DecodeAnnotation(value, DecodeOptions{})
	return d.Records, err
}
