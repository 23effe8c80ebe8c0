package updater

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/records"
	"github.com/vpa-inplace/vpa-inplace/pkg/resize"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testjob"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testvpa"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/condition"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/jobtemplate"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/report"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/state"
)

func TestSuspendedJobGetsTheRecommendation(t *testing.T) {
	f := newJobFixture(t, trainJob().Container("sidecar", "10m", "10Mi").Suspended().Obj(), jobVPA("250m", "200Mi"), fixtureOpts{})
	require.NoError(t, f.syncJob("train"))

	patches := f.jobPatches()
	require.Len(t, patches, 1)
	assert.JSONEq(t, `{"metadata":{"resourceVersion":"1"},"spec":{"template":{"spec":{"containers":[
		{"name":"app","resources":{"requests":{"cpu":"250m","memory":"200Mi"}}}]}}}}`, patches[0],
		"only the resources of the container the VPA controls, guarded by the Job's resourceVersion")
	job := f.getJob("train")
	assert.Equal(t, "250m/200Mi", templateRequests(job))
	assert.Equal(t, "10m", job.Spec.Template.Spec.Containers[1].Resources.Requests.Cpu().String(), "the sidecar is untouched")
	assert.Equal(t, []string{"Job/train Normal " + report.EventJobTemplateUpdated +
		" Pod template resources set to app: requests cpu=250m memory=200Mi while suspended (VPA train); pods created on resume get them"},
		f.recorder.unread("Job"))
	assert.InDelta(t, 1, counter(t, f, report.MetricJobWrites, "outcome", "Accepted"), 0)
	assert.InDelta(t, 1, counter(t, f, report.MetricJobDecisions, "action", "Patch", "reason", "JobTemplateUpdate"), 0)

	t.Run("until the cache has seen the write, the Job is not decided again", func(t *testing.T) {
		written := f.getJob("train").ResourceVersion
		assert.True(t, jobCacheBehind(f, "uid-train", "1", f.clock.Now()), "the version the write was decided on")
		assert.False(t, jobCacheBehind(f, "uid-train", written, f.clock.Now()), "the version the write made")
		f.ctrl.jobTracker.AwaitUpdate("uid-train", "1", written, f.clock.Now())
		assert.False(t, jobCacheBehind(f, "uid-train", "1", f.clock.Now().Add(state.MaxCacheLag)), "the cache is trusted again after a while")
	})
	t.Run("right-sized now: no further write, condition up to date", func(t *testing.T) {
		f.waitJobCached("train", func(j *batchv1.Job) bool { return j.ResourceVersion != "1" })
		for range 3 {
			require.NoError(t, f.syncJob("train"))
		}
		assert.Len(t, f.jobPatches(), 1, "never a pointless write")
		assert.Empty(t, f.recorder.unread("Job"))
		require.NoError(t, f.syncStatus("train"))
		c := f.condition("train")
		require.NotNil(t, c)
		assert.Equal(t, corev1.ConditionFalse, c.Status)
		assert.Equal(t, condition.ReasonNotBlocked, c.Reason)
		assert.Contains(t, c.Message, "1 suspended Job: 1 template up to date.")
		assert.InDelta(t, 1, gauge(t, f, report.MetricSuspendedJobs, map[string]string{"state": string(state.JobTemplateUpToDate)}), 0)
	})
}

func TestJobsThatAreNotWritten(t *testing.T) {
	tests := []struct {
		name   string
		job    *batchv1.Job
		vpa    *vpatypes.VerticalPodAutoscaler
		gate   bool
		want   state.JobState // "" when the Job is not tracked
		reason string         // decision reason, "" when no decision is taken
	}{
		{name: "not suspended: left to the pod path", job: trainJob().Obj(), vpa: jobVPA("250m", "200Mi")},
		{name: "resumed and running", job: trainJob().Resumed().Started().Active(1).Obj(), vpa: jobVPA("250m", "200Mi")},
		{name: "suspended but pods still active: waits", job: trainJob().Suspended().Started().Active(2).Obj(), vpa: jobVPA("250m", "200Mi"),
			want: state.JobWaiting, reason: "JobNotMutableYet"},
		{name: "already right-sized", job: trainJob().Suspended().Obj(), vpa: jobVPA("100m", "100Mi"),
			want: state.JobTemplateUpToDate, reason: "UpToDate"},
		{name: "no recommendation yet", job: trainJob().Suspended().Obj(), vpa: testvpa.New("train").Target("batch/v1", "Job", "train").InPlace().Obj(),
			want: state.JobNoRecommendation, reason: "NoRecommendation"},
		{name: "VPA not in InPlace mode", job: trainJob().Suspended().Obj(),
			vpa: testvpa.New("train").Target("batch/v1", "Job", "train").Mode(vpatypes.UpdateModeInitial).Recommend("app", "250m", "200Mi").Obj()},
		{name: "VPA names another Job", job: trainJob().Suspended().Obj(),
			vpa: testvpa.New("train").Target("batch/v1", "Job", "other").InPlace().Recommend("app", "250m", "200Mi").Obj()},
		{name: "VPA names the Job, but a CronJob controls it", job: trainJob().Suspended().OwnedBy("batch/v1", "CronJob", "nightly").Obj(), vpa: jobVPA("250m", "200Mi")},
		{name: "InPlace gate off", job: trainJob().Suspended().Obj(), vpa: jobVPA("250m", "200Mi"), gate: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newJobFixture(t, tc.job, tc.vpa, fixtureOpts{gateOff: tc.gate})
			require.NoError(t, f.syncJob("train"))
			assert.Empty(t, f.jobPatches())
			assert.Empty(t, f.recorder.unread("Job"))
			assert.Equal(t, 0, f.store.Len())
			jobs := f.ctrl.jobTracker.Of("default/train")
			if tc.want == "" {
				assert.Empty(t, jobs)
			} else {
				require.Len(t, jobs, 1)
				assert.Equal(t, tc.want, jobs[0].State)
			}
			n, err := testutil.GatherAndCount(f.registry, report.MetricJobDecisions)
			require.NoError(t, err)
			if tc.reason == "" {
				assert.Equal(t, 0, n, "no decision for a Job out of scope")
			} else {
				assert.InDelta(t, 1, counter(t, f, report.MetricJobDecisions, "action", "Skip", "reason", tc.reason)+
					counter(t, f, report.MetricJobDecisions, "action", "Wait", "reason", tc.reason), 0)
			}
		})
	}
}

func TestCronJobsJobGetsTheCronJobVPAsRecommendation(t *testing.T) {
	job := testjob.New("nightly-29000000").Container("app", "100m", "100Mi").OwnedBy("batch/v1", "CronJob", "nightly").Suspended().Obj()
	vpa := testvpa.New("nightly").Target("batch/v1", "CronJob", "nightly").InPlace().Recommend("app", "300m", "300Mi").Obj()
	f := newJobFixture(t, job, vpa, fixtureOpts{})
	f.run()
	require.Eventually(t, func() bool { return len(f.jobPatches()) == 1 }, waitFor, every, "the Job is queued from its informer event")
	assert.Equal(t, "300m/300Mi", templateRequests(f.getJob("nightly-29000000")))

	t.Run("a new recommendation of the CronJob's VPA reaches its Jobs", func(t *testing.T) {
		f.waitJobCached("nightly-29000000", func(j *batchv1.Job) bool { return templateRequests(j) == "300m/300Mi" })
		f.setRecommendation("nightly", "400m", "300Mi")
		require.Eventually(t, func() bool { return len(f.jobPatches()) == 2 }, waitFor, every)
		assert.Equal(t, "400m/300Mi", templateRequests(f.getJob("nightly-29000000")))
	})
}

func TestJobBecomesMutable(t *testing.T) {
	t.Run("1.35: written once the Suspended condition is True", func(t *testing.T) {
		f := newJobFixture(t, trainJob().SuspendOnly().Obj(), jobVPA("250m", "200Mi"), fixtureOpts{serverMinor: 35})
		f.run()
		require.Eventually(t, func() bool {
			return counter(t, f, report.MetricJobDecisions, "action", "Wait", "reason", "JobNotMutableYet") >= 1
		}, waitFor, every)
		assert.Empty(t, f.jobPatches(), "no write the API server would refuse")
		f.updateJob("train", func(j *batchv1.Job) {
			j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobSuspended, Status: corev1.ConditionTrue}}
		})
		require.Eventually(t, func() bool { return len(f.jobPatches()) == 1 }, waitFor, every, "the Job's update event brings it back")
	})
	t.Run("1.37: written at once for a Job that never started", func(t *testing.T) {
		f := newJobFixture(t, trainJob().SuspendOnly().Obj(), jobVPA("250m", "200Mi"), fixtureOpts{serverMinor: 37})
		require.NoError(t, f.syncJob("train"))
		assert.Len(t, f.jobPatches(), 1)
	})
	t.Run("a Job suspended while running: written once its pods are gone", func(t *testing.T) {
		f := newJobFixture(t, trainJob().Suspended().Started().Active(1).Obj(), jobVPA("250m", "200Mi"), fixtureOpts{})
		f.run()
		require.Eventually(t, func() bool {
			return counter(t, f, report.MetricJobDecisions, "action", "Wait", "reason", "JobNotMutableYet") >= 1
		}, waitFor, every)
		require.Eventually(t, func() bool {
			if f.syncStatus("train") != nil {
				return false
			}
			c := f.condition("train")
			return c != nil && c.Reason == condition.ReasonNotBlocked && strings.Contains(c.Message, "waiting until the template may change") && assert.ObjectsAreEqual(corev1.ConditionFalse, c.Status)
		}, waitFor, every, "waiting is progress, not blocked")
		assert.Empty(t, f.jobPatches())
		f.updateJob("train", func(j *batchv1.Job) { j.Status.Active = 0 })
		require.Eventually(t, func() bool { return len(f.jobPatches()) == 1 }, waitFor, every)
	})
}

func TestJobRejectionIsReportedOnceAndNotRetried(t *testing.T) {
	f := newJobFixture(t, trainJob().Suspended().Obj(), jobVPA("250m", "200Mi"), fixtureOpts{serverMinor: 35})
	f.failJobPatch(immutableErr())
	require.NoError(t, f.syncJob("train"), "a refusal is recorded, not retried with backoff")

	require.Len(t, f.jobPatches(), 1)
	r, held := f.store.Get("uid-train")
	require.True(t, held)
	assert.Equal(t, records.KindJobRejected, r.Kind)
	assert.Equal(t, "app: requests cpu=250m memory=200Mi", r.Attempted.String())
	assert.Equal(t, int64(1), r.Generation)
	assert.Contains(t, r.Message, "field is immutable")
	jobEvents, vpaEvents := f.recorder.unread("Job"), f.vpaEvents()
	require.Len(t, jobEvents, 1)
	assert.Contains(t, jobEvents[0], "Job/train Warning "+report.EventJobTemplateRejected+" Pod template resources cannot be set to app: requests cpu=250m memory=200Mi")
	assert.Contains(t, jobEvents[0], "not retried until the recommendation or the Job changes")
	require.Len(t, vpaEvents, 1)
	assert.Contains(t, vpaEvents[0], "VerticalPodAutoscaler/train Warning "+report.EventJobTemplateRejected+" Job train: pod template resources cannot be set")
	assert.InDelta(t, 1, counter(t, f, report.MetricJobWrites, "outcome", "Rejected"), 0)

	require.NoError(t, f.syncStatus("train"))
	c := f.condition("train")
	require.NotNil(t, c)
	assert.Equal(t, corev1.ConditionTrue, c.Status)
	assert.Equal(t, condition.ReasonJobTemplateRejected, c.Reason)
	assert.Contains(t, c.Message, "Job train cannot get app: requests cpu=250m memory=200Mi in its pod template while suspended (JobRejected:")
	assert.Contains(t, c.Message, "field is immutable")

	t.Run("not retried: same recommendation, same Job", func(t *testing.T) {
		for range 3 {
			require.NoError(t, f.syncJob("train"))
		}
		f.ctrl.Resync(f.ctx)
		require.NoError(t, f.syncJob("train"))
		assert.Len(t, f.jobPatches(), 1)
		assert.Empty(t, f.recorder.unread("Job"))
		assert.Empty(t, f.vpaEvents())
		assert.InDelta(t, 4, counter(t, f, report.MetricJobDecisions, "action", "Skip", "reason", "RecordedAttemptSame"), 0)
		f.waitCached("train", condition.Has)
		writes := len(f.statusWrites())
		require.NoError(t, f.syncStatus("train"))
		assert.Len(t, f.statusWrites(), writes, "the condition is not written again")
	})
	t.Run("retried once when the recommendation changes", func(t *testing.T) {
		f.setRecommendation("train", "300m", "200Mi")
		require.NoError(t, f.syncJob("train"))
		require.NoError(t, f.syncJob("train"))
		assert.Len(t, f.jobPatches(), 2)
		r, _ := f.store.Get("uid-train")
		assert.Equal(t, "app: requests cpu=300m memory=200Mi", r.Attempted.String())
		assert.Len(t, f.recorder.unread("Job"), 1, "the new refusal is reported once")
	})
	t.Run("retried once when the Job changes", func(t *testing.T) {
		f.updateJob("train", func(j *batchv1.Job) { j.Spec.Parallelism = new(int32) })
		require.NoError(t, f.syncJob("train"))
		require.NoError(t, f.syncJob("train"))
		assert.Len(t, f.jobPatches(), 3)
		r, _ := f.store.Get("uid-train")
		assert.Equal(t, int64(2), r.Generation)
	})
	t.Run("a resumed Job's record is forgotten", func(t *testing.T) {
		f.updateJob("train", func(j *batchv1.Job) { j.Spec.Suspend = new(bool) })
		require.NoError(t, f.syncJob("train"))
		_, held := f.store.Get("uid-train")
		assert.False(t, held)
		assert.Empty(t, f.ctrl.jobTracker.Of("default/train"))
	})
}

func TestJobRecordOutlivesAnUnresolvedVPA(t *testing.T) {
	r := &unresolved{}
	f := newJobFixture(t, trainJob().Suspended().Obj(), jobVPA("250m", "200Mi"), fixtureOpts{serverMinor: 35,
		wrapResolver: func(inner Resolver) Resolver { r.Resolver = inner; return r }})
	f.failJobPatch(immutableErr())
	require.NoError(t, f.syncJob("train"))
	require.Len(t, f.jobPatches(), 1)
	require.Len(t, f.recorder.unread("Job"), 1)

	r.on.Store(true)
	require.NoError(t, f.syncJob("train"))
	assert.Empty(t, f.ctrl.jobTracker.Of("default/train"), "not counted while its VPA is unknown")
	_, held := f.store.Get("uid-train")
	assert.True(t, held, "the record is kept")

	r.on.Store(false)
	require.NoError(t, f.syncJob("train"))
	assert.Len(t, f.jobPatches(), 1, "the refused write is not sent again once the VPA is found")
	assert.Empty(t, f.recorder.unread("Job"))
}

func TestJobRejectionSurvivesRestart(t *testing.T) {
	first := newJobFixture(t, trainJob().Suspended().Obj(), jobVPA("250m", "200Mi"), fixtureOpts{durable: true, serverMinor: 35})
	first.failJobPatch(immutableErr())
	stopFirst := first.run()
	require.Eventually(t, func() bool { return first.getVPA("train").Annotations[records.AnnotationKey] != "" }, waitFor, every,
		"the record is written onto the VPA")
	require.Len(t, first.jobPatches(), 1)
	require.Len(t, first.recorder.unread("Job"), 1)
	stopFirst()

	next := newFixtureOn(t, first.kube, first.vpa, fixtureOpts{durable: true, serverMinor: 35})
	next.run()
	require.Eventually(t, func() bool {
		return counter(t, next, report.MetricJobDecisions, "action", "Skip", "reason", "RecordedAttemptSame") >= 1
	}, waitFor, every, "the Job is decided against the loaded record")
	assert.Len(t, first.jobPatches(), 1, "the refused write is not sent again")
	assert.Empty(t, next.recorder.unread("Job"), "nor reported again")
	assert.Empty(t, next.vpaEvents())
	r, held := next.store.Get("uid-train")
	require.True(t, held)
	assert.Equal(t, int64(1), r.Generation)
}

func TestOldServerIsNotSentAnything(t *testing.T) {
	f := newJobFixture(t, trainJob().Suspended().Obj(), jobVPA("250m", "200Mi"), fixtureOpts{serverMinor: 34})
	for range 3 {
		require.NoError(t, f.syncJob("train"))
	}
	f.setRecommendation("train", "300m", "300Mi")
	require.NoError(t, f.syncJob("train"))

	assert.Empty(t, f.jobPatches(), "Kubernetes 1.34 refuses any template change: nothing is sent")
	events := f.recorder.unread("Job")
	require.Len(t, events, 1, "reported once per Job generation, whatever the recommendation: %v", events)
	assert.Contains(t, events[0], "Kubernetes 1.34 cannot change the pod template of a Job")
	require.Len(t, f.vpaEvents(), 1)
	require.NoError(t, f.syncStatus("train"))
	c := f.condition("train")
	require.NotNil(t, c)
	assert.Equal(t, condition.ReasonJobTemplateRejected, c.Reason)
	assert.Contains(t, c.Message, "JobUnsupported: Kubernetes 1.34")
}

func TestJobDryRunAndPause(t *testing.T) {
	t.Run("dry run: decided and reported, never written", func(t *testing.T) {
		f := newJobFixture(t, trainJob().Suspended().Obj(), jobVPA("250m", "200Mi"), fixtureOpts{dryRun: true})
		for range 3 {
			require.NoError(t, f.syncJob("train"))
		}
		assert.Empty(t, f.jobPatches())
		events := f.recorder.unread("Job")
		require.Len(t, events, 1, "one withheld event per Job and target")
		assert.Contains(t, events[0], "Job/train Normal "+report.EventJobTemplateWithheld+
			" Would set the pod template resources to app: requests cpu=250m memory=200Mi while suspended; not sent: the updater runs with --dry-run")
		assert.InDelta(t, 3, counter(t, f, report.MetricJobWrites, "outcome", jobtemplate.OutcomeWithheld), 0)
		require.NoError(t, f.syncStatus("train"))
		c := f.condition("train")
		require.NotNil(t, c)
		assert.Equal(t, condition.ReasonDryRun, c.Reason)
		assert.Contains(t, c.Message, "Not sent (dry run): the pod template of Job train would be set to app: requests cpu=250m memory=200Mi.")
	})
	t.Run("paused by the VPA annotation", func(t *testing.T) {
		vpa := jobVPA("250m", "200Mi")
		vpa.Annotations = map[string]string{PausedAnnotation: "true"}
		f := newJobFixture(t, trainJob().Suspended().Obj(), vpa, fixtureOpts{})
		require.NoError(t, f.syncJob("train"))
		assert.Empty(t, f.jobPatches())
		events := f.recorder.unread("Job")
		require.Len(t, events, 1)
		assert.Contains(t, events[0], "not sent: resizing is paused by annotation vpa-inplace.dev/paused")
	})
	t.Run("paused cluster-wide, then resumed: written at once", func(t *testing.T) {
		f := newJobFixture(t, trainJob().Suspended().Obj(), jobVPA("250m", "200Mi"), fixtureOpts{watchConfigMap: true})
		_, err := f.kube.CoreV1().ConfigMaps(systemNamespace).Create(context.Background(), &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: systemNamespace, Name: "vpa-inplace-updater-config"}, Data: map[string]string{PausedKey: "true"},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		require.Eventually(t, func() bool { paused, _ := f.ctrl.clusterPaused(); return paused }, waitFor, every)
		f.run()
		require.Eventually(t, func() bool {
			return counter(t, f, report.MetricJobWrites, "outcome", jobtemplate.OutcomeWithheld) >= 1
		}, waitFor, every)
		assert.Empty(t, f.jobPatches())
		require.NoError(t, f.kube.CoreV1().ConfigMaps(systemNamespace).Delete(context.Background(), "vpa-inplace-updater-config", metav1.DeleteOptions{}))
		require.Eventually(t, func() bool { return len(f.jobPatches()) == 1 }, waitFor, every)
	})
}

func TestJobWriteFailures(t *testing.T) {
	t.Run("transient error: retried with backoff, nothing recorded", func(t *testing.T) {
		f := newJobFixture(t, trainJob().Suspended().Obj(), jobVPA("250m", "200Mi"), fixtureOpts{})
		f.failJobPatch(apierrors.NewInternalError(errors.New("etcd timeout")))
		err := f.syncJob("train")
		require.Error(t, err)
		assert.Equal(t, 0, f.store.Len())
		assert.Empty(t, f.recorder.unread("Job"))
		jobs := f.ctrl.jobTracker.Of("default/train")
		require.Len(t, jobs, 1)
		assert.Equal(t, state.JobError, jobs[0].State)
		assert.InDelta(t, 1, counter(t, f, report.MetricJobWrites, "outcome", "Transient"), 0)
	})
	t.Run("conflict (the Job changed): decided again, nothing recorded", func(t *testing.T) {
		f := newJobFixture(t, trainJob().Suspended().Obj(), jobVPA("250m", "200Mi"), fixtureOpts{})
		f.failJobPatch(apierrors.NewConflict(schema.GroupResource{Group: "batch", Resource: "jobs"}, "train", errors.New("changed")))
		require.Error(t, f.syncJob("train"))
		assert.Equal(t, 0, f.store.Len())
		assert.Empty(t, f.recorder.unread("Job"))
	})
	t.Run("the Job was resumed between the cache read and the write: a conflict, not a refusal", func(t *testing.T) {
		f := newJobFixture(t, trainJob().Suspended().Obj(), jobVPA("250m", "200Mi"), fixtureOpts{})
		stale := f.getJob("train")
		vpa := f.getVPA("train")
		desired, err := f.ctrl.calc.ForPod(jobtemplate.PodFromJobTemplate(stale), vpa)
		require.NoError(t, err)
		d := jobtemplate.Decide(jobtemplate.Input{Job: stale, Desired: desired, Threshold: 0.1, ServerMinor: 37})
		require.Equal(t, resize.ActionPatch, d.Action)

		resumed := stale.DeepCopy()
		resumed.Spec.Suspend = new(bool)
		resumed.ResourceVersion = "2"
		_, err = f.kube.BatchV1().Jobs("default").Update(context.Background(), resumed, metav1.UpdateOptions{})
		require.NoError(t, err)

		st, err := f.ctrl.jobTemplates.Act(f.ctx, stale, vpa, d)
		require.Error(t, err, "retried with backoff, decided again on the newer Job")
		assert.True(t, apierrors.IsConflict(errors.Unwrap(err)), "%v", err)
		assert.Nil(t, st)
		assert.Equal(t, 0, f.store.Len(), "never recorded as refused")
		assert.Empty(t, f.recorder.unread("Job"))
		assert.True(t, jobtemplate.IsSuspended(stale), "the cached Job is not modified")
		assert.False(t, jobtemplate.IsSuspended(f.getJob("train")), "the resumed Job's template is untouched")
		assert.Equal(t, "100m/100Mi", templateRequests(f.getJob("train")))
	})
	t.Run("403 from an admission policy is a refusal", func(t *testing.T) {
		f := newJobFixture(t, trainJob().Suspended().Obj(), jobVPA("250m", "200Mi"), fixtureOpts{})
		f.failJobPatch(apierrors.NewForbidden(schema.GroupResource{Group: "batch", Resource: "jobs"}, "train", errors.New("denied by policy")))
		require.NoError(t, f.syncJob("train"))
		r, held := f.store.Get("uid-train")
		require.True(t, held)
		assert.Equal(t, records.KindJobRejected, r.Kind)
	})
}

func TestJobRecordsAreCleanedUp(t *testing.T) {
	f := newJobFixture(t, trainJob().Suspended().Obj(), jobVPA("250m", "200Mi"), fixtureOpts{serverMinor: 35})
	f.failJobPatch(immutableErr())
	require.NoError(t, f.syncJob("train"))
	require.Equal(t, 1, f.store.Len())

	assert.Empty(t, f.ctrl.CleanupRecords(), "the record of a live Job is kept by the sweep of pods' records")
	require.Equal(t, 1, f.store.Len())

	require.NoError(t, f.kube.BatchV1().Jobs("default").Delete(context.Background(), "train", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool { return f.store.Len() == 0 }, waitFor, every, "a deleted Job's record is forgotten")
	// The tracker is forgotten after the store, in the same handler.
	require.Eventually(t, func() bool { return len(f.ctrl.jobTracker.Of("default/train")) == 0 }, waitFor, every, "and its attempts")
}

func TestDeletedVPAForgetsItsJobs(t *testing.T) {
	f := newJobFixture(t, trainJob().Suspended().Obj(), jobVPA("250m", "200Mi"), fixtureOpts{serverMinor: 35})
	f.failJobPatch(immutableErr())
	require.NoError(t, f.syncJob("train"))
	require.Len(t, f.ctrl.jobTracker.Of("default/train"), 1)
	require.NoError(t, f.vpa.AutoscalingV1().VerticalPodAutoscalers("default").Delete(context.Background(), "train", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool { return f.store.Len() == 0 }, waitFor, every)
	require.Eventually(t, func() bool { return len(f.ctrl.jobTracker.Of("default/train")) == 0 }, waitFor, every, "the tracker is forgotten after the store")
}
