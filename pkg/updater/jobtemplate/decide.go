// Package jobtemplate writes recommendations into the pod templates of
// suspended Jobs (KEP-5440). Decide is the pure decision, as pkg/resize is
// for pods; the Controller reads the caches, decides, sends the write and
// reports it. It reaches the rest of the updater through narrow ends: a
// status sink for the VPA condition, a pauser (Withheld), the Job queue.
package jobtemplate

import (
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/recommendation"
	"github.com/vpa-inplace/vpa-inplace/pkg/records"
	"github.com/vpa-inplace/vpa-inplace/pkg/resize"
	"github.com/vpa-inplace/vpa-inplace/pkg/resources"
)

// Suspended Jobs (KEP-5440). While a Job is suspended and has no active pod,
// the API server lets the resources of its pod template's containers change,
// so that the pods it creates on resume start with them. The decision here
// says whether to write the recommendation into the template of one Job;
// pkg/updater sends the write. The rules the API server applies to the old
// Job (pkg/registry/batch/job/strategy.go) differ by version:
//
//   - 1.34 and earlier: a Job's pod template is immutable. Nothing is sent;
//     the refusal is recorded once per Job generation (KindJobUnsupported).
//   - 1.35: gate MutablePodResourcesForSuspendedJobs, alpha, off by default.
//     Allowed when spec.suspend is true, the JobSuspended condition is True
//     and status.active is 0.
//   - 1.36 and later: the gate is beta, on by default. Allowed when
//     spec.suspend is true, status.active is 0 and either status.startTime
//     is unset (never started) or the JobSuspended condition is True.
//   - Version unknown: both rules must hold (the 1.35 one, which implies the
//     1.36 one).
//
// Where the gate is off, the API server answers 422 "field is immutable":
// recorded (KindJobRejected) and not sent again until the recommendation or
// the Job's spec (its generation) changes.

// Reasons of Job decisions, besides ReasonNoRecommendation, ReasonUpToDate,
// ReasonBelowThreshold, ReasonRecordedSame and ReasonInvalid.
const (
	ReasonJobNotSuspended      resize.Reason = "JobNotSuspended"
	ReasonJobFinished          resize.Reason = "JobFinished"
	ReasonJobNotMutableYet     resize.Reason = "JobNotMutableYet"
	ReasonJobUnsupported       resize.Reason = "JobUnsupportedVersion"
	ReasonJobTemplateUpdate    resize.Reason = "JobTemplateUpdate"
	ReasonJobRetryAfterRefusal resize.Reason = "JobRetryAfterRefusal"
)

// firstMutableMinor is the first Kubernetes minor version whose API server
// can change a suspended Job's container resources (behind a gate in 1.35).
const firstMutableMinor = 35

// Input is everything a Job decision depends on.
type Input struct {
	Job *batchv1.Job
	// Desired is what the VPA wants for each container of the Job's pod
	// template (the calculator applied to PodFromJobTemplate), after capping.
	Desired recommendation.Desired
	// Record is what is remembered of an earlier refusal for this Job, or nil.
	Record *records.Record
	// Threshold is --pod-update-threshold: inside the recommended range, a
	// template is only rewritten for a change larger than this.
	Threshold float64
	// ServerMinor is the API server's minor version, 0 when unknown.
	ServerMinor int
}

// Decision is what to do with a Job and why. NewRecord carries the Job's
// generation.
type Decision struct {
	Action  resize.Action
	Reason  resize.Reason
	Message string
	// Target is what the template's containers should get (cpu and memory
	// requests and limits of the containers the VPA controls).
	Target resources.Resources
	// Patch is the strategic merge patch of the Job (ActionPatch only).
	Patch       []byte
	ClearRecord bool
	NewRecord   *records.Record
}

func (d Decision) with(a resize.Action, r resize.Reason, msg string) Decision {
	d.Action, d.Reason, d.Message = a, r, msg
	return d
}

// Decide returns what to do with a Job's pod template.
func Decide(in Input) Decision {
	job := in.Job
	record := in.Record
	var d Decision
	if !IsSuspended(job) {
		d.ClearRecord = record != nil
		return d.with(resize.ActionSkip, ReasonJobNotSuspended, "the Job is not suspended; its pods are resized in place once running")
	}
	if finished, how := isFinished(job); finished {
		d.ClearRecord = record != nil
		return d.with(resize.ActionSkip, ReasonJobFinished, "the Job is "+how)
	}
	if len(in.Desired) == 0 {
		return d.with(resize.ActionSkip, resize.ReasonNoRecommendation, "no recommendation for any container of the Job's pod template")
	}
	pod := PodFromJobTemplate(job)
	d.Target = resize.Target(pod, in.Desired)
	if resources.Equal(resize.Current(pod, d.Target), d.Target) {
		d.ClearRecord = record != nil
		return d.with(resize.ActionSkip, resize.ReasonUpToDate, "the pod template has the recommendation")
	}
	if matters, why := resize.ChangeMatters(pod, in.Desired, in.Threshold); !matters {
		return d.with(resize.ActionSkip, resize.ReasonBelowThreshold, why)
	}

	if in.ServerMinor > 0 && in.ServerMinor < firstMutableMinor {
		// Nothing is sent to a server that refuses it whatever the values:
		// one record per generation of the Job, whatever the target.
		if record != nil && record.Kind == records.KindJobUnsupported && record.Generation == job.Generation {
			return d.with(resize.ActionSkip, resize.ReasonRecordedSame, record.Message)
		}
		msg := fmt.Sprintf("Kubernetes 1.%d cannot change the pod template of a Job; suspended Jobs' container resources are mutable from 1.35 (gate MutablePodResourcesForSuspendedJobs, on by default from 1.36)", in.ServerMinor)
		d.NewRecord = &records.Record{Kind: records.KindJobUnsupported, Attempted: d.Target, Message: msg, Generation: job.Generation}
		return d.with(resize.ActionSkip, ReasonJobUnsupported, msg)
	}

	retry := false
	if record != nil {
		switch {
		case record.Generation != job.Generation, record.Kind == records.KindJobUnsupported:
			// The Job's spec changed since, or the server now supports it.
			d.ClearRecord, retry = true, true
		case record.Compare(d.Target) == records.Same:
			return d.with(resize.ActionSkip, resize.ReasonRecordedSame, fmt.Sprintf("%s already recorded for these values: %s", record.Kind, record.Message))
		default:
			d.ClearRecord, retry = true, true
		}
	}

	if ok, why := JobTemplateMutable(job, in.ServerMinor); !ok {
		// The Job's next status update (pods gone, condition set) brings it
		// back.
		return d.with(resize.ActionWait, ReasonJobNotMutableYet, why)
	}
	if msg := validateTemplateTarget(pod, d.Target); msg != "" {
		d.ClearRecord = false
		d.NewRecord = &records.Record{Kind: records.KindInvalid, Attempted: d.Target, Message: msg, Generation: job.Generation}
		return d.with(resize.ActionSkip, resize.ReasonInvalid, msg)
	}
	patch, err := resize.BuildJobPatch(job, d.Target)
	if err != nil {
		d.ClearRecord = false
		d.NewRecord = &records.Record{Kind: records.KindInvalid, Attempted: d.Target, Message: err.Error(), Generation: job.Generation}
		return d.with(resize.ActionSkip, resize.ReasonInvalid, err.Error())
	}
	d.Patch = patch
	if retry {
		return d.with(resize.ActionPatch, ReasonJobRetryAfterRefusal, "the recommendation or the Job changed since the last refusal; set the pod template to "+d.Target.String())
	}
	return d.with(resize.ActionPatch, ReasonJobTemplateUpdate, "set the pod template to "+d.Target.String())
}

// IsSuspended reports whether a Job's spec.suspend is true.
func IsSuspended(job *batchv1.Job) bool {
	return job.Spec.Suspend != nil && *job.Spec.Suspend
}

// JobTemplateMutable tells whether the API server of minor version
// serverMinor (0: unknown) accepts a change of the container resources in
// job's pod template now, and why not. It does not know whether the gate is
// on: a server with the gate off refuses what this allows.
func JobTemplateMutable(job *batchv1.Job, serverMinor int) (bool, string) {
	if !IsSuspended(job) {
		return false, "the Job is not suspended"
	}
	if serverMinor > 0 && serverMinor < firstMutableMinor {
		return false, fmt.Sprintf("Kubernetes 1.%d cannot change the pod template of a Job", serverMinor)
	}
	if job.Status.Active > 0 {
		return false, fmt.Sprintf("%d pod(s) of the Job are still active", job.Status.Active)
	}
	suspendedCondition := jobConditionTrue(job, batchv1.JobSuspended)
	if serverMinor >= 36 {
		if job.Status.StartTime == nil || suspendedCondition {
			return true, ""
		}
		return false, "the Job has started and its Suspended condition is not True yet"
	}
	if !suspendedCondition {
		return false, "the Job's Suspended condition is not True yet"
	}
	return true, ""
}

func jobConditionTrue(job *batchv1.Job, t batchv1.JobConditionType) bool {
	for _, c := range job.Status.Conditions {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func isFinished(job *batchv1.Job) (bool, string) {
	switch {
	case jobConditionTrue(job, batchv1.JobComplete):
		return true, "complete"
	case jobConditionTrue(job, batchv1.JobFailed):
		return true, "failed"
	}
	return false, ""
}

// PodFromJobTemplate returns the pod a Job's template describes, for the
// recommendation calculator (capping, LimitRange, proportional limits work
// on pods): the Job's namespace, the template's labels and annotations and a
// copy of its spec.
func PodFromJobTemplate(job *batchv1.Job) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:        job.Name,
			Namespace:   job.Namespace,
			Labels:      job.Spec.Template.Labels,
			Annotations: job.Spec.Template.Annotations,
		},
		Spec: *job.Spec.Template.Spec.DeepCopy(),
	}
}

// validateTemplateTarget catches what the API server's pod template
// validation would refuse in target: a request above its limit.
func validateTemplateTarget(pod *corev1.Pod, target resources.Resources) string {
	for ref := range recommendation.Containers(pod) {
		c := ref.Container
		t, ok := target[c.Name]
		if !ok {
			continue
		}
		for name, req := range t.Requests {
			if lim, ok := t.Limits[name]; ok && req.Cmp(lim) > 0 {
				return fmt.Sprintf("container %s: %s request %s would exceed its limit %s", c.Name, name, req.String(), lim.String())
			}
		}
	}
	return ""
}
