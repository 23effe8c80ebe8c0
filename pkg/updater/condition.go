package updater

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
)

// ConditionInPlaceResizeBlocked is the condition the updater keeps on every
// InPlace VPA: True when a recommendation is not being applied to some pod,
// with the reason and the details in its message; False when every pod has
// it or is getting it.
const ConditionInPlaceResizeBlocked vpatypes.VerticalPodAutoscalerConditionType = "InPlaceResizeBlocked"

// Reasons of the InPlaceResizeBlocked condition. With status True, the most
// pressing one present, in this order.
const (
	// ReasonPaused: resizing is paused, for this VPA or cluster-wide.
	ReasonPaused = "Paused"
	// ReasonFeatureGateOff: the updater runs with the InPlace gate off.
	ReasonFeatureGateOff = "FeatureGateOff"
	// ReasonDryRun: the updater runs with --dry-run; due resizes are not sent.
	ReasonDryRun = "DryRun"
	// ReasonInvalid: a change cannot be made in place.
	ReasonInvalid = "Invalid"
	// ReasonInfeasible: a resize does not fit its node.
	ReasonInfeasible = "Infeasible"
	// ReasonMemoryLimitKept: memory limits are not lowered as recommended,
	// because the memory in use (plus the margin) reaches them or the
	// kubelet refused; the rest of the recommendation is applied.
	ReasonMemoryLimitKept = "MemoryLimitKept"
	// ReasonResizeError: the kubelet fails to apply a resize, or the resize
	// patch keeps failing.
	ReasonResizeError = "ResizeError"
	// ReasonDeferred: the kubelet holds a resize until the node has room.
	ReasonDeferred = "Deferred"
)

// Reasons with status False.
const (
	// ReasonInProgress: resizes are under way or wait their turn.
	ReasonInProgress = "ResizesInProgress"
	// ReasonUpToDate: every running pod has the recommendation.
	ReasonUpToDate = "PodsUpToDate"
	// ReasonNoPods: no pod of the VPA is known.
	ReasonNoPods = "NoPods"
)

// maxConditionMessage bounds the condition's message.
const maxConditionMessage = 2048

// summary is what the condition of one VPA is made from.
type summary struct {
	pods []podStatus
	// paused says why resizing is paused, "" when it is not.
	paused  string
	gateOff bool
	dryRun  bool
}

// blockedCondition builds the InPlaceResizeBlocked condition (without its
// transition time) from the states of a VPA's pods. The message names
// absolute times, never ages, so that it only changes when a pod does.
func blockedCondition(s summary) vpatypes.VerticalPodAutoscalerCondition {
	byState := map[PodState][]podStatus{}
	for _, p := range s.pods {
		byState[p.state] = append(byState[p.state], p)
	}
	var details []string
	reason := ""
	blocked := func(r string, detail string) {
		if reason == "" {
			reason = r
		}
		if detail != "" {
			details = append(details, detail)
		}
	}
	if s.paused != "" {
		blocked(ReasonPaused, "Paused: "+s.paused+".")
	}
	if s.gateOff {
		blocked(ReasonFeatureGateOff, "The updater runs with the InPlace feature gate off (--feature-gates=InPlace=true turns it on); pods are not resized.")
	}
	if ps := byState[PodWithheld]; len(ps) > 0 {
		r, why := ReasonDryRun, "dry run"
		if s.paused != "" {
			r, why = ReasonPaused, "paused"
		}
		blocked(r, fmt.Sprintf("Not sent (%s): %s would be resized to %s%s.", why, ps[0].name, ps[0].values, more(ps)))
	}
	if ps := byState[PodInvalid]; len(ps) > 0 {
		blocked(ReasonInvalid, fmt.Sprintf("Invalid: %s cannot be resized in place to %s: %s%s.", ps[0].name, ps[0].values, ps[0].message, more(ps)))
	}
	if ps := byState[PodInfeasible]; len(ps) > 0 {
		blocked(ReasonInfeasible, fmt.Sprintf("Infeasible: %s cannot get %s (%s: %s); not retried until the recommendation asks for less%s.",
			ps[0].name, ps[0].values, ps[0].kind, ps[0].message, more(ps)))
	}
	if ps := byState[PodMemoryLimitKept]; len(ps) > 0 {
		blocked(ReasonMemoryLimitKept, fmt.Sprintf("Memory limit kept: %s runs with higher memory limits than recommended; %s or lower is not sent (%s: %s)%s.",
			ps[0].name, ps[0].values, ps[0].kind, ps[0].message, more(ps)))
	}
	if ps := byState[PodError]; len(ps) > 0 {
		blocked(ReasonResizeError, fmt.Sprintf("Error: %s: %s%s.", ps[0].name, ps[0].message, more(ps)))
	}
	if ps := byState[PodDeferred]; len(ps) > 0 {
		oldest := ps[0]
		for _, p := range ps[1:] {
			if p.since.Before(oldest.since) {
				oldest = p
			}
		}
		blocked(ReasonDeferred, fmt.Sprintf("Deferred: oldest pending %s since %s (%s); the pod keeps waiting and is not evicted%s.",
			oldest.name, oldest.since.UTC().Format(time.RFC3339), oldest.message, more(ps)))
	}

	status := corev1.ConditionTrue
	if reason == "" {
		status = corev1.ConditionFalse
		switch {
		case len(byState[PodInProgress])+len(byState[PodWaiting]) > 0:
			reason = ReasonInProgress
		case len(s.pods) == 0:
			reason = ReasonNoPods
		default:
			reason = ReasonUpToDate
		}
	}
	msg := counts(s.pods, byState)
	if len(details) > 0 {
		msg += " " + strings.Join(details, " ")
	}
	if s.dryRun && reason != ReasonDryRun {
		msg += " Dry run: no resize is sent."
	}
	return vpatypes.VerticalPodAutoscalerCondition{
		Type:    ConditionInPlaceResizeBlocked,
		Status:  status,
		Reason:  reason,
		Message: truncateMessage(msg, maxConditionMessage),
	}
}

// counts is the first sentence: "3 pods: 1 resized, 1 deferred, 1 infeasible."
func counts(pods []podStatus, byState map[PodState][]podStatus) string {
	if len(pods) == 0 {
		return "No pods."
	}
	labels := []struct {
		state PodState
		label string
	}{
		{PodResized, "resized"},
		{PodInProgress, "in progress"},
		{PodWaiting, "waiting for the eviction tolerance"},
		{PodWithheld, "not sent"},
		{PodDeferred, "deferred"},
		{PodInfeasible, "infeasible"},
		{PodInvalid, "invalid"},
		{PodMemoryLimitKept, "with memory limits kept"},
		{PodError, "in error"},
		{PodNotRunning, "not running"},
		{PodNoRecommendation, "without recommendation"},
	}
	var parts []string
	for _, l := range labels {
		if n := len(byState[l.state]); n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, l.label))
		}
	}
	noun := "pods"
	if len(pods) == 1 {
		noun = "pod"
	}
	return fmt.Sprintf("%d %s: %s.", len(pods), noun, strings.Join(parts, ", "))
}

func more(ps []podStatus) string {
	if len(ps) < 2 {
		return ""
	}
	return fmt.Sprintf(" (and %d more)", len(ps)-1)
}

func truncateMessage(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const ellipsis = "..."
	cut := n - len(ellipsis)
	for cut > 0 && s[cut]&0xC0 == 0x80 { // not in the middle of a character
		cut--
	}
	return s[:cut] + ellipsis
}

// setCondition returns conditions with want in place of the existing
// condition of its type (removed when want is nil), and whether anything
// changed. Conditions are compared without their transition time, which
// moves only when the status does.
func setCondition(conditions []vpatypes.VerticalPodAutoscalerCondition, want *vpatypes.VerticalPodAutoscalerCondition, now time.Time) ([]vpatypes.VerticalPodAutoscalerCondition, bool) {
	out := make([]vpatypes.VerticalPodAutoscalerCondition, 0, len(conditions)+1)
	found := false
	changed := false
	for _, c := range conditions {
		if c.Type != ConditionInPlaceResizeBlocked {
			out = append(out, c)
			continue
		}
		found = true
		if want == nil {
			changed = true
			continue
		}
		next := *want
		if c.Status == next.Status && !c.LastTransitionTime.IsZero() {
			next.LastTransitionTime = c.LastTransitionTime
		} else {
			next.LastTransitionTime = metav1.NewTime(now)
		}
		if c.Status != next.Status || c.Reason != next.Reason || c.Message != next.Message || !c.LastTransitionTime.Equal(&next.LastTransitionTime) {
			changed = true
		}
		out = append(out, next)
	}
	if !found && want != nil {
		next := *want
		next.LastTransitionTime = metav1.NewTime(now)
		out = append(out, next)
		changed = true
	}
	return out, changed
}
