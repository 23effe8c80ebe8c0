package recommendation

import (
	"fmt"
	"math/rand/v2"
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
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testvpa"
)

// Whatever the recommendation, a pod the API server admits is still
// admitted with what ForPod gives it, in a namespace with LimitRanges (min,
// max, maxLimitRequestRatio, per container and per pod): the admission
// controller and the updater (pods/resize is checked by LimitRanger since
// Kubernetes 1.33) both apply it. testadmit, written apart from upstream's
// capping, judges.
func TestForPodStaysWithinLimitRanges(t *testing.T) {
	rng := rand.New(rand.NewPCG(32, 12))
	pick := func(values ...int64) int64 { return values[rng.IntN(len(values))] }
	milli := func(m int64) resource.Quantity { return *resource.NewMilliQuantity(m, resource.DecimalSI) }
	mi := func(m int64) resource.Quantity { return *resource.NewQuantity(m<<20, resource.BinarySI) }
	cases, changed := 0, 0
	for i := 0; cases < 2000 && i < 200000; i++ {
		container := corev1.LimitRangeItem{Type: corev1.LimitTypeContainer}
		if rng.IntN(2) == 0 {
			container.Max = corev1.ResourceList{corev1.ResourceCPU: milli(pick(500, 1000, 2000)), corev1.ResourceMemory: mi(pick(512, 1024))}
		}
		if rng.IntN(3) == 0 {
			container.Min = corev1.ResourceList{corev1.ResourceCPU: milli(pick(50, 100)), corev1.ResourceMemory: mi(pick(32, 64))}
		}
		if rng.IntN(3) == 0 {
			container.MaxLimitRequestRatio = corev1.ResourceList{corev1.ResourceCPU: milli(pick(1500, 2000, 4000))}
		}
		pod := corev1.LimitRangeItem{Type: corev1.LimitTypePod}
		if rng.IntN(3) == 0 {
			pod.Max = corev1.ResourceList{corev1.ResourceCPU: milli(pick(1500, 3000)), corev1.ResourceMemory: mi(pick(1024, 2048))}
		}
		lr := &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "limits", Namespace: "default"},
			Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{container, pod}}}

		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}}
		vpa := testvpa.New("v").InPlace()
		for c := range 1 + rng.IntN(2) {
			name := fmt.Sprintf("c%d", c)
			cpu, mem := pick(100, 250, 400), pick(64, 128, 256)
			ctr := corev1.Container{Name: name, Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: milli(cpu), corev1.ResourceMemory: mi(mem)}}}
			if rng.IntN(4) > 0 {
				ratio := pick(1000, 1500, 2000)
				ctr.Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: milli(cpu * ratio / 1000), corev1.ResourceMemory: mi(mem * ratio / 1000)}
			}
			p.Spec.Containers = append(p.Spec.Containers, ctr)
			rc, rm := milli(pick(10, 90, 300, 700, 1500, 5000)), mi(pick(16, 100, 600, 3000))
			vpa.Recommend(name, rc.String(), rm.String())
			if rng.IntN(4) == 0 {
				vpa.RequestsOnly(name)
			}
		}
		// The LimitRange and the pod as the API server stores them:
		// LimitRanger's defaults set on what the containers lack.
		lr = testadmit.Stored(lr)
		if testadmit.Pod(p, []*corev1.LimitRange{lr}, nil) != nil {
			continue // refused as it is
		}
		p = testadmit.Mutate(p, []*corev1.LimitRange{lr})
		cases++
		factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
		require.NoError(t, factory.Core().V1().LimitRanges().Informer().GetIndexer().Add(lr))
		limits, err := limitrange.NewLimitsRangeCalculator(factory)
		require.NoError(t, err)
		desired, err := NewCalculator(limits).WithLimitRanges(factory.Core().V1().LimitRanges().Lister()).ForPod(p, vpa.Obj())
		require.NoError(t, err)
		out := p.DeepCopy()
		for c := range out.Spec.Containers {
			ctr := &out.Spec.Containers[c]
			want, ok := desired[ctr.Name]
			if !ok {
				continue
			}
			changed++
			for name, q := range want.Requests {
				ctr.Resources.Requests[name] = q
			}
			for name, q := range want.Limits {
				if ctr.Resources.Limits == nil {
					ctr.Resources.Limits = corev1.ResourceList{}
				}
				ctr.Resources.Limits[name] = q
			}
		}
		assert.NoError(t, testadmit.Pod(out, []*corev1.LimitRange{lr}, nil), "case %d: pod %v, LimitRange %v, VPA %v",
			i, p.Spec.Containers, lr.Spec.Limits, vpa.Obj().Status.Recommendation)
	}
	t.Logf("%d pods admitted as created, %d containers given a recommendation, all admitted with it", cases, changed)
	require.Equal(t, 2000, cases)
}

func TestFit(t *testing.T) {
	item := func(typ corev1.LimitType, field string, r corev1.ResourceName, v string) corev1.LimitRangeItem {
		i := corev1.LimitRangeItem{Type: typ}
		l := corev1.ResourceList{r: resource.MustParse(v)}
		switch field {
		case "min":
			i.Min = l
		case "max":
			i.Max = l
		case "ratio":
			i.MaxLimitRequestRatio = l
		}
		return i
	}
	ranges := func(items ...corev1.LimitRangeItem) []*corev1.LimitRange {
		return []*corev1.LimitRange{{ObjectMeta: metav1.ObjectMeta{Name: "l", Namespace: "default"}, Spec: corev1.LimitRangeSpec{Limits: items}}}
	}
	cpuOnly := func(req, lim string) Container {
		c := Container{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(req)}}
		if lim != "" {
			c.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(lim)}
		}
		return c
	}
	container := func(name, req, lim string) corev1.Container {
		c := corev1.Container{Name: name, Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(req)}}}
		if lim != "" {
			c.Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(lim)}
		}
		return c
	}
	for _, tc := range []struct {
		name       string
		containers []corev1.Container
		ranges     []*corev1.LimitRange
		desired    Desired
		want       map[string][2]string // container: request, limit ("" none); absent: no recommendation left
	}{
		{"RequestsOnly under maxLimitRequestRatio: the request no lower than its own limit allows",
			[]corev1.Container{container("app", "500m", "2")}, ranges(item(corev1.LimitTypeContainer, "ratio", corev1.ResourceCPU, "4")),
			Desired{"app": cpuOnly("100m", "")}, map[string][2]string{"app": {"500m", ""}}},
		{"RequestsOnly within the ratio: unchanged",
			[]corev1.Container{container("app", "500m", "2")}, ranges(item(corev1.LimitTypeContainer, "ratio", corev1.ResourceCPU, "4")),
			Desired{"app": cpuOnly("600m", "")}, map[string][2]string{"app": {"600m", ""}}},
		{"a limit of ours past the ratio is lowered to it",
			[]corev1.Container{container("app", "100m", "150m")}, ranges(item(corev1.LimitTypeContainer, "ratio", corev1.ResourceCPU, "1500m")),
			Desired{"app": cpuOnly("333m", "500m")}, map[string][2]string{"app": {"333m", "499m"}}},
		{"container max and min",
			[]corev1.Container{container("a", "100m", "200m"), container("b", "100m", "1")},
			ranges(item(corev1.LimitTypeContainer, "max", corev1.ResourceCPU, "1"), item(corev1.LimitTypeContainer, "min", corev1.ResourceCPU, "50m")),
			Desired{"a": cpuOnly("800m", "1600m"), "b": cpuOnly("10m", "")}, map[string][2]string{"a": {"800m", "1"}, "b": {"50m", ""}}},
		{"pod max, a container without a limit: lowered by one share",
			[]corev1.Container{container("a", "400m", ""), container("b", "100m", "100m")}, ranges(item(corev1.LimitTypePod, "max", corev1.ResourceCPU, "1500m")),
			Desired{"a": cpuOnly("1500m", ""), "b": cpuOnly("5", "5")}, map[string][2]string{"a": {"345m", ""}, "b": {"1150m", "1150m"}}},
		{"pod min the VPA cannot meet by lowering: the pod keeps its cpu",
			[]corev1.Container{container("a", "600m", "600m")}, ranges(item(corev1.LimitTypePod, "min", corev1.ResourceCPU, "500m")),
			Desired{"a": cpuOnly("100m", "100m")}, map[string][2]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default"}, Spec: corev1.PodSpec{Containers: tc.containers}}
			before := fmt.Sprint(tc.desired)
			got := fit(pod, tc.desired, tc.ranges, false)
			assert.Equal(t, before, fmt.Sprint(tc.desired), "desired is not changed")
			require.Len(t, got, len(tc.want), "%v", got)
			for name, w := range tc.want {
				c := got[name]
				assert.Equal(t, w[0], ptrQ(c.Requests[corev1.ResourceCPU]).String(), "%s request", name)
				if w[1] == "" {
					assert.NotContains(t, c.Limits, corev1.ResourceCPU, "%s limit", name)
				} else {
					assert.Equal(t, w[1], ptrQ(c.Limits[corev1.ResourceCPU]).String(), "%s limit", name)
				}
			}
			out := pod.DeepCopy()
			for i := range out.Spec.Containers {
				c := &out.Spec.Containers[i]
				for r, q := range got[c.Name].Requests {
					c.Resources.Requests[r] = q
				}
				for r, q := range got[c.Name].Limits {
					c.Resources.Limits[r] = q
				}
			}
			assert.NoError(t, testadmit.Pod(out, tc.ranges, nil))
		})
	}
}

func ptrQ(q resource.Quantity) *resource.Quantity { return &q }

// Both binaries get their recommendations from NewClusterMemo: they are
// kept within the LimitRanges, maxLimitRequestRatio included.
func TestClusterMemoKeepsWithinLimitRanges(t *testing.T) {
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	lr := &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "l", Namespace: "default"}, Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{
		Type: corev1.LimitTypeContainer, MaxLimitRequestRatio: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}}}}}
	require.NoError(t, factory.Core().V1().LimitRanges().Informer().GetIndexer().Add(lr))
	memo, err := NewClusterMemo(factory, 0)
	require.NoError(t, err)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
		Name: "app", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}}}}}
	vpa := testvpa.New("v").InPlace().Recommend("app", "100m", "100Mi").RequestsOnly("app").Obj()
	desired, err := memo.ForPod(pod, vpa)
	require.NoError(t, err)
	assert.Equal(t, "500m", ptrQ(desired["app"].Requests[corev1.ResourceCPU]).String(), "2 / 4, not the 100m recommended")
}
