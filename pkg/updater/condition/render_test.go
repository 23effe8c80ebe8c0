package condition

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/records"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/state"
)

// t0 is the tests' clock.
var t0 = time.Unix(1_800_000_000, 0)

func pod(name string, st state.PodState) state.Pod {
	return state.Pod{VPA: "default/web", Name: name, State: st, Since: t0}
}

func withDetail(p state.Pod, values, message string, kind records.Kind) state.Pod {
	p.Values, p.Message, p.Kind = values, message, kind
	return p
}

func withSince(p state.Pod, since time.Time) state.Pod {
	p.Since = since
	return p
}

func job(name string, st state.JobState) state.Job {
	return state.Job{VPA: "default/web", Name: name, State: st, Since: t0}
}

func TestBlockedCondition(t *testing.T) {
	infeasiblePod := withDetail(pod("web-2", state.PodInfeasible), "c: requests cpu=8 memory=100Mi",
		"node didn't have enough allocatable resources: cpu", records.KindNodeCapacity)
	invalidPod := withDetail(pod("web-3", state.PodInvalid), "c: requests cpu=300m",
		"the pod's QoS class would change from BestEffort to Burstable, which resizing cannot do", records.KindInvalid)
	deferredOld := withDetail(withSince(pod("web-5", state.PodDeferred), t0.Add(-time.Hour)), "", "Node didn't have enough resource: cpu", "")
	deferredNew := withDetail(pod("web-4", state.PodDeferred), "", "Node didn't have enough resource: cpu", "")
	errorPod := withDetail(pod("web-6", state.PodError), "", "failed to update the container's cgroup", "")
	withheldPod := withDetail(pod("web-7", state.PodWithheld), "c: requests cpu=300m", "", "")
	rejectedJob := job("train", state.JobRejected)
	rejectedJob.Values, rejectedJob.Kind, rejectedJob.Message = "app: requests cpu=250m", records.KindJobRejected, "spec.template: Invalid value: field is immutable"
	withheldJob := job("train-2", state.JobWithheld)
	withheldJob.Values = "app: requests cpu=250m"
	erroredJob := job("train-3", state.JobError)
	erroredJob.Message = "job template patch (Transient): etcdserver: request timed out"
	keptPod := withDetail(pod("web-8", state.PodMemoryLimitKept), "c: limits memory=100Mi",
		"cannot decrease memory limits: attempting to set pod memory limit (104857600) below current usage (157286400)", records.KindMemoryLimitRefused)

	tests := []struct {
		name        string
		in          Summary
		status      corev1.ConditionStatus
		reason      string
		contains    []string
		notContains []string
	}{
		{"no pods", Summary{}, corev1.ConditionFalse, ReasonNoPods, []string{"No pods."}, nil},
		{"all resized", Summary{Pods: []state.Pod{pod("web-1", state.PodResized), pod("web-2", state.PodResized)}},
			corev1.ConditionFalse, ReasonNotBlocked, []string{"2 pods: 2 resized or resizing."}, nil},
		{"resized and not running", Summary{Pods: []state.Pod{pod("web-1", state.PodResized), pod("web-2", state.PodNotRunning)}},
			corev1.ConditionFalse, ReasonNotBlocked, []string{"2 pods: 1 resized or resizing, 1 not running."}, nil},
		{"in progress counts with resized", Summary{Pods: []state.Pod{pod("web-1", state.PodResized), pod("web-2", state.PodInProgress)}},
			corev1.ConditionFalse, ReasonNotBlocked, []string{"2 pods: 2 resized or resizing."}, nil},
		{"waiting for the eviction tolerance", Summary{Pods: []state.Pod{pod("web-1", state.PodWaiting)}},
			corev1.ConditionFalse, ReasonNotBlocked, []string{"1 pod: 1 waiting for a disruption budget. Waiting: 1 pod waits for the eviction tolerance."}, nil},
		{"held back on purpose: not blocked, and why for the first by name", Summary{Pods: []state.Pod{pod("web-1", state.PodResized),
			withDetail(pod("web-3", state.PodHeld), "c: requests cpu=50m", "the resize waits for its resize window", ""),
			withDetail(pod("web-2", state.PodHeld), "c: requests cpu=10m", "the recommendation is not acted on yet", "")}},
			corev1.ConditionFalse, ReasonNotBlocked,
			[]string{"3 pods: 1 resized or resizing, 2 held back.", "Held back: web-2 to c: requests cpu=10m: the recommendation is not acted on yet (and 1 more)."},
			[]string{"web-3"}},
		{"deferred: the oldest pending pod and since when", Summary{Pods: []state.Pod{pod("web-1", state.PodResized), deferredNew, deferredOld}},
			corev1.ConditionTrue, ReasonDeferred,
			[]string{"3 pods: 1 resized or resizing, 2 deferred.", "oldest pending web-5 since 2027-01-15T07:00:00Z", "Node didn't have enough resource: cpu", "not evicted", "(and 1 more)"},
			[]string{"web-4"}},
		{"infeasible: the values and the API server's message", Summary{Pods: []state.Pod{pod("web-1", state.PodResized), infeasiblePod}},
			corev1.ConditionTrue, ReasonInfeasible,
			[]string{"1 infeasible", "web-2 cannot get c: requests cpu=8 memory=100Mi", "NodeCapacity: node didn't have enough allocatable resources: cpu", "asks for less"}, nil},
		{"invalid: the reason", Summary{Pods: []state.Pod{invalidPod}},
			corev1.ConditionTrue, ReasonInvalid, []string{"web-3 cannot be resized in place to c: requests cpu=300m: the pod's QoS class would change"}, nil},
		{"in error", Summary{Pods: []state.Pod{errorPod}},
			corev1.ConditionTrue, ReasonResizeError, []string{"1 in error", "web-6: failed to update the container's cgroup"}, nil},
		{"memory limit kept: the limits not sent and why", Summary{Pods: []state.Pod{pod("web-1", state.PodResized), keptPod}},
			corev1.ConditionTrue, ReasonMemoryLimitKept,
			[]string{"2 pods: 1 resized or resizing, 1 with memory limits kept.",
				"Memory limit kept: web-8 runs with higher memory limits than recommended; c: limits memory=100Mi or lower is not sent (MemoryLimitRefused: cannot decrease memory limits: attempting to set pod memory limit (104857600) below current usage (157286400))."}, nil},
		{"infeasible comes before a memory limit kept, which comes before an error",
			Summary{Pods: []state.Pod{errorPod, keptPod, infeasiblePod}},
			corev1.ConditionTrue, ReasonInfeasible, []string{"Infeasible:", "Memory limit kept:", "Error:"}, nil},
		{"invalid comes before infeasible, infeasible before error, error before deferred",
			Summary{Pods: []state.Pod{deferredOld, errorPod, infeasiblePod, invalidPod}},
			corev1.ConditionTrue, ReasonInvalid, []string{"Invalid:", "Infeasible:", "Error:", "Deferred:"}, nil},
		{"dry run: what would be sent", Summary{Pods: []state.Pod{withheldPod, infeasiblePod}, DryRun: true},
			corev1.ConditionTrue, ReasonDryRun, []string{"1 not sent", "Not sent (dry run): web-7 would be resized to c: requests cpu=300m"}, nil},
		{"dry run with nothing to send says so", Summary{Pods: []state.Pod{pod("web-1", state.PodResized)}, DryRun: true},
			corev1.ConditionFalse, ReasonNotBlocked, []string{"Dry run: no resize is sent."}, nil},
		{"paused comes first and says how", Summary{Pods: []state.Pod{withheldPod, invalidPod}, Paused: `resizing is paused by annotation vpa-inplace.dev/paused="true" on the VPA`},
			corev1.ConditionTrue, ReasonPaused, []string{"Paused: resizing is paused by annotation vpa-inplace.dev/paused", "Not sent (paused)", "Invalid:"}, nil},
		{"a revert the kill switch holds: it waits for the switch", Summary{Pods: []state.Pod{withheldPod,
			withDetail(pod("web-9", state.PodWithheld), "c: requests memory=100Mi", "resizing is paused cluster-wide", records.KindRevert)},
			Paused: "resizing is paused cluster-wide", KillSwitch: true},
			corev1.ConditionTrue, ReasonPaused, []string{"Paused: resizing is paused cluster-wide.",
				"Revert not sent (paused): web-9 is to be resized back to c: requests memory=100Mi after harm; it is sent as soon as the kill switch is lifted.",
				"Not sent (paused): web-7 would be resized to c: requests cpu=300m."}, []string{"and 1 more"}},
		{"a revert --dry-run holds: it waits for the updater without it, a VPA's pause notwithstanding", Summary{Pods: []state.Pod{
			withDetail(pod("web-9", state.PodWithheld), "c: requests memory=100Mi", "the updater runs with --dry-run", records.KindRevert)},
			Paused: `resizing is paused by annotation vpa-inplace.dev/paused="true" on the VPA`, DryRun: true},
			corev1.ConditionTrue, ReasonPaused, []string{"Revert not sent (dry run): web-9 is to be resized back to c: requests memory=100Mi after harm; it is sent as soon as the updater runs without --dry-run."},
			[]string{"Not sent (paused)"}},
		{"paused with nothing due is still reported", Summary{Pods: []state.Pod{pod("web-1", state.PodResized)}, Paused: "resizing is paused cluster-wide"},
			corev1.ConditionTrue, ReasonPaused, []string{"Paused: resizing is paused cluster-wide."}, nil},
		{"gate off", Summary{GateOff: true}, corev1.ConditionTrue, ReasonFeatureGateOff, []string{"--feature-gates=InPlace=true"}, nil},
		{"records not durable: said, whatever else the message says", Summary{Pods: []state.Pod{infeasiblePod},
			NotDurable: `writing the records of VPA default/web into ConfigMap vpa-inplace-system/vpa-inplace-records-infeasible-uid-web: configmaps is forbidden`},
			corev1.ConditionTrue, ReasonInfeasible, []string{"Records not durable: writing the records of VPA default/web", "configmaps is forbidden; they are held in memory only",
				"tried once more", "Infeasible:"}, nil},
		{"records not durable with nothing blocked", Summary{Pods: []state.Pod{pod("web-1", state.PodResized)}, NotDurable: "namespaces \"vpa-inplace-system\" not found"},
			corev1.ConditionFalse, ReasonNotBlocked, []string{"Records not durable: namespaces"}, nil},
		{"suspended Job with its template up to date, no pods", Summary{Jobs: []state.Job{job("train", state.JobTemplateUpToDate)}},
			corev1.ConditionFalse, ReasonNotBlocked, []string{"No pods. 1 suspended Job: 1 template up to date."}, nil},
		{"suspended Job waiting for its pods to go", Summary{Jobs: []state.Job{job("train", state.JobWaiting), job("train-2", state.JobTemplateUpToDate)}},
			corev1.ConditionFalse, ReasonNotBlocked, []string{"2 suspended Jobs: 1 template up to date, 1 waiting until the template may change."}, nil},
		{"Job template refused: the values, the API server's message, no retry", Summary{Pods: []state.Pod{pod("web-1", state.PodResized)}, Jobs: []state.Job{rejectedJob}},
			corev1.ConditionTrue, ReasonJobTemplateRejected,
			[]string{"1 pod: 1 resized or resizing. 1 suspended Job: 1 refused.", "Job train cannot get app: requests cpu=250m in its pod template while suspended (JobRejected: spec.template: Invalid value: field is immutable)", "not retried until the recommendation or the Job changes"}, nil},
		{"infeasible pods come before a refused Job template, which comes before errors",
			Summary{Pods: []state.Pod{infeasiblePod}, Jobs: []state.Job{rejectedJob, erroredJob}},
			corev1.ConditionTrue, ReasonInfeasible, []string{"Infeasible:", "Job template refused:", "Error: Job train-3: job template patch"}, nil},
		{"Job template in error", Summary{Jobs: []state.Job{erroredJob}},
			corev1.ConditionTrue, ReasonResizeError, []string{"1 in error", "Error: Job train-3: job template patch (Transient)"}, nil},
		{"dry run: the Job template that would be written", Summary{Jobs: []state.Job{withheldJob}, DryRun: true},
			corev1.ConditionTrue, ReasonDryRun, []string{"Not sent (dry run): the pod template of Job train-2 would be set to app: requests cpu=250m."}, nil},
		{"paused: the Job template not written", Summary{Jobs: []state.Job{withheldJob}, Paused: "resizing is paused cluster-wide"},
			corev1.ConditionTrue, ReasonPaused, []string{"Not sent (paused): the pod template of Job train-2"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := Blocked(tc.in)
			assert.Equal(t, Type, c.Type)
			assert.Equal(t, tc.status, c.Status)
			assert.Equal(t, tc.reason, c.Reason)
			for _, s := range tc.contains {
				assert.Contains(t, c.Message, s)
			}
			for _, s := range tc.notContains {
				assert.NotContains(t, c.Message, s)
			}
			assert.True(t, c.LastTransitionTime.IsZero(), "set when written")
		})
	}
}

func TestBlockedConditionIsStableAsTimePasses(t *testing.T) {
	in := Summary{Pods: []state.Pod{withDetail(withSince(pod("web-1", state.PodDeferred), t0.Add(-time.Hour)), "", "no room", "")}}
	assert.Equal(t, Blocked(in), Blocked(in), "no age in the message: no write as time passes")
}

func TestBlockedConditionMessageIsBounded(t *testing.T) {
	long := strings.Repeat("é", 3000)
	c := Blocked(Summary{Pods: []state.Pod{withDetail(pod("web-1", state.PodInvalid), "x", long, records.KindInvalid)}})
	assert.LessOrEqual(t, len(c.Message), maxConditionMessage)
	assert.True(t, strings.HasSuffix(c.Message, "..."))
	assert.True(t, strings.ToValidUTF8(c.Message, "?") == c.Message, "cut on a character boundary")
}

func TestSetCondition(t *testing.T) {
	earlier := metav1.NewTime(t0.Add(-time.Hour))
	ours := func(status corev1.ConditionStatus, reason, msg string, at metav1.Time) vpatypes.VerticalPodAutoscalerCondition {
		return vpatypes.VerticalPodAutoscalerCondition{Type: Type, Status: status, Reason: reason, Message: msg, LastTransitionTime: at}
	}
	recommender := vpatypes.VerticalPodAutoscalerCondition{Type: vpatypes.RecommendationProvided, Status: corev1.ConditionTrue, LastTransitionTime: earlier}
	want := ours(corev1.ConditionTrue, ReasonInfeasible, "1 pod: 1 infeasible.", metav1.Time{})
	tests := []struct {
		name     string
		existing []vpatypes.VerticalPodAutoscalerCondition
		want     *vpatypes.VerticalPodAutoscalerCondition
		changed  bool
		result   []vpatypes.VerticalPodAutoscalerCondition
	}{
		{"added next to the recommender's, transition now", []vpatypes.VerticalPodAutoscalerCondition{recommender}, &want, true,
			[]vpatypes.VerticalPodAutoscalerCondition{recommender, ours(corev1.ConditionTrue, ReasonInfeasible, "1 pod: 1 infeasible.", metav1.NewTime(t0))}},
		{"same status, reason and message: unchanged, whatever the transition time",
			[]vpatypes.VerticalPodAutoscalerCondition{ours(corev1.ConditionTrue, ReasonInfeasible, "1 pod: 1 infeasible.", earlier), recommender}, &want, false,
			[]vpatypes.VerticalPodAutoscalerCondition{ours(corev1.ConditionTrue, ReasonInfeasible, "1 pod: 1 infeasible.", earlier), recommender}},
		{"new message, same status: the transition time is kept",
			[]vpatypes.VerticalPodAutoscalerCondition{ours(corev1.ConditionTrue, ReasonDeferred, "old", earlier)}, &want, true,
			[]vpatypes.VerticalPodAutoscalerCondition{ours(corev1.ConditionTrue, ReasonInfeasible, "1 pod: 1 infeasible.", earlier)}},
		{"status flips: the transition time moves",
			[]vpatypes.VerticalPodAutoscalerCondition{ours(corev1.ConditionFalse, ReasonNotBlocked, "ok", earlier)}, &want, true,
			[]vpatypes.VerticalPodAutoscalerCondition{ours(corev1.ConditionTrue, ReasonInfeasible, "1 pod: 1 infeasible.", metav1.NewTime(t0))}},
		{"removed when no longer wanted", []vpatypes.VerticalPodAutoscalerCondition{recommender, ours(corev1.ConditionFalse, ReasonNotBlocked, "ok", earlier)}, nil, true,
			[]vpatypes.VerticalPodAutoscalerCondition{recommender}},
		{"absent and not wanted: unchanged", []vpatypes.VerticalPodAutoscalerCondition{recommender}, nil, false,
			[]vpatypes.VerticalPodAutoscalerCondition{recommender}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, changed := Set(tc.existing, tc.want, t0)
			assert.Equal(t, tc.changed, changed)
			require.Len(t, got, len(tc.result))
			for i := range got {
				assert.Equal(t, tc.result[i].Type, got[i].Type)
				assert.Equal(t, tc.result[i].Status, got[i].Status)
				assert.Equal(t, tc.result[i].Reason, got[i].Reason)
				assert.Equal(t, tc.result[i].Message, got[i].Message)
				assert.True(t, tc.result[i].LastTransitionTime.Equal(&got[i].LastTransitionTime), "%s: %s vs %s", got[i].Type, tc.result[i].LastTransitionTime, got[i].LastTransitionTime)
			}
		})
	}
}

// A resize going through must not change the condition: applying a
// recommendation without trouble costs no status write.
func TestConditionIgnoresResizesUnderWay(t *testing.T) {
	settled := Blocked(Summary{Pods: []state.Pod{pod("web-1", state.PodResized), pod("web-2", state.PodResized)}})
	underWay := Blocked(Summary{Pods: []state.Pod{pod("web-1", state.PodInProgress), pod("web-2", state.PodResized)}})
	assert.Equal(t, settled, underWay)
}
