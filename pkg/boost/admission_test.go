package boost

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testadmit"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
)

func milliQ(m int64) resource.Quantity { return *resource.NewMilliQuantity(m, resource.DecimalSI) }

// admissionOf returns the LimitRange and ResourceQuotas adm stands for, for
// testadmit.
func admissionOf(adm Admission) ([]*corev1.LimitRange, []*corev1.ResourceQuota) {
	lr := &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "limits"}}
	item := func(t corev1.LimitType, max, ratio *resource.Quantity) {
		i := corev1.LimitRangeItem{Type: t}
		if max != nil {
			i.Max = corev1.ResourceList{corev1.ResourceCPU: *max}
		}
		if ratio != nil {
			i.MaxLimitRequestRatio = corev1.ResourceList{corev1.ResourceCPU: *ratio}
		}
		lr.Spec.Limits = append(lr.Spec.Limits, i)
	}
	item(corev1.LimitTypeContainer, adm.ContainerMax, adm.ContainerRatio)
	item(corev1.LimitTypePod, adm.PodMax, adm.PodRatio)
	return []*corev1.LimitRange{lr}, adm.Quotas
}

func TestApplyWithinRoom(t *testing.T) {
	q := func(s string) *resource.Quantity { return ptr.To(resource.MustParse(s)) }
	quota := func(key corev1.ResourceName, hard, used string) *corev1.ResourceQuota {
		return &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "compute"}, Status: corev1.ResourceQuotaStatus{
			Hard: corev1.ResourceList{key: resource.MustParse(hard)}, Used: corev1.ResourceList{key: resource.MustParse(used)}}}
	}
	burstable := testpod.New("p").Container("app", "100m", "100Mi").Limits("app", "200m", "").Obj()
	for _, tc := range []struct {
		name             string
		adm              Admission
		pod              *corev1.Pod
		factor           int32
		wantReq, wantLim string // "": not boosted
		capped, notBoost string
	}{
		{name: "nothing bounds it", pod: burstable, factor: 4, wantReq: "400m", wantLim: "800m"},
		{name: "container max: the limit reaches it first", adm: Admission{ContainerMax: q("500m")}, pod: burstable, factor: 4,
			wantReq: "250m", wantLim: "500m", capped: "the LimitRange max cpu per Container is 500m"},
		{name: "container max above: whole boost", adm: Admission{ContainerMax: q("800m")}, pod: burstable, factor: 4,
			wantReq: "400m", wantLim: "800m"},
		{name: "container ratio: the limit kept within it, the request whole", adm: Admission{ContainerRatio: q("1500m")},
			pod: testpod.New("p").Container("app", "100m", "").Limits("app", "150m", "").Obj(), factor: 3, wantReq: "300m", wantLim: "450m"},
		{name: "pod max over two containers", adm: Admission{PodMax: q("1")},
			pod:    testpod.New("p").Container("app", "100m", "").Limits("app", "200m", "").Container("side", "300m", "").Limits("side", "300m", "").Obj(),
			factor: 8, wantReq: "350m", wantLim: "700m", capped: "the LimitRange max cpu per Pod is 1"},
		{name: "quota requests.cpu", adm: Admission{Quotas: []*corev1.ResourceQuota{quota(corev1.ResourceRequestsCPU, "2", "1500m")}},
			pod: burstable, factor: 8, wantReq: "500m", wantLim: "1", capped: "the ResourceQuota compute requests.cpu is 2, 1500m used"},
		{name: "quota already over (a stale used): not boosted", adm: Admission{Quotas: []*corev1.ResourceQuota{quota(corev1.ResourceCPU, "1", "1")}},
			pod: burstable, factor: 2, notBoost: "the ResourceQuota compute cpu is 1, 1 used: no room for a boost"},
		{name: "RequestsOnly: the limit stays, the request up to the pod max", adm: Admission{PodMax: q("300m")},
			pod: testpod.New("p").Container("app", "100m", "").Limits("app", "300m", "").Obj(), factor: 4,
			wantReq: "299m", wantLim: "300m"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := podBoost(factor(tc.factor, 20))
			if tc.name == "RequestsOnly: the limit stays, the request up to the pod max" {
				v = v.RequestsOnly("app")
			}
			room := NewRoom(tc.adm, tc.pod)
			got := Apply(Input{VPA: v.Obj(), Container: &tc.pod.Spec.Containers[0], Room: room})
			if tc.wantReq == "" {
				assert.False(t, got.Boosted)
				assert.Equal(t, tc.notBoost, got.NotBoosted)
				return
			}
			require.True(t, got.Boosted, got.NotBoosted)
			assert.Equal(t, tc.wantReq, ptr.To(got.Requests[corev1.ResourceCPU]).String())
			assert.Equal(t, tc.wantLim, ptr.To(got.Limits[corev1.ResourceCPU]).String())
			assert.Equal(t, tc.capped, got.Capped)
			if tc.capped != "" {
				assert.Equal(t, ptr.To(milliQ(100*int64(tc.factor))).String(), got.Wanted.String(), "what the policy asks")
			}
			boosted := tc.pod.DeepCopy()
			boosted.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: got.Requests, Limits: got.Limits}
			lrs, quotas := admissionOf(tc.adm)
			assert.NoError(t, testadmit.Pod(boosted, lrs, quotas))
		})
	}
}

// Whatever the pod and the namespace's bounds, boosting every container of
// a pod the API server admits leaves a pod it admits (testadmit, written
// apart from Room, judges), and a boost is capped only when the whole one
// would not be admitted.
func TestApplyNeverLeavesAdmission(t *testing.T) {
	rng := rand.New(rand.NewPCG(32, 12))
	pick := func(values ...int64) int64 { return values[rng.IntN(len(values))] }
	maybe := func(m int64) *resource.Quantity {
		if rng.IntN(2) == 0 {
			return nil
		}
		return ptr.To(milliQ(m))
	}
	cases, boosted, capped := 0, 0, 0
	for i := 0; cases < 3000 && i < 100000; i++ {
		pod := &corev1.Pod{}
		for c := range 1 + rng.IntN(3) {
			req := pick(10, 100, 150, 250, 333, 500, 1000)
			ctr := corev1.Container{Name: fmt.Sprintf("c%d", c), Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: milliQ(req)}}}
			if rng.IntN(4) > 0 {
				ctr.Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: milliQ(req * pick(1000, 1500, 2000, 3000) / 1000)}
			}
			pod.Spec.Containers = append(pod.Spec.Containers, ctr)
		}
		if rng.IntN(3) == 0 {
			pod.Spec.InitContainers = []corev1.Container{{Name: "init", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: milliQ(pick(100, 2000))},
				Limits:   corev1.ResourceList{corev1.ResourceCPU: milliQ(pick(2000, 4000))}}}}
		}
		adm := Admission{
			ContainerMax: maybe(pick(300, 500, 1000, 2000)), PodMax: maybe(pick(1000, 2000, 4000)),
			ContainerRatio: maybe(pick(1000, 1500, 2000, 3000)), PodRatio: maybe(pick(1500, 2000, 3000)),
		}
		for _, key := range []corev1.ResourceName{corev1.ResourceRequestsCPU, corev1.ResourceLimitsCPU} {
			if rng.IntN(3) == 0 {
				adm.Quotas = append(adm.Quotas, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "q-" + string(key)},
					Status: corev1.ResourceQuotaStatus{Hard: corev1.ResourceList{key: milliQ(pick(2000, 4000, 8000))},
						Used: corev1.ResourceList{key: milliQ(pick(0, 1000, 3000))}}})
			}
		}
		lrs, quotas := admissionOf(adm)
		if testadmit.Pod(pod, lrs, quotas) != nil {
			continue // refused without a boost: nothing a boost can spoil
		}
		// The boost sees the pod as LimitRanger's mutation left it: its
		// defaults set on what the containers lack.
		pod = testadmit.Mutate(pod, lrs)
		cases++
		vpa := podBoost(factor(int32(pick(2, 3, 5, 10)), 20))
		if rng.IntN(4) == 0 {
			vpa = vpa.RequestsOnly("c0")
		}
		room := NewRoom(adm, pod)
		out := pod.DeepCopy()
		for c := range pod.Spec.Containers {
			o := Apply(Input{VPA: vpa.Obj(), Container: &pod.Spec.Containers[c], Room: room})
			room.Take(o)
			if !o.Boosted {
				continue
			}
			boosted++
			out.Spec.Containers[c].Resources = corev1.ResourceRequirements{Requests: o.Requests, Limits: o.Limits}
			if len(o.Limits) == 0 {
				out.Spec.Containers[c].Resources.Limits = nil
			}
			whole := Apply(Input{VPA: vpa.Obj(), Container: &pod.Spec.Containers[c]})
			if o.Capped == "" {
				assert.Zero(t, whole.Requests.Cpu().Cmp(*o.Requests.Cpu()), "uncapped: the whole boost")
			} else {
				capped++
				assert.Negative(t, o.Requests.Cpu().Cmp(*whole.Requests.Cpu()), "capped: less than the whole boost")
			}
		}
		require.NoError(t, testadmit.Pod(out, lrs, quotas), "case %d: pod %v, admission %+v", i, pod.Spec, adm)
	}
	t.Logf("%d pods admitted without a boost, %d containers boosted, %d of them capped", cases, boosted, capped)
	require.Equal(t, 3000, cases)
	require.NotZero(t, capped)
}

// A limit scaled with its request is rounded up to the millicore, which can
// take it past maxLimitRequestRatio: it is lowered to the ratio, not the
// request (without the ratio, the limit keeps its rounding).
func TestApplyKeepsTheLimitWithinTheRatio(t *testing.T) {
	pod := testpod.New("p").Container("app", "100m", "").Limits("app", "150m", "").Obj()
	vpa := podBoost(quantityBoost("233m")).Obj()
	ratio := ptr.To(resource.MustParse("1500m"))
	for _, tc := range []struct {
		name string
		room *Room
		lim  string
	}{
		{"without a ratio", nil, "500m"},
		{"per container", NewRoom(Admission{ContainerRatio: ratio}, pod), "499m"},
		{"per pod", NewRoom(Admission{PodRatio: ratio}, pod), "499m"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Apply(Input{VPA: vpa, Container: &pod.Spec.Containers[0], Room: tc.room})
			require.True(t, got.Boosted, got.NotBoosted)
			assert.Equal(t, "333m", ptr.To(got.Requests[corev1.ResourceCPU]).String())
			assert.Equal(t, tc.lim, ptr.To(got.Limits[corev1.ResourceCPU]).String())
			assert.Empty(t, got.Capped)
		})
	}
}
