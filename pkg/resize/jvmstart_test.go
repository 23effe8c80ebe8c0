package resize

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/vpa-inplace/vpa-inplace/pkg/records"
	"github.com/vpa-inplace/vpa-inplace/pkg/resources"
)

var strimziHeap = envVar("STRIMZI_DYNAMIC_HEAP_PERCENTAGE", "50")

func startRecord(limit string, restarts int32) *records.Record {
	return &records.Record{Kind: records.KindLimitAtStart, Starts: map[string]int32{"c": restarts},
		Attempted: resources.Resources{"c": {Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(limit)}}}}
}

// runningWith is a running dynamic-heap broker whose spec limits it at
// spec and whose status says it runs with running, restarted restarts
// times, of pod generation gen.
func runningWith(spec, running string, restarts int32, gen int64) *corev1.Pod {
	p := broker(spec, strimziHeap).Generation(gen).Running().Obj()
	p.Status.ContainerStatuses[0].Resources.Limits[corev1.ResourceMemory] = resource.MustParse(running)
	p.Status.ContainerStatuses[0].RestartCount = restarts
	return p
}

func TestLimitsAtStart(t *testing.T) {
	tests := []struct {
		name string
		pod  *corev1.Pod
		rec  *records.Record
		// limit is the limit at start found; next the record to keep
		// (nil: none).
		limit string
		next  *records.Record
	}{
		{
			name:  "a start seen for the first time, the pod never resized: the limit it runs with",
			pod:   runningWith("2Gi", "2Gi", 0, 1),
			limit: "2Gi", next: startRecord("2Gi", 0),
		},
		{
			name:  "the record of this start holds, whatever the container runs with since",
			pod:   runningWith("3Gi", "3Gi", 0, 2),
			rec:   startRecord("4Gi", 0),
			limit: "4Gi", next: startRecord("4Gi", 0),
		},
		{
			name:  "a restart since the record: the limit it runs with now, recorded with its count",
			pod:   runningWith("3Gi", "3Gi", 1, 2),
			rec:   startRecord("4Gi", 0),
			limit: "3Gi", next: startRecord("3Gi", 1),
		},
		{
			name:  "a restart that a resize caused: the new limit",
			pod:   runningWith("4Gi", "4Gi", 2, 3),
			rec:   startRecord("2Gi", 1),
			limit: "4Gi", next: startRecord("4Gi", 2),
		},
		{
			name:  "no record of a pod resized before: the higher of the spec's and the running limit (the spec's)",
			pod:   runningWith("4Gi", "3Gi", 0, 2),
			limit: "4Gi", next: startRecord("4Gi", 0),
		},
		{
			name:  "no record of a pod resized before: the higher of the spec's and the running limit (the running one)",
			pod:   runningWith("3Gi", "4Gi", 0, 2),
			limit: "4Gi", next: startRecord("4Gi", 0),
		},
		{
			name: "a container not running keeps the record of its last start, and none is made",
			pod: func() *corev1.Pod {
				p := runningWith("3Gi", "3Gi", 2, 2)
				p.Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}
				return p
			}(),
			rec:   startRecord("4Gi", 1),
			limit: "3Gi", next: startRecord("4Gi", 1),
		},
		{
			name: "a fixed heap needs no limit at start",
			pod: func() *corev1.Pod {
				return withEnv(runningWith("3Gi", "3Gi", 0, 1), kafkaHeap)
			}(),
			rec: startRecord("4Gi", 0),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := InspectJVMs(tt.pod, nil)
			require.NotNil(t, j)
			next := j.LimitsAtStart(tt.pod, tt.rec)
			if tt.next == nil {
				assert.Nil(t, next)
			} else {
				require.NotNil(t, next)
				assert.True(t, SameLimitsAtStart(tt.next, next), "want %v, got %v", tt.next.Attempted, next.Attempted)
			}
			if tt.limit == "" {
				assert.Empty(t, j.LimitAtStart)
				return
			}
			want := resource.MustParse(tt.limit)
			assert.Equal(t, want.Value(), j.LimitAtStart["c"])
		})
	}
}

// The limit at start decides the floor of a heap sized from the limit: the
// same pod, recorded at 4Gi or first seen at 2Gi, has two floors.
func TestLimitAtStartDecidesTheFloor(t *testing.T) {
	pod := runningWith("2Gi", "2Gi", 0, 2)
	desired := desire("200m", "600Mi", "800Mi")
	for _, tt := range []struct {
		rec   *records.Record
		floor string
	}{
		{nil, "1690Mi"},                      // 1Gi of heap
		{startRecord("4Gi", 0), "2Gi"},       // 2Gi of heap: floor above the running limit, kept at it
		{startRecord("3000Mi", 0), "2Gi"},    // 1496Mi of heap: floor 2233Mi, kept at the running 2Gi
		{startRecord("2560Mi", 0), "1984Mi"}, // 1280Mi of heap
	} {
		j := InspectJVMs(pod, nil)
		j.LimitsAtStart(pod, tt.rec)
		d := Decide(Input{Pod: pod, Desired: desired, Threshold: 0.1, ServerMinor: 37, DisruptionAllowed: true, JVM: j})
		require.Equal(t, ReasonJVMHeapFloor, d.Reason, d.Message)
		got := d.Target["c"].Limits[corev1.ResourceMemory]
		assert.Equal(t, tt.floor, got.String())
	}
}

func TestSameLimitsAtStart(t *testing.T) {
	assert.True(t, SameLimitsAtStart(nil, nil))
	assert.False(t, SameLimitsAtStart(nil, startRecord("2Gi", 0)))
	assert.True(t, SameLimitsAtStart(startRecord("2Gi", 0), startRecord("2Gi", 0)))
	assert.False(t, SameLimitsAtStart(startRecord("2Gi", 0), startRecord("2Gi", 1)))
	assert.False(t, SameLimitsAtStart(startRecord("2Gi", 0), startRecord("3Gi", 0)))
}
