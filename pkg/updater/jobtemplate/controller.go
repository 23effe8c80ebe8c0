package jobtemplate

import (
	"context"
	"errors"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/component-base/featuregate"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
	vpaapiutil "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/utils/vpa"

	"github.com/vpa-inplace/vpa-inplace/pkg/features"
	"github.com/vpa-inplace/vpa-inplace/pkg/recommendation"
	"github.com/vpa-inplace/vpa-inplace/pkg/records"
	"github.com/vpa-inplace/vpa-inplace/pkg/resize"
	"github.com/vpa-inplace/vpa-inplace/pkg/target"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/report"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/state"
)

// Config holds the Jobs' settings (the updater's).
type Config struct {
	Threshold   float64
	ServerMinor int
	// Ignored are the namespaces not looked at.
	Ignored sets.Set[string]
}

// Resolver finds the VPA of a Job (pkg/target).
type Resolver interface {
	VPAForJob(ctx context.Context, job *batchv1.Job) (*vpatypes.VerticalPodAutoscaler, error)
}

// Calculator computes what the containers of a pod (here, of a Job's pod
// template) should get (pkg/recommendation).
type Calculator interface {
	ForPod(pod *corev1.Pod, vpa *vpatypes.VerticalPodAutoscaler) (recommendation.Desired, error)
}

// Metrics counts decisions and writes.
type Metrics interface {
	JobDecided(action resize.Action, reason resize.Reason)
	JobWritten(outcome string)
}

// OutcomeWithheld is the outcome of a write that was due but not sent.
const OutcomeWithheld = "Withheld"

// Deps are the collaborators of the Jobs' path. Status, Withheld and
// GateOff are the narrow ends of the updater: queue a VPA's condition, tell
// whether writes are withheld (metric reason and why, "" when they may be
// sent), log once that a VPA is skipped with the gate off.
type Deps struct {
	Client kubernetes.Interface
	Jobs   batchlisters.JobLister
	// Index is the Job informer's indexer, with CronJobIndex.
	Index      cache.Indexer
	Resolver   Resolver
	Calculator Calculator
	Store      records.Store
	Tracker    *state.Tracker[state.JobState]
	Recorder   record.EventRecorder
	Gate       featuregate.FeatureGate
	Metrics    Metrics
	Clock      clock.PassiveClock
	// Enqueue puts a Job key on the Job queue.
	Enqueue  func(key string)
	Status   func(vpaKey string)
	Withheld func(vpa *vpatypes.VerticalPodAutoscaler) (reason, why string)
	GateOff  func(logger klog.Logger, vpa *vpatypes.VerticalPodAutoscaler)
	// Fence passes the write of a Job of a namespace: the context to send
	// it with and the function to call once answered, or an error, and
	// then nothing is sent. nil: every write goes.
	Fence func(ctx context.Context, namespace string) (context.Context, func(), error)
}

// Controller writes recommendations into suspended Jobs' pod templates.
type Controller struct {
	cfg  Config
	deps Deps
}

// New returns a Controller.
func New(cfg Config, deps Deps) *Controller {
	return &Controller{cfg: cfg, deps: deps}
}

func isInPlace(vpa *vpatypes.VerticalPodAutoscaler) bool {
	return vpaapiutil.GetUpdateMode(vpa) == vpatypes.UpdateModeInPlace
}

func ownerOf(vpa *vpatypes.VerticalPodAutoscaler) records.Owner {
	return records.Owner{Namespace: vpa.Namespace, Name: vpa.Name, UID: vpa.UID}
}

// apiMessage is what the API server said, or the error.
func apiMessage(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Message != "" {
		return status.Status().Message
	}
	return err.Error()
}

// Suspended Jobs (KEP-5440). For a VPA in InPlace mode whose target is a Job,
// or a CronJob that controls Jobs, the recommendation is written into the pod
// template of each Job while the Job is suspended and has no active pod, so
// that its pods start with it when the Job resumes. Running pods of Jobs are
// resized in place like any other pods; this covers the pods not created
// yet.
//
// A Job travels: Job informer event (or its VPA's) -> job queue -> Sync ->
// Decide (pure, version-specific rules) -> one strategic merge patch
// of the Job -> the outcome is reported: an event on the Job, metrics, and the
// VPA's InPlaceResizeBlocked condition. A refusal by the API server (the gate
// MutablePodResourcesForSuspendedJobs off, Kubernetes 1.34 and earlier, an
// admission policy) is recorded in the infeasible store under the Job's UID,
// with the values and the Job's generation, and is reported once (a warning
// event on the Job and on the VPA, and the condition). It is not sent again
// until the recommendation or the Job's spec changes. The store is the
// durable one (the VPA annotation): a restart or a new leader neither sends
// the refused write again nor repeats the warning.
//
// The Jobs' informer is the one target resolution already runs (the shared
// factory of well-known controllers): watching Jobs costs no extra watch.

// CronJobIndex indexes Jobs by "namespace/name" of the CronJob that
// controls them (IndexByCronJob); the Job informer of Deps.Index has it.
const CronJobIndex = "vpa-inplace/cronjob"

func IndexByCronJob(obj any) ([]string, error) {
	job, ok := obj.(*batchv1.Job)
	if !ok {
		return nil, nil
	}
	if kind, name, ok := target.JobController(job); ok && kind == "CronJob" {
		return []string{job.Namespace + "/" + name}, nil
	}
	return nil, nil
}

// Running Jobs are left to the pod path.
// OnJob queues a Job that is or was suspended when something the decision
// depends on may have changed (an informer handler: it only queues).
func (c *Controller) OnJob(logger klog.Logger, oldObj, obj any) {
	job, ok := obj.(*batchv1.Job)
	if !ok || c.cfg.Ignored.Has(job.Namespace) {
		return
	}
	old, isUpdate := oldObj.(*batchv1.Job)
	switch {
	case IsSuspended(job):
	case isUpdate && IsSuspended(old):
	default:
		return
	}
	if isUpdate && !relevantJobChange(old, job) {
		return
	}
	key, err := cache.MetaNamespaceKeyFunc(job)
	if err != nil {
		logger.Error(err, "Cannot key Job")
		return
	}
	c.deps.Enqueue(key)
}

// relevantJobChange reports whether an update of a Job may change its
// decision: its spec (suspend, template), active pods, start time or
// conditions.
func relevantJobChange(old, job *batchv1.Job) bool {
	if old.ResourceVersion == job.ResourceVersion {
		return false
	}
	return old.Generation != job.Generation || old.Status.Active != job.Status.Active ||
		(old.Status.StartTime == nil) != (job.Status.StartTime == nil) ||
		(old.DeletionTimestamp == nil) != (job.DeletionTimestamp == nil) ||
		!apiequality.Semantic.DeepEqual(old.Spec, job.Spec) ||
		!apiequality.Semantic.DeepEqual(jobConditions(old), jobConditions(job))
}

func jobConditions(job *batchv1.Job) map[batchv1.JobConditionType]corev1.ConditionStatus {
	out := map[batchv1.JobConditionType]corev1.ConditionStatus{}
	for _, c := range job.Status.Conditions {
		out[c.Type] = c.Status
	}
	return out
}

// OnJobDelete forgets a deleted Job's record and state.
func (c *Controller) OnJobDelete(logger klog.Logger, obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	job, ok := obj.(*batchv1.Job)
	if !ok {
		return
	}
	if c.deps.Store.Delete(job.UID) {
		logger.V(4).Info("Forgot record of deleted Job", "job", klog.KObj(job))
	}
	c.untrackJob(job.UID)
}

// EnqueueVPAJobs queues the Jobs a VPA may control: the Job it names, or the
// Jobs of the CronJob it names.
func (c *Controller) EnqueueVPAJobs(vpa *vpatypes.VerticalPodAutoscaler) {
	if c.deps.Jobs == nil || c.cfg.Ignored.Has(vpa.Namespace) || vpa.Spec.TargetRef == nil {
		return
	}
	name := vpa.Spec.TargetRef.Name
	switch {
	case target.TargetsBatch(vpa, "Job", name):
		c.deps.Enqueue(vpa.Namespace + "/" + name)
	case target.TargetsBatch(vpa, "CronJob", name):
		objs, err := c.deps.Index.ByIndex(CronJobIndex, vpa.Namespace+"/"+name)
		if err != nil {
			return
		}
		for _, obj := range objs {
			if job, ok := obj.(*batchv1.Job); ok {
				c.deps.Enqueue(job.Namespace + "/" + job.Name)
			}
		}
	}
}

// Sync handles one Job: read the caches, decide, act, report. A returned
// error is retried with backoff; refusals are recorded instead.
func (c *Controller) Sync(ctx context.Context, key string) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	job, err := c.deps.Jobs.Jobs(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return nil // OnJobDelete forgot it
	}
	if err != nil {
		return fmt.Errorf("reading Job from cache: %w", err)
	}
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "job", klog.KObj(job))
	ctx = klog.NewContext(ctx, logger)

	// Only suspended Jobs are handled. A resumed Job's record no longer
	// holds: resuming changed its generation.
	if !IsSuspended(job) || job.DeletionTimestamp != nil {
		c.forgetJob(job.UID)
		return nil
	}
	vpa, err := c.deps.Resolver.VPAForJob(ctx, job)
	if err != nil {
		return fmt.Errorf("finding the Job's VPA: %w", err)
	}
	if vpa == nil || !isInPlace(vpa) {
		// The record is kept: no VPA may also mean one whose target cannot
		// be resolved for a while (caches still syncing after a restart).
		// It goes with the Job, with its VPA, or when the Job resumes.
		c.untrackJob(job.UID)
		return nil
	}
	if !c.deps.Gate.Enabled(features.InPlace) {
		c.deps.GateOff(logger, vpa)
		c.untrackJob(job.UID)
		return nil
	}
	now := c.deps.Clock.Now()
	// After MaxCacheLag the cache is trusted again: the write carries the
	// resourceVersion it was decided on, a stale one fails with a conflict.
	if behind, overdue := c.deps.Tracker.CacheLag(job.UID, job.ResourceVersion, now); behind && !overdue {
		logger.V(4).Info("Cache has not seen the template write yet; waiting for the Job's update")
		return nil
	}
	desired, err := c.deps.Calculator.ForPod(PodFromJobTemplate(job), vpa)
	if err != nil {
		c.reportJob(job, vpa, state.Job{State: state.JobError, Message: "cannot compute what the template should get: " + err.Error()})
		return fmt.Errorf("computing recommendation: %w", err)
	}
	record, _ := c.deps.Store.GetFor(ownerOf(vpa), job.UID)
	d := Decide(Input{
		Job:         job,
		Desired:     desired,
		Record:      record,
		Threshold:   c.cfg.Threshold,
		ServerMinor: c.cfg.ServerMinor,
	})
	c.deps.Metrics.JobDecided(d.Action, d.Reason)
	logger.V(2).Info("Decided", "vpa", klog.KObj(vpa), "action", d.Action, "reason", d.Reason, "message", d.Message)
	st, err := c.Act(ctx, job, vpa, d)
	if st != nil {
		c.reportJob(job, vpa, *st)
	}
	return err
}

// Act carries out a Job decision and returns the Job's resulting state
// (nil when the Job is no longer tracked).
func (c *Controller) Act(ctx context.Context, job *batchv1.Job, vpa *vpatypes.VerticalPodAutoscaler, d Decision) (*state.Job, error) {
	logger := klog.FromContext(ctx)
	if d.ClearRecord {
		c.deps.Store.Delete(job.UID)
	}
	if d.NewRecord != nil {
		d.NewRecord.RecordedAt = c.deps.Clock.Now()
		c.deps.Store.Put(ownerOf(vpa), job.UID, d.NewRecord)
		c.reportJobRecord(ctx, job, vpa, d.NewRecord)
	}
	switch d.Reason {
	case ReasonJobNotSuspended, ReasonJobFinished:
		c.untrackJob(job.UID)
		return nil, nil
	case resize.ReasonNoRecommendation:
		return &state.Job{State: state.JobNoRecommendation, Message: d.Message}, nil
	case resize.ReasonUpToDate, resize.ReasonBelowThreshold:
		return &state.Job{State: state.JobTemplateUpToDate}, nil
	case ReasonJobNotMutableYet:
		return &state.Job{State: state.JobWaiting, Message: d.Message}, nil
	}
	if d.Action != resize.ActionPatch {
		if record, ok := c.deps.Store.GetFor(ownerOf(vpa), job.UID); ok {
			return rejectedStatus(record), nil
		}
		return &state.Job{State: state.JobWaiting, Message: d.Message}, nil
	}

	if reason, why := c.deps.Withheld(vpa); reason != "" {
		c.deps.Metrics.JobWritten(OutcomeWithheld)
		logger.V(2).Info("Job template write not sent", "target", d.Target.String(), "why", why)
		return &state.Job{State: state.JobWithheld, Values: d.Target.String(), Message: why}, nil
	}

	pctx, done := ctx, func() {}
	if c.deps.Fence != nil {
		var err error
		if pctx, done, err = c.deps.Fence(ctx, job.Namespace); err != nil {
			return &state.Job{State: state.JobError, Message: err.Error()}, err
		}
	}
	patched, err := c.deps.Client.BatchV1().Jobs(job.Namespace).Patch(pctx, job.Name, types.StrategicMergePatchType, d.Patch, metav1.PatchOptions{})
	done()
	outcome := resize.ClassifyJobPatchError(err)
	c.deps.Metrics.JobWritten(string(outcome))
	switch outcome {
	case resize.OutcomeAccepted:
		now := c.deps.Clock.Now()
		logger.Info("Job template updated", "vpa", klog.KObj(vpa), "target", d.Target.String())
		c.deps.Recorder.Eventf(job, corev1.EventTypeNormal, report.EventJobTemplateUpdated,
			"Pod template resources set to %s while suspended (VPA %s); pods created on resume get them", d.Target.String(), vpa.Name)
		// Reported here, before AwaitUpdate, which needs the Job's entry.
		c.reportJob(job, vpa, state.Job{State: state.JobTemplateUpToDate})
		sentVersion := ""
		if patched != nil {
			sentVersion = patched.ResourceVersion
		}
		c.deps.Tracker.AwaitUpdate(job.UID, job.ResourceVersion, sentVersion, now)
		return nil, nil
	case resize.OutcomeRejected:
		r := &records.Record{Kind: records.KindJobRejected, Attempted: d.Target, Message: apiMessage(err), RecordedAt: c.deps.Clock.Now(), Generation: job.Generation}
		c.deps.Store.Put(ownerOf(vpa), job.UID, r)
		c.reportJobRecord(ctx, job, vpa, r)
		return rejectedStatus(r), nil
	case resize.OutcomeGone:
		c.untrackJob(job.UID)
		return nil, nil
	case resize.OutcomeConflict:
		// The Job changed since the cache was read (resumed, new status):
		// decided again on the new version, with backoff.
		return nil, fmt.Errorf("job template patch: %w", err)
	default:
		err = fmt.Errorf("job template patch (%s): %w", outcome, err)
		return &state.Job{State: state.JobError, Message: err.Error()}, err
	}
}

func rejectedStatus(r *records.Record) *state.Job {
	return &state.Job{State: state.JobRejected, Since: r.RecordedAt, Values: r.Attempted.String(), Message: r.Message, Kind: r.Kind}
}

// reportJob remembers a Job's state and queues its VPA's condition when it
// changed; it sends the withheld event once per target.
func (c *Controller) reportJob(job *batchv1.Job, vpa *vpatypes.VerticalPodAutoscaler, st state.Job) {
	st.VPA, st.Name = state.VPAKey(vpa), job.Name
	for _, key := range c.deps.Tracker.Set(job.UID, st, c.deps.Clock.Now()) {
		c.deps.Status(key)
	}
	if st.State == state.JobWithheld && c.deps.Tracker.Once(job.UID, "withheld", st.Values) {
		c.deps.Recorder.Eventf(job, corev1.EventTypeNormal, report.EventJobTemplateWithheld,
			"Would set the pod template resources to %s while suspended; not sent: %s", st.Values, st.Message)
	}
}

// reportJobRecord logs and emits the warnings, on the Job and on its VPA, for
// a newly recorded refusal.
func (c *Controller) reportJobRecord(ctx context.Context, job *batchv1.Job, vpa *vpatypes.VerticalPodAutoscaler, r *records.Record) {
	klog.FromContext(ctx).Info("Job template update refused; recorded", "vpa", klog.KObj(vpa), "kind", r.Kind,
		"attempted", r.Attempted.String(), "generation", r.Generation, "message", r.Message)
	c.deps.Recorder.Eventf(job, corev1.EventTypeWarning, report.EventJobTemplateRejected,
		"Pod template resources cannot be set to %s while suspended (%s: %s); not retried until the recommendation or the Job changes",
		r.Attempted.String(), r.Kind, r.Message)
	c.deps.Recorder.Eventf(vpa, corev1.EventTypeWarning, report.EventJobTemplateRejected,
		"Job %s: pod template resources cannot be set to %s while suspended (%s: %s); not retried until the recommendation or the Job changes",
		job.Name, r.Attempted.String(), r.Kind, r.Message)
}

// forgetJob drops a Job's record and state: it is no longer a suspended Job
// of an InPlace VPA.
func (c *Controller) forgetJob(uid types.UID) {
	c.deps.Store.Delete(uid)
	c.untrackJob(uid)
}

// untrackJob forgets a Job's state and queues its VPA's condition.
func (c *Controller) untrackJob(uid types.UID) {
	if key, ok := c.deps.Tracker.Forget(uid); ok {
		c.deps.Status(key)
	}
}

// Live returns the UIDs of the Jobs in the cache (for the cleanup of
// records). An error is no answer: it is returned, not an empty list that
// would forget every Job's record.
func (c *Controller) Live() ([]types.UID, error) {
	if c.deps.Jobs == nil {
		return nil, nil
	}
	jobs, err := c.deps.Jobs.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("listing Jobs from cache: %w", err)
	}
	out := make([]types.UID, 0, len(jobs))
	for _, j := range jobs {
		out = append(out, j.UID)
	}
	return out, nil
}
