package target

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/labels"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"

	controllerfetcher "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/target/controller_fetcher"

	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testjob"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testvpa"
)

func TestJobController(t *testing.T) {
	tests := []struct {
		name             string
		builder          *testjob.Builder
		wantKind, wantNm string
		ok               bool
	}{
		{"a Job without controller is its own", testjob.New("j"), "Job", "j", true},
		{"a Job of a CronJob belongs to the CronJob", testjob.New("j").OwnedBy("batch/v1", "CronJob", "nightly"), "CronJob", "nightly", true},
		{"a Job of another controller is not handled", testjob.New("j").OwnedBy("jobset.x-k8s.io/v1alpha2", "JobSet", "js"), "", "", false},
		{"a CronJob kind of another group is not a CronJob", testjob.New("j").OwnedBy("example.com/v1", "CronJob", "c"), "", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			kind, name, ok := JobController(tc.builder.Obj())
			assert.Equal(t, tc.ok, ok)
			assert.Equal(t, tc.wantKind, kind)
			assert.Equal(t, tc.wantNm, name)
		})
	}
}

func TestVPAForJob(t *testing.T) {
	now := time.Unix(0, 0)
	clock := func() time.Time { return now }
	sel := func(app string) labels.Selector { return labels.SelectorFromSet(labels.Set{"app": app}) }

	jobVPA := testvpa.New("job-vpa").Target("batch/v1", "Job", "train").InPlace().Obj()
	jobVPANewer := testvpa.New("job-vpa-newer").Target("batch/v1", "Job", "train").InPlace().Obj()
	jobVPANewer.CreationTimestamp.Time = jobVPA.CreationTimestamp.Add(time.Hour)
	cronVPA := testvpa.New("cron-vpa").Target("batch/v1", "CronJob", "nightly").InPlace().Obj()
	otherGroup := testvpa.New("other-group").Target("example.com/v1", "Job", "train").InPlace().Obj()
	otherGroup.CreationTimestamp.Time = jobVPA.CreationTimestamp.Add(-time.Hour)
	deployment := testvpa.New("deploy").Target("apps/v1", "Deployment", "train").InPlace().Obj()
	fetcher := &countingFetcher{selectors: map[string]labels.Selector{
		"job-vpa": sel("train"), "job-vpa-newer": sel("train"), "cron-vpa": sel("nightly"), "other-group": sel("train"), "deploy": sel("train"),
	}}
	r := newResolver(t, []*vpatypes.VerticalPodAutoscaler{jobVPANewer, jobVPA, cronVPA, otherGroup, deployment}, fetcher, controllerfetcher.FakeControllerFetcher{}, nil, clock)
	ctx := context.Background()

	t.Run("the oldest VPA targeting the Job in group batch", func(t *testing.T) {
		got, err := r.VPAForJob(ctx, testjob.New("train").Obj())
		require.NoError(t, err)
		require.NotNil(t, got)
		assert.Equal(t, "job-vpa", got.Name)
	})
	t.Run("a Job of a CronJob: the CronJob's VPA", func(t *testing.T) {
		job := testjob.New("nightly-123").TemplateLabels(map[string]string{"app": "nightly"}).OwnedBy("batch/v1", "CronJob", "nightly").Obj()
		got, err := r.VPAForJob(ctx, job)
		require.NoError(t, err)
		require.NotNil(t, got)
		assert.Equal(t, "cron-vpa", got.Name)
	})
	t.Run("a Job of a CronJob is not controlled by a VPA naming the Job", func(t *testing.T) {
		job := testjob.New("train").OwnedBy("batch/v1", "CronJob", "no-vpa").Obj()
		got, err := r.VPAForJob(ctx, job)
		require.NoError(t, err)
		assert.Nil(t, got)
	})
	t.Run("template labels must match the target's selector", func(t *testing.T) {
		job := testjob.New("nightly-1").TemplateLabels(map[string]string{"app": "other"}).OwnedBy("batch/v1", "CronJob", "nightly").Obj()
		got, err := r.VPAForJob(ctx, job)
		require.NoError(t, err)
		assert.Nil(t, got)
	})
	t.Run("a Job of another controller has no VPA", func(t *testing.T) {
		got, err := r.VPAForJob(ctx, testjob.New("train").OwnedBy("jobset.x-k8s.io/v1alpha2", "JobSet", "train").Obj())
		require.NoError(t, err)
		assert.Nil(t, got)
	})
	t.Run("other namespace has no VPA", func(t *testing.T) {
		got, err := r.VPAForJob(ctx, testjob.New("train").Namespace("elsewhere").Obj())
		require.NoError(t, err)
		assert.Nil(t, got)
	})
}
