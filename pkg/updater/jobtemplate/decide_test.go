package jobtemplate

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/recommendation"
	"github.com/vpa-inplace/vpa-inplace/pkg/records"
	"github.com/vpa-inplace/vpa-inplace/pkg/resize"
	"github.com/vpa-inplace/vpa-inplace/pkg/resources"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testjob"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
)

func suspendedJob() *testjob.Builder {
	return testjob.New("j").Container("c", "100m", "100Mi").Suspended()
}

func TestDecide(t *testing.T) {
	rejected := func(cpu, mem string, generation int64) *records.Record {
		return &records.Record{Kind: records.KindJobRejected, Attempted: reqs("c", cpu, mem), Message: "field is immutable", Generation: generation}
	}
	tests := []struct {
		name      string
		job       *batchv1.Job
		desired   recommendation.Desired
		record    *records.Record
		minor     int
		action    resize.Action
		reason    resize.Reason
		clear     bool
		newRecord *records.Record // Kind, Attempted and Generation compared
	}{
		{
			name: "job not suspended: skip, its pods are resized in place", job: testjob.New("j").Container("c", "100m", "100Mi").Obj(),
			desired: want("c", "250m", "200Mi"), minor: 37, action: resize.ActionSkip, reason: ReasonJobNotSuspended,
		},
		{
			name: "job resumed: skip and forget an earlier refusal", job: testjob.New("j").Container("c", "100m", "100Mi").Resumed().Started().Obj(),
			desired: want("c", "250m", "200Mi"), record: rejected("250m", "200Mi", 1), minor: 37, action: resize.ActionSkip, reason: ReasonJobNotSuspended, clear: true,
		},
		{
			name: "job finished: skip", job: suspendedJob().Condition(batchv1.JobComplete, corev1.ConditionTrue).Obj(),
			desired: want("c", "250m", "200Mi"), minor: 37, action: resize.ActionSkip, reason: ReasonJobFinished,
		},
		{
			name: "no recommendation: skip", job: suspendedJob().Obj(),
			desired: recommendation.Desired{}, minor: 37, action: resize.ActionSkip, reason: resize.ReasonNoRecommendation,
		},
		{
			name: "template already has the recommendation: skip, no write", job: suspendedJob().Obj(),
			desired: want("c", "100m", "100Mi"), minor: 37, action: resize.ActionSkip, reason: resize.ReasonUpToDate,
		},
		{
			name: "template already right-sized, values written differently: skip", job: testjob.New("j").Container("c", "0.1", "102400Ki").Suspended().Obj(),
			desired: want("c", "100m", "100Mi"), minor: 37, action: resize.ActionSkip, reason: resize.ReasonUpToDate,
		},
		{
			name: "template inside the recommended range, change below threshold: skip", job: suspendedJob().Obj(),
			desired: recommendation.Desired{"c": {Requests: testpod.List("105m", "100Mi"), LowerBound: testpod.List("50m", "50Mi"), UpperBound: testpod.List("200m", "200Mi")}},
			minor:   37, action: resize.ActionSkip, reason: resize.ReasonBelowThreshold,
		},
		{
			name: "1.37, suspended with condition, no active pod: write", job: suspendedJob().Obj(),
			desired: want("c", "250m", "200Mi"), minor: 37, action: resize.ActionPatch, reason: ReasonJobTemplateUpdate,
		},
		{
			name: "1.36, suspend set, never started, no condition yet: write", job: suspendedJob().Condition(batchv1.JobSuspended, corev1.ConditionFalse).Obj(),
			desired: want("c", "250m", "200Mi"), minor: 36, action: resize.ActionPatch, reason: ReasonJobTemplateUpdate,
		},
		{
			name: "1.36, started and suspended, condition not True yet: wait", job: testjob.New("j").Container("c", "100m", "100Mi").SuspendOnly().Started().Obj(),
			desired: want("c", "250m", "200Mi"), minor: 36, action: resize.ActionWait, reason: ReasonJobNotMutableYet,
		},
		{
			name: "1.36, started, then suspended with condition True: write", job: suspendedJob().Started().Obj(),
			desired: want("c", "250m", "200Mi"), minor: 36, action: resize.ActionPatch, reason: ReasonJobTemplateUpdate,
		},
		{
			name: "1.35, suspend set, never started, no condition yet: wait for the condition", job: testjob.New("j").Container("c", "100m", "100Mi").SuspendOnly().Obj(),
			desired: want("c", "250m", "200Mi"), minor: 35, action: resize.ActionWait, reason: ReasonJobNotMutableYet,
		},
		{
			name: "1.35, suspended with condition True, no active pod: write", job: suspendedJob().Started().Obj(),
			desired: want("c", "250m", "200Mi"), minor: 35, action: resize.ActionPatch, reason: ReasonJobTemplateUpdate,
		},
		{
			name: "version unknown, no condition yet: wait (the 1.35 rule)", job: testjob.New("j").Container("c", "100m", "100Mi").SuspendOnly().Obj(),
			desired: want("c", "250m", "200Mi"), minor: 0, action: resize.ActionWait, reason: ReasonJobNotMutableYet,
		},
		{
			name: "version unknown, condition True: write", job: suspendedJob().Obj(),
			desired: want("c", "250m", "200Mi"), minor: 0, action: resize.ActionPatch, reason: ReasonJobTemplateUpdate,
		},
		{
			name: "suspended, pods still active: wait", job: suspendedJob().Started().Active(2).Obj(),
			desired: want("c", "250m", "200Mi"), minor: 37, action: resize.ActionWait, reason: ReasonJobNotMutableYet,
		},
		{
			name: "1.34: nothing sent, recorded as unsupported", job: suspendedJob().Generation(4).Obj(),
			desired: want("c", "250m", "200Mi"), minor: 34, action: resize.ActionSkip, reason: ReasonJobUnsupported,
			newRecord: &records.Record{Kind: records.KindJobUnsupported, Attempted: reqs("c", "250m", "200Mi"), Generation: 4},
		},
		{
			name: "1.33: nothing sent, recorded as unsupported", job: suspendedJob().Generation(2).Obj(),
			desired: want("c", "250m", "200Mi"), minor: 33, action: resize.ActionSkip, reason: ReasonJobUnsupported,
			newRecord: &records.Record{Kind: records.KindJobUnsupported, Attempted: reqs("c", "250m", "200Mi"), Generation: 2},
		},
		{
			name: "1.34, already recorded for this generation, another target: skip, no new record", job: suspendedJob().Generation(4).Obj(),
			desired: want("c", "300m", "300Mi"), minor: 34, action: resize.ActionSkip, reason: resize.ReasonRecordedSame,
			record: &records.Record{Kind: records.KindJobUnsupported, Attempted: reqs("c", "250m", "200Mi"), Generation: 4},
		},
		{
			name: "1.34, recorded for an older generation: recorded again", job: suspendedJob().Generation(5).Obj(),
			desired: want("c", "250m", "200Mi"), minor: 34, action: resize.ActionSkip, reason: ReasonJobUnsupported,
			record:    &records.Record{Kind: records.KindJobUnsupported, Attempted: reqs("c", "250m", "200Mi"), Generation: 4},
			newRecord: &records.Record{Kind: records.KindJobUnsupported, Attempted: reqs("c", "250m", "200Mi"), Generation: 5},
		},
		{
			name: "recorded as unsupported, server now supports it: write", job: suspendedJob().Generation(4).Obj(),
			desired: want("c", "250m", "200Mi"), minor: 36, action: resize.ActionPatch, reason: ReasonJobRetryAfterRefusal, clear: true,
			record: &records.Record{Kind: records.KindJobUnsupported, Attempted: reqs("c", "250m", "200Mi"), Generation: 4},
		},
		{
			name: "refused before, same values, same generation: skip, not retried", job: suspendedJob().Obj(),
			desired: want("c", "250m", "200Mi"), record: rejected("250m", "200Mi", 1), minor: 35, action: resize.ActionSkip, reason: resize.ReasonRecordedSame,
		},
		{
			name: "refused before, recommendation changed: retried once", job: suspendedJob().Obj(),
			desired: want("c", "300m", "300Mi"), record: rejected("250m", "200Mi", 1), minor: 35, action: resize.ActionPatch, reason: ReasonJobRetryAfterRefusal, clear: true,
		},
		{
			name: "refused before, the Job changed (new generation): retried once", job: suspendedJob().Generation(3).Obj(),
			desired: want("c", "250m", "200Mi"), record: rejected("250m", "200Mi", 1), minor: 35, action: resize.ActionPatch, reason: ReasonJobRetryAfterRefusal, clear: true,
		},
		{
			name: "refused before, template now has the values: skip and forget", job: testjob.New("j").Container("c", "250m", "200Mi").Suspended().Obj(),
			desired: want("c", "250m", "200Mi"), record: rejected("250m", "200Mi", 1), minor: 37, action: resize.ActionSkip, reason: resize.ReasonUpToDate, clear: true,
		},
		{
			name: "request above the template's limit: recorded as invalid, nothing sent", job: testjob.New("j").Container("c", "100m", "100Mi").Limits("c", "200m", "").Suspended().Obj(),
			desired:   recommendation.Desired{"c": {Requests: testpod.List("300m", ""), LowerBound: testpod.List("300m", ""), UpperBound: testpod.List("300m", "")}},
			minor:     37,
			action:    resize.ActionSkip,
			reason:    resize.ReasonInvalid,
			newRecord: &records.Record{Kind: records.KindInvalid, Attempted: resources.Resources{"c": {Requests: testpod.List("300m", "100Mi"), Limits: testpod.List("200m", "")}}, Generation: 1},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(Input{Job: tc.job, Desired: tc.desired, Record: tc.record, Threshold: 0.1, ServerMinor: tc.minor})
			assert.Equal(t, tc.action, d.Action, d.Message)
			assert.Equal(t, tc.reason, d.Reason, d.Message)
			assert.Equal(t, tc.clear, d.ClearRecord, "clear record")
			if tc.newRecord == nil {
				assert.Nil(t, d.NewRecord)
			} else {
				require.NotNil(t, d.NewRecord)
				assert.Equal(t, tc.newRecord.Kind, d.NewRecord.Kind)
				assert.True(t, resources.Equal(tc.newRecord.Attempted, d.NewRecord.Attempted), "attempted %s, want %s", d.NewRecord.Attempted, tc.newRecord.Attempted)
				assert.Equal(t, tc.newRecord.Generation, d.NewRecord.Generation)
				assert.NotEmpty(t, d.NewRecord.Message)
			}
			if tc.action == resize.ActionPatch {
				assert.NotEmpty(t, d.Patch)
			} else {
				assert.Empty(t, d.Patch, "no write unless the decision is to patch")
			}
		})
	}
}

func TestJobTemplateMutable(t *testing.T) {
	tests := []struct {
		name  string
		job   *batchv1.Job
		minor int
		want  bool
	}{
		{"not suspended, 1.37", testjob.New("j").Obj(), 37, false},
		{"suspended, condition, 1.34", testjob.New("j").Suspended().Obj(), 34, false},
		{"suspended, condition, 1.35", testjob.New("j").Suspended().Obj(), 35, true},
		{"suspended, no condition, never started, 1.35", testjob.New("j").SuspendOnly().Obj(), 35, false},
		{"suspended, no condition, never started, 1.36", testjob.New("j").SuspendOnly().Obj(), 36, true},
		{"suspended, no condition, never started, 1.37", testjob.New("j").SuspendOnly().Obj(), 37, true},
		{"suspended, no condition, started, 1.36", testjob.New("j").SuspendOnly().Started().Obj(), 36, false},
		{"suspended, condition, started, 1.36", testjob.New("j").Suspended().Started().Obj(), 36, true},
		{"suspended, condition, one active pod, 1.37", testjob.New("j").Suspended().Active(1).Obj(), 37, false},
		{"suspended, condition, one active pod, 1.35", testjob.New("j").Suspended().Active(1).Obj(), 35, false},
		{"condition True but suspend unset, 1.37", testjob.New("j").Condition(batchv1.JobSuspended, corev1.ConditionTrue).Obj(), 37, false},
		{"suspended, no condition, never started, version unknown", testjob.New("j").SuspendOnly().Obj(), 0, false},
		{"suspended, condition, started, version unknown", testjob.New("j").Suspended().Started().Obj(), 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, why := JobTemplateMutable(tc.job, tc.minor)
			assert.Equal(t, tc.want, got, why)
			if !got {
				assert.NotEmpty(t, why)
			}
		})
	}
}

func TestPodFromJobTemplate(t *testing.T) {
	job := testjob.New("j").Namespace("batch").Container("app", "100m", "100Mi").Obj()
	pod := PodFromJobTemplate(job)
	assert.Equal(t, "batch", pod.Namespace)
	assert.Equal(t, "j", pod.Labels["app"])
	pod.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = testpod.List("1", "")[corev1.ResourceCPU]
	assert.Equal(t, "100m", job.Spec.Template.Spec.Containers[0].Resources.Requests.Cpu().String(), "the Job in the cache is not touched")
}

func reqs(c, cpu, mem string) resources.Resources {
	return resources.Resources{c: {Requests: testpod.List(cpu, mem)}}
}

// want builds a Desired entry for container c with requests and bounds
// equal to the target.
func want(c, cpu, mem string) recommendation.Desired {
	return recommendation.Desired{c: {Requests: testpod.List(cpu, mem), LowerBound: testpod.List(cpu, mem), UpperBound: testpod.List(cpu, mem)}}
}
