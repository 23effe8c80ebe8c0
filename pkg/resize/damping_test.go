package resize

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/vpa-inplace/vpa-inplace/pkg/recommendation"
	"github.com/vpa-inplace/vpa-inplace/pkg/resources"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
)

// The steady-noise finding of issue #23: the upstream recommender's memory
// target flapped between two histogram buckets, 126.8 MB and 144.6 MB (14 %
// apart, above the 0.1 threshold), and the pod was resized at every flap.
func TestDecideHoldsTheReversalOfTheLastResize(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	hold := 15 * time.Minute
	// The pod was resized up to 144.6 MB two minutes ago.
	up := &LastResize{At: t0, From: resources.Compact(reqs("c", "100m", "126.8M")), To: reqs("c", "100m", "144.6M")}
	inRange := func(cpu, mem string) recommendation.Desired {
		return recommendation.Desired{"c": {Requests: testpod.List(cpu, mem),
			LowerBound: testpod.List("50m", "100M"), UpperBound: testpod.List("1", "300M")}}
	}
	tests := []struct {
		name    string
		pod     string // memory requests now
		desired recommendation.Desired
		last    *LastResize
		hold    time.Duration
		now     time.Time
		action  Action
		reason  Reason
		recheck time.Duration
	}{
		{"the flap back within the hold is held", "144.6M", inRange("100m", "126.8M"), up, hold, t0.Add(2 * time.Minute),
			ActionSkip, ReasonReversalHeld, 13 * time.Minute},
		{"after the hold it is sent", "144.6M", inRange("100m", "126.8M"), up, hold, t0.Add(16 * time.Minute),
			ActionPatch, ReasonResize, 0},
		{"the same way again is sent", "144.6M", inRange("100m", "170M"), up, hold, t0.Add(2 * time.Minute),
			ActionPatch, ReasonResize, 0},
		{"a request outside the recommended range is never held", "144.6M",
			recommendation.Desired{"c": {Requests: testpod.List("100m", "126.8M"), LowerBound: testpod.List("50m", "100M"), UpperBound: testpod.List("1", "140M")}},
			up, hold, t0.Add(2 * time.Minute), ActionPatch, ReasonResize, 0},
		{"a pod whose requests changed since is not held", "150M", inRange("100m", "126.8M"), up, hold, t0.Add(2 * time.Minute),
			ActionPatch, ReasonResize, 0},
		{"a reversal with another change above the threshold is sent", "144.6M", inRange("200m", "126.8M"), up, hold, t0.Add(2 * time.Minute),
			ActionPatch, ReasonResize, 0},
		{"no resize known: sent", "144.6M", inRange("100m", "126.8M"), nil, hold, t0.Add(2 * time.Minute),
			ActionPatch, ReasonResize, 0},
		{"no hold configured: sent", "144.6M", inRange("100m", "126.8M"), up, 0, t0.Add(2 * time.Minute),
			ActionPatch, ReasonResize, 0},
		{"a change below the threshold stays below the threshold", "144.6M", inRange("100m", "140M"), up, hold, t0.Add(2 * time.Minute),
			ActionSkip, ReasonBelowThreshold, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Decide(Input{
				Pod:     testpod.New("p").Container("c", "100m", tt.pod).Running().Obj(),
				Desired: tt.desired, Threshold: 0.1, ServerMinor: 35, DisruptionAllowed: true,
				LastResize: tt.last, ReversalHold: tt.hold, Now: tt.now,
			})
			assert.Equal(t, tt.action, d.Action, d.Message)
			assert.Equal(t, tt.reason, d.Reason, d.Message)
			assert.Equal(t, tt.recheck, d.RecheckAfter)
		})
	}
}
