package recommendation

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"k8s.io/autoscaler/vertical-pod-autoscaler/pkg/utils/limitrange"

	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testadmit"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testvpa"
)

// A kubelet whose runtime reports no resources reads a container's absent
// memory limit as 0 when the container has a cpu limit (1.37, 1.38). That
// reported 0 is no limit: a container whose VPA controls only its requests
// gets the recommended request, not one capped to 0; one whose VPA
// controls its limits too is given no memory limit.
func TestReportedZeroLimitIsNoLimit(t *testing.T) {
	for _, tc := range []struct {
		name         string
		pod          *corev1.Pod
		requestsOnly bool
		// wantLimits: the app's limits (RequestsAndLimits).
		wantLimits corev1.ResourceList
	}{
		{"requests only", testpod.New("p").Container("app", "100m", "100Mi").Limits("app", "1", "").Running().
			ReportedLimits("app", "1", "0").Obj(), true, nil},
		{"a sidecar's, requests only", testpod.New("p").Container("main", "100m", "100Mi").Sidecar("app", "100m", "100Mi").
			Limits("app", "1", "").Running().ReportedLimits("app", "1", "0").Obj(), true, nil},
		{"requests and limits: no memory limit", testpod.New("p").Container("app", "100m", "100Mi").Limits("app", "1", "").Running().
			ReportedLimits("app", "1", "0").Obj(), false, corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vpa := testvpa.New("v").InPlace().Recommend("app", "100m", "200Mi")
			if tc.requestsOnly {
				vpa.RequestsOnly("app")
			}
			before := tc.pod.DeepCopy()
			d, err := NewCalculator(limitrange.NewNoopLimitsCalculator()).ForPod(tc.pod, vpa.Obj())
			require.NoError(t, err)
			require.Contains(t, d, "app")
			assert.Equal(t, "200Mi", ptrQ(d["app"].Requests[corev1.ResourceMemory]).String())
			assert.Equal(t, "100m", ptrQ(d["app"].Requests[corev1.ResourceCPU]).String())
			assert.Equal(t, len(tc.wantLimits), len(d["app"].Limits), "limits %v", d["app"].Limits)
			for r, q := range tc.wantLimits {
				assert.Equal(t, q.String(), ptrQ(d["app"].Limits[r]).String(), "%s limit", r)
			}
			assert.Equal(t, before, tc.pod, "the pod is not changed")
		})
	}
}

// The end-to-end case that showed it (TestResizeFollowsTheServersLimitRanger):
// a pod admitted before its namespace's LimitRange, whose cpu limit is 10
// times its request, on a node whose kubelet reports its absent memory
// limit as 0. Its VPA controls requests only, keeps the cpu and raises the
// memory: the memory follows the recommendation on every version; the cpu
// request is raised to the limit over the ratio where LimitRanger checks
// the resized pod whole (up to 1.37), and kept from 1.38.
func TestRequestsOnlyOnAReportedZeroLimitWithinALimitRange(t *testing.T) {
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	lr := &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "ratio", Namespace: "default"}, Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{
		Type: corev1.LimitTypeContainer, MaxLimitRequestRatio: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}}}}}
	require.NoError(t, factory.Core().V1().LimitRanges().Informer().GetIndexer().Add(lr))
	for _, tc := range []struct {
		minor int
		cpu   string
	}{{37, "250m"}, {38, "100m"}} {
		memo, err := NewClusterMemo(factory, tc.minor)
		require.NoError(t, err)
		pod := testpod.New("p").UID("uid-p").Container("app", "100m", "100Mi").Limits("app", "1", "").Running().ReportedLimits("app", "1", "0").Obj()
		vpa := testvpa.New("web").InPlace().Recommend("app", "100m", "200Mi").RequestsOnly("app").Obj()
		vpa.ResourceVersion = "1"
		d, err := memo.ForPod(pod, vpa)
		require.NoError(t, err)
		assert.Equal(t, tc.cpu, ptrQ(d["app"].Requests[corev1.ResourceCPU]).String(), "1.%d", tc.minor)
		assert.Equal(t, "200Mi", ptrQ(d["app"].Requests[corev1.ResourceMemory]).String(), "1.%d", tc.minor)
		assert.Empty(t, d["app"].Limits)
	}
}

// A limit of 0 in a container's spec holds its request of that resource
// at 0: the API server refuses a request above a limit, a limit of 0
// included, on every version, and a limit cannot be removed in place. The
// VPA's values of that resource are left out, whatever it controls; the
// other resource follows the recommendation. The pods are as the API
// server has them: a request defaulted to its limit of 0.
func TestSpecZeroLimitHoldsTheResource(t *testing.T) {
	for _, tc := range []struct {
		name         string
		pod          *corev1.Pod
		container    string
		requestsOnly bool
		// wantCPU: the container's cpu request ("" none: the container is
		// left out).
		wantCPU string
	}{
		{"memory limit 0, requests only", testpod.New("p").Container("app", "100m", "0").Limits("app", "1", "0").Running().Obj(),
			"app", true, "300m"},
		{"memory limit 0, requests and limits", testpod.New("p").Container("app", "100m", "0").Limits("app", "1", "0").Running().Obj(),
			"app", false, "300m"},
		{"cpu and memory limits 0: left out", testpod.New("p").Container("app", "0", "0").Limits("app", "0", "0").Running().Obj(),
			"app", false, ""},
		{"a sidecar's memory limit 0", testpod.New("p").Container("main", "100m", "100Mi").Sidecar("side", "100m", "0").Limits("side", "1", "0").Running().Obj(),
			"side", false, "300m"},
		{"at admission (no status), memory limit 0", testpod.New("p").Container("app", "100m", "0").Limits("app", "1", "0").Obj(),
			"app", false, "300m"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vpa := testvpa.New("v").InPlace().Recommend(tc.container, "300m", "300Mi")
			if tc.requestsOnly {
				vpa.RequestsOnly(tc.container)
			}
			d, err := NewCalculator(limitrange.NewNoopLimitsCalculator()).ForPod(tc.pod, vpa.Obj())
			require.NoError(t, err)
			if tc.wantCPU == "" {
				assert.NotContains(t, d, tc.container)
				return
			}
			require.Contains(t, d, tc.container)
			want := d[tc.container]
			assert.Equal(t, tc.wantCPU, ptrQ(want.Requests[corev1.ResourceCPU]).String())
			for _, list := range []corev1.ResourceList{want.Requests, want.Limits, want.LowerBound, want.UpperBound} {
				assert.NotContains(t, list, corev1.ResourceMemory, "memory is left as it is")
			}
			out := tc.pod.DeepCopy()
			for r := range Containers(out) {
				if r.Container.Name != tc.container {
					continue
				}
				for name, q := range want.Requests {
					r.Container.Resources.Requests[name] = q
				}
				for name, q := range want.Limits {
					r.Container.Resources.Limits[name] = q
				}
			}
			assert.NoError(t, testadmit.Pod(out, nil, nil), "the API server takes it")
		})
	}
}
