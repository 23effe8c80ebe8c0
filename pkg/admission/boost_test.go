package admission

import (
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
	"k8s.io/autoscaler/vertical-pod-autoscaler/pkg/utils/annotations"

	"github.com/vpa-inplace/vpa-inplace/pkg/boost"
	"github.com/vpa-inplace/vpa-inplace/pkg/recommendation"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testvpa"
)

// factorBoost is a VPA-wide CPU startup boost of factor for 20 s.
func factorBoost(b *testvpa.Builder, factor int32) *vpatypes.VerticalPodAutoscaler {
	vpa := b.Obj()
	vpa.Spec.StartupBoost = &vpatypes.StartupBoost{CPU: &vpatypes.GenericStartupBoost{
		Type: vpatypes.FactorStartupBoostType, Factor: ptr.To(factor), DurationSeconds: ptr.To[int32](20)}}
	return vpa
}

// quantityBoost is a CPU startup boost of container by q for 30 s, in its
// container policy.
func quantityBoost(b *testvpa.Builder, container, q string) *vpatypes.VerticalPodAutoscaler {
	return b.ContainerPolicy(vpatypes.ContainerResourcePolicy{ContainerName: container, StartupBoost: &vpatypes.StartupBoost{
		CPU: &vpatypes.GenericStartupBoost{Type: vpatypes.QuantityStartupBoostType, Quantity: ptr.To(resource.MustParse(q)),
			DurationSeconds: ptr.To[int32](30)}}}).Obj()
}

// events drains the fake recorder.
func events(r *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-r.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

type boostCase struct {
	name string
	// gates: boost turns on both; inPlaceOnly only InPlace.
	boost, inPlaceOnly bool
	vpa                *vpatypes.VerticalPodAutoscaler
	pod                string
	// want are the container's resources after the patch; nil: no patch.
	want *corev1.ResourceRequirements
	// wantOriginal is what the boost annotation records, read with
	// upstream's reader; nil: no annotation.
	wantOriginal *annotations.OriginalResources
	wantEvents   []string
	applied      float64
	skipped      float64
}

func TestMutatePodsStartupBoost(t *testing.T) {
	list := testpod.List
	inPlace := func() *testvpa.Builder { return testvpa.New("web").InPlace().Recommend("app", "300m", "300Mi") }
	asCreated := &annotations.OriginalResources{Requests: list("100m", "100Mi"), Limits: list("200m", "200Mi")}
	guaranteed := `[{"name":"app","resources":{"requests":{"cpu":"100m","memory":"100Mi"},"limits":{"cpu":"100m","memory":"100Mi"}}}]`
	restart := `[{"name":"app","resources":{"requests":{"cpu":"100m","memory":"100Mi"},"limits":{"cpu":"200m","memory":"200Mi"}},` +
		`"resizePolicy":[{"resourceName":"cpu","restartPolicy":"RestartContainer"}]}]`
	recommended := requirements(list("300m", "300Mi"), list("600m", "600Mi"))
	tests := []boostCase{
		{
			name:  "Deployment pod, factor 2: requests and limits of the recommendation doubled",
			boost: true, vpa: factorBoost(inPlace(), 2), pod: podJSON("", appContainer),
			want:         ptr.To(requirements(list("600m", "300Mi"), list("1200m", "600Mi"))),
			wantOriginal: asCreated,
			wantEvents:   []string{"Normal InPlaceStartupBoostApplied Boosted CPU of container app of a new pod of ReplicaSet web-7d9f8 from 300m to 600m for 20s after Ready"},
			applied:      1,
		},
		{
			name:  "Deployment pod, quantity +500m in the container policy",
			boost: true, vpa: quantityBoost(inPlace(), "app", "500m"), pod: podJSON("", appContainer),
			want:         ptr.To(requirements(list("800m", "300Mi"), list("1600m", "600Mi"))),
			wantOriginal: asCreated,
			wantEvents:   []string{"Normal InPlaceStartupBoostApplied Boosted CPU of container app of a new pod of ReplicaSet web-7d9f8 from 300m to 800m for 30s after Ready"},
			applied:      1,
		},
		{
			name:  "Guaranteed pod stays Guaranteed",
			boost: true, vpa: factorBoost(inPlace(), 3), pod: podJSON("", guaranteed),
			want:         ptr.To(requirements(list("900m", "300Mi"), list("900m", "300Mi"))),
			wantOriginal: &annotations.OriginalResources{Requests: list("100m", "100Mi"), Limits: list("100m", "100Mi")},
			wantEvents:   []string{"Normal InPlaceStartupBoostApplied Boosted CPU of container app of a new pod of ReplicaSet web-7d9f8 from 300m to 900m for 20s after Ready"},
			applied:      1,
		},
		{
			name:  "no recommendation: the container's own values are boosted",
			boost: true, vpa: factorBoost(testvpa.New("web").InPlace(), 2), pod: podJSON("", appContainer),
			want:         ptr.To(requirements(list("200m", "100Mi"), list("400m", "200Mi"))),
			wantOriginal: asCreated,
			wantEvents:   []string{"Normal InPlaceStartupBoostApplied Boosted CPU of container app of a new pod of ReplicaSet web-7d9f8 from 100m to 200m for 20s after Ready"},
			applied:      1,
		},
		{
			name:  "resizePolicy RestartContainer: not boosted, with a warning",
			boost: true, vpa: factorBoost(inPlace(), 2), pod: podJSON("", restart),
			want: &recommended,
			wantEvents: []string{"Warning InPlaceStartupBoostSkipped Not boosting the CPU of container app of a new pod of ReplicaSet web-7d9f8: " +
				"its CPU resize policy is RestartContainer: ending the boost would restart it"},
			skipped: 1,
		},
		{
			name:  "a boost annotation already on the new pod: not boosted, the annotation left as it is",
			boost: true, vpa: factorBoost(inPlace(), 2),
			pod:          podJSON(`"annotations":{"vpaCpuStartupBoost/app":"{\"requests\":{\"cpu\":\"9\"}}"},`, appContainer),
			want:         &recommended,
			wantOriginal: &annotations.OriginalResources{Requests: corev1.ResourceList{"cpu": resource.MustParse("9")}},
			wantEvents: []string{"Warning InPlaceStartupBoostSkipped Not boosting the CPU of container app of a new pod of ReplicaSet web-7d9f8: " +
				"the new pod already has the annotation vpaCpuStartupBoost/app, left as it is"},
			skipped: 1,
		},
		{
			name:        "CPUStartupBoost gate off: the recommendation, no boost",
			inPlaceOnly: true, vpa: factorBoost(inPlace(), 2), pod: podJSON("", appContainer),
			want: &recommended,
		},
		{
			name: "both gates off: the recommendation, no boost",
			vpa:  factorBoost(inPlace(), 2), pod: podJSON("", appContainer),
			want: &recommended,
		},
		{
			name:  "VPA not InPlace: the pod is left alone",
			boost: true, vpa: factorBoost(testvpa.New("web").Mode(vpatypes.UpdateModeInitial).Recommend("app", "300m", "300Mi"), 2),
			pod: podJSON("", appContainer),
		},
		{
			name:  "no boost policy: the recommendation only",
			boost: true, vpa: inPlace().Obj(), pod: podJSON("", appContainer),
			want: &recommended,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			recorder := record.NewFakeRecorder(10)
			h, metrics := testHandler{gate: tc.inPlaceOnly, boost: tc.boost, vpas: []*vpatypes.VerticalPodAutoscaler{tc.vpa}, recorder: recorder}.build(t)
			resp := response(t, post(t, h, MutatePodsPath, podReview("CREATE", tc.pod)))
			require.True(t, resp.Allowed)
			if tc.want == nil {
				assert.Empty(t, resp.Patch)
			} else {
				pod := applyPatch(t, tc.pod, resp)
				require.Len(t, pod.Spec.Containers, 1)
				assertResources(t, *tc.want, pod.Spec.Containers[0].Resources, "app")
				assert.Equal(t, testpod.QOS(podWith(tc.pod)), testpod.QOS(pod), "the QoS class is the one created")
				original, err := annotations.GetOriginalResourcesFromAnnotation(pod, "app")
				require.NoError(t, err, "upstream's reader reads the annotation")
				if tc.wantOriginal == nil {
					assert.Nil(t, original)
				} else {
					require.NotNil(t, original)
					assertResources(t, requirements(tc.wantOriginal.Requests, tc.wantOriginal.Limits),
						requirements(original.Requests, original.Limits), "original app")
				}
			}
			assert.Equal(t, tc.wantEvents, events(recorder))
			assert.Equal(t, tc.applied, testutil.ToFloat64(metrics.startupBoosts.WithLabelValues(StartupBoostApplied)))
			assert.Equal(t, tc.skipped, testutil.ToFloat64(metrics.startupBoosts.WithLabelValues(StartupBoostSkipped)))
		})
	}
}

// podWith decodes a pod's JSON.
func podWith(raw string) *corev1.Pod {
	pod, _, err := decodePodReference([]byte(raw), "default")
	if err != nil {
		panic(err)
	}
	return pod
}

// The annotation lands wherever the pod's JSON has room for it, beside the
// note of what was set, and only a boost changes a pod whose values already
// are the recommendation's.
func TestMutatePodsStartupBoostAnnotationPlaces(t *testing.T) {
	vpa := factorBoost(testvpa.New("web").InPlace().Recommend("app", "100m", "100Mi"), 2)
	for _, meta := range []string{``, `"annotations":null,`, `"annotations":{"team":"web"},`} {
		t.Run(meta, func(t *testing.T) {
			h, _ := testHandler{boost: true, vpas: []*vpatypes.VerticalPodAutoscaler{vpa}}.build(t)
			raw := podJSON(meta, appContainer)
			pod := applyPatch(t, raw, response(t, post(t, h, MutatePodsPath, podReview("CREATE", raw))))
			assertResources(t, requirements(testpod.List("200m", "100Mi"), testpod.List("400m", "200Mi")), pod.Spec.Containers[0].Resources, "app")
			assert.Equal(t, "Pod resources updated by web: container 0: cpu request, cpu limit", pod.Annotations[ResourceUpdatesAnnotation])
			original, err := annotations.GetOriginalResourcesFromAnnotation(pod, "app")
			require.NoError(t, err)
			require.NotNil(t, original)
			assert.Equal(t, "100m", ptr.To(original.Requests[corev1.ResourceCPU]).String())
			if strings.Contains(meta, "team") {
				assert.Equal(t, "web", pod.Annotations["team"])
			}
		})
	}
}

// The fast decoders and the reference path give a boosted pod the same
// patch, byte for byte.
func TestMutatePodsStartupBoostSameOnBothPaths(t *testing.T) {
	vpa := factorBoost(testvpa.New("web").InPlace().Recommend("app", "300m", "300Mi"), 2)
	h, _ := testHandler{boost: true, vpas: []*vpatypes.VerticalPodAutoscaler{vpa}}.build(t)
	for _, raw := range []string{
		podJSON("", appContainer),
		podJSON(`"annotations":{"a":"b"},`, appContainer),
		podJSON(`"annotations":{"vpaCpuStartupBoost/app":"x"},`, `[{"name":"app"},{"name":"sidecar","resources":{"limits":{"cpu":"1"}}}]`),
	} {
		body := podReview("CREATE", raw)
		_, fast := decodeReviewFast([]byte(body))
		require.True(t, fast)
		// An escaped field name is left to the reference path.
		slow := strings.Replace(body, `"namespace":"default","operation"`, `"n\u0061mespace":"default","operation"`, 1)
		_, fast = decodeReviewFast([]byte(slow))
		require.False(t, fast)
		a, b := response(t, post(t, h, MutatePodsPath, body)), response(t, post(t, h, MutatePodsPath, slow))
		require.NotEmpty(t, a.Patch)
		assert.Equal(t, string(a.Patch), string(b.Patch))
	}
}

// A dry run gets the boost, without an event or a count.
func TestMutatePodsStartupBoostDryRun(t *testing.T) {
	recorder := record.NewFakeRecorder(10)
	h, metrics := testHandler{boost: true, recorder: recorder,
		vpas: []*vpatypes.VerticalPodAutoscaler{factorBoost(testvpa.New("web").InPlace(), 2)}}.build(t)
	raw := podJSON("", appContainer)
	body := strings.Replace(podReview("CREATE", raw), `"dryRun":false`, `"dryRun":true`, 1)
	rec := post(t, h, MutatePodsPath, body)
	require.Equal(t, http.StatusOK, rec.Code)
	pod := applyPatch(t, raw, response(t, rec))
	assert.Equal(t, "200m", ptr.To(pod.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]).String())
	assert.Empty(t, events(recorder))
	assert.Zero(t, testutil.ToFloat64(metrics.startupBoosts.WithLabelValues(StartupBoostApplied)))
}

// Containers without a policy of their own follow the VPA's; a container
// policy of mode Off has none; two containers of the same name are not
// boosted.
func TestStartupBoostsPerContainer(t *testing.T) {
	off := vpatypes.ContainerScalingModeOff
	vpa := factorBoost(testvpa.New("web").InPlace().ContainerPolicy(vpatypes.ContainerResourcePolicy{ContainerName: "off", Mode: &off}), 2)
	pod := testpod.New("p").Container("app", "100m", "").Container("off", "100m", "").Container("dup", "100m", "").Container("dup", "100m", "").Obj()
	shape := &podShape{metadata: true, spec: true, containers: make([]containerShape, 4)}
	desired, added, boosts := startupBoosts(shape, pod, vpa, nil, nil)
	assert.Equal(t, []annotation{{key: boost.AnnotationKey("app"), value: `{"requests":{"cpu":"100m"},"limits":{}}`}}, added)
	require.Len(t, boosts, 3)
	assert.Equal(t, "app", boosts[0].container)
	assert.Equal(t, "200m", boosts[0].to.String())
	assert.Equal(t, "its name is not unique in the pod", boosts[1].skipped)
	assert.Equal(t, "its name is not unique in the pod", boosts[2].skipped)
	assert.Equal(t, "200m", ptr.To(desired["app"].Requests[corev1.ResourceCPU]).String())
	assert.NotContains(t, desired, "off")
}

// The recommendation a cache hands out is not changed by a boost.
func TestStartupBoostsLeaveTheRecommendationAlone(t *testing.T) {
	vpa := factorBoost(testvpa.New("web").InPlace(), 2)
	pod := testpod.New("p").Container("app", "100m", "100Mi").Obj()
	shape := &podShape{metadata: true, spec: true, containers: make([]containerShape, 1)}
	rec := recommendation.Desired{"app": {Requests: testpod.List("300m", "300Mi")}}
	out, _, _ := startupBoosts(shape, pod, vpa, rec, nil)
	assert.Equal(t, "600m", ptr.To(out["app"].Requests[corev1.ResourceCPU]).String())
	assert.Equal(t, "300m", ptr.To(rec["app"].Requests[corev1.ResourceCPU]).String())
}

// Annotations that cannot be read, or are larger than the API server
// accepts, boost nothing: whether a container already carries its
// annotation is unknown.
func TestStartupBoostsWithUnreadableAnnotations(t *testing.T) {
	vpa := factorBoost(testvpa.New("web").InPlace(), 2)
	pod := testpod.New("p").Container("app", "100m", "").Obj()
	for name, raw := range map[string]string{
		"not strings": `{"a":1}`,
		"too large":   `{"a":"` + strings.Repeat("x", maxPodAnnotationsBytes) + `"}`,
	} {
		t.Run(name, func(t *testing.T) {
			shape := &podShape{metadata: true, annotations: true, annotationsJSON: rawValue(raw), spec: true, containers: make([]containerShape, 1)}
			desired, added, boosts := startupBoosts(shape, pod, vpa, nil, nil)
			assert.Empty(t, desired)
			assert.Empty(t, added)
			require.Len(t, boosts, 1)
			assert.Contains(t, boosts[0].skipped, "the pod's annotations")
		})
	}
	// Readable ones without the container's key do not stop its boost.
	shape := &podShape{metadata: true, annotations: true, annotationsJSON: rawValue(`{"vpaCpuStartupBoost/other":"x"}`), spec: true,
		containers: make([]containerShape, 1)}
	_, added, _ := startupBoosts(shape, pod, vpa, nil, nil)
	assert.Len(t, added, 1)
}
