package updater

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clienttesting "k8s.io/client-go/testing"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testjob"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testvpa"
)

func trainJob() *testjob.Builder {
	return testjob.New("train").Container("app", "100m", "100Mi")
}

// jobVPA is an InPlace VPA "train" targeting Job "train".
func jobVPA(cpu, mem string) *vpatypes.VerticalPodAutoscaler {
	return testvpa.New("train").Target("batch/v1", "Job", "train").InPlace().Recommend("app", cpu, mem).Obj()
}

// immutableErr is the API server's answer to a template change it does not
// allow (gate MutablePodResourcesForSuspendedJobs off, Kubernetes 1.34-).
func immutableErr() error {
	return apierrors.NewInvalid(schema.GroupKind{Group: "batch", Kind: "Job"}, "train", field.ErrorList{
		field.Invalid(field.NewPath("spec", "template"), "", "field is immutable"),
	})
}

func newJobFixture(t *testing.T, job *batchv1.Job, vpa *vpatypes.VerticalPodAutoscaler, o fixtureOpts) *fixture {
	t.Helper()
	o.jobs = append(o.jobs, job)
	return newFixture(t, nil, []*vpatypes.VerticalPodAutoscaler{vpa}, o)
}

func (f *fixture) syncJob(name string) error {
	return f.ctrl.syncJob(f.ctx, "default/"+name)
}

// jobPatches returns the patches sent to Jobs so far.
func (f *fixture) jobPatches() []string {
	var out []string
	for _, a := range f.kube.Actions() {
		if p, ok := a.(clienttesting.PatchAction); ok && a.GetResource().Resource == "jobs" {
			out = append(out, string(p.GetPatch()))
		}
	}
	return out
}

func (f *fixture) getJob(name string) *batchv1.Job {
	j, err := f.kube.BatchV1().Jobs("default").Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(f.t, err)
	return j
}

// waitJobCached waits until the controller's Job cache satisfies ok.
func (f *fixture) waitJobCached(name string, ok func(*batchv1.Job) bool) {
	f.t.Helper()
	require.Eventually(f.t, func() bool {
		j, err := f.ctrl.jobs.Jobs("default").Get(name)
		return err == nil && ok(j)
	}, waitFor, every)
}

// updateJob changes a Job through the API, as a user or the Job controller
// would, and waits for the cache to hold the change.
func (f *fixture) updateJob(name string, change func(*batchv1.Job)) {
	f.t.Helper()
	j := f.getJob(name)
	before := j.ResourceVersion
	change(j)
	j.Generation++
	j.ResourceVersion = before + "1"
	_, err := f.kube.BatchV1().Jobs("default").Update(context.Background(), j, metav1.UpdateOptions{})
	require.NoError(f.t, err)
	f.waitJobCached(name, func(j *batchv1.Job) bool { return j.ResourceVersion != before })
}

// setRecommendation writes a new recommendation for container app and waits
// for the cache to hold it.
func (f *fixture) setRecommendation(vpa, cpu, mem string) {
	f.t.Helper()
	v := f.getVPA(vpa)
	v.Status.Recommendation = testvpa.New(vpa).Recommend("app", cpu, mem).Obj().Status.Recommendation
	_, err := f.vpa.AutoscalingV1().VerticalPodAutoscalers("default").UpdateStatus(context.Background(), v, metav1.UpdateOptions{})
	require.NoError(f.t, err)
	f.waitCached(vpa, func(v *vpatypes.VerticalPodAutoscaler) bool {
		return v.Status.Recommendation.ContainerRecommendations[0].Target.Cpu().String() == cpu
	})
}

func (f *fixture) failJobPatch(err error) {
	f.kube.PrependReactor("patch", "jobs", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, err
	})
}

func templateRequests(j *batchv1.Job) string {
	r := j.Spec.Template.Spec.Containers[0].Resources.Requests
	return r.Cpu().String() + "/" + r.Memory().String()
}

// unresolved hides every VPA while on is set: a target that cannot be
// resolved for a while (caches syncing, a /scale request failing).
type unresolved struct {
	Resolver
	on atomic.Bool
}

func (r *unresolved) VPAForJob(ctx context.Context, job *batchv1.Job) (*vpatypes.VerticalPodAutoscaler, error) {
	if r.on.Load() {
		return nil, nil
	}
	return r.Resolver.VPAForJob(ctx, job)
}

// jobCacheBehind tells whether syncJob waits for the Job's update event
// before deciding on the cached Job at version.
func jobCacheBehind(f *fixture, uid types.UID, version string, now time.Time) bool {
	behind, overdue := f.ctrl.jobTracker.CacheLag(uid, version, now)
	return behind && !overdue
}
