package resize

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/recommendation"
	"github.com/vpa-inplace/vpa-inplace/pkg/records"
	"github.com/vpa-inplace/vpa-inplace/pkg/resources"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
)

// want builds a Desired entry for container c with requests (and, when
// given, limits) and bounds equal to the target.
func want(c, cpu, mem string) recommendation.Desired {
	return recommendation.Desired{c: {Requests: testpod.List(cpu, mem), LowerBound: testpod.List(cpu, mem), UpperBound: testpod.List(cpu, mem)}}
}

func wantWithLimits(c, cpu, mem string) recommendation.Desired {
	d := want(c, cpu, mem)
	e := d[c]
	e.Limits = testpod.List(cpu, mem)
	d[c] = e
	return d
}

func reqs(c, cpu, mem string) resources.Resources {
	return resources.Resources{c: {Requests: testpod.List(cpu, mem)}}
}

func guaranteed(c, cpu, mem string) resources.Resources {
	return resources.Resources{c: {Requests: testpod.List(cpu, mem), Limits: testpod.List(cpu, mem)}}
}

func running() *testpod.Builder {
	return testpod.New("p").Container("c", "100m", "100Mi")
}

func TestDecide(t *testing.T) {
	tests := []struct {
		name        string
		pod         *corev1.Pod
		desired     recommendation.Desired
		record      *records.Record
		minor       int
		noDisrupt   bool
		action      Action
		reason      Reason
		clear       bool
		newRecord   *records.Record // Kind and Attempted compared
		patch       string
		disruptive  bool
		messageHint string
	}{
		// AEP-8818 Complete Flow Description: the stored attempt.
		{
			name:    "stored attempt exists and matches current recommendation: skip pod",
			pod:     running().Running().Obj(),
			desired: want("c", "4", "100Mi"),
			record:  &records.Record{Kind: records.KindNodeCapacity, Attempted: reqs("c", "4", "100Mi")},
			action:  ActionSkip, reason: ReasonRecordedSame,
		},
		{
			name:    "stored attempt exists and recommendation has one resource lower: clear stored attempt and update",
			pod:     running().Running().Obj(),
			desired: want("c", "3", "100Mi"),
			record:  &records.Record{Kind: records.KindNodeCapacity, Attempted: reqs("c", "4", "100Mi")},
			action:  ActionPatch, reason: ReasonResize, clear: true,
			patch: `{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"3","memory":"100Mi"}}}]}}`,
		},
		{
			name:    "stored attempt exists and recommendation is all greater or equal: skip pod, keep stored attempt",
			pod:     running().Running().Obj(),
			desired: want("c", "5", "100Mi"),
			record:  &records.Record{Kind: records.KindNodeCapacity, Attempted: reqs("c", "4", "100Mi")},
			action:  ActionSkip, reason: ReasonRecordedNotLower,
		},
		{
			name:    "no stored attempt: proceed and update",
			pod:     running().Running().Obj(),
			desired: want("c", "200m", "200Mi"),
			action:  ActionPatch, reason: ReasonResize,
			patch: `{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"200m","memory":"200Mi"}}}]}}`,
		},

		// AEP-8818 resize status table.
		{
			name:    "resize status InProgress: wait, take no action",
			pod:     running().Running().Condition(corev1.PodResizeInProgress, "", "").Obj(),
			desired: want("c", "200m", "200Mi"),
			action:  ActionWait, reason: ReasonResizeInProgress,
		},
		{
			name:    "resize status Deferred: wait, take no action",
			pod:     running().Running().Condition(corev1.PodResizePending, corev1.PodReasonDeferred, "Node didn't have enough resource: cpu").Obj(),
			desired: want("c", "200m", "200Mi"),
			action:  ActionWait, reason: ReasonResizeDeferred, messageHint: "Node didn't have enough resource",
		},
		{
			name:      "resize status Infeasible: store spec.resources as infeasible, skip pod",
			pod:       testpod.New("p").Container("c", "4", "100Mi").Running().Condition(corev1.PodResizePending, corev1.PodReasonInfeasible, "static CPU manager").Obj(),
			desired:   want("c", "4", "100Mi"),
			action:    ActionSkip,
			reason:    ReasonInfeasible,
			newRecord: &records.Record{Kind: records.KindInfeasible, Attempted: reqs("c", "4", "100Mi")},
		},
		{
			name:    "resize status Error: take no action, kubelet retries, never recorded",
			pod:     running().Running().Condition(corev1.PodResizeInProgress, corev1.PodReasonError, "cannot decrease memory limits").Obj(),
			desired: want("c", "200m", "50Mi"),
			action:  ActionWait, reason: ReasonResizeError,
		},

		// Clarifications.
		{
			name:    "resize pending with an unknown reason: wait, no patch",
			pod:     running().Running().Condition(corev1.PodResizePending, "SomethingNew", "").Obj(),
			desired: want("c", "200m", "200Mi"),
			action:  ActionWait, reason: ReasonResizeUnknown,
		},
		{
			name:    "kubelet has not observed the latest generation: unknown state, wait, no patch",
			pod:     running().Running().Generation(3).Obj(),
			desired: want("c", "200m", "200Mi"),
			action:  ActionWait, reason: ReasonResizeUnknown,
		},
		{
			name:    "legacy status.resize Deferred: wait",
			pod:     running().Running().LegacyResizeStatus(corev1.PodResizeStatusDeferred).Obj(),
			desired: want("c", "200m", "200Mi"),
			action:  ActionWait, reason: ReasonResizeDeferred,
		},
		{
			name:    "legacy status.resize InProgress: wait",
			pod:     running().Running().LegacyResizeStatus(corev1.PodResizeStatusInProgress).Obj(),
			desired: want("c", "200m", "200Mi"),
			action:  ActionWait, reason: ReasonResizeInProgress,
		},
		{
			name:      "legacy status.resize Infeasible: store spec.resources, skip pod",
			pod:       testpod.New("p").Container("c", "4", "100Mi").Running().LegacyResizeStatus(corev1.PodResizeStatusInfeasible).Obj(),
			desired:   want("c", "4", "100Mi"),
			action:    ActionSkip,
			reason:    ReasonInfeasible,
			newRecord: &records.Record{Kind: records.KindInfeasible, Attempted: reqs("c", "4", "100Mi")},
		},
		{
			name:    "kubelet Infeasible already recorded and recommendation unchanged: skip without recording again",
			pod:     testpod.New("p").Container("c", "4", "100Mi").Running().Condition(corev1.PodResizePending, corev1.PodReasonInfeasible, "x").Obj(),
			desired: want("c", "4", "100Mi"),
			record:  &records.Record{Kind: records.KindInfeasible, Attempted: reqs("c", "4", "100Mi")},
			action:  ActionSkip, reason: ReasonInfeasible,
		},
		{
			name:    "kubelet Infeasible and recommendation lower than the infeasible values: clear and patch",
			pod:     testpod.New("p").Container("c", "4", "100Mi").Running().Condition(corev1.PodResizePending, corev1.PodReasonInfeasible, "x").Obj(),
			desired: want("c", "3900m", "100Mi"),
			record:  &records.Record{Kind: records.KindInfeasible, Attempted: reqs("c", "4", "100Mi")},
			action:  ActionPatch, reason: ReasonRetryLowerThanRecord, clear: true,
			patch: `{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"3900m","memory":"100Mi"}}}]}}`,
		},
		{
			name:      "kubelet Infeasible and recommendation greater than the infeasible values: skip, record kept",
			pod:       testpod.New("p").Container("c", "4", "100Mi").Running().Condition(corev1.PodResizePending, corev1.PodReasonInfeasible, "x").Obj(),
			desired:   want("c", "5", "100Mi"),
			action:    ActionSkip,
			reason:    ReasonRecordedNotLower,
			newRecord: &records.Record{Kind: records.KindInfeasible, Attempted: reqs("c", "4", "100Mi")},
		},
		{
			name:    "NodeCapacity record and same capped values: skip (compare values that would be patched)",
			pod:     running().Running().Obj(),
			desired: want("c", "4", "100Mi"), // what capping produced, e.g. maxAllowed 4 for a raw 8
			record:  &records.Record{Kind: records.KindNodeCapacity, Attempted: reqs("c", "4000m", "100Mi")},
			action:  ActionSkip, reason: ReasonRecordedSame,
		},
		{
			name:    "invalid record and same values: skip",
			pod:     running().Running().Obj(),
			desired: want("c", "200m", "200Mi"),
			record:  &records.Record{Kind: records.KindInvalid, Attempted: reqs("c", "200m", "200Mi")},
			action:  ActionSkip, reason: ReasonRecordedSame,
		},
		{
			name:    "invalid record and different values, even greater: clear and try",
			pod:     running().Running().Obj(),
			desired: want("c", "300m", "300Mi"),
			record:  &records.Record{Kind: records.KindInvalid, Attempted: reqs("c", "200m", "200Mi")},
			action:  ActionPatch, reason: ReasonResize, clear: true,
			patch: `{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"300m","memory":"300Mi"}}}]}}`,
		},
		{
			name:    "resources already match the recommendation: skip, no pointless patch",
			pod:     running().Running().Obj(),
			desired: want("c", "100m", "100Mi"),
			action:  ActionSkip, reason: ReasonUpToDate,
		},
		{
			name: "change below pod-update-threshold inside the recommended range: skip",
			pod:  running().Running().Obj(),
			desired: recommendation.Desired{"c": {
				Requests:   testpod.List("105m", "104Mi"),
				LowerBound: testpod.List("50m", "50Mi"), UpperBound: testpod.List("1", "1Gi"),
			}},
			action: ActionSkip, reason: ReasonBelowThreshold,
		},
		{
			name: "small change but request outside the recommended range: patch",
			pod:  running().Running().Obj(),
			desired: recommendation.Desired{"c": {
				Requests:   testpod.List("105m", "100Mi"),
				LowerBound: testpod.List("104m", "50Mi"), UpperBound: testpod.List("1", "1Gi"),
			}},
			action: ActionPatch, reason: ReasonResize,
			patch: `{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"105m","memory":"100Mi"}}}]}}`,
		},
		{
			name:    "guaranteed pod keeps requests equal to limits: patched with both",
			pod:     testpod.New("p").Guaranteed("c", "100m", "100Mi").Running().Obj(),
			desired: wantWithLimits("c", "200m", "200Mi"),
			action:  ActionPatch, reason: ReasonResize,
			patch: `{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"200m","memory":"200Mi"},"limits":{"cpu":"200m","memory":"200Mi"}}}]}}`,
		},
		{
			name:      "change that would alter the QoS class: invalid, recorded with the reason, never patched",
			pod:       testpod.New("p").Guaranteed("c", "100m", "100Mi").Running().Obj(),
			desired:   want("c", "50m", "100Mi"), // requests only: no longer equal to limits
			action:    ActionSkip,
			reason:    ReasonInvalid,
			newRecord: &records.Record{Kind: records.KindInvalid, Attempted: resources.Resources{"c": {Requests: testpod.List("50m", "100Mi"), Limits: testpod.List("100m", "100Mi")}}},
		},
		{
			name:      "request above limit: invalid",
			pod:       testpod.New("p").Container("c", "100m", "100Mi").Limits("c", "500m", "").Running().Obj(),
			desired:   want("c", "1", "100Mi"),
			action:    ActionSkip,
			reason:    ReasonInvalid,
			newRecord: &records.Record{Kind: records.KindInvalid, Attempted: resources.Resources{"c": {Requests: testpod.List("1", "100Mi"), Limits: testpod.List("500m", "")}}},
		},
		{
			name:        "memory limit decrease on 1.33 without RestartContainer: invalid before patching",
			pod:         testpod.New("p").Container("c", "100m", "100Mi").Limits("c", "", "400Mi").Running().Obj(),
			desired:     recommendation.Desired{"c": {Requests: testpod.List("100m", "50Mi"), Limits: testpod.List("", "200Mi"), LowerBound: testpod.List("100m", "50Mi"), UpperBound: testpod.List("100m", "50Mi")}},
			minor:       33,
			action:      ActionSkip,
			reason:      ReasonInvalid,
			messageHint: "1.33 forbids decreasing a memory limit",
			newRecord:   &records.Record{Kind: records.KindInvalid, Attempted: resources.Resources{"c": {Requests: testpod.List("100m", "50Mi"), Limits: testpod.List("", "200Mi")}}},
		},
		{
			name:    "memory limit decrease on 1.34: allowed",
			pod:     testpod.New("p").Container("c", "100m", "100Mi").Limits("c", "", "400Mi").Running().Obj(),
			desired: recommendation.Desired{"c": {Requests: testpod.List("100m", "50Mi"), Limits: testpod.List("", "200Mi"), LowerBound: testpod.List("100m", "50Mi"), UpperBound: testpod.List("100m", "50Mi")}},
			minor:   34,
			action:  ActionPatch, reason: ReasonResize,
			patch: `{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"100m","memory":"50Mi"},"limits":{"memory":"200Mi"}}}]}}`,
		},
		{
			name:    "memory limit decrease on 1.33 with RestartContainer: allowed and disruptive",
			pod:     testpod.New("p").Container("c", "100m", "100Mi").Limits("c", "", "400Mi").ResizePolicy("c", corev1.ResourceMemory, corev1.RestartContainer).Running().Obj(),
			desired: recommendation.Desired{"c": {Requests: testpod.List("100m", "50Mi"), Limits: testpod.List("", "200Mi"), LowerBound: testpod.List("100m", "50Mi"), UpperBound: testpod.List("100m", "50Mi")}},
			minor:   33,
			action:  ActionPatch, reason: ReasonResize, disruptive: true,
			patch: `{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"100m","memory":"50Mi"},"limits":{"memory":"200Mi"}}}]}}`,
		},
		{
			name:      "static pod: invalid",
			pod:       running().Annotation("kubernetes.io/config.mirror", "x").Running().Obj(),
			desired:   want("c", "200m", "200Mi"),
			action:    ActionSkip,
			reason:    ReasonInvalid,
			newRecord: &records.Record{Kind: records.KindInvalid, Attempted: reqs("c", "200m", "200Mi")},
		},
		{
			name: "pod-level resources on 1.34: invalid",
			pod: func() *corev1.Pod {
				p := running().Running().Obj()
				p.Spec.Resources = &corev1.ResourceRequirements{Limits: testpod.List("1", "1Gi")}
				return p
			}(),
			desired:   want("c", "200m", "200Mi"),
			minor:     34,
			action:    ActionSkip,
			reason:    ReasonInvalid,
			newRecord: &records.Record{Kind: records.KindInvalid, Attempted: reqs("c", "200m", "200Mi")},
		},
		{
			name:    "resize restarting containers within the eviction tolerance: patch, disruptive",
			pod:     running().ResizePolicy("c", corev1.ResourceCPU, corev1.RestartContainer).Running().Obj(),
			desired: want("c", "200m", "100Mi"),
			action:  ActionPatch, reason: ReasonResize, disruptive: true,
			patch: `{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"200m","memory":"100Mi"}}}]}}`,
		},
		{
			name:      "resize restarting containers beyond the eviction tolerance: wait",
			pod:       running().ResizePolicy("c", corev1.ResourceCPU, corev1.RestartContainer).Running().Obj(),
			desired:   want("c", "200m", "100Mi"),
			noDisrupt: true, disruptive: true,
			action: ActionWait, reason: ReasonDisruptionBudget,
		},
		{
			name:      "RestartContainer on an unchanged resource is not disruptive",
			pod:       running().ResizePolicy("c", corev1.ResourceMemory, corev1.RestartContainer).Running().Obj(),
			desired:   want("c", "200m", "100Mi"),
			noDisrupt: true,
			action:    ActionPatch, reason: ReasonResize,
			patch: `{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"200m","memory":"100Mi"}}}]}}`,
		},
		{
			name:    "only containers that change are patched; others are left alone",
			pod:     testpod.New("p").Container("a", "100m", "100Mi").Container("b", "100m", "100Mi").Running().Obj(),
			desired: recommendation.Desired{"a": want("a", "100m", "100Mi")["a"], "b": want("b", "300m", "100Mi")["b"]},
			action:  ActionPatch, reason: ReasonResize,
			patch: `{"spec":{"containers":[{"name":"b","resources":{"requests":{"cpu":"300m","memory":"100Mi"}}}]}}`,
		},
		{
			name:    "pod not running: skip",
			pod:     running().Obj(),
			desired: want("c", "200m", "200Mi"),
			action:  ActionSkip, reason: ReasonPodNotRunning,
		},
		{
			name: "terminating pod: skip",
			pod: func() *corev1.Pod {
				p := running().Running().Obj()
				p.DeletionTimestamp = &metav1.Time{}
				return p
			}(),
			desired: want("c", "200m", "200Mi"),
			action:  ActionSkip, reason: ReasonPodNotRunning,
		},
		{
			name:   "no recommendation: skip",
			pod:    running().Running().Obj(),
			action: ActionSkip, reason: ReasonNoRecommendation,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(Input{
				Pod: tc.pod, Desired: tc.desired, Record: tc.record,
				Threshold: 0.1, ServerMinor: tc.minor, DisruptionAllowed: !tc.noDisrupt,
			})
			assert.Equal(t, tc.action, d.Action, d.Message)
			assert.Equal(t, tc.reason, d.Reason, d.Message)
			assert.Equal(t, tc.clear, d.ClearRecord, "ClearRecord")
			assert.Equal(t, tc.disruptive, d.Disruptive, "Disruptive")
			if tc.patch != "" {
				assert.JSONEq(t, tc.patch, string(d.Patch))
			} else {
				assert.Empty(t, d.Patch)
			}
			if tc.newRecord == nil {
				assert.Nil(t, d.NewRecord)
			} else {
				require.NotNil(t, d.NewRecord)
				assert.Equal(t, tc.newRecord.Kind, d.NewRecord.Kind)
				assert.True(t, resources.Equal(tc.newRecord.Attempted, d.NewRecord.Attempted), "recorded %s", d.NewRecord.Attempted)
				assert.NotEmpty(t, d.NewRecord.Message)
			}
			if tc.messageHint != "" {
				assert.Contains(t, d.Message, tc.messageHint)
			}
		})
	}
}
