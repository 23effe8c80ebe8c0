package recommendation

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"k8s.io/autoscaler/vertical-pod-autoscaler/pkg/utils/limitrange"

	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testadmit"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testvpa"
)

// assertList compares two lists by value.
func assertList(t *testing.T, want, got corev1.ResourceList, msgAndArgs ...any) {
	t.Helper()
	render := func(l corev1.ResourceList) map[corev1.ResourceName]string {
		out := map[corev1.ResourceName]string{}
		for name, q := range l {
			out[name] = q.String()
		}
		return out
	}
	assert.Equal(t, render(want), render(got), msgAndArgs...)
}

func names(pod *corev1.Pod) []string {
	var out []string
	for r := range Containers(pod) {
		kind := "container"
		if r.Sidecar {
			kind = "sidecar"
		}
		out = append(out, fmt.Sprintf("%s %s %d", kind, r.Container.Name, r.Index))
	}
	return out
}

func TestContainers(t *testing.T) {
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want []string
	}{
		{"app containers only", testpod.New("p").Container("a", "", "").Container("b", "", "").Obj(),
			[]string{"container a 0", "container b 1"}},
		{"sidecars after the app containers, at their index among the init containers",
			testpod.New("p").InitContainer("setup", "", "").Sidecar("proxy", "", "").Container("app", "", "").Sidecar("log", "", "").Obj(),
			[]string{"container app 0", "sidecar proxy 1", "sidecar log 2"}},
		{"init containers that are not sidecars are left out", testpod.New("p").InitContainer("setup", "", "").Container("app", "", "").Obj(),
			[]string{"container app 0"}},
		{"an init container with restartPolicy Never is no sidecar", func() *corev1.Pod {
			p := testpod.New("p").Container("app", "", "").InitContainer("once", "", "").Obj()
			p.Spec.InitContainers[0].RestartPolicy = ptr.To(corev1.ContainerRestartPolicyNever)
			return p
		}(), []string{"container app 0"}},
		{"an app container with restartPolicy Always stays an app container", func() *corev1.Pod {
			p := testpod.New("p").Container("app", "", "").Obj()
			p.Spec.Containers[0].RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
			return p
		}(), []string{"container app 0"}},
		{"a sidecar named as an app container is left out", testpod.New("p").Container("app", "", "").Sidecar("app", "", "").Obj(),
			[]string{"container app 0"}},
		{"a sidecar named as an earlier init container is left out", testpod.New("p").InitContainer("x", "", "").Sidecar("x", "", "").Sidecar("y", "", "").Obj(),
			[]string{"sidecar y 2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, names(tc.pod))
		})
	}
}

func TestStatusOfASidecarIsAnInitContainerStatus(t *testing.T) {
	pod := testpod.New("p").Container("app", "100m", "").Sidecar("proxy", "10m", "").Running().Obj()
	for r := range Containers(pod) {
		st := Status(pod, r)
		require.NotNil(t, st, r.Container.Name)
		assert.Equal(t, r.Container.Name, st.Name)
		if r.Sidecar {
			assert.Same(t, &pod.Status.InitContainerStatuses[0], st)
		}
	}
	pod.Status.InitContainerStatuses = nil
	r, ok := Find(pod, "proxy")
	require.True(t, ok)
	assert.Nil(t, Status(pod, r), "a sidecar is never matched with an app container's status")
	_, ok = Find(pod, "nothing")
	assert.False(t, ok)
}

func TestForPodWithSidecars(t *testing.T) {
	calc := NewCalculator(limitrange.NewNoopLimitsCalculator())

	t.Run("a sidecar gets its recommendation, limits in proportion", func(t *testing.T) {
		pod := testpod.New("p").Container("app", "100m", "100Mi").Sidecar("proxy", "50m", "64Mi").Limits("proxy", "100m", "128Mi").Running().Obj()
		vpa := testvpa.New("v").InPlace().Recommend("app", "200m", "200Mi").Recommend("proxy", "20m", "32Mi").Obj()
		d, err := calc.ForPod(pod, vpa)
		require.NoError(t, err)
		require.Contains(t, d, "proxy")
		assertList(t, testpod.List("20m", "32Mi"), d["proxy"].Requests)
		assertList(t, testpod.List("40m", "64Mi"), d["proxy"].Limits)
		assertList(t, testpod.List("200m", "200Mi"), d["app"].Requests)
	})

	t.Run("the VPA's policy for the sidecar caps it", func(t *testing.T) {
		pod := testpod.New("p").Container("app", "100m", "100Mi").Sidecar("proxy", "50m", "64Mi").Running().Obj()
		vpa := testvpa.New("v").InPlace().Recommend("proxy", "2", "32Mi").MaxAllowed("proxy", "500m", "").Obj()
		d, err := calc.ForPod(pod, vpa)
		require.NoError(t, err)
		assertList(t, testpod.List("500m", "32Mi"), d["proxy"].Requests)
		assertList(t, testpod.List("500m", "32Mi"), d["proxy"].UpperBound)
	})

	t.Run("what the kubelet reports of the sidecar is what limits are scaled from", func(t *testing.T) {
		pod := testpod.New("p").Container("app", "100m", "100Mi").Sidecar("proxy", "50m", "").Limits("proxy", "100m", "").Running().Obj()
		// A resize of the sidecar is under way: it still runs with 25m/100m.
		pod.Status.InitContainerStatuses[0].Resources = &corev1.ResourceRequirements{Requests: testpod.List("25m", ""), Limits: testpod.List("100m", "")}
		vpa := testvpa.New("v").InPlace().Recommend("proxy", "50m", "").Obj()
		d, err := calc.ForPod(pod, vpa)
		require.NoError(t, err)
		assertList(t, testpod.List("200m", ""), d["proxy"].Limits, "upstream scales from the running request and limit")
	})

	t.Run("an init container that is not a sidecar is ignored", func(t *testing.T) {
		pod := testpod.New("p").InitContainer("setup", "100m", "100Mi").Container("app", "100m", "100Mi").Running().Obj()
		vpa := testvpa.New("v").InPlace().Recommend("setup", "1", "1Gi").Recommend("app", "200m", "200Mi").Obj()
		d, err := calc.ForPod(pod, vpa)
		require.NoError(t, err)
		assert.NotContains(t, d, "setup")
		assert.Contains(t, d, "app")
	})

	t.Run("a sidecar named as an app container is not recommended for", func(t *testing.T) {
		pod := testpod.New("p").Container("app", "100m", "100Mi").Sidecar("app", "10m", "10Mi").Obj()
		vpa := testvpa.New("v").InPlace().Recommend("app", "200m", "200Mi").Obj()
		d, err := calc.ForPod(pod, vpa)
		require.NoError(t, err)
		require.Len(t, d, 1)
		assertList(t, testpod.List("200m", "200Mi"), d["app"].Requests)
	})

	t.Run("the pod is not changed", func(t *testing.T) {
		pod := testpod.New("p").InitContainer("setup", "1", "").Container("app", "100m", "100Mi").Sidecar("proxy", "50m", "64Mi").Running().Obj()
		before := pod.DeepCopy()
		vpa := testvpa.New("v").InPlace().Recommend("proxy", "20m", "32Mi").Obj()
		_, err := calc.ForPod(pod, vpa)
		require.NoError(t, err)
		assert.Equal(t, before, pod)
	})
}

func TestIgnoredInitContainers(t *testing.T) {
	pod := testpod.New("p").InitContainer("setup", "", "").InitContainer("migrate", "", "").Sidecar("proxy", "", "").Container("app", "", "").Obj()
	for _, tc := range []struct {
		name  string
		vpa   *testvpa.Builder
		want  []string
		total int
	}{
		{"none named", testvpa.New("v").Recommend("app", "1", "").Recommend("proxy", "1", ""), nil, 0},
		{"one named", testvpa.New("v").Recommend("setup", "1", "").Recommend("app", "1", ""), []string{"setup"}, 1},
		{"both named, sorted, once however often", testvpa.New("v").Recommend("setup", "1", "").Recommend("migrate", "1", "").Recommend("setup", "2", ""),
			[]string{"migrate", "setup"}, 2},
		{"no recommendation", testvpa.New("v"), nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, total := IgnoredInitContainers(pod, tc.vpa.Obj())
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.total, total)
		})
	}

	t.Run("a pod without init containers reads nothing", func(t *testing.T) {
		got, total := IgnoredInitContainers(testpod.New("p").Container("setup", "", "").Obj(), testvpa.New("v").Recommend("setup", "1", "").Obj())
		assert.Nil(t, got)
		assert.Zero(t, total)
	})

	t.Run("the names returned are bounded", func(t *testing.T) {
		b := testpod.New("p").Container("app", "", "")
		vpa := testvpa.New("v")
		for i := range 3 * MaxIgnoredNames {
			name := fmt.Sprintf("init-%02d", i)
			b.InitContainer(name, "", "")
			vpa.Recommend(name, "1", "")
		}
		got, total := IgnoredInitContainers(b.Obj(), vpa.Obj())
		assert.Len(t, got, MaxIgnoredNames)
		assert.True(t, slices.IsSorted(got))
		assert.Equal(t, 3*MaxIgnoredNames, total)
	})
}

// TestForPodStaysWithinLimitRanges with sidecars and other init containers:
// LimitRanger checks every init container against the container bounds,
// and counts sidecars into the pod's requests and limits (other init
// containers at their peak). What ForPod gives the app containers and the
// sidecars keeps a pod the API server admits admitted.
func TestForPodWithSidecarsStaysWithinLimitRanges(t *testing.T) {
	rng := rand.New(rand.NewPCG(35, 2))
	pick := func(values ...int64) int64 { return values[rng.IntN(len(values))] }
	milli := func(m int64) resource.Quantity { return *resource.NewMilliQuantity(m, resource.DecimalSI) }
	mi := func(m int64) resource.Quantity { return *resource.NewQuantity(m<<20, resource.BinarySI) }
	container := func(name string) corev1.Container {
		cpu, mem := pick(100, 250, 400), pick(64, 128, 256)
		c := corev1.Container{Name: name, Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: milli(cpu), corev1.ResourceMemory: mi(mem)}}}
		if rng.IntN(4) > 0 {
			ratio := pick(1000, 1500, 2000)
			c.Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: milli(cpu * ratio / 1000), corev1.ResourceMemory: mi(mem * ratio / 1000)}
		}
		return c
	}
	cases, sidecarsChanged := 0, 0
	for i := 0; cases < 1000 && i < 100000; i++ {
		limits := corev1.LimitRangeItem{Type: corev1.LimitTypeContainer}
		if rng.IntN(2) == 0 {
			limits.Max = corev1.ResourceList{corev1.ResourceCPU: milli(pick(500, 1000, 2000)), corev1.ResourceMemory: mi(pick(512, 1024))}
		}
		if rng.IntN(3) == 0 {
			limits.Min = corev1.ResourceList{corev1.ResourceCPU: milli(pick(50, 100)), corev1.ResourceMemory: mi(pick(32, 64))}
		}
		if rng.IntN(3) == 0 {
			limits.MaxLimitRequestRatio = corev1.ResourceList{corev1.ResourceCPU: milli(pick(1500, 2000, 4000))}
		}
		podLimits := corev1.LimitRangeItem{Type: corev1.LimitTypePod}
		if rng.IntN(2) == 0 {
			podLimits.Max = corev1.ResourceList{corev1.ResourceCPU: milli(pick(1500, 3000)), corev1.ResourceMemory: mi(pick(1024, 2048))}
		}
		lr := &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "limits", Namespace: "default"},
			Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{limits, podLimits}}}

		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}}
		vpa := testvpa.New("v").InPlace()
		recommend := func(name string) {
			rc, rm := milli(pick(10, 90, 300, 700, 1500, 5000)), mi(pick(16, 100, 600, 3000))
			vpa.Recommend(name, rc.String(), rm.String())
			if rng.IntN(4) == 0 {
				vpa.RequestsOnly(name)
			}
		}
		p.Spec.Containers = append(p.Spec.Containers, container("app"))
		recommend("app")
		if rng.IntN(2) == 0 {
			p.Spec.InitContainers = append(p.Spec.InitContainers, container("setup"))
			recommend("setup")
		}
		for s := range 1 + rng.IntN(2) {
			c := container(fmt.Sprintf("sidecar%d", s))
			c.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
			p.Spec.InitContainers = append(p.Spec.InitContainers, c)
			recommend(c.Name)
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
		calc, err := limitrange.NewLimitsRangeCalculator(factory)
		require.NoError(t, err)
		desired, err := NewCalculator(calc).WithLimitRanges(factory.Core().V1().LimitRanges().Lister()).ForPod(p, vpa.Obj())
		require.NoError(t, err)
		require.NotContains(t, desired, "setup", "an init container that is not a sidecar is never recommended for")
		out := p.DeepCopy()
		for r := range Containers(out) {
			want, ok := desired[r.Container.Name]
			if !ok {
				continue
			}
			if r.Sidecar {
				sidecarsChanged++
			}
			res := &r.Container.Resources
			for name, q := range want.Requests {
				res.Requests[name] = q
			}
			for name, q := range want.Limits {
				if res.Limits == nil {
					res.Limits = corev1.ResourceList{}
				}
				res.Limits[name] = q
			}
		}
		assert.NoError(t, testadmit.Pod(out, []*corev1.LimitRange{lr}, nil), "case %d: init containers %v, containers %v, LimitRange %v, VPA %v",
			i, p.Spec.InitContainers, p.Spec.Containers, lr.Spec.Limits, vpa.Obj().Status.Recommendation)
	}
	t.Logf("%d pods admitted as created, %d sidecars given a recommendation, all admitted with it", cases, sidecarsChanged)
	require.Equal(t, 1000, cases)
	require.Positive(t, sidecarsChanged)
}
