package resize

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/vpa-inplace/vpa-inplace/pkg/resources"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testjob"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
)

func TestBuildJobPatch(t *testing.T) {
	job := testjob.New("j").Container("app", "100m", "100Mi").Limits("app", "200m", "").Container("sidecar", "10m", "10Mi").Container("same", "50m", "").Suspended().Obj()
	job.ResourceVersion = "42"
	job.Spec.Template.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"] = testpod.List("1", "")[corev1.ResourceCPU]
	target := resources.Resources{
		"app":  {Requests: testpod.List("250m", "200Mi"), Limits: testpod.List("500m", "")},
		"same": {Requests: testpod.List("50m", "")},
	}
	patch, err := BuildJobPatch(job, target)
	require.NoError(t, err)
	assert.JSONEq(t, `{"metadata":{"resourceVersion":"42"},"spec":{"template":{"spec":{"containers":[
		{"name":"app","resources":{"requests":{"cpu":"250m","memory":"200Mi"},"limits":{"cpu":"500m"}}}]}}}}`, string(patch),
		"only the controlled containers whose values change, only cpu and memory (a GPU request is left to the merge), guarded by resourceVersion")

	var doc map[string]any
	require.NoError(t, json.Unmarshal(patch, &doc))
	assert.NotContains(t, string(patch), "sidecar", "a container without recommendation is not named")

	_, err = BuildJobPatch(job, resources.Resources{"same": {Requests: testpod.List("50m", "")}})
	assert.Error(t, err, "no change is no patch")
}

func TestClassifyJobPatchError(t *testing.T) {
	gr := schema.GroupResource{Group: "batch", Resource: "jobs"}
	immutable := apierrors.NewInvalid(schema.GroupKind{Group: "batch", Kind: "Job"}, "j",
		field.ErrorList{field.Invalid(field.NewPath("spec", "template"), nil, "field is immutable")})
	tests := []struct {
		name string
		err  error
		want Outcome
	}{
		{"accepted", nil, OutcomeAccepted},
		{"422 immutable template (gate off, 1.34-)", immutable, OutcomeRejected},
		{"403 by an admission policy", apierrors.NewForbidden(gr, "j", assert.AnError), OutcomeRejected},
		{"400", apierrors.NewBadRequest("bad"), OutcomeRejected},
		{"409 the Job changed", apierrors.NewConflict(gr, "j", assert.AnError), OutcomeConflict},
		{"404 the Job is gone", apierrors.NewNotFound(gr, "j"), OutcomeGone},
		{"500", apierrors.NewInternalError(assert.AnError), OutcomeTransient},
		{"429", apierrors.NewTooManyRequests("slow down", 1), OutcomeTransient},
		{"no answer", assert.AnError, OutcomeTransient},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, ClassifyJobPatchError(tc.err))
		})
	}
}
