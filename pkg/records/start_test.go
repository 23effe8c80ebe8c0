package records

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vpa-inplace/vpa-inplace/pkg/resources"
)

func limitAtStart(at time.Time, limits map[string]string, starts map[string]int32) *Record {
	attempted := resources.Resources{}
	for c, l := range limits {
		attempted[c] = corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(l)}}
	}
	return &Record{Kind: KindLimitAtStart, Attempted: attempted, Starts: starts, RecordedAt: at}
}

func TestLimitAtStartRoundTrip(t *testing.T) {
	at := time.Unix(goodCompactTime, 0).UTC()
	recs := map[types.UID]*Record{
		"pod-a": limitAtStart(at, map[string]string{"kafka": "2Gi"}, map[string]int32{"kafka": 0}),
		// Same limits, another start: not the same attempt.
		"pod-b": limitAtStart(at, map[string]string{"kafka": "2Gi"}, map[string]int32{"kafka": 3}),
		"pod-c": limitAtStart(at, map[string]string{"kafka": "2Gi"}, map[string]int32{"kafka": 0}),
	}
	for name, encode := range map[string]func(map[types.UID]*Record, int) (string, []types.UID, error){
		"compact": EncodeCompact, "annotation": EncodeAnnotation,
	} {
		t.Run(name, func(t *testing.T) {
			value, left, err := encode(recs, DefaultMaxAnnotationBytes)
			require.NoError(t, err)
			require.Empty(t, left)
			assert.Equal(t, 2, strings.Count(value, `"starts"`), "pods of one start share an attempt: %s", value)
			var d Decoded
			if name == "compact" {
				d, err = DecodeCompact(value, DecodeOptions{})
			} else {
				d, err = DecodeAnnotation(value, DecodeOptions{})
			}
			require.NoError(t, err)
			require.Len(t, d.Records, 3)
			limit, restarts, ok := d.Records["pod-b"].ContainerStart("kafka")
			require.True(t, ok)
			assert.Equal(t, "2Gi", limit.String())
			assert.Equal(t, int32(3), restarts)
			_, restarts, ok = d.Records["pod-a"].ContainerStart("kafka")
			require.True(t, ok)
			assert.Equal(t, int32(0), restarts)
		})
	}
}

func TestDecodeDropsBadStarts(t *testing.T) {
	attempt := func(kind, res, starts string) string {
		a := `{"kind":"` + kind + `","resources":` + res
		if starts != "" {
			a += `,"starts":` + starts
		}
		return a + "}"
	}
	const memLimit = `{"kafka":{"limits":{"memory":"2Gi"}}}`
	tests := []struct {
		name, kind, res, starts string
	}{
		{"a limit at start without its starts", "LimitAtStart", memLimit, ""},
		{"starts on a kind that has none", "NodeCapacity", memLimit, `{"kafka":0}`},
		{"a negative restart count", "LimitAtStart", memLimit, `{"kafka":-1}`},
		{"a start of a container without a limit", "LimitAtStart", memLimit, `{"kafka":0,"other":0}`},
		{"a limit without its start", "LimitAtStart", `{"kafka":{"limits":{"memory":"2Gi"}},"other":{"limits":{"memory":"1Gi"}}}`, `{"kafka":0}`},
		{"a request instead of a limit", "LimitAtStart", `{"kafka":{"requests":{"memory":"2Gi"}}}`, `{"kafka":0}`},
		{"a cpu limit", "LimitAtStart", `{"kafka":{"limits":{"cpu":"2"}}}`, `{"kafka":0}`},
		{"a container name longer than a DNS label", "LimitAtStart", `{"` + strings.Repeat("a", 64) + `":{"limits":{"memory":"2Gi"}}}`, `{"` + strings.Repeat("a", 64) + `":0}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := DecodeCompact(compactDocOf(attempt(tt.kind, tt.res, tt.starts), goodCompactEntry()), DecodeOptions{Now: time.Unix(goodCompactTime, 0)})
			require.NoError(t, err)
			assert.Empty(t, d.Records)
			assert.Equal(t, map[DropReason]int{DropBadStarts: 1}, d.Dropped)
		})
	}
	t.Run("the encoders leave out what the decoders would drop", func(t *testing.T) {
		bad := limitAtStart(time.Unix(goodCompactTime, 0), map[string]string{"kafka": "2Gi"}, map[string]int32{"kafka": -1})
		good := limitAtStart(time.Unix(goodCompactTime, 0), map[string]string{"kafka": "2Gi"}, map[string]int32{"kafka": 1})
		value, left, err := EncodeCompact(map[types.UID]*Record{goodUID: bad, "pod-b": good}, DefaultMaxCompactBytes)
		require.NoError(t, err)
		assert.Equal(t, []types.UID{goodUID}, left)
		d, err := DecodeCompact(value, DecodeOptions{})
		require.NoError(t, err)
		assert.Empty(t, d.Dropped)
		assert.Len(t, d.Records, 1)
	})
}

func TestContainerStartOfOtherKinds(t *testing.T) {
	var none *Record
	_, _, ok := none.ContainerStart("kafka")
	assert.False(t, ok, "a nil record holds no start")
	r := &Record{Kind: KindMemoryLimitUnsafe, Attempted: resources.Resources{"kafka": {Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}}}
	_, _, ok = r.ContainerStart("kafka")
	assert.False(t, ok, "a memory record is no limit at start")
}
