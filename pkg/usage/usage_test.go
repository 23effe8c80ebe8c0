package usage

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"
	metricsapi "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	metricsfake "k8s.io/metrics/pkg/client/clientset/versioned/fake"

	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
)

var t0 = time.Unix(1_800_000_000, 0)

// discovery answers the look-ups for the metrics API.
type discovery struct {
	mu     sync.Mutex
	served bool
	err    error
	calls  int
}

func (d *discovery) ServerResourcesForGroupVersion(gv string) (*metav1.APIResourceList, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls++
	if d.err != nil {
		return nil, d.err
	}
	if !d.served || gv != GroupVersion {
		return nil, apierrors.NewNotFound(schema.GroupResource{}, "")
	}
	return &metav1.APIResourceList{GroupVersion: gv, APIResources: []metav1.APIResource{{Name: "nodes"}, {Name: "pods", Namespaced: true}}}, nil
}

func (d *discovery) set(served bool, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.served, d.err = served, err
}

func (d *discovery) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.calls
}

type fixture struct {
	disc    *discovery
	client  *metricsfake.Clientset
	now     time.Time
	src     *MetricsSource
	results []Result
	// reply is what the API answers for pod metrics.
	reply func(name string) (*metricsapi.PodMetrics, error)
	gets  int
}

func newFixture(t *testing.T, served bool) *fixture {
	f := &fixture{disc: &discovery{served: served}, client: metricsfake.NewSimpleClientset(), now: t0}
	f.reply = func(name string) (*metricsapi.PodMetrics, error) {
		return podMetrics(name, map[string]string{"app": "150Mi", "sidecar": "10Mi"}), nil
	}
	// The typed client asks for the resource "pods" of metrics.k8s.io; the
	// fake's tracker would look under another name, so answer here.
	f.client.PrependReactor("get", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		f.gets++
		pm, err := f.reply(a.(clienttesting.GetAction).GetName())
		if err != nil {
			return true, nil, err
		}
		return true, pm, nil
	})
	f.src = NewMetricsSource(f.disc, f.client.MetricsV1beta1(), Config{
		TTL: 15 * time.Second, Recheck: time.Minute,
		Now:     func() time.Time { return f.now },
		Observe: func(r Result) { f.results = append(f.results, r) },
	})
	return f
}

func podMetrics(name string, mem map[string]string) *metricsapi.PodMetrics {
	pm := &metricsapi.PodMetrics{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}}
	for c, m := range mem {
		pm.Containers = append(pm.Containers, metricsapi.ContainerMetrics{Name: c, Usage: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse(m),
		}})
	}
	return pm
}

func ctx(t *testing.T) context.Context {
	_, c := ktesting.NewTestContext(t)
	return c
}

func TestMemoryUsageFromTheMetricsAPI(t *testing.T) {
	f := newFixture(t, true)
	require.True(t, f.src.Check(ctx(t)))
	assert.True(t, f.src.Available())

	usage, err := f.src.MemoryUsage(ctx(t), testpod.New("p").Obj())
	require.NoError(t, err)
	require.Len(t, usage, 2)
	assert.Equal(t, "150Mi", ptr(usage["app"]).String())
	assert.Equal(t, "10Mi", ptr(usage["sidecar"]).String())
	assert.Equal(t, []Result{ResultFound}, f.results)
}

func ptr(q resource.Quantity) *resource.Quantity { return &q }

func TestUsageIsReusedForTheTTLThenFetchedAgain(t *testing.T) {
	f := newFixture(t, true)
	pod := testpod.New("p").Obj()
	_, err := f.src.MemoryUsage(ctx(t), pod)
	require.NoError(t, err)
	f.now = f.now.Add(14 * time.Second)
	_, err = f.src.MemoryUsage(ctx(t), pod)
	require.NoError(t, err)
	assert.Equal(t, 1, f.gets, "answered from the cache within the TTL")

	f.reply = func(name string) (*metricsapi.PodMetrics, error) {
		return podMetrics(name, map[string]string{"app": "90Mi"}), nil
	}
	f.now = f.now.Add(time.Second)
	usage, err := f.src.MemoryUsage(ctx(t), pod)
	require.NoError(t, err)
	assert.Equal(t, 2, f.gets, "fetched again once the TTL is over")
	assert.Equal(t, "90Mi", ptr(usage["app"]).String())
	assert.NotContains(t, usage, "sidecar", "containers without metrics are absent")
}

func TestMetricsAPIAbsent(t *testing.T) {
	f := newFixture(t, false)
	assert.False(t, f.src.Check(ctx(t)))
	assert.False(t, f.src.Available())
	pod := testpod.New("p").Obj()

	_, err := f.src.MemoryUsage(ctx(t), pod)
	require.ErrorIs(t, err, ErrUnavailable)
	assert.Zero(t, f.gets, "no request to an API that is not served")
	assert.Equal(t, 1, f.disc.count(), "not looked for again before the recheck interval")

	// The API comes: found at the next look, after the recheck interval.
	f.disc.set(true, nil)
	f.now = f.now.Add(30 * time.Second)
	_, err = f.src.MemoryUsage(ctx(t), pod)
	require.ErrorIs(t, err, ErrUnavailable)
	assert.Equal(t, 1, f.disc.count())
	f.now = f.now.Add(30 * time.Second)
	usage, err := f.src.MemoryUsage(ctx(t), pod)
	require.NoError(t, err)
	assert.Equal(t, 2, f.disc.count())
	assert.True(t, f.src.Available())
	assert.Equal(t, "150Mi", ptr(usage["app"]).String())
}

func TestMetricsAPIGoesAwayAndComesBack(t *testing.T) {
	f := newFixture(t, true)
	require.True(t, f.src.Check(ctx(t)))
	pod := testpod.New("p").Obj()

	// The aggregator has no backend any more: 503.
	f.reply = func(string) (*metricsapi.PodMetrics, error) {
		return nil, apierrors.NewServiceUnavailable("the server is currently unable to handle the request")
	}
	f.disc.set(false, apierrors.NewServiceUnavailable("the server is currently unable to handle the request"))
	_, err := f.src.MemoryUsage(ctx(t), pod)
	require.ErrorIs(t, err, ErrUnavailable)
	assert.False(t, f.src.Available())
	assert.Equal(t, []Result{ResultUnavailable}, f.results)

	// Other pods do not hammer the API meanwhile.
	for _, name := range []string{"q", "r", "s"} {
		_, err := f.src.MemoryUsage(ctx(t), testpod.New(name).Obj())
		require.ErrorIs(t, err, ErrUnavailable)
	}
	assert.Equal(t, 1, f.gets)
	assert.Equal(t, 1, f.disc.count())

	f.now = f.now.Add(time.Minute)
	f.disc.set(true, nil)
	f.reply = func(name string) (*metricsapi.PodMetrics, error) {
		return podMetrics(name, map[string]string{"app": "150Mi"}), nil
	}
	usage, err := f.src.MemoryUsage(ctx(t), pod)
	require.NoError(t, err)
	assert.True(t, f.src.Available())
	assert.Contains(t, usage, "app")
}

func TestMetricsAPIErrors(t *testing.T) {
	tests := []struct {
		name      string
		err       error
		want      error
		result    Result
		available bool
	}{
		{"no metrics for the pod yet", apierrors.NewNotFound(schema.GroupResource{Group: "metrics.k8s.io", Resource: "pods"}, "p"), ErrNoMetrics, ResultNotFound, true},
		{"forbidden: the updater may not read the API", apierrors.NewForbidden(schema.GroupResource{Group: "metrics.k8s.io", Resource: "pods"}, "p", errors.New("RBAC")), ErrUnavailable, ResultUnavailable, false},
		{"timeout", apierrors.NewTimeoutError("slow", 1), nil, ResultError, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, true)
			require.True(t, f.src.Check(ctx(t)))
			f.reply = func(string) (*metricsapi.PodMetrics, error) { return nil, tc.err }
			pod := testpod.New("p").Obj()
			usage, err := f.src.MemoryUsage(ctx(t), pod)
			require.Error(t, err)
			assert.Nil(t, usage)
			if tc.want != nil {
				require.ErrorIs(t, err, tc.want)
			}
			assert.Equal(t, []Result{tc.result}, f.results)
			assert.Equal(t, tc.available, f.src.Available())

			// Asked again at once: no new request (the failure is cached, or
			// the API is considered gone until the recheck).
			_, err = f.src.MemoryUsage(ctx(t), pod)
			require.Error(t, err)
			assert.Equal(t, 1, f.gets)
		})
	}
}

func TestNotFoundLooksForTheAPIAgainWhenDue(t *testing.T) {
	// A 404 is also what a removed API answers: the API is looked for again,
	// at most once per recheck interval.
	f := newFixture(t, true)
	require.True(t, f.src.Check(ctx(t)))
	f.reply = func(name string) (*metricsapi.PodMetrics, error) {
		return nil, apierrors.NewNotFound(schema.GroupResource{Group: "metrics.k8s.io", Resource: "pods"}, name)
	}
	f.disc.set(false, nil)
	_, err := f.src.MemoryUsage(ctx(t), testpod.New("p").Obj())
	require.ErrorIs(t, err, ErrNoMetrics)
	assert.Equal(t, 1, f.disc.count(), "checked at start, not yet due")

	f.now = f.now.Add(time.Minute)
	_, err = f.src.MemoryUsage(ctx(t), testpod.New("q").Obj())
	require.ErrorIs(t, err, ErrNoMetrics)
	assert.Equal(t, 2, f.disc.count())
	assert.False(t, f.src.Available(), "the API was removed")
	_, err = f.src.MemoryUsage(ctx(t), testpod.New("r").Obj())
	require.ErrorIs(t, err, ErrUnavailable)
	assert.Equal(t, 2, f.gets, "no request while it is gone")
}

func TestCacheForgetsExpiredEntries(t *testing.T) {
	f := newFixture(t, true)
	for _, name := range []string{"a", "b", "c"} {
		_, err := f.src.MemoryUsage(ctx(t), testpod.New(name).Obj())
		require.NoError(t, err)
	}
	f.now = f.now.Add(time.Minute)
	_, err := f.src.MemoryUsage(ctx(t), testpod.New("d").Obj())
	require.NoError(t, err)
	f.src.mu.Lock()
	defer f.src.mu.Unlock()
	assert.Len(t, f.src.cache, 1, "only the fresh entry is kept")
}
