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
)

const goodUID = "0b4f5a36-1b1e-4a83-9f4e-0d2c6a1d7e10"

// doc builds an annotation of the version written today.
func doc(attempts, pods string) string {
	return `{"version":1,"attempts":[` + attempts + `],"pods":{` + pods + `}}`
}

const goodAttempt = `{"kind":"NodeCapacity","resources":{"app":{"requests":{"cpu":"8","memory":"100Mi"}}},"message":"no room"}`

func TestDecodeAnnotationDropsMalformedRecords(t *testing.T) {
	good := `"` + goodUID + `":{"attempt":0,"recordedAt":"2026-05-01T10:00:00Z"}`
	tests := []struct {
		name    string
		attempt string // attempt 1, next to the good attempt 0
		entry   string // the record of "bad", or a whole entry when it starts with a quote
		want    DropReason
	}{
		{"a quantity with an exponent of eight digits", `{"kind":"Infeasible","resources":{"app":{"requests":{"cpu":"1e-99999999"}}}}`, `{"attempt":1}`, DropBadResources},
		{"a quantity with a hundred digits", `{"kind":"Infeasible","resources":{"app":{"requests":{"cpu":"` + strings.Repeat("9", 100) + `"}}}}`, `{"attempt":1}`, DropBadResources},
		{"a quantity that does not parse", `{"kind":"Infeasible","resources":{"app":{"requests":{"cpu":"lots"}}}}`, `{"attempt":1}`, DropBadResources},
		{"a resource other than cpu and memory", `{"kind":"Infeasible","resources":{"app":{"requests":{"nvidia.com/gpu":"1"}}}}`, `{"attempt":1}`, DropBadResources},
		{"empty resources", `{"kind":"Infeasible","resources":{}}`, `{"attempt":1}`, DropBadResources},
		{"a container with no value", `{"kind":"Infeasible","resources":{"app":{}}}`, `{"attempt":1}`, DropBadResources},
		{"too many containers", `{"kind":"Infeasible","resources":{` + containers(MaxContainers+1) + `}}`, `{"attempt":1}`, DropBadResources},
		{"unknown kind", `{"kind":"Whatever","resources":{"app":{"requests":{"cpu":"1"}}}}`, `{"attempt":1}`, DropUnknownKind},
		{"attempt out of range", goodAttempt, `{"attempt":2}`, DropBadAttempt},
		{"negative attempt", goodAttempt, `{"attempt":-1}`, DropBadAttempt},
		{"recorded in 2099", goodAttempt, `{"attempt":1,"recordedAt":"2099-01-01T00:00:00Z"}`, DropFuture},
		{"a time that is no time", goodAttempt, `{"attempt":1,"recordedAt":"yesterday"}`, DropBadTime},
		{"a key with a slash", goodAttempt, `"../etc":{"attempt":1}`, DropBadUID},
		{"a key longer than a UID", goodAttempt, `"` + strings.Repeat("a", MaxUIDLength+1) + `":{"attempt":1}`, DropBadUID},
		{"an empty key", goodAttempt, `"":{"attempt":1}`, DropBadUID},
	}
	now := t0.Add(time.Hour)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			entry := tc.entry
			if !strings.HasPrefix(entry, `"`) {
				entry = `"bad":` + entry
			}
			d, err := DecodeAnnotation(doc(goodAttempt+","+tc.attempt, good+","+entry), DecodeOptions{Now: now})
			require.NoError(t, err, "one bad record does not fail the others")
			assert.Equal(t, map[DropReason]int{tc.want: 1}, d.Dropped)
			require.Len(t, d.Records, 1)
			assert.Contains(t, d.Records, types.UID(goodUID))
		})
	}

	t.Run("a record within the skew is kept", func(t *testing.T) {
		d, err := DecodeAnnotation(doc(goodAttempt, `"a":{"attempt":0,"recordedAt":"`+now.Add(FutureSkew/2).Format(time.RFC3339)+`"}`), DecodeOptions{Now: now})
		require.NoError(t, err)
		assert.Len(t, d.Records, 1)
		assert.Empty(t, d.Dropped)
	})
	t.Run("every record of a bad attempt is dropped under its reason", func(t *testing.T) {
		d, err := DecodeAnnotation(doc(`{"kind":"Infeasible","resources":{"app":{"limits":{"memory":"1e-9999999"}}}}`,
			`"a":{"attempt":0},"b":{"attempt":0},"c":{"attempt":0}`), DecodeOptions{})
		require.NoError(t, err)
		assert.Empty(t, d.Records)
		assert.Equal(t, map[DropReason]int{DropBadResources: 3}, d.Dropped)
	})
	t.Run("a long message is cut, an invalid one made valid", func(t *testing.T) {
		d, err := DecodeAnnotation(doc(`{"kind":"Infeasible","resources":{"app":{"requests":{"cpu":"1"}}},"message":"`+strings.Repeat("x", 5000)+"\xff\"}",
			`"a":{"attempt":0}`), DecodeOptions{})
		require.NoError(t, err)
		require.Contains(t, d.Records, types.UID("a"))
		assert.LessOrEqual(t, len(d.Records["a"].Message), maxMessageBytes)
	})
	t.Run("a negative generation is none", func(t *testing.T) {
		d, err := DecodeAnnotation(doc(goodAttempt, `"a":{"attempt":0,"generation":-4}`), DecodeOptions{})
		require.NoError(t, err)
		assert.Zero(t, d.Records["a"].Generation)
	})
}

func TestDecodeAnnotationRefusesTheWholeValue(t *testing.T) {
	tests := []struct {
		name, value string
		maxBytes    int
		want        DropReason
		wantErr     string
	}{
		{"not JSON", "{", 0, DropUnreadable, "decoding"},
		{"unknown version", `{"version":2,"attempts":[],"pods":{}}`, 0, DropUnreadable, "unknown version 2"},
		{"a number where a record is", `{"version":1,"attempts":[],"pods":{"a":7}}`, 0, DropUnreadable, "decoding"},
		{"an attempt index beyond int", doc(goodAttempt, `"a":{"attempt":1e99}`), 0, DropUnreadable, "decoding"},
		{"longer than read", doc(goodAttempt, `"a":{"attempt":0}`), 40, DropTooLarge, "more than 40"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := DecodeAnnotation(tc.value, DecodeOptions{MaxBytes: tc.maxBytes})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.wantErr)
			assert.Empty(t, d.Records)
			assert.Equal(t, map[DropReason]int{tc.want: 1}, d.Dropped)
		})
	}
}

func TestDecodeAnnotationBounds(t *testing.T) {
	t.Run("attempts beyond the bound are none", func(t *testing.T) {
		attempts := make([]string, MaxAttempts+1)
		for i := range attempts {
			attempts[i] = fmt.Sprintf(`{"kind":"Infeasible","resources":{"app":{"requests":{"cpu":"%dm"}}}}`, i+1)
		}
		d, err := DecodeAnnotation(doc(strings.Join(attempts, ","), fmt.Sprintf(`"first":{"attempt":0},"last":{"attempt":%d}`, MaxAttempts)),
			DecodeOptions{MaxBytes: 1 << 20})
		require.NoError(t, err)
		assert.Contains(t, d.Records, types.UID("first"))
		assert.Equal(t, map[DropReason]int{DropTooMany: 1}, d.Dropped, "counted as past the bound")
	})
	t.Run("records beyond the bound are dropped", func(t *testing.T) {
		pods := make([]string, MaxEntries+10)
		for i := range pods {
			pods[i] = fmt.Sprintf(`"p%d":{"attempt":0}`, i)
		}
		d, err := DecodeAnnotation(doc(goodAttempt, strings.Join(pods, ",")), DecodeOptions{MaxBytes: 1 << 20})
		require.NoError(t, err)
		assert.Len(t, d.Records, MaxEntries)
		assert.Equal(t, map[DropReason]int{DropTooMany: 10}, d.Dropped)
	})
	t.Run("the default read bound is the written one", func(t *testing.T) {
		_, err := DecodeAnnotation(doc(goodAttempt, `"a":{"attempt":0,"pad":"`+strings.Repeat("x", DefaultMaxAnnotationBytes)+`"}`), DecodeOptions{})
		require.Error(t, err)
	})
}

func TestDecodeAnnotationAsksKeepBeforeParsing(t *testing.T) {
	value := doc(goodAttempt+`,{"kind":"Infeasible","resources":{"app":{"requests":{"cpu":"1e-99999999"}}}}`,
		`"mine":{"attempt":0},"theirs":{"attempt":0},"hostile":{"attempt":1}`)
	var asked []types.UID
	d, err := DecodeAnnotation(value, DecodeOptions{Keep: func(uid types.UID) bool {
		asked = append(asked, uid)
		return uid == "mine"
	}})
	require.NoError(t, err)
	assert.ElementsMatch(t, []types.UID{"mine", "theirs", "hostile"}, asked)
	assert.Len(t, d.Records, 1)
	assert.Contains(t, d.Records, types.UID("mine"))
	assert.Equal(t, map[DropReason]int{DropNotOwned: 2}, d.Dropped, "a record of a UID not kept is not even parsed")
}

// The annotation of the review: ten quantities of seven exponent digits
// took 11 s to decode. None of them is parsed now (quantity.Check refuses
// them first); the wall clock bound only catches a decode gone badly wrong
// (seconds), never a busy machine. The figures are in
// BenchmarkDecodeAnnotation.
func TestDecodeAnnotationOfHugeExponentsIsCheap(t *testing.T) {
	attempts := make([]string, 10)
	pods := make([]string, 10)
	for i := range attempts {
		attempts[i] = fmt.Sprintf(`{"kind":"Infeasible","resources":{"c%d":{"requests":{"cpu":"1e-9999999","memory":"1e-99999999"}}}}`, i)
		pods[i] = fmt.Sprintf(`"p%d":{"attempt":%d}`, i, i)
	}
	var parsed []string
	parseQuantity = func(s string) (resource.Quantity, error) {
		parsed = append(parsed, s)
		return resource.ParseQuantity(s)
	}
	t.Cleanup(func() { parseQuantity = resource.ParseQuantity })
	start := time.Now()
	d, err := DecodeAnnotation(doc(strings.Join(attempts, ","), strings.Join(pods, ",")), DecodeOptions{})
	require.NoError(t, err)
	assert.Less(t, time.Since(start), 5*time.Second)
	assert.Empty(t, parsed, "no quantity of a huge exponent is parsed")
	assert.Empty(t, d.Records)
	assert.Equal(t, map[DropReason]int{DropBadResources: 10}, d.Dropped)
}

func containers(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf(`"c%d":{"requests":{"cpu":"1"}}`, i)
	}
	return strings.Join(parts, ",")
}
