package target

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/labels"
	testingclock "k8s.io/utils/clock/testing"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
	vpatarget "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/target"

	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testvpa"
)

// fetcherFunc is a VpaTargetSelectorFetcher of one function.
type fetcherFunc func() (labels.Selector, error)

func (f fetcherFunc) Fetch(context.Context, *vpatypes.VerticalPodAutoscaler) (labels.Selector, error) {
	return f()
}

var errNoKind = errors.New(`unhandled targetRef kafka.strimzi.io/v1 / KafkaNodePool / brokers, last error no matches for kind "KafkaNodePool" in group "kafka.strimzi.io"`)

// knowing builds fetchers that know the kind from the build numbered
// knownFrom on, and counts the builds and the fetchers stopped.
type knowing struct {
	knownFrom int32
	builds    atomic.Int32
	stopped   atomic.Int32
}

func (k *knowing) build(stop <-chan struct{}) vpatarget.VpaTargetSelectorFetcher {
	n := k.builds.Add(1)
	go func() { <-stop; k.stopped.Add(1) }()
	return fetcherFunc(func() (labels.Selector, error) {
		if n < k.knownFrom {
			return nil, errNoKind
		}
		return labels.Everything(), nil
	})
}

func TestRefreshingFetcherLearnsAKindInstalledAfterTheStart(t *testing.T) {
	clock := testingclock.NewFakeClock(time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC))
	k := &knowing{knownFrom: 2}
	f := newRefreshingFetcher(context.Background(), clock.Now, k.build)
	vpa := testvpa.New("brokers").Obj()

	_, err := f.Fetch(context.Background(), vpa)
	require.ErrorIs(t, err, errNoKind, "built just now: not built again yet")
	assert.Equal(t, int32(1), k.builds.Load())

	clock.Step(RefreshInterval)
	sel, err := f.Fetch(context.Background(), vpa)
	require.NoError(t, err, "built anew, it knows the kind")
	assert.NotNil(t, sel)
	assert.Equal(t, int32(2), k.builds.Load())
	require.Eventually(t, func() bool { return k.stopped.Load() == 1 }, waitFor, 10*time.Millisecond, "the fetcher replaced is stopped")
}

func TestRefreshingFetcherBuildsOnceForManyWorkers(t *testing.T) {
	clock := testingclock.NewFakeClock(time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC))
	k := &knowing{knownFrom: 2}
	f := newRefreshingFetcher(context.Background(), clock.Now, k.build)
	clock.Step(RefreshInterval)
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			_, err := f.Fetch(context.Background(), testvpa.New("brokers").Obj())
			assert.NoError(t, err)
		})
	}
	wg.Wait()
	assert.Equal(t, int32(2), k.builds.Load(), "one rebuild for all the workers that met the unknown kind")
}

func TestRefreshingFetcherLeavesOtherErrorsAlone(t *testing.T) {
	clock := testingclock.NewFakeClock(time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC))
	builds := 0
	other := errors.New("deployments.apps \"web\" not found")
	f := newRefreshingFetcher(context.Background(), clock.Now, func(<-chan struct{}) vpatarget.VpaTargetSelectorFetcher {
		builds++
		return fetcherFunc(func() (labels.Selector, error) { return nil, other })
	})
	clock.Step(time.Hour)
	_, err := f.Fetch(context.Background(), testvpa.New("web").Obj())
	assert.ErrorIs(t, err, other)
	assert.Equal(t, 1, builds)
}
