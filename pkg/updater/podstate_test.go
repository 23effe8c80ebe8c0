package updater

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/vpa-inplace/vpa-inplace/pkg/records"
	"github.com/vpa-inplace/vpa-inplace/pkg/resize"
	"github.com/vpa-inplace/vpa-inplace/pkg/resources"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/state"
)

func TestStateOf(t *testing.T) {
	since := t0.Add(-time.Hour)
	deferred := resize.Status{State: resize.StateDeferred, Message: "Node didn't have enough resource: cpu", Since: since}
	infeasibleRecord := &records.Record{Kind: records.KindNodeCapacity, Attempted: resources.Resources{"c": {Requests: testpod.List("8", "")}}, Message: "no room", RecordedAt: since}
	invalidRecord := &records.Record{Kind: records.KindInvalid, Attempted: resources.Resources{"c": {Requests: testpod.List("1", "")}}, Message: "qos", RecordedAt: since}
	memRecord := &records.Record{Kind: records.KindMemoryLimitRefused, Attempted: resources.Resources{"c": {Limits: testpod.List("", "100Mi")}},
		Message: "cannot decrease memory limits", RecordedAt: since}
	kept := state.Pod{State: state.PodMemoryLimitKept, Since: since, Values: "c: limits memory=100Mi", Message: "cannot decrease memory limits", Kind: records.KindMemoryLimitRefused}
	tests := []struct {
		name      string
		reason    resize.Reason
		record    *records.Record
		memRecord *records.Record
		status    resize.Status
		want      state.Pod
	}{
		{"not running", resize.ReasonPodNotRunning, nil, nil, resize.Status{}, state.Pod{State: state.PodNotRunning}},
		{"no recommendation", resize.ReasonNoRecommendation, nil, nil, resize.Status{}, state.Pod{State: state.PodNoRecommendation}},
		{"up to date", resize.ReasonUpToDate, nil, nil, resize.Status{}, state.Pod{State: state.PodResized}},
		{"below threshold counts as resized", resize.ReasonBelowThreshold, nil, nil, resize.Status{}, state.Pod{State: state.PodResized}},
		{"deferred: the kubelet's time and words", resize.ReasonResizeDeferred, nil, nil, deferred, state.Pod{State: state.PodDeferred, Since: since, Message: deferred.Message}},
		{"in progress", resize.ReasonResizeInProgress, nil, nil, resize.Status{Since: since}, state.Pod{State: state.PodInProgress, Since: since}},
		{"unknown counts as in progress", resize.ReasonResizeUnknown, nil, nil, resize.Status{}, state.Pod{State: state.PodInProgress}},
		{"kubelet error", resize.ReasonResizeError, nil, nil, resize.Status{Message: "boom"}, state.Pod{State: state.PodError, Message: "boom"}},
		{"eviction tolerance", resize.ReasonDisruptionBudget, nil, nil, resize.Status{}, state.Pod{State: state.PodWaiting}},
		{"infeasible record", resize.ReasonRecordedSame, infeasibleRecord, nil, resize.Status{},
			state.Pod{State: state.PodInfeasible, Since: since, Values: "c: requests cpu=8", Message: "no room", Kind: records.KindNodeCapacity}},
		{"kubelet infeasible", resize.ReasonInfeasible, infeasibleRecord, nil, resize.Status{}, state.Pod{State: state.PodInfeasible, Since: since, Values: "c: requests cpu=8", Message: "no room", Kind: records.KindNodeCapacity}},
		{"invalid record", resize.ReasonInvalid, invalidRecord, nil, resize.Status{},
			state.Pod{State: state.PodInvalid, Since: since, Values: "c: requests cpu=1", Message: "qos", Kind: records.KindInvalid}},
		{"memory limit unsafe, nothing else to resize: memory limit kept", resize.ReasonMemoryLimitUnsafe, nil, memRecord, resize.Status{}, kept},
		{"up to date but for a memory limit kept: memory limit kept", resize.ReasonUpToDate, nil, memRecord, resize.Status{}, kept},
		{"below threshold but for a memory limit kept: memory limit kept", resize.ReasonBelowThreshold, nil, memRecord, resize.Status{}, kept},
		{"a memory record does not hide a resize in progress", resize.ReasonResizeInProgress, nil, memRecord, resize.Status{Since: since}, state.Pod{State: state.PodInProgress, Since: since}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := stateOf(resize.Decision{Reason: tc.reason}, tc.record, tc.memRecord, tc.status)
			if tc.want.Message == "" {
				got.Message = "" // the decision's own wording is not under test
			}
			assert.True(t, tc.want.Equal(got), "got %+v", got)
		})
	}
}
