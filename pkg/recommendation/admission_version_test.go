package recommendation

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"k8s.io/autoscaler/vertical-pod-autoscaler/pkg/utils/limitrange"

	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testadmit"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testvpa"
)

// applied is pod with desired's requests and limits set.
func applied(pod *corev1.Pod, desired Desired) *corev1.Pod {
	out := pod.DeepCopy()
	for i := range out.Spec.Containers {
		c := &out.Spec.Containers[i]
		for r, q := range desired[c.Name].Requests {
			if c.Resources.Requests == nil {
				c.Resources.Requests = corev1.ResourceList{}
			}
			c.Resources.Requests[r] = q
		}
		for r, q := range desired[c.Name].Limits {
			if c.Resources.Limits == nil {
				c.Resources.Limits = corev1.ResourceList{}
			}
			c.Resources.Limits[r] = q
		}
	}
	return out
}

// A resize is checked by LimitRanger whole up to Kubernetes 1.37, and only
// in what it changes from 1.38: fit keeps a resize within the first rule on
// 1.37 and within the second on 1.38, where it leaves what the VPA does not
// change as it is, even out of a LimitRange tightened since the pod was
// admitted. testadmit.Resize judges each by its version's rule.
func TestFitFollowsTheServersLimitRanger(t *testing.T) {
	mi := func(n int64) resource.Quantity { return *resource.NewQuantity(n<<20, resource.BinarySI) }
	list := func(cpu string, mem int64) corev1.ResourceList {
		l := corev1.ResourceList{}
		if cpu != "" {
			l[corev1.ResourceCPU] = resource.MustParse(cpu)
		}
		if mem > 0 {
			l[corev1.ResourceMemory] = mi(mem)
		}
		return l
	}
	ctr := func(name string, req, lim corev1.ResourceList) corev1.Container {
		return corev1.Container{Name: name, Resources: corev1.ResourceRequirements{Requests: req, Limits: lim}}
	}
	ranges := func(items ...corev1.LimitRangeItem) []*corev1.LimitRange {
		return []*corev1.LimitRange{{ObjectMeta: metav1.ObjectMeta{Name: "l", Namespace: "default"}, Spec: corev1.LimitRangeSpec{Limits: items}}}
	}
	containerMax := ranges(corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, Max: list("", 512)})
	podMax := ranges(corev1.LimitRangeItem{Type: corev1.LimitTypePod, Max: list("", 1024)})
	ratio := ranges(corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, MaxLimitRequestRatio: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("4")}})
	defaultRatio := ranges(corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, Default: list("", 512),
		MaxLimitRequestRatio: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2")}})
	defaultPodMax := ranges(corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, Default: list("", 512)},
		corev1.LimitRangeItem{Type: corev1.LimitTypePod, Max: list("", 1024)})

	for _, tc := range []struct {
		name       string
		containers []corev1.Container
		ranges     []*corev1.LimitRange
		desired    Desired
		// memory of app (request, limit; 0: none) on 1.37 and on 1.38
		want137, want138 [2]int64
	}{
		{"container max: memory the VPA keeps is brought within it on 1.37, left on 1.38",
			[]corev1.Container{ctr("app", list("100m", 1024), list("", 1024))}, containerMax,
			Desired{"app": {Requests: list("200m", 1024), Limits: list("", 1024)}},
			[2]int64{512, 512}, [2]int64{1024, 1024}},
		{"container max: memory the VPA changes is brought within it on both",
			[]corev1.Container{ctr("app", list("100m", 1024), list("", 1024))}, containerMax,
			Desired{"app": {Requests: list("200m", 2048), Limits: list("", 2048)}},
			[2]int64{512, 512}, [2]int64{512, 512}},
		{"ratio over a limit of its own: the request the VPA keeps is raised on 1.37, left on 1.38",
			[]corev1.Container{ctr("app", list("100m", 100), list("", 1024))}, ratio,
			Desired{"app": {Requests: list("200m", 100)}},
			[2]int64{256, 1024}, [2]int64{100, 1024}},
		{"pod max exceeded by a container the VPA does not control: the VPA's lowered on 1.37, left on 1.38",
			[]corev1.Container{ctr("app", list("100m", 256), list("", 256)), ctr("side", list("", 900), list("", 900))}, podMax,
			Desired{"app": {Requests: list("200m", 256), Limits: list("", 256)}},
			[2]int64{-1, -1}, [2]int64{256, 256}},
		// A pod admitted before its LimitRange had defaults gets them with
		// its next resize, and LimitRanger checks it with them.
		{"ratio over the default limit the resize adds: the request the VPA keeps is raised on both",
			[]corev1.Container{ctr("app", list("100m", 100), nil)}, defaultRatio,
			Desired{"app": {Requests: list("200m", 100)}},
			[2]int64{256, 512}, [2]int64{256, 512}},
		{"pod max met with the default request and limit the resize adds to a container the VPA does not control",
			[]corev1.Container{ctr("app", list("100m", 128), nil), ctr("side", nil, nil)}, defaultPodMax,
			Desired{"app": {Requests: list("200m", 768)}},
			[2]int64{512, 512}, [2]int64{512, 512}},
	} {
		for _, onlyChanges := range []bool{false, true} {
			version := map[bool]string{false: "1.37", true: "1.38"}[onlyChanges]
			t.Run(tc.name+"/"+version, func(t *testing.T) {
				pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "uid-p"},
					Spec: corev1.PodSpec{Containers: tc.containers}}
				got := fit(pod, tc.desired, tc.ranges, onlyChanges)
				out := applied(pod, got)
				require.NoError(t, testadmit.Resize(pod, out, tc.ranges, onlyChanges), "admitted by %s's LimitRanger", version)
				// As stored after the resize: LimitRanger's defaults set.
				out = testadmit.Mutate(out, tc.ranges)
				assert.Equal(t, "200m", out.Spec.Containers[0].Resources.Requests.Cpu().String(), "the cpu the VPA changes")
				want := tc.want137
				if onlyChanges {
					want = tc.want138
				}
				app := out.Spec.Containers[0].Resources
				if want[0] < 0 {
					// Lowered by a share, to what the pod's max leaves.
					assert.Equal(t, -1, app.Requests.Memory().Cmp(mi(256)), "memory lowered: %s", app.Requests.Memory())
					return
				}
				assert.Equal(t, want[0]<<20, app.Requests.Memory().Value(), "memory request: %s", app.Requests.Memory())
				assert.Equal(t, want[1]<<20, app.Limits.Memory().Value(), "memory limit: %s", app.Limits.Memory())
			})
		}
	}
}

// ForPod follows the server's rule for a pod that exists (it is resized)
// and keeps a pod being created, or a Job's template, within the
// LimitRanges whole on every version: LimitRanger checks every value of a
// new pod. The memo tells the two apart although their shapes are alike.
func TestForPodFollowsTheServersLimitRanger(t *testing.T) {
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	lr := &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "l", Namespace: "default"}, Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{
		Type: corev1.LimitTypeContainer, MaxLimitRequestRatio: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}}}}}
	require.NoError(t, factory.Core().V1().LimitRanges().Informer().GetIndexer().Add(lr))
	// Admitted before the LimitRange: a limit 10 times its request.
	pod := func(uid types.UID) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: uid}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "app", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("100Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}}}
	}
	// The VPA controls the requests only; it keeps the cpu, raises the memory.
	vpa := testvpa.New("v").InPlace().Recommend("app", "100m", "200Mi").RequestsOnly("app").Obj()
	vpa.ResourceVersion = "1"
	limits, err := limitrange.NewLimitsRangeCalculator(factory)
	require.NoError(t, err)
	for _, tc := range []struct {
		name  string
		minor int
		uid   types.UID
		cpu   string
	}{
		{"resize on 1.38: the cpu kept as it is", 38, "uid-p", "100m"},
		{"resize on 1.37: the cpu raised to limit / ratio", 37, "uid-p", "250m"},
		{"resize, version unknown: as 1.37", 0, "uid-p", "250m"},
		{"new pod on 1.38: as 1.37", 38, "", "250m"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calc := NewCalculator(limits).WithLimitRanges(factory.Core().V1().LimitRanges().Lister()).WithServerMinor(tc.minor)
			desired, err := calc.ForPod(pod(tc.uid), vpa)
			require.NoError(t, err)
			assert.Equal(t, tc.cpu, ptrQ(desired["app"].Requests[corev1.ResourceCPU]).String())
			assert.Equal(t, "200Mi", ptrQ(desired["app"].Requests[corev1.ResourceMemory]).String())
		})
	}
	t.Run("memo: a resized pod, then a new one of the same shape", func(t *testing.T) {
		memo, err := NewClusterMemo(factory, 38)
		require.NoError(t, err)
		resized, err := memo.ForPod(pod("uid-p"), vpa)
		require.NoError(t, err)
		created, err := memo.ForPod(pod(""), vpa)
		require.NoError(t, err)
		assert.Equal(t, "100m", ptrQ(resized["app"].Requests[corev1.ResourceCPU]).String())
		assert.Equal(t, "250m", ptrQ(created["app"].Requests[corev1.ResourceCPU]).String())
	})
}

// Kubernetes 1.38's kubelet leaves a pod's sandbox without a cpu or memory
// limit when only some of its containers set one, and counts a container
// limit of 0 as none; from component-helpers v0.38, resourcehelper.PodLimits
// leaves such a partial sum out too. LimitRanger does not: it sums the
// limits that are set (its own podLimits, 1.37 and 1.38 alike), so a pod
// max applies to the sum of the containers that set one, and a limit of 0
// counts 0 and is never held to a ratio. fit keeps resizes within that.
func TestFitCountsPartialLimitsAsLimitRangerDoes(t *testing.T) {
	mi := func(n int64) resource.Quantity { return *resource.NewQuantity(n<<20, resource.BinarySI) }
	mem := func(n int64) corev1.ResourceList { return corev1.ResourceList{corev1.ResourceMemory: mi(n)} }
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "uid-p"}, Spec: corev1.PodSpec{Containers: []corev1.Container{
		{Name: "app", Resources: corev1.ResourceRequirements{Requests: mem(256), Limits: mem(512)}},
		{Name: "side", Resources: corev1.ResourceRequirements{Requests: mem(64)}},
	}}}
	podMax := []*corev1.LimitRange{{ObjectMeta: metav1.ObjectMeta{Name: "l", Namespace: "default"}, Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{
		{Type: corev1.LimitTypePod, Max: mem(1024)}}}}}
	for _, onlyChanges := range []bool{false, true} {
		// The VPA doubles app: its limit, the pod's only one, would pass the pod's max.
		got := fit(pod, Desired{"app": {Requests: mem(768), Limits: mem(1536)}}, podMax, onlyChanges)
		out := applied(pod, got)
		require.NoError(t, testadmit.Resize(pod, out, podMax, onlyChanges))
		lim := out.Spec.Containers[0].Resources.Limits[corev1.ResourceMemory]
		assert.LessOrEqual(t, lim.Value(), int64(1024<<20), "app's limit within the pod's max (onlyChanges %v): %s", onlyChanges, lim.String())
		assert.Equal(t, 1, out.Spec.Containers[0].Resources.Requests.Memory().Cmp(mi(256)), "app still grows")
	}

	// A container held to a ratio without a limit, or with a limit of 0
	// (and so a request of 0: none may be above its limit), admitted
	// before the LimitRange: LimitRanger refuses any value of it
	// that changes, so it keeps its own; up to 1.37 the pod cannot be
	// resized at all (it is checked whole), from 1.38 the rest passes.
	cpu := func(req, lim string) corev1.ResourceRequirements {
		r := corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(req)}}
		if lim != "" {
			r.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(lim)}
		}
		return r
	}
	zero := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "z", Namespace: "default", UID: "uid-z"}, Spec: corev1.PodSpec{Containers: []corev1.Container{
		{Name: "app", Resources: cpu("0", "0")}, {Name: "bare", Resources: cpu("500m", "")}, {Name: "web", Resources: cpu("200m", "400m")},
	}}}
	ratio := []*corev1.LimitRange{{ObjectMeta: metav1.ObjectMeta{Name: "l", Namespace: "default"}, Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{
		{Type: corev1.LimitTypeContainer, MaxLimitRequestRatio: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}}}}}
	desired := Desired{"app": {Requests: cpu("100m", "").Requests}, "bare": {Requests: cpu("100m", "").Requests}, "web": {Requests: cpu("300m", "").Requests}}
	for _, onlyChanges := range []bool{false, true} {
		got := fit(zero, desired, ratio, onlyChanges)
		out := applied(zero, got)
		assert.NotContains(t, got, "app", "a limit of 0: kept (onlyChanges %v)", onlyChanges)
		assert.NotContains(t, got, "bare", "no limit: kept (onlyChanges %v)", onlyChanges)
		assert.Equal(t, "300m", out.Spec.Containers[2].Resources.Requests.Cpu().String())
		if onlyChanges {
			assert.NoError(t, testadmit.Resize(zero, out, ratio, true), "1.38 admits the rest")
		} else {
			assert.Error(t, testadmit.Resize(zero, out, ratio, false), "1.37 checks the pod whole: nothing sent passes")
		}
	}
}
