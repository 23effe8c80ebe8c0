package resize

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/recommendation"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testvpa"
)

// rec is a recommendation for container "c": target, lower and upper bound
// as "cpu/memory".
type rec struct{ target, lower, upper string }

func split(s string) (string, string) {
	cpu, mem, _ := strings.Cut(s, "/")
	return cpu, mem
}

// evidenceCase builds the input of one row: a pod requesting 100m/100Mi,
// its VPA created at t0 with recommendation r, decided at now.
func evidenceInput(t0, now time.Time, r rec, histories map[string]History, min time.Duration, vpaMods ...func(*testvpa.Builder)) Input {
	tc, tm := split(r.target)
	lc, lm := split(r.lower)
	uc, um := split(r.upper)
	b := testvpa.New("v").InPlace().RecommendRange("c", tc, tm, lc, lm, uc, um)
	for _, m := range vpaMods {
		m(b)
	}
	vpa := b.Obj()
	vpa.CreationTimestamp = metav1.NewTime(t0)
	return Input{
		Pod: testpod.New("p").Container("c", "100m", "100Mi").Running().Obj(),
		Desired: recommendation.Desired{"c": {Requests: testpod.List(tc, tm),
			LowerBound: testpod.List(lc, lm), UpperBound: testpod.List(uc, um)}},
		Threshold: 0.1, ServerMinor: 35, DisruptionAllowed: true, Now: now,
		Evidence: &Evidence{VPA: vpa, Histories: histories, MinHistory: min},
	}
}

func checkpoint(first time.Time, span time.Duration, samples int) map[string]History {
	return map[string]History{"c": {FirstSample: first, LastSample: first.Add(span), Samples: samples}}
}

// written is a checkpoint as checkpoint makes it, last written at when.
func written(h map[string]History, when time.Time) map[string]History {
	c := h["c"]
	c.Written = when
	return map[string]History{"c": c}
}

// everyMinute is in with a recommender writing its checkpoints every
// minute (upstream's default --recommender-interval).
func everyMinute(in Input) Input {
	in.Evidence.RecommenderInterval = time.Minute
	return in
}

// The rows of the evidence rule (docs/resize-timing.md). The first five are
// what upstream's recommender (v1.8.1, the local cluster's flags) wrote for
// a new VPA over a pod requesting and using 100m/100Mi: its floor while it
// had no sample, with a checkpoint of 0 samples written right after, then
// its first real target with an upper bound at its maximum, narrowing as
// samples came.
func TestEvidenceRule(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 9, 45, 27, 0, time.UTC)
	floor := rec{"10m/10Mi", "10m/10Mi", "10m/10Mi"}
	first := rec{"126m/121Mi", "10m/10Mi", "100000000/97656250000Ki"}
	hour := time.Hour
	tests := []struct {
		name      string
		in        Input
		action    Action
		reason    Reason
		recheck   time.Duration
		target    string // the target sent, "" not checked
		inMessage string
	}{
		{"the floor with a checkpoint of no sample: nothing is sent",
			evidenceInput(t0, t0.Add(11*time.Second), floor, checkpoint(time.Time{}, 0, 0), hour),
			ActionWait, ReasonAwaitingEvidence, 0, "", "holds no usage sample"},
		{"the floor before its checkpoint, on a new VPA: the decrease waits until the VPA is old enough",
			evidenceInput(t0, t0.Add(11*time.Second), floor, nil, hour),
			ActionWait, ReasonAwaitingEvidence, hour - 11*time.Second, "", "cpu and memory decrease waits until 2026-11-26T10:45:27Z"},
		{"no checkpoint and bounds equal to the target, on a VPA older than the minimum history: taken as given",
			evidenceInput(t0, t0.Add(2*hour), floor, nil, hour),
			ActionPatch, ReasonResize, 0, "c: requests cpu=10m memory=10Mi", ""},
		{"the first real target, an increase on one sample: sent at once",
			evidenceInput(t0, t0.Add(31*time.Second), first, checkpoint(t0.Add(18*time.Second), 0, 1), hour),
			ActionPatch, ReasonResize, 0, "c: requests cpu=126m memory=121Mi", ""},
		{"the first real target before its checkpoint: its upper bound proves no history, but an increase goes",
			evidenceInput(t0, t0.Add(31*time.Second), first, nil, hour),
			ActionPatch, ReasonResize, 0, "", ""},
		{"a decrease on 5 minutes of samples waits",
			evidenceInput(t0, t0.Add(6*time.Minute), rec{"50m/50Mi", "20m/20Mi", "14/14Gi"}, checkpoint(t0, 5*time.Minute, 30), hour),
			ActionWait, ReasonAwaitingEvidence, 0, "", "rests on 5m0s of usage samples (the recommender's checkpoint), a decrease needs 1h0m0s"},
		{"a decrease on an hour of samples is sent",
			evidenceInput(t0, t0.Add(2*hour), rec{"50m/50Mi", "45m/45Mi", "1200m/1200Mi"}, checkpoint(t0, hour, 60), hour),
			ActionPatch, ReasonResize, 0, "c: requests cpu=50m memory=50Mi", ""},
		{"history counts no more than a minute per sample",
			evidenceInput(t0, t0.Add(3*hour), rec{"50m/50Mi", "45m/45Mi", "100m/100Mi"}, checkpoint(t0, 2*hour, 10), hour),
			ActionWait, ReasonAwaitingEvidence, 0, "", "rests on 10m0s"},
		{"a request above the upper bound is lowered whatever the history",
			evidenceInput(t0, t0.Add(6*time.Minute), rec{"50m/100Mi", "20m/50Mi", "80m/14Gi"}, checkpoint(t0, 5*time.Minute, 30), hour),
			ActionPatch, ReasonResize, 0, "c: requests cpu=50m memory=100Mi", ""},
		{"a request above an upper bound capped to maxAllowed is lowered: the VPA's own policy asks for it",
			evidenceInput(t0, t0.Add(time.Minute), rec{"50m/50Mi", "45m/45Mi", "60m/60Mi"}, nil, hour,
				func(b *testvpa.Builder) { b.MaxAllowed("c", "60m", "60Mi") }),
			ActionPatch, ReasonResize, 0, "c: requests cpu=50m memory=50Mi", ""},
		{"without a checkpoint, narrow bounds prove the history",
			evidenceInput(t0, t0.Add(time.Minute), rec{"50m/50Mi", "45m/45Mi", "60m/60Mi"}, nil, hour),
			ActionPatch, ReasonResize, 0, "c: requests cpu=50m memory=50Mi", ""},
		{"without a checkpoint, wide bounds prove too little",
			evidenceInput(t0, t0.Add(time.Minute), rec{"50m/50Mi", "20m/20Mi", "50/50Gi"}, nil, hour),
			ActionWait, ReasonAwaitingEvidence, 0, "", "(the width of its bounds)"},
		{"an upper bound capped to maxAllowed proves nothing",
			evidenceInput(t0, t0.Add(time.Minute), rec{"50m/50Mi", "45m/45Mi", "150m/150Mi"}, nil, hour,
				func(b *testvpa.Builder) { b.MaxAllowed("c", "150m", "150Mi") }),
			ActionWait, ReasonAwaitingEvidence, hour - time.Minute, "", "nothing tells how much usage"},
		{"a capped target proves nothing",
			evidenceInput(t0, t0.Add(time.Minute), rec{"50m/50Mi", "45m/45Mi", "150m/150Mi"}, nil, hour,
				func(b *testvpa.Builder) {
					b.Obj().Status.Recommendation.ContainerRecommendations[0].UncappedTarget = testpod.List("20m", "20Mi")
				}),
			ActionWait, ReasonAwaitingEvidence, hour - time.Minute, "", "nothing tells how much usage"},
		{"the checkpoint of another container does not count",
			evidenceInput(t0, t0.Add(time.Minute), floor, map[string]History{"other": {FirstSample: t0, LastSample: t0.Add(2 * hour), Samples: 500}}, hour),
			ActionWait, ReasonAwaitingEvidence, hour - time.Minute, "", "no checkpoint"},
		{"cpu up and memory down on short history: the increase goes, the decrease waits",
			evidenceInput(t0, t0.Add(6*time.Minute), rec{"200m/50Mi", "20m/20Mi", "50/50Gi"}, checkpoint(t0, 5*time.Minute, 30), hour),
			ActionPatch, ReasonDecreasesHeld, 0, "c: requests cpu=200m memory=100Mi", "memory decrease waits"},
		{"what is left of the change below the threshold is not sent",
			evidenceInput(t0, t0.Add(6*time.Minute), rec{"105m/50Mi", "20m/20Mi", "50/50Gi"}, checkpoint(t0, 5*time.Minute, 30), hour),
			ActionWait, ReasonAwaitingEvidence, 0, "", "memory decrease waits"},
		{"no minimum history: one sample is enough",
			evidenceInput(t0, t0.Add(31*time.Second), rec{"50m/50Mi", "10m/10Mi", "100/100Gi"}, checkpoint(t0, 0, 1), 0),
			ActionPatch, ReasonResize, 0, "", ""},
		{"no minimum history: still no sample, still no decrease",
			evidenceInput(t0, t0.Add(11*time.Second), floor, checkpoint(time.Time{}, 0, 0), 0),
			ActionWait, ReasonAwaitingEvidence, 0, "", "holds no usage sample"},
		{"an increase while the checkpoint holds no sample (it lags behind the recommendation): sent at once",
			evidenceInput(t0, t0.Add(31*time.Second), first, checkpoint(time.Time{}, 0, 0), hour),
			ActionPatch, ReasonResize, 0, "c: requests cpu=126m memory=121Mi", ""},
		{"cpu up and memory down while the checkpoint holds no sample: the increase goes, the decrease waits",
			evidenceInput(t0, t0.Add(31*time.Second), rec{"200m/50Mi", "20m/20Mi", "50/50Gi"}, checkpoint(time.Time{}, 0, 0), hour),
			ActionPatch, ReasonDecreasesHeld, 0, "c: requests cpu=200m memory=100Mi", "memory decrease waits, the recommender's checkpoint holds no usage sample"},
		{"a decrease on a checkpoint last written more than two recommender intervals ago waits, whatever its samples",
			everyMinute(evidenceInput(t0, t0.Add(5*hour), rec{"50m/50Mi", "45m/45Mi", "1200m/1200Mi"}, written(checkpoint(t0, 3*hour, 500), t0.Add(3*hour)), hour)),
			ActionWait, ReasonAwaitingEvidence, 0, "", "cpu and memory decrease waits, the recommender's checkpoint was last written at 2026-11-26T12:45:27Z, more than 2 recommender intervals (2m0s) ago"},
		{"a decrease on a checkpoint written two recommender intervals ago is sent",
			everyMinute(evidenceInput(t0, t0.Add(3*hour+2*time.Minute), rec{"50m/50Mi", "45m/45Mi", "1200m/1200Mi"}, written(checkpoint(t0, 3*hour, 500), t0.Add(3*hour)), hour)),
			ActionPatch, ReasonResize, 0, "c: requests cpu=50m memory=50Mi", ""},
		{"a stale checkpoint holds even a request above the upper bound: it proves nothing",
			everyMinute(evidenceInput(t0, t0.Add(5*hour), rec{"50m/50Mi", "45m/45Mi", "60m/60Mi"}, written(checkpoint(t0, 3*hour, 500), t0.Add(3*hour)), hour)),
			ActionWait, ReasonAwaitingEvidence, 0, "", "it proves nothing until the recommender writes it again"},
		{"a checkpoint that does not say when it was written proves nothing for a decrease",
			everyMinute(evidenceInput(t0, t0.Add(5*hour), rec{"50m/50Mi", "45m/45Mi", "1200m/1200Mi"}, checkpoint(t0, 3*hour, 500), hour)),
			ActionWait, ReasonAwaitingEvidence, 0, "", "does not say when it was written"},
		{"an increase on a stale checkpoint is sent at once",
			everyMinute(evidenceInput(t0, t0.Add(5*hour), rec{"200m/200Mi", "150m/150Mi", "400m/400Mi"}, written(checkpoint(t0, 3*hour, 500), t0.Add(3*hour)), hour)),
			ActionPatch, ReasonResize, 0, "c: requests cpu=200m memory=200Mi", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Decide(tt.in)
			assert.Equal(t, tt.action, d.Action, d.Message)
			assert.Equal(t, tt.reason, d.Reason, d.Message)
			assert.Equal(t, tt.recheck, d.RecheckAfter)
			if tt.target != "" {
				assert.Equal(t, tt.target, d.Target.String())
			}
			if tt.inMessage != "" {
				assert.Contains(t, d.Message, tt.inMessage)
			}
			if d.Action == ActionPatch {
				assert.NotEmpty(t, d.Patch)
			} else {
				assert.Empty(t, d.Patch)
				assert.Nil(t, d.NewRecord, "a held resize records nothing")
			}
		})
	}
}

// Without Evidence, decisions are as they were: the floor is sent. This is
// what the updater did before the rule (issue #34).
func TestNoEvidenceTakesTheRecommendationAsGiven(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 9, 45, 27, 0, time.UTC)
	in := evidenceInput(t0, t0.Add(11*time.Second), rec{"10m/10Mi", "10m/10Mi", "10m/10Mi"}, nil, time.Hour)
	in.Evidence = nil
	d := Decide(in)
	assert.Equal(t, ActionPatch, d.Action)
	assert.Equal(t, "c: requests cpu=10m memory=10Mi", d.Target.String())
}

func TestHistoryLength(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		h    History
		want time.Duration
	}{
		{History{}, 0},
		{History{FirstSample: t0, LastSample: t0.Add(time.Hour), Samples: 1000}, time.Hour},
		{History{FirstSample: t0, LastSample: t0.Add(time.Hour), Samples: 7}, 7 * time.Minute},
		{History{FirstSample: t0.Add(time.Hour), LastSample: t0, Samples: 7}, 0},
		{History{LastSample: t0, Samples: 7}, 0},
	} {
		assert.Equal(t, tt.want, tt.h.Length(), "%+v", tt.h)
	}
}

// The bounds' width read back: upstream's upper bound after 10 s of
// samples was 1088766m for a 126m target (8641 times: 1 + 86400/10).
func TestBoundsHistory(t *testing.T) {
	vpa := testvpa.New("v").RecommendRange("c", "126m", "121Mi", "10m", "10Mi", "1088766m", "1045Gi").Obj()
	got, ok := boundsHistory(vpa, recommendationFor(vpa, "c"), "c")
	require.True(t, ok)
	assert.InDelta(t, 10*time.Second, got, float64(50*time.Millisecond))

	point := testvpa.New("v").Recommend("c", "10m", "10Mi").Obj()
	_, ok = boundsHistory(point, recommendationFor(point, "c"), "c")
	assert.False(t, ok, "bounds equal to the target prove nothing")
}

func TestKeepValues(t *testing.T) {
	current := reqs("c", "100m", "100Mi")
	current["c"] = corev1.ResourceRequirements{Requests: current["c"].Requests, Limits: testpod.List("200m", "200Mi")}
	target := reqs("c", "50m", "200Mi")
	target["c"] = corev1.ResourceRequirements{Requests: target["c"].Requests, Limits: testpod.List("100m", "400Mi")}
	lowerOnly := func(string, corev1.ResourceName) (bool, bool) { return false, true }
	kept := keepValues(current, target, lowerOnly)
	assert.Equal(t, "c: requests cpu=100m memory=200Mi limits cpu=200m memory=400Mi", kept.String())
	all := func(_ string, n corev1.ResourceName) (bool, bool) { return n == corev1.ResourceMemory, false }
	kept = keepValues(current, target, all)
	assert.Equal(t, "c: requests cpu=50m memory=100Mi limits cpu=100m memory=200Mi", kept.String())
	assert.Equal(t, "c: requests cpu=50m memory=200Mi limits cpu=100m memory=400Mi", target.String(), "target is not changed")
}

var _ = vpatypes.UpdateModeInPlace
