package resize

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
	vpaapiutil "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/utils/vpa"

	"github.com/vpa-inplace/vpa-inplace/pkg/resources"
)

// The evidence rule: a recommendation is acted on only when it rests on
// usage. Upstream's recommender answers a new VPA before it has a single
// sample of its pods' usage with its floor (the minimum it ever
// recommends: 25m and 250Mi by default), lower bound, target and upper
// bound all equal; from the first sample on, its bounds are widened by its
// confidence multipliers, which shrink as history grows (upper bound x
// (1 + 1/confidence), confidence being min(span of samples, one minute per
// sample) in days). Its own updater keeps away from the young pod unless a
// request is outside those bounds. Here:
//
//   - an increase never waits for evidence: it relieves pressure, and
//     waiting would leave the pod short (a recommender whose checkpoint
//     lags behind its recommendation would hold it back for nothing);
//   - a decrease waits while the recommender's checkpoint of the container
//     proves nothing: it holds no sample (the recommendation is the
//     recommender's floor), or it was last written more than two
//     recommender intervals ago (a recommender stopped, failing, or no
//     longer the VPA's: its samples need not be those the recommendation
//     rests on);
//   - any other decrease needs MinHistory of samples behind the
//     recommendation, unless the request is above the recommendation's
//     upper bound (the recommender's own, confidence-widened, range
//     excludes it).
//
// How much history a recommendation rests on is read, in this order, from
// the recommender's checkpoint of the container (VerticalPodAutoscalerCheckpoint:
// first and last sample, number of samples), else from the width of its
// bounds (an upper bound w times the target proves 24h/(w-1) of history
// under upstream's default confidence interval), else it is unknown: a
// recommender that writes neither checkpoints nor bounds (or bounds equal to
// the target, as its floor does) has its decreases acted on once the VPA is
// MinHistory old.

// Evidence is what a decision knows of the usage a recommendation rests on.
type Evidence struct {
	// VPA is the pod's VPA: its creation time, its recommendation as the
	// recommender wrote it and its resource policy (whether a bound was
	// capped to maxAllowed).
	VPA *vpatypes.VerticalPodAutoscaler
	// Histories holds, by container, what the recommender's checkpoint
	// says of its samples; a container without one is absent.
	Histories map[string]History
	// MinHistory is how much history a decrease needs
	// (--decrease-min-history); 0 asks only for a sample.
	MinHistory time.Duration
	// RecommenderInterval is how often the recommender runs its loop and
	// writes its checkpoints (--recommender-interval): a checkpoint last
	// written more than StaleCheckpointIntervals of them before Now proves
	// nothing for a decrease. 0: a checkpoint's age is not judged.
	RecommenderInterval time.Duration
}

// StaleCheckpointIntervals is how many recommender intervals may pass
// since a checkpoint was written before it proves nothing for a decrease:
// the recommender writes every checkpoint in each loop, the oldest first,
// and one it could not write in time is written in the next.
const StaleCheckpointIntervals = 2

// StaleAfter is how long after it was written a checkpoint proves nothing
// for a decrease; 0 when its age is not judged.
func (ev *Evidence) StaleAfter() time.Duration {
	return StaleCheckpointIntervals * ev.RecommenderInterval
}

// History is what a recommender's checkpoint says of one container's
// usage samples.
type History struct {
	FirstSample, LastSample time.Time
	Samples                 int
	// Written is when the recommender last wrote the checkpoint (its
	// lastUpdateTime); zero when the checkpoint does not say.
	Written time.Time
}

// Length is the history as upstream's recommender weighs it for its
// confidence: the span of the samples, but no more than a minute per
// sample.
func (h History) Length() time.Duration {
	span := h.LastSample.Sub(h.FirstSample)
	if h.FirstSample.IsZero() || h.LastSample.IsZero() || span < 0 {
		span = 0
	}
	return min(span, time.Duration(h.Samples)*time.Minute)
}

// ConfidenceInterval is upstream's recommender's default
// --confidence-interval-cpu and --confidence-interval-memory: the history
// at which its confidence is 1. The bounds' width is read with it.
const ConfidenceInterval = 24 * time.Hour

// evidenceHold is what the evidence rule holds back of a change: decreases
// only.
type evidenceHold struct {
	// lower are, by container, the resources whose decreases wait.
	lower map[string]map[corev1.ResourceName]bool
	why   []string
	// recheck is when time alone brings the evidence (the VPA's age), 0
	// when only the recommender can.
	recheck time.Duration
}

func (h evidenceHold) empty() bool { return len(h.lower) == 0 }

func (h evidenceHold) message() string {
	return strings.Join(h.why, "; ")
}

// keeps tells whether the value (container, resource) may not be lowered;
// the evidence rule never holds a container whole.
func (h evidenceHold) keeps(container string, name corev1.ResourceName) (all, lower bool) {
	return false, h.lower[container][name]
}

// hold keeps the decreases of names in container c.
func (h *evidenceHold) hold(c string, names []corev1.ResourceName) {
	for _, name := range names {
		if h.lower[c] == nil {
			h.lower[c] = map[corev1.ResourceName]bool{}
		}
		h.lower[c][name] = true
	}
}

// weighEvidence applies the evidence rule to the change from current to
// target.
func weighEvidence(in Input, current, target resources.Resources) evidenceHold {
	ev := in.Evidence
	h := evidenceHold{lower: map[string]map[corev1.ResourceName]bool{}}
	if ev == nil || ev.VPA == nil {
		return h
	}
	names := make([]string, 0, len(target))
	for c := range target {
		names = append(names, c)
	}
	slices.Sort(names)
	for _, c := range names {
		lowered := loweredBy(current[c], target[c])
		if len(lowered) == 0 {
			continue // an increase never waits for evidence
		}
		rec := recommendationFor(ev.VPA, c)
		length, samples, source := historyOf(ev, rec, c)
		if source == sourceCheckpoint {
			if why := provesNothing(ev, ev.Histories[c], samples, in.Now); why != "" {
				h.hold(c, lowered)
				h.why = append(h.why, fmt.Sprintf("%s: %s decrease waits, %s", c, namesOf(lowered), why))
				continue
			}
		}
		var wait []corev1.ResourceName
		for _, name := range lowered {
			if aboveUpperBound(in, rec, c, name) {
				continue // outside the recommended range: the recommender excludes the request
			}
			wait = append(wait, name)
		}
		if len(wait) == 0 {
			continue
		}
		switch source {
		case sourceUnknown:
			age := in.Now.Sub(ev.VPA.CreationTimestamp.Time)
			if age >= ev.MinHistory {
				continue // a recommender that says nothing of its history, given time
			}
			left := ev.MinHistory - age
			if h.recheck == 0 || left < h.recheck {
				h.recheck = left
			}
			// Absolute times only: the message goes into the VPA condition,
			// which must not change as time passes.
			h.why = append(h.why, fmt.Sprintf("%s: %s decrease waits until %s, nothing tells how much usage the recommendation rests on (no checkpoint of the recommender, bounds equal to the target) and the VPA, created at %s, is younger than %s",
				c, namesOf(wait), ev.VPA.CreationTimestamp.Add(ev.MinHistory).UTC().Format(time.RFC3339),
				ev.VPA.CreationTimestamp.UTC().Format(time.RFC3339), ev.MinHistory))
		default:
			if length >= ev.MinHistory {
				continue
			}
			h.why = append(h.why, fmt.Sprintf("%s: %s decrease waits, the recommendation rests on %s of usage samples (%s), a decrease needs %s",
				c, namesOf(wait), length.Round(time.Second), source, ev.MinHistory))
		}
		h.hold(c, wait)
	}
	return h
}

// provesNothing says why the recommender's checkpoint h of a container
// proves nothing for a decrease, "" when it may: it holds no sample, or it
// was written longer than ev.StaleAfter before now (or does not say when).
// The reason names absolute times only: it goes into the VPA condition,
// which must not change as time passes.
func provesNothing(ev *Evidence, h History, samples int, now time.Time) string {
	if samples == 0 {
		return "the recommender's checkpoint holds no usage sample yet: its recommendation is its floor, not a measure"
	}
	stale := ev.StaleAfter()
	if stale <= 0 {
		return ""
	}
	if h.Written.IsZero() {
		return "the recommender's checkpoint does not say when it was written: it proves nothing until the recommender writes it again"
	}
	if now.Sub(h.Written) > stale {
		return fmt.Sprintf("the recommender's checkpoint was last written at %s, more than %d recommender intervals (%s) ago: it proves nothing until the recommender writes it again",
			h.Written.UTC().Format(time.RFC3339), StaleCheckpointIntervals, stale)
	}
	return ""
}

type historySource string

const (
	sourceCheckpoint historySource = "the recommender's checkpoint"
	sourceBounds     historySource = "the width of its bounds"
	sourceUnknown    historySource = ""
)

// historyOf tells how much history the recommendation of container c
// rests on, how many samples, and where that is known from.
func historyOf(ev *Evidence, rec *vpatypes.RecommendedContainerResources, c string) (time.Duration, int, historySource) {
	if h, ok := ev.Histories[c]; ok {
		return h.Length(), h.Samples, sourceCheckpoint
	}
	if length, ok := boundsHistory(ev.VPA, rec, c); ok {
		return length, 1, sourceBounds
	}
	return 0, 0, sourceUnknown
}

// boundsHistory reads the history a recommendation's bounds prove: upstream
// widens the upper bound to (1 + 1/confidence) times its estimate, and its
// 95th percentile is never below the target's 90th, so an upper bound w
// times the target proves a confidence of at least 1/(w-1). A bound capped
// by the VPA's maxAllowed, a capped target or an upper bound not above the
// target proves nothing.
func boundsHistory(vpa *vpatypes.VerticalPodAutoscaler, rec *vpatypes.RecommendedContainerResources, c string) (time.Duration, bool) {
	if rec == nil {
		return 0, false
	}
	var maxAllowed corev1.ResourceList
	if p := vpaapiutil.GetContainerResourcePolicy(c, vpa.Spec.ResourcePolicy); p != nil {
		maxAllowed = p.MaxAllowed
	}
	best, found := time.Duration(0), false
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		target, ok := rec.Target[name]
		upper, hasUpper := rec.UpperBound[name]
		if !ok || !hasUpper || target.Sign() <= 0 || upper.Cmp(target) <= 0 {
			continue
		}
		if uncapped, ok := rec.UncappedTarget[name]; ok && uncapped.Cmp(target) != 0 {
			continue
		}
		if max, ok := maxAllowed[name]; ok && upper.Cmp(max) >= 0 {
			continue
		}
		t, u := target.AsApproximateFloat64(), upper.AsApproximateFloat64()
		confidence := t / (u - t) // in ConfidenceIntervals
		length := time.Duration(math.Min(confidence*float64(ConfidenceInterval), float64(math.MaxInt64/2)))
		if !found || length > best {
			best, found = length, true
		}
	}
	return best, found
}

// aboveUpperBound tells whether the container's request of name is above
// the recommendation's upper bound (capped, as the range ChangeMatters
// uses), that bound being a measure: above the target as the recommender
// wrote it.
func aboveUpperBound(in Input, rec *vpatypes.RecommendedContainerResources, c string, name corev1.ResourceName) bool {
	if rec == nil {
		return false
	}
	target, ok := rec.Target[name]
	rawUpper, hasUpper := rec.UpperBound[name]
	if !ok || !hasUpper || rawUpper.Cmp(target) <= 0 {
		return false
	}
	upper, ok := in.Desired[c].UpperBound[name]
	if !ok {
		return false
	}
	for i := range in.Pod.Spec.Containers {
		if pc := &in.Pod.Spec.Containers[i]; pc.Name == c {
			now, has := pc.Resources.Requests[name]
			return has && now.Cmp(upper) > 0
		}
	}
	return false
}

func recommendationFor(vpa *vpatypes.VerticalPodAutoscaler, c string) *vpatypes.RecommendedContainerResources {
	if vpa.Status.Recommendation == nil {
		return nil
	}
	for i := range vpa.Status.Recommendation.ContainerRecommendations {
		if r := &vpa.Status.Recommendation.ContainerRecommendations[i]; r.ContainerName == c {
			return r
		}
	}
	return nil
}

// loweredBy tells which resources want lowers (a request or a limit) in a
// container, a value removed counting as lowered.
func loweredBy(now, want corev1.ResourceRequirements) []corev1.ResourceName {
	var lowered []corev1.ResourceName
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		for _, pair := range [][2]corev1.ResourceList{{now.Requests, want.Requests}, {now.Limits, want.Limits}} {
			a, hasA := pair[0][name]
			b, hasB := pair[1][name]
			if hasA && (!hasB || b.Cmp(a) < 0) {
				lowered = append(lowered, name)
				break
			}
		}
	}
	return lowered
}

func namesOf(names []corev1.ResourceName) string {
	s := make([]string, len(names))
	for i, n := range names {
		s[i] = string(n)
	}
	return strings.Join(s, " and ")
}

// keepValues returns target with, in each container, the values keep
// selects kept at current's: all of a container's, or the decreases of a
// resource (a value target lowers keeps its current one).
func keepValues(current, target resources.Resources, keep func(container string, name corev1.ResourceName) (all, lower bool)) resources.Resources {
	out := resources.Resources{}
	for c, want := range target {
		now := current[c]
		next := corev1.ResourceRequirements{Requests: want.Requests.DeepCopy(), Limits: want.Limits.DeepCopy()}
		for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			all, lower := keep(c, name)
			if !all && !lower {
				continue
			}
			next.Requests = keepOne(now.Requests, next.Requests, name, all)
			next.Limits = keepOne(now.Limits, next.Limits, name, all)
		}
		out[c] = next
	}
	return out
}

// keepOne sets want's value of name back to now's: always with all, else
// when want lowers it (or drops it).
func keepOne(now, want corev1.ResourceList, name corev1.ResourceName, all bool) corev1.ResourceList {
	a, hasA := now[name]
	b, hasB := want[name]
	if !all && hasB && (!hasA || b.Cmp(a) >= 0) {
		return want
	}
	if !hasA {
		if hasB {
			delete(want, name)
		}
		return want
	}
	if want == nil {
		want = corev1.ResourceList{}
	}
	want[name] = a.DeepCopy()
	return want
}

// worthSending tells whether the change from current to kept, what is left
// of a resize once some of it is held back, is still worth a resize: a
// request it sets was missing or outside the recommended range, or the
// requests change by more than the threshold (as ChangeMatters weighs
// them).
func worthSending(in Input, current, kept resources.Resources) bool {
	if resources.Equal(current, kept) {
		return false
	}
	totalNow := map[corev1.ResourceName]float64{}
	totalKept := map[corev1.ResourceName]float64{}
	for c, k := range kept {
		now := current[c]
		for name, want := range k.Requests {
			have, ok := now.Requests[name]
			if !ok {
				return true
			}
			if want.Cmp(have) != 0 && outsideRange(have, in.Desired[c].LowerBound, in.Desired[c].UpperBound, name) {
				return true
			}
			totalNow[name] += float64(have.MilliValue())
			totalKept[name] += float64(want.MilliValue())
		}
	}
	diff := 0.0
	for name, want := range totalKept {
		now := math.Max(totalNow[name], 1)
		diff += math.Abs(now-want) / now
	}
	return diff > in.Threshold
}

func outsideRange(q resource.Quantity, lower, upper corev1.ResourceList, name corev1.ResourceName) bool {
	if low, ok := lower[name]; ok && q.Cmp(low) < 0 {
		return true
	}
	if up, ok := upper[name]; ok && q.Cmp(up) > 0 {
		return true
	}
	return false
}
