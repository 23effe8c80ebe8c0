package updater

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/records"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testvpa"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/report"
)

const (
	waitFor = 10 * time.Second
	every   = 20 * time.Millisecond
)

// TestRecordSurvivesRestart: an updater records an infeasible resize and
// stops (a restart, or another replica taking the lease); the next one
// loads the record before deciding and sends no repeated attempt.
func TestRecordSurvivesRestart(t *testing.T) {
	first := newFixture(t, []*corev1.Pod{webPod("p").Running().Obj()}, []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("8", "100Mi")}, fixtureOpts{durable: true})
	first.failResize(nodeCapacityErr())
	stopFirst := first.run()
	require.Eventually(t, func() bool { return first.getVPA("web").Annotations[records.AnnotationKey] != "" }, waitFor, every,
		"the record is written onto the VPA")
	require.Len(t, first.resizePatches(), 1)
	stopFirst()

	for _, who := range []string{"after a restart", "after another restart"} {
		t.Run(who, func(t *testing.T) {
			next := newFixtureOn(t, first.kube, first.vpa, fixtureOpts{durable: true})
			next.run()
			require.Eventually(t, func() bool {
				return counter(t, next, report.MetricDecisions, "action", "Skip", "reason", "RecordedAttemptSame") >= 1
			}, waitFor, every, "the pod is decided against the loaded record")
			assert.Len(t, first.resizePatches(), 1, "no repeated attempt for an unchanged recommendation")
			assert.Equal(t, 1, next.store.Len())
			assert.Empty(t, next.events(), "nothing new to report")
		})
	}
}

// blockingStore holds Load until released.
type blockingStore struct {
	*records.InMemoryStore
	release chan struct{}
}

func (s *blockingStore) Load(ctx context.Context) error {
	select {
	case <-s.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Caches synced and a resize due, but the records not loaded yet: the pod
// (and a Job) is not decided, and the key is retried; once Run has loaded
// the records, the resize goes.
func TestNoResizeBeforeRecordsAreLoaded(t *testing.T) {
	store := &blockingStore{InMemoryStore: records.NewInMemoryStore(), release: make(chan struct{})}
	f := newFixture(t, []*corev1.Pod{webPod("p").Running().Obj()}, []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("300m", "300Mi")},
		fixtureOpts{store: store, recordsNotLoaded: true})
	require.ErrorIs(t, f.sync("p"), errRecordsNotLoaded)
	require.ErrorIs(t, f.ctrl.syncJob(f.ctx, "default/train"), errRecordsNotLoaded)
	assert.Empty(t, f.resizePatches())
	assert.Empty(t, f.recorder.unread("Pod"), "nothing decided, nothing reported")

	f.run()
	close(store.release)
	assert.Eventually(t, func() bool { return len(f.resizePatches()) == 1 }, waitFor, every)
}

// A failed load is retried after a backoff on the controller's clock: the
// records load when the clock has moved by the first delay, not before.
func TestLoadIsRetriedUntilItSucceeds(t *testing.T) {
	store := &failingLoad{InMemoryStore: records.NewInMemoryStore(), failures: 1}
	f := newFixture(t, []*corev1.Pod{webPod("p").Running().Obj()}, []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("300m", "300Mi")}, fixtureOpts{store: store})
	f.run()
	require.Eventually(t, func() bool { return store.calls.Load() == 1 }, waitFor, every, "one failed load")
	// The clock moves 100 ms at a time until the load is tried again: the
	// first delay is 1 s plus up to 10 % of jitter. On real time it would
	// come only after many more steps; with no delay, after none.
	var stepped time.Duration
	require.Eventually(t, func() bool {
		if store.calls.Load() >= 2 {
			return true
		}
		f.clock.Step(100 * time.Millisecond)
		stepped += 100 * time.Millisecond
		return false
	}, waitFor, every, "the load tried again")
	assert.GreaterOrEqual(t, stepped, time.Second)
	assert.LessOrEqual(t, stepped, 1300*time.Millisecond)
	assert.Eventually(t, func() bool { return len(f.resizePatches()) == 1 }, waitFor, every, "after one failed load and a backoff")
}

type failingLoad struct {
	*records.InMemoryStore
	failures int
	calls    atomic.Int32
}

func (s *failingLoad) Load(context.Context) error {
	if s.calls.Add(1) <= int32(s.failures) {
		return context.DeadlineExceeded
	}
	return nil
}

func TestDeletedVPAForgetsItsRecordsAndPods(t *testing.T) {
	f := newFixture(t, []*corev1.Pod{webPod("p").Running().Obj()}, []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("8", "100Mi")}, fixtureOpts{})
	f.failResize(nodeCapacityErr())
	require.NoError(t, f.sync("p"))
	require.Equal(t, 1, f.store.Len())
	require.Len(t, f.ctrl.tracker.Of("default/web"), 1)

	require.NoError(t, f.vpa.AutoscalingV1().VerticalPodAutoscalers("default").Delete(context.Background(), "web", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool { return f.store.Len() == 0 }, waitFor, every, "the records went with the VPA's annotation")
	assert.Empty(t, f.ctrl.tracker.Of("default/web"))
	f.ctrl.mu.Lock()
	defer f.ctrl.mu.Unlock()
	assert.NotContains(t, f.ctrl.recommendationSeen, types.UID("uid-web"))
}

// A VPA of another tenant, in mode Off, whose annotation holds a record for
// the UID of this tenant's pod (a record that would compare NotLower with
// anything, recorded an hour before) holds nothing back once the updater starts:
// the record is not the VPA's own pod's, and is dropped at Load.
func TestAnotherTenantsAnnotationHoldsNoPodBack(t *testing.T) {
	attacker := testvpa.New("web").Obj()
	attacker.Namespace, attacker.UID = "tenant-a", "uid-attacker"
	attacker.Annotations = map[string]string{records.AnnotationKey: `{"version":1,"attempts":[{"kind":"Infeasible","resources":{"c":{"requests":{"cpu":"1m"}}}}],` +
		`"pods":{"uid-p":{"attempt":0,"recordedAt":"2027-01-15T07:00:00Z"}}}`}
	f := newFixture(t, []*corev1.Pod{webPod("p").Running().Obj()}, []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("300m", "100Mi"), attacker}, fixtureOpts{durable: true})
	f.run()
	require.Eventually(t, func() bool { return len(f.resizePatches()) == 1 }, waitFor, every, "the pod is resized")
	_, held := f.store.Get("uid-p")
	assert.False(t, held, "no record of another VPA's making")
}
