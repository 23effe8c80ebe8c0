package admission

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testadmit"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testvpa"
)

// limitRangeOf is a LimitRange of namespace default with one item.
func limitRangeOf(item corev1.LimitRangeItem) *corev1.LimitRange {
	return &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "limits", Namespace: "default"},
		Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{item}}}
}

// cpuItem is a LimitRange item of type t on cpu: max, and
// maxLimitRequestRatio when ratio is set.
func cpuItem(t corev1.LimitType, max, ratio string) corev1.LimitRangeItem {
	item := corev1.LimitRangeItem{Type: t}
	if max != "" {
		item.Max = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(max)}
	}
	if ratio != "" {
		item.MaxLimitRequestRatio = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(ratio)}
	}
	return item
}

// quotaOf is a ResourceQuota of namespace default as the quota controller
// leaves it: hard, and what is used.
func quotaOf(name string, hard, used corev1.ResourceList, scopes ...corev1.ResourceQuotaScope) *corev1.ResourceQuota {
	return &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec:   corev1.ResourceQuotaSpec{Hard: hard, Scopes: scopes},
		Status: corev1.ResourceQuotaStatus{Hard: hard, Used: used}}
}

func cpu(name corev1.ResourceName, q string) corev1.ResourceList {
	return corev1.ResourceList{name: resource.MustParse(q)}
}

// A CPU startup boost never makes a new pod one that the API server's
// admission refuses (LimitRanger, ResourceQuota): a pod refused at creation
// is never created, and its workload makes none. The boost is capped to
// what the namespace allows, and says so.
func TestStartupBoostStaysWithinAdmission(t *testing.T) {
	list := testpod.List
	// One container, cpu 100m/200m (a ratio of 2), memory 100Mi/200Mi; no
	// recommendation for it: its own values are boosted.
	const burstable = `[{"name":"app","resources":{"requests":{"cpu":"100m","memory":"100Mi"},"limits":{"cpu":"200m","memory":"200Mi"}}}]`
	const guaranteed = `[{"name":"app","resources":{"requests":{"cpu":"200m","memory":"100Mi"},"limits":{"cpu":"200m","memory":"100Mi"}}}]`
	// Two containers of 200m/400m each.
	const two = `[{"name":"app","resources":{"requests":{"cpu":"200m"},"limits":{"cpu":"400m"}}},` +
		`{"name":"side","resources":{"requests":{"cpu":"200m"},"limits":{"cpu":"400m"}}}]`
	vpa := func(factor int32) *vpatypes.VerticalPodAutoscaler {
		return factorBoost(testvpa.New("web").InPlace(), factor)
	}
	tests := []struct {
		name        string
		vpa         *vpatypes.VerticalPodAutoscaler
		pod         string
		limitRanges []*corev1.LimitRange
		quotas      []*corev1.ResourceQuota
		// want are the resources of container app after the patch.
		want    corev1.ResourceRequirements
		applied float64
		capped  float64
		skipped float64
		event   string
	}{
		{
			name: "LimitRange max 400m per container: capped where the limit reaches it",
			vpa:  vpa(4), pod: podJSON("", burstable),
			limitRanges: []*corev1.LimitRange{limitRangeOf(cpuItem(corev1.LimitTypeContainer, "400m", ""))},
			want:        requirements(list("200m", "100Mi"), list("400m", "200Mi")),
			capped:      1,
			event: "Warning InPlaceStartupBoostCapped Boosted CPU of container app of a new pod of ReplicaSet web-7d9f8 from 100m to 200m " +
				"for 20s after Ready, less than its policy asks (400m): the LimitRange max cpu per Container is 400m",
		},
		{
			name: "LimitRange max 400m per container, Guaranteed: the request up to it",
			vpa:  vpa(4), pod: podJSON("", guaranteed),
			limitRanges: []*corev1.LimitRange{limitRangeOf(cpuItem(corev1.LimitTypeContainer, "400m", ""))},
			want:        requirements(list("400m", "100Mi"), list("400m", "100Mi")),
			capped:      1,
		},
		{
			name: "LimitRange max at the container's limit: no room, not boosted",
			vpa:  vpa(2), pod: podJSON("", burstable),
			limitRanges: []*corev1.LimitRange{limitRangeOf(cpuItem(corev1.LimitTypeContainer, "200m", ""))},
			want:        requirements(list("100m", "100Mi"), list("200m", "200Mi")),
			skipped:     1,
			event: "Warning InPlaceStartupBoostSkipped Not boosting the CPU of container app of a new pod of ReplicaSet web-7d9f8: " +
				"the LimitRange max cpu per Container is 200m: no room for a boost",
		},
		{
			name: "LimitRange max well above: the whole boost",
			vpa:  vpa(4), pod: podJSON("", burstable),
			limitRanges: []*corev1.LimitRange{limitRangeOf(cpuItem(corev1.LimitTypeContainer, "2", ""))},
			want:        requirements(list("400m", "100Mi"), list("800m", "200Mi")),
			applied:     1,
		},
		{
			name:        "maxLimitRequestRatio 1.5 per container: a limit rounded up would exceed it",
			vpa:         quantityBoost(testvpa.New("web").InPlace(), "app", "233m"),
			pod:         podJSON("", `[{"name":"app","resources":{"requests":{"cpu":"100m"},"limits":{"cpu":"150m"}}}]`),
			limitRanges: []*corev1.LimitRange{limitRangeOf(cpuItem(corev1.LimitTypeContainer, "", "1500m"))},
			want:        requirements(cpu(corev1.ResourceCPU, "333m"), cpu(corev1.ResourceCPU, "499m")),
			applied:     1,
		},
		{
			name: "LimitRange max 1 per pod: the boosted container's share",
			vpa:  vpa(2), pod: podJSON("", two),
			limitRanges: []*corev1.LimitRange{limitRangeOf(cpuItem(corev1.LimitTypePod, "1", ""))},
			want:        requirements(cpu(corev1.ResourceCPU, "300m"), cpu(corev1.ResourceCPU, "600m")),
			capped:      1, skipped: 1,
		},
		{
			name: "maxLimitRequestRatio 1.5 per pod: the Burstable container's limit grows no faster than allowed",
			vpa: factorBoost(testvpa.New("web").InPlace().ContainerPolicy(vpatypes.ContainerResourcePolicy{
				ContainerName: "side", Mode: ptrTo(vpatypes.ContainerScalingModeOff)}), 8),
			pod: podJSON("", `[{"name":"app","resources":{"requests":{"cpu":"100m"},"limits":{"cpu":"200m"}}},`+
				`{"name":"side","resources":{"requests":{"cpu":"500m"},"limits":{"cpu":"500m"}}}]`),
			limitRanges: []*corev1.LimitRange{limitRangeOf(cpuItem(corev1.LimitTypePod, "", "1500m"))},
			want:        requirements(cpu(corev1.ResourceCPU, "800m"), cpu(corev1.ResourceCPU, "1450m")),
			applied:     1,
		},
		{
			name: "ResourceQuota requests.cpu: what is left of it",
			vpa:  vpa(8), pod: podJSON("", burstable),
			quotas: []*corev1.ResourceQuota{quotaOf("compute", cpu(corev1.ResourceRequestsCPU, "1"), cpu(corev1.ResourceRequestsCPU, "500m"))},
			want:   requirements(list("500m", "100Mi"), list("1", "200Mi")),
			capped: 1,
			event: "Warning InPlaceStartupBoostCapped Boosted CPU of container app of a new pod of ReplicaSet web-7d9f8 from 100m to 500m " +
				"for 20s after Ready, less than its policy asks (800m): the ResourceQuota compute requests.cpu is 1, 500m used",
		},
		{
			name: "ResourceQuota limits.cpu",
			vpa:  vpa(8), pod: podJSON("", burstable),
			quotas: []*corev1.ResourceQuota{quotaOf("compute", cpu(corev1.ResourceLimitsCPU, "2"), cpu(corev1.ResourceLimitsCPU, "1"))},
			want:   requirements(list("500m", "100Mi"), list("1", "200Mi")),
			capped: 1,
		},
		{
			name: "ResourceQuota cpu, already full: not boosted",
			vpa:  vpa(2), pod: podJSON("", burstable),
			quotas:  []*corev1.ResourceQuota{quotaOf("compute", cpu(corev1.ResourceCPU, "1"), cpu(corev1.ResourceCPU, "900m"))},
			want:    requirements(list("100m", "100Mi"), list("200m", "200Mi")),
			skipped: 1,
		},
		{
			name: "ResourceQuota of scope BestEffort: it never counts a boosted pod",
			vpa:  vpa(4), pod: podJSON("", burstable),
			quotas: []*corev1.ResourceQuota{quotaOf("besteffort", cpu(corev1.ResourceRequestsCPU, "1"), cpu(corev1.ResourceRequestsCPU, "900m"),
				corev1.ResourceQuotaScopeBestEffort)},
			want:    requirements(list("400m", "100Mi"), list("800m", "200Mi")),
			applied: 1,
		},
		{
			name: "ResourceQuota of scope Terminating: counted in (the pod's activeDeadlineSeconds is not read), the boost capped",
			vpa:  vpa(4), pod: podJSON("", burstable),
			quotas: []*corev1.ResourceQuota{quotaOf("jobs", cpu(corev1.ResourceRequestsCPU, "1"), cpu(corev1.ResourceRequestsCPU, "700m"),
				corev1.ResourceQuotaScopeTerminating)},
			want:   requirements(list("300m", "100Mi"), list("600m", "200Mi")),
			capped: 1,
		},
		{
			name: "LimitRange and ResourceQuota: the tighter wins",
			vpa:  vpa(8), pod: podJSON("", guaranteed),
			limitRanges: []*corev1.LimitRange{limitRangeOf(cpuItem(corev1.LimitTypeContainer, "700m", ""))},
			quotas:      []*corev1.ResourceQuota{quotaOf("compute", cpu(corev1.ResourceRequestsCPU, "4"), cpu(corev1.ResourceRequestsCPU, "3"))},
			want:        requirements(list("700m", "100Mi"), list("700m", "100Mi")),
			capped:      1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			recorder := record.NewFakeRecorder(10)
			h, metrics := testHandler{boost: true, vpas: []*vpatypes.VerticalPodAutoscaler{tc.vpa}, recorder: recorder,
				limitRanges: tc.limitRanges, quotas: tc.quotas}.build(t)
			require.NoError(t, testadmit.Pod(podWith(tc.pod), tc.limitRanges, tc.quotas), "the pod as created is admitted")
			resp := response(t, post(t, h, MutatePodsPath, podReview("CREATE", tc.pod)))
			require.True(t, resp.Allowed)
			pod := podWith(tc.pod)
			if len(resp.Patch) > 0 {
				pod = applyPatch(t, tc.pod, resp)
			}
			require.NoError(t, testadmit.Pod(pod, tc.limitRanges, tc.quotas), "the pod as patched is admitted")
			assertResources(t, tc.want, pod.Spec.Containers[0].Resources, "app")
			got := events(recorder)
			if tc.event != "" {
				assert.Equal(t, []string{tc.event}, got)
			}
			assert.Equal(t, tc.applied, testutil.ToFloat64(metrics.startupBoosts.WithLabelValues(StartupBoostApplied)), "applied")
			assert.Equal(t, tc.capped, testutil.ToFloat64(metrics.startupBoosts.WithLabelValues(StartupBoostCapped)), "capped")
			assert.Equal(t, tc.skipped, testutil.ToFloat64(metrics.startupBoosts.WithLabelValues(StartupBoostSkipped)), "skipped")
		})
	}
}

func ptrTo[T any](v T) *T { return &v }

// The recommendation alone (no boost) keeps a new pod admitted too: a VPA
// that controls only requests, under maxLimitRequestRatio, gives a request
// no lower than the container's own limit allows.
func TestMutatePodsStaysWithinLimitRanges(t *testing.T) {
	vpa := testvpa.New("web").InPlace().Recommend("app", "100m", "100Mi").RequestsOnly("app").Obj()
	raw := podJSON("", `[{"name":"app","resources":{"requests":{"cpu":"1","memory":"100Mi"},"limits":{"cpu":"2","memory":"200Mi"}}}]`)
	ranges := []*corev1.LimitRange{limitRangeOf(cpuItem(corev1.LimitTypeContainer, "", "4"))}
	h, _ := testHandler{gate: true, vpas: []*vpatypes.VerticalPodAutoscaler{vpa}, limitRanges: ranges}.build(t)
	pod := applyPatch(t, raw, response(t, post(t, h, MutatePodsPath, podReview("CREATE", raw))))
	require.NoError(t, testadmit.Pod(pod, ranges, nil))
	assertResources(t, requirements(testpod.List("500m", "100Mi"), testpod.List("2", "200Mi")), pod.Spec.Containers[0].Resources, "app")
}
