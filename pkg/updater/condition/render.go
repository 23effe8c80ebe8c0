// Package condition keeps the InPlaceResizeBlocked condition of every
// InPlace VPA: Blocked renders it from the states of the VPA's pods and
// suspended Jobs (pure), and the Controller writes it when it changed.
package condition

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/records"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/state"
)

// Type is the condition the updater keeps on every
// InPlace VPA: True when a recommendation is not being applied to some pod
// (or to the pod template of a suspended Job), with the reason and the
// details in its message; False when every pod has it or is getting it.
const Type vpatypes.VerticalPodAutoscalerConditionType = "InPlaceResizeBlocked"

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
	// ReasonJobTemplateRejected: the API server refused (or, on Kubernetes
	// 1.34 and earlier, cannot accept) the recommendation in a suspended
	// Job's pod template.
	ReasonJobTemplateRejected = "JobTemplateRejected"
	// ReasonMemoryLimitKept: memory limits are not lowered as recommended,
	// because the memory in use (plus the margin) reaches them or the
	// kubelet refused; the rest of the recommendation is applied.
	ReasonMemoryLimitKept = "MemoryLimitKept"
	// ReasonJVMHeapUnknown: the memory of a JVM container whose heap is
	// unknown is not lowered in place; the rest of the recommendation is
	// applied.
	ReasonJVMHeapUnknown = "JVMHeapUnknown"
	// ReasonJVMHeapFloor: the memory of a JVM container is kept at its
	// heap floor (heap + overhead) instead of the lower recommended value;
	// the rest of the recommendation is applied.
	ReasonJVMHeapFloor = "JVMHeapFloor"
	// ReasonResizeError: the kubelet fails to apply a resize, or the resize
	// patch (or a Job template write) keeps failing.
	ReasonResizeError = "ResizeError"
	// ReasonDeferred: the kubelet holds a resize until the node has room.
	ReasonDeferred = "Deferred"
	// ReasonWaitingForNodeCapacity: a resize does not fit its node now and
	// is not sent until it does (resize-when: fits-node).
	ReasonWaitingForNodeCapacity = "WaitingForNodeCapacity"
	// ReasonResizeReverted: harm was seen after a resize lowered values of
	// a pod; the pod was resized back, and no pod of the VPA is lowered to
	// those values, or below, for a while (the hold).
	ReasonResizeReverted = "ResizeReverted"
)

// Reasons with status False.
const (
	// ReasonNotBlocked: every running pod has the recommendation, is being
	// resized or waits its turn under the eviction tolerance, and every
	// suspended Job's template has it or waits until it may change. Resizes
	// under way do not change the condition: a recommendation change
	// applied without trouble costs no status write.
	ReasonNotBlocked = "NotBlocked"
	// ReasonNoPods: no pod and no suspended Job of the VPA is known.
	ReasonNoPods = "NoPods"
)

// maxConditionMessage bounds the condition's message.
const maxConditionMessage = 2048

// Summary is what the condition of one VPA is made from.
type Summary struct {
	Pods []state.Pod
	// Jobs are the VPA's suspended Jobs.
	Jobs []state.Job
	// Paused says why resizing is paused, "" when it is not.
	Paused string
	// KillSwitch: resizing is paused cluster-wide, every revert after harm
	// included.
	KillSwitch bool
	GateOff    bool
	DryRun     bool
	// NotDurable says why the records of the VPA's pods cannot be written
	// (records.Store.WriteError), "" while they are.
	NotDurable string
	// Preemptions are the pods the scheduler preempted on the nodes of the
	// VPA's pods with a Deferred resize (preemption.go).
	Preemptions []Preemption
	// Reverted says what the VPA's hold after harm is for and until when,
	// "" without one.
	Reverted string
	// Canary says how the canaries of a decrease stand ("canary: 1 of 4
	// lowered, 3 wait until ..."), "" when none runs. It blocks nothing:
	// the decrease is paced.
	Canary string
	// SafetyInvalid says which safety annotation of the VPA cannot be
	// read, and what is used instead; "" when none.
	SafetyInvalid string
}

// maxNotDurable bounds what the error of a records write adds to the
// message.
const maxNotDurable = 300

// Blocked builds the InPlaceResizeBlocked condition (without its
// transition time) from the states of a VPA's pods. The message names
// absolute times, never ages, so that it only changes when a pod does.
func Blocked(s Summary) vpatypes.VerticalPodAutoscalerCondition {
	byState := map[state.PodState][]state.Pod{}
	for _, p := range s.Pods {
		byState[p.State] = append(byState[p.State], p)
	}
	jobsByState := map[state.JobState][]state.Job{}
	for _, j := range s.Jobs {
		jobsByState[j.State] = append(jobsByState[j.State], j)
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
	if s.Paused != "" {
		blocked(ReasonPaused, "Paused: "+s.Paused+".")
	}
	if s.GateOff {
		blocked(ReasonFeatureGateOff, "The updater runs with the InPlace feature gate off (--feature-gates=InPlace=true turns it on); pods are not resized.")
	}
	if ps := byState[state.PodWithheld]; len(ps) > 0 {
		r, why := ReasonDryRun, "dry run"
		if s.Paused != "" {
			r, why = ReasonPaused, "paused"
		}
		var reverts, others []state.Pod
		for _, p := range ps {
			if p.Kind == records.KindRevert {
				reverts = append(reverts, p)
			} else {
				others = append(others, p)
			}
		}
		if len(reverts) > 0 {
			// Only the emergency brake holds a revert back.
			r, why, lifted := ReasonDryRun, "dry run", "the updater runs without --dry-run"
			if s.KillSwitch {
				r, why, lifted = ReasonPaused, "paused", "the kill switch is lifted"
			}
			blocked(r, fmt.Sprintf("Revert not sent (%s): %s is to be resized back to %s after harm; it is sent as soon as %s%s.",
				why, reverts[0].Name, reverts[0].Values, lifted, more(reverts)))
		}
		if len(others) > 0 {
			blocked(r, fmt.Sprintf("Not sent (%s): %s would be resized to %s%s.", why, others[0].Name, others[0].Values, more(others)))
		}
	}
	if js := jobsByState[state.JobWithheld]; len(js) > 0 {
		r, why := ReasonDryRun, "dry run"
		if s.Paused != "" {
			r, why = ReasonPaused, "paused"
		}
		blocked(r, fmt.Sprintf("Not sent (%s): the pod template of Job %s would be set to %s%s.", why, js[0].Name, js[0].Values, more(js)))
	}
	if s.Reverted != "" {
		blocked(ReasonResizeReverted, "Reverted: "+s.Reverted+".")
	}
	if ps := byState[state.PodInvalid]; len(ps) > 0 {
		blocked(ReasonInvalid, fmt.Sprintf("Invalid: %s cannot be resized in place to %s: %s%s.", ps[0].Name, ps[0].Values, ps[0].Message, more(ps)))
	}
	if ps := byState[state.PodInfeasible]; len(ps) > 0 {
		blocked(ReasonInfeasible, fmt.Sprintf("Infeasible: %s cannot get %s (%s: %s); not retried until the recommendation asks for less%s.",
			ps[0].Name, ps[0].Values, ps[0].Kind, ps[0].Message, more(ps)))
	}
	if js := jobsByState[state.JobRejected]; len(js) > 0 {
		blocked(ReasonJobTemplateRejected, fmt.Sprintf("Job template refused: Job %s cannot get %s in its pod template while suspended (%s: %s); not retried until the recommendation or the Job changes%s.",
			js[0].Name, js[0].Values, js[0].Kind, js[0].Message, more(js)))
	}
	if ps := byState[state.PodMemoryLimitKept]; len(ps) > 0 {
		blocked(ReasonMemoryLimitKept, fmt.Sprintf("Memory limit kept: %s runs with higher memory limits than recommended; %s or lower is not sent (%s: %s)%s.",
			ps[0].Name, ps[0].Values, ps[0].Kind, ps[0].Message, more(ps)))
	}
	if ps := byState[state.PodJVMHeapUnknown]; len(ps) > 0 {
		blocked(ReasonJVMHeapUnknown, fmt.Sprintf("JVM heap unknown: %s runs with more memory than recommended, not lowered in place: %s%s.",
			ps[0].Name, Truncate(ps[0].Message, maxHeldMessage), more(ps)))
	}
	if ps := byState[state.PodJVMHeapFloor]; len(ps) > 0 {
		blocked(ReasonJVMHeapFloor, fmt.Sprintf("JVM heap floor: %s runs with more memory than recommended, at its heap floor: %s%s.",
			ps[0].Name, Truncate(ps[0].Message, maxHeldMessage), more(ps)))
	}
	if ps := byState[state.PodError]; len(ps) > 0 {
		blocked(ReasonResizeError, fmt.Sprintf("Error: %s: %s%s.", ps[0].Name, ps[0].Message, more(ps)))
	}
	if js := jobsByState[state.JobError]; len(js) > 0 {
		blocked(ReasonResizeError, fmt.Sprintf("Error: Job %s: %s%s.", js[0].Name, js[0].Message, more(js)))
	}
	if ps := byState[state.PodDeferred]; len(ps) > 0 {
		oldest := ps[0]
		for _, p := range ps[1:] {
			if p.Since.Before(oldest.Since) {
				oldest = p
			}
		}
		blocked(ReasonDeferred, fmt.Sprintf("Deferred: oldest pending %s since %s (%s); the pod keeps waiting and is not evicted%s.",
			oldest.Name, oldest.Since.UTC().Format(time.RFC3339), oldest.Message, more(ps)))
		blocked(ReasonDeferred, preemptions(s.Preemptions, ps))
	}
	if ps := byState[state.PodWaitingForNode]; len(ps) > 0 {
		blocked(ReasonWaitingForNodeCapacity, fmt.Sprintf("Waiting for node capacity: %s is not sent its resize until %s has room (%s); it never shows PodResizePending%s.",
			ps[0].Name, ps[0].Values, ps[0].Message, more(ps)))
	}

	if ps := byState[state.PodBoostBackedOff]; len(ps) > 0 {
		// Not a blocked resize: the pod has its recommendation.
		details = append(details, fmt.Sprintf("Startup boost backed off: in %s, %s%s.", ps[0].Name, ps[0].Message, more(ps)))
	}

	status := corev1.ConditionTrue
	if reason == "" {
		status = corev1.ConditionFalse
		reason = ReasonNotBlocked
		if len(s.Pods) == 0 && len(s.Jobs) == 0 {
			reason = ReasonNoPods
		}
	}
	msg := counts(s.Pods, byState) + jobCounts(s.Jobs, jobsByState) + waitingFor(byState[state.PodWaiting]) + heldBack(byState[state.PodHeld])
	if s.Canary != "" {
		msg += " Decrease paced: " + s.Canary + "."
	}
	if s.SafetyInvalid != "" {
		msg += " " + s.SafetyInvalid + "."
	}
	if s.NotDurable != "" {
		// It blocks nothing now; it says what a restart would repeat.
		msg += " Records not durable: " + Truncate(s.NotDurable, maxNotDurable) +
			"; they are held in memory only, and after a restart or a change of leader the resizes they hold back are tried once more."
	}
	if len(details) > 0 {
		msg += " " + strings.Join(details, " ")
	}
	if s.DryRun && reason != ReasonDryRun {
		msg += " Dry run: no resize is sent."
	}
	return vpatypes.VerticalPodAutoscalerCondition{
		Type:    Type,
		Status:  status,
		Reason:  reason,
		Message: Truncate(msg, maxConditionMessage),
	}
}

// counts is the first sentence: "3 pods: 1 resized or resizing, 1
// deferred, 1 records." Pods that have the recommendation and pods being
// resized to it are counted together, so that a resize going through does
// not change the message.
func counts(pods []state.Pod, byState map[state.PodState][]state.Pod) string {
	if len(pods) == 0 {
		return "No pods."
	}
	labels := []struct {
		state state.PodState
		label string
	}{
		{state.PodResized, "resized or resizing"},
		{state.PodBoosted, "boosted at startup"},
		{state.PodBoostBackedOff, "not boosted after repeated restarts"},
		{state.PodWaiting, "waiting for a disruption budget"},
		{state.PodWaitingForNode, "waiting for node capacity"},
		{state.PodCanaryWait, "waiting for the canary"},
		{state.PodHeldAfterHarm, "held after harm"},
		{state.PodHeld, "held back"},
		{state.PodWithheld, "not sent"},
		{state.PodDeferred, "deferred"},
		{state.PodInfeasible, "infeasible"},
		{state.PodInvalid, "invalid"},
		{state.PodMemoryLimitKept, "with memory limits kept"},
		{state.PodJVMHeapFloor, "at a JVM's heap floor"},
		{state.PodJVMHeapUnknown, "with a JVM's heap unknown"},
		{state.PodError, "in error"},
		{state.PodNotRunning, "not running"},
		{state.PodNoRecommendation, "without recommendation"},
	}
	var parts []string
	for _, l := range labels {
		n := len(byState[l.state])
		if l.state == state.PodResized {
			n += len(byState[state.PodInProgress])
		}
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, l.label))
		}
	}
	noun := "pods"
	if len(pods) == 1 {
		noun = "pod"
	}
	return fmt.Sprintf("%d %s: %s.", len(pods), noun, strings.Join(parts, ", "))
}

// jobCounts is the sentence about suspended Jobs, "" when there are none:
// " 2 suspended Jobs: 1 template up to date, 1 refused."
func jobCounts(jobs []state.Job, byState map[state.JobState][]state.Job) string {
	if len(jobs) == 0 {
		return ""
	}
	labels := map[state.JobState]string{
		state.JobTemplateUpToDate: "template up to date",
		state.JobWaiting:          "waiting until the template may change",
		state.JobWithheld:         "not sent",
		state.JobRejected:         "refused",
		state.JobError:            "in error",
		state.JobNoRecommendation: "without recommendation",
	}
	var parts []string
	for _, state := range state.JobStates {
		if n := len(byState[state]); n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, labels[state]))
		}
	}
	noun := "Jobs"
	if len(jobs) == 1 {
		noun = "Job"
	}
	return fmt.Sprintf(" %d suspended %s: %s.", len(jobs), noun, strings.Join(parts, ", "))
}

// waitingFor is the sentence about pods whose restarting resize waits,
// by what they wait for: " Waiting: 2 pods wait for PodDisruptionBudget
// kafka-pdb." Their resizes are not blocked, only paced.
func waitingFor(pods []state.Pod) string {
	if len(pods) == 0 {
		return ""
	}
	byBlocker := map[string]int{}
	for _, p := range pods {
		blocker := p.Values
		if blocker == "" {
			blocker = "the eviction tolerance"
		}
		byBlocker[blocker]++
	}
	blockers := make([]string, 0, len(byBlocker))
	for b := range byBlocker {
		blockers = append(blockers, b)
	}
	sort.Strings(blockers)
	parts := make([]string, 0, len(blockers))
	for _, b := range blockers {
		if n := byBlocker[b]; n == 1 {
			parts = append(parts, fmt.Sprintf("1 pod waits for %s", b))
		} else {
			parts = append(parts, fmt.Sprintf("%d pods wait for %s", n, b))
		}
	}
	return " Waiting: " + strings.Join(parts, ", ") + "."
}

// heldBack says why resizes are held back on purpose (not a block: the
// condition stays False for them), "" when none is: " Held back: web-1:
// ... (and 2 more)."
func heldBack(pods []state.Pod) string {
	if len(pods) == 0 {
		return ""
	}
	first := pods[0]
	for _, p := range pods[1:] {
		if p.Name < first.Name {
			first = p
		}
	}
	return fmt.Sprintf(" Held back: %s to %s: %s%s.", first.Name, first.Values, Truncate(first.Message, maxHeldMessage), more(pods))
}

// maxHeldMessage bounds what one held pod's reason adds to the message.
const maxHeldMessage = 512

func more[T any](ps []T) string {
	if len(ps) < 2 {
		return ""
	}
	return fmt.Sprintf(" (and %d more)", len(ps)-1)
}

// Truncate bounds s to n bytes, never cutting a character in two.
func Truncate(s string, n int) string {
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

// Set returns conditions with want in place of the existing
// condition of its type (removed when want is nil), and whether anything
// changed. Conditions are compared without their transition time, which
// moves only when the status does.
func Set(conditions []vpatypes.VerticalPodAutoscalerCondition, want *vpatypes.VerticalPodAutoscalerCondition, now time.Time) ([]vpatypes.VerticalPodAutoscalerCondition, bool) {
	out := make([]vpatypes.VerticalPodAutoscalerCondition, 0, len(conditions)+1)
	found := false
	changed := false
	for _, c := range conditions {
		if c.Type != Type {
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
