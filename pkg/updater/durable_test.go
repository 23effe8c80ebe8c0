package updater

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
	vpafake "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/client/clientset/versioned/fake"
	vpalisters "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/client/listers/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/records"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testvpa"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/report"
)

// waitFor bounds each wait for a condition that the code meets within
// milliseconds on an idle machine: generous, so that a busy one (other
// builds, the race detector) does not fail a test that would pass.
const (
	waitFor = time.Minute
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
	f := newFixture(t, []*corev1.Pod{webPod("p").Running().Obj()}, []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("300m", "300Mi")},
		fixtureOpts{store: store, watchClock: true})
	f.run()
	// The clock is stepped once the backoff waits on it: a step before
	// would be lost, and the retry come later than the delay.
	require.Eventually(t, func() bool { return store.calls.Load() == 1 && f.watched.afters() == 1 }, waitFor, every,
		"one failed load, and its backoff begun")
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
	// The delete handler forgets the store, the tracker and the memo one
	// after the other: each is waited for, not read once the first is done.
	require.Eventually(t, func() bool { return f.store.Len() == 0 }, waitFor, every, "the records went with the VPA's annotation")
	require.Eventually(t, func() bool { return len(f.ctrl.tracker.Of("default/web")) == 0 }, waitFor, every, "the attempts are forgotten")
	require.Eventually(t, func() bool {
		f.ctrl.mu.Lock()
		defer f.ctrl.mu.Unlock()
		_, seen := f.ctrl.recommendationSeen[types.UID("uid-web")]
		return !seen
	}, waitFor, every, "the recommendation's time is forgotten")
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

// A VPA of the pod's namespace, in mode Off, whose annotation holds a
// record for this pod (one that would compare NotLower with anything):
// Load keeps it (the pod is live in the VPA's namespace), but the pod's
// sync, which resolves the pod's own VPA, does not believe it and forgets
// it. The check Load made with an owner walk per record is made here, with
// the walk the sync makes anyway.
func TestAnotherVPAOfTheNamespaceHoldsNoPodBack(t *testing.T) {
	other := testvpa.New("db").Target("apps/v1", "Deployment", "db").Obj()
	other.Annotations = map[string]string{records.AnnotationKey: `{"version":1,"attempts":[{"kind":"Infeasible","resources":{"c":{"requests":{"cpu":"1m"}}}}],` +
		`"pods":{"uid-p":{"attempt":0,"recordedAt":"2027-01-15T07:00:00Z"}}}`}
	f := newFixture(t, []*corev1.Pod{webPod("p").Running().Obj()}, []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("300m", "100Mi"), other}, fixtureOpts{durable: true})
	require.NoError(t, f.store.Load(f.ctx))
	_, held := f.store.Get("uid-p")
	require.True(t, held, "kept at Load, where no owner is walked")
	require.NoError(t, f.sync("p"))
	assert.Len(t, f.resizePatches(), 1, "the pod is resized")
	_, held = f.store.Get("uid-p")
	assert.False(t, held, "the other VPA's record is forgotten")
}

// lookupResolver counts the owner lookups and fails them while failing
// is set, as a flaky API server would.
type lookupResolver struct {
	Resolver
	calls   atomic.Int32
	failing atomic.Bool
}

var errLookup = errors.New("reading the pod's owner: the server was unable to return a response in the time allotted")

func (r *lookupResolver) VPAForPod(ctx context.Context, pod *corev1.Pod) (*vpatypes.VerticalPodAutoscaler, error) {
	r.calls.Add(1)
	if r.failing.Load() {
		return nil, errLookup
	}
	return r.Resolver.VPAForPod(ctx, pod)
}

func (r *lookupResolver) VPAForJob(ctx context.Context, job *batchv1.Job) (*vpatypes.VerticalPodAutoscaler, error) {
	r.calls.Add(1)
	if r.failing.Load() {
		return nil, errLookup
	}
	return r.Resolver.VPAForJob(ctx, job)
}

// recordedPods has an updater record an infeasible resize for each of n pods
// durably, and returns its clients for the next one.
func recordedPods(t *testing.T, n int) *fixture {
	t.Helper()
	pods := make([]*corev1.Pod, n)
	for i := range pods {
		pods[i] = webPod(fmt.Sprintf("p%d", i)).Running().Obj()
	}
	first := newFixture(t, pods, []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("8", "100Mi")}, fixtureOpts{durable: true})
	first.failResize(nodeCapacityErr())
	stop := first.run()
	require.Eventually(t, func() bool {
		d, err := records.DecodeAnnotation(first.getVPA("web").Annotations[records.AnnotationKey], records.DecodeOptions{})
		return err == nil && len(d.Records) == n
	}, waitFor, every, "the records are written")
	stop()
	require.Len(t, first.resizePatches(), n)
	return first
}

// Issue #32, item 2: Load looked up the VPA of every recorded pod (an owner
// walk each, up to 32 reads for a pod with 32 ownerReferences) before any
// worker started. It makes no lookup at all now; BenchmarkLoadRecords
// gives the figures.
func TestLoadLooksUpNoOwner(t *testing.T) {
	first := recordedPods(t, 20)
	resolver := &lookupResolver{}
	next := newFixtureOn(t, first.kube, first.vpa, fixtureOpts{durable: true, wrapResolver: func(r Resolver) Resolver {
		resolver.Resolver = r
		return resolver
	}})
	require.NoError(t, next.store.Load(next.ctx))
	assert.Equal(t, 20, next.store.Len())
	assert.Zero(t, resolver.calls.Load(), "no owner lookup at Load")
}

// Issue #32, item 4: a lookup that failed at Load read as "not owned", and
// the record was dropped for good; after the restart the infeasible resize
// was sent again. An error is no answer: the record is kept, and the pod's
// sync, which retries a failed lookup, decides against it.
func TestAFailedOwnerLookupKeepsTheRecord(t *testing.T) {
	first := recordedPods(t, 1)
	resolver := &lookupResolver{}
	resolver.failing.Store(true)
	next := newFixtureOn(t, first.kube, first.vpa, fixtureOpts{durable: true, wrapResolver: func(r Resolver) Resolver {
		resolver.Resolver = r
		return resolver
	}})
	require.NoError(t, next.store.Load(next.ctx))
	require.Equal(t, 1, next.store.Len(), "the record is kept")
	require.ErrorIs(t, next.sync("p0"), errLookup, "the sync fails, to be retried")
	_, held := next.store.Get("uid-p0")
	require.True(t, held, "a failed lookup forgets nothing")

	resolver.failing.Store(false)
	require.NoError(t, next.sync("p0"))
	assert.Len(t, first.resizePatches(), 1, "the infeasible resize is not sent again")
	assert.Equal(t, 1.0, counter(t, next, report.MetricDecisions, "action", "Skip", "reason", "RecordedAttemptSame"))
}

// Issue #32, item 5: an updater whose records namespace does not exist (run
// with --kubeconfig on a cluster without vpa-inplace-system, or a chart in
// another namespace) became Ready, sent resizes and could record none of
// their failures: after a restart it sent them again. Now its Load fails
// with what to do, /readyz says so, and nothing is sent.
func TestNothingIsSentWhileTheRecordsNamespaceIsMissing(t *testing.T) {
	kube := kubefake.NewClientset(webPod("p").Running().Obj())
	bumpResourceVersions(kube)
	var creates atomic.Int32
	kube.PrependReactor("create", "configmaps", func(clienttesting.Action) (bool, runtime.Object, error) {
		creates.Add(1)
		return true, nil, apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, systemNamespace)
	})
	vpaClient := vpafake.NewSimpleClientset(inPlaceVPA("300m", "300Mi"))
	store, err := records.NewConfigMapStore(kube.CoreV1(), vpaClient.AutoscalingV1(),
		vpalisters.NewVerticalPodAutoscalerLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})),
		records.ConfigMapStoreConfig{Namespace: systemNamespace, Store: records.StoreInfeasible})
	require.NoError(t, err)
	f := newFixtureOn(t, kube, vpaClient, fixtureOpts{store: store, recordsNotLoaded: true})
	f.run()
	require.Eventually(t, func() bool {
		err := f.ctrl.RecordsLoaded()
		return err != nil && strings.Contains(err.Error(), `namespace "vpa-inplace-system" does not exist`)
	}, waitFor, every, "not ready, saying why")
	require.ErrorIs(t, f.sync("p"), errRecordsNotLoaded)
	// The load is retried after its backoff, and fails again.
	tried := creates.Load()
	require.Eventually(t, func() bool {
		f.clock.Step(time.Minute) // the longest backoff
		return creates.Load() > tried
	}, waitFor, every, "the load is retried")
	require.Eventually(t, func() bool {
		err := f.ctrl.RecordsLoaded()
		return err != nil && strings.Contains(err.Error(), `namespace "vpa-inplace-system" does not exist`)
	}, waitFor, every, "and fails again")
	assert.Empty(t, f.resizePatches(), "nothing sent that could not be recorded")
}
