package resources

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
)

func res(cpu, mem, limCPU, limMem string) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{Requests: testpod.List(cpu, mem), Limits: testpod.List(limCPU, limMem)}
}

func TestEqualAndString(t *testing.T) {
	a := Resources{"c": res("1", "1Gi", "", "")}
	assert.True(t, Equal(a, Resources{"c": res("1000m", "1024Mi", "", "")}))
	assert.False(t, Equal(a, Resources{"c": res("1", "", "", "")}))
	assert.Equal(t, "c: requests cpu=1 memory=1Gi; d: requests cpu=1 limits memory=2Gi",
		Resources{"d": res("1", "", "", "2Gi"), "c": res("1", "1Gi", "", "")}.String())
}

func TestForEachValue(t *testing.T) {
	a := Resources{
		"b": {Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}},
		"a": {Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}},
	}
	b := Resources{
		"b": {Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m")}},
		"c": {Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}},
	}
	show := func(q *resource.Quantity) string {
		if q == nil {
			return "-"
		}
		return q.String()
	}
	var seen []string
	ForEachValue(a, b, func(c, list string, name corev1.ResourceName, av, bv *resource.Quantity) {
		if av != nil || bv != nil {
			seen = append(seen, c+" "+list+" "+string(name)+" "+show(av)+" "+show(bv))
		}
	})
	assert.Equal(t, []string{
		"a limits memory 1Gi -",
		"b requests cpu 100m 200m",
		"c requests memory - 64Mi",
	}, seen, "every value of either side, once, containers in name order")

	t.Run("allocates no set and no quantity per value", func(t *testing.T) {
		n := 0
		allocs := testing.AllocsPerRun(100, func() {
			ForEachValue(a, b, func(_, _ string, _ corev1.ResourceName, av, bv *resource.Quantity) {
				if av != nil && bv != nil && av.Cmp(*bv) < 0 {
					n++
				}
			})
		})
		assert.LessOrEqual(t, allocs, 2.0, "the two quantity slots at most")
		assert.Equal(t, 101, n, "100 runs and the warm-up each saw b's cpu rise")
	})
}

func TestCompactValues(t *testing.T) {
	r := Resources{
		"app":     res("100m", "1Gi", "", "2Gi"),
		"sidecar": {Requests: testpod.List("10m", "")},
	}
	v := Compact(r)
	assert.Len(t, v, 4, "every value, once")
	assert.True(t, Equal(r, v.Resources()), "round trip: %s", v.Resources())
	assert.Equal(t, Resources{"app": {}, "sidecar": {}}, v.Containers())
	for _, c := range []struct {
		container string
		name      corev1.ResourceName
		want      string
	}{{"app", corev1.ResourceCPU, "100m"}, {"app", corev1.ResourceMemory, "1Gi"}, {"sidecar", corev1.ResourceCPU, "10m"}, {"sidecar", corev1.ResourceMemory, ""}, {"other", corev1.ResourceCPU, ""}} {
		q, ok := v.Request(c.container, c.name)
		assert.Equal(t, c.want != "", ok, "%s %s", c.container, c.name)
		if ok {
			assert.Equal(t, c.want, q.String(), "%s %s", c.container, c.name)
		}
	}
	_, ok := v.Request("app", "limits")
	assert.False(t, ok)
	if lim, ok := Compact(Resources{"app": res("", "", "", "2Gi")}).Request("app", corev1.ResourceMemory); ok {
		t.Errorf("a limit is not a request: %s", lim.String())
	}
	assert.Nil(t, Compact(nil))
	assert.Nil(t, Compact(Resources{"app": {}}), "a container with no value")
	assert.Nil(t, Values(nil).Resources())
}

func TestValueKeepsEveryQuantityExactly(t *testing.T) {
	for _, s := range []string{
		"0", "1", "100m", "1500m", "0.5", "1n", "123456789n", "2.000000001", "10Mi", "1.5Gi",
		"64Gi", "100m", "1e3", "12E", "8Ei", "9223372036854775807", "9223372036854775808",
		"10000000000.000000001", "99999999999999999999999", "1k", "1.1k", "1.100", "0.100",
	} {
		for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			q := resource.MustParse(s)
			for _, limit := range []bool{false, true} {
				v := newValue("app", limit, name, q)
				got := v.Quantity()
				assert.Zero(t, got.Cmp(q), "%s: %s", s, got.String())
				assert.Equal(t, q.String(), got.String(), "%s renders the same", s)
				assert.Equal(t, q.Format, got.Format, "%s", s)
				assert.Equal(t, limit, v.Limit(), "%s", s)
				assert.Equal(t, name, v.Name(), "%s", s)
			}
		}
	}
	small := newValue("app", false, corev1.ResourceCPU, resource.MustParse("1500m"))
	assert.Nil(t, small.big, "a milli value is an amount")
	huge := newValue("app", false, corev1.ResourceMemory, resource.MustParse("99999999999999999999999"))
	assert.NotNil(t, huge.big, "beyond an int64 it is kept whole")
	assert.Equal(t, uintptr(40), unsafe.Sizeof(Value{}), "a Value is 40 bytes: a watch keeps several per resize")
}
