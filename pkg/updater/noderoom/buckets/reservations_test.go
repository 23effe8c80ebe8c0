package buckets

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Two brokers of 500m on a node of 4 cpus, beside a filler of 1500m: 1500m
// are free, one broker may grow to 1500m, not both.
func twoBrokers() (n *corev1.Node, a, b, filler *corev1.Pod) {
	return onNode("node-1", "4"), broker("tenant-a", "kafka-0", "500m"), broker("tenant-b", "kafka-1", "500m"), broker("other", "filler", "1500m")
}

func newMetrics(t *testing.T) *Metrics {
	t.Helper()
	m, err := NewMetrics(prometheus.NewRegistry())
	require.NoError(t, err)
	return m
}

// TestADecreaseReservesNothing: a resize that takes no room the pod does
// not hold already writes nothing.
func TestADecreaseReservesNothing(t *testing.T) {
	n, a, b, filler := twoBrokers()
	api := newFakeAPI(4)
	r := replica(t, "replica-a", api, staleCache{api: api}, fakeClock(), nil)
	before := api.version
	require.True(t, r.Reserve(context.Background(), request(a, "200m", n, a, b, filler)).Fits)
	require.True(t, r.Reserve(context.Background(), request(a, "500m", n, a, b, filler)).Fits)
	assert.Equal(t, before, api.version, "nothing written")
	assert.Zero(t, r.Len())
}

func TestAnotherReplicasReservationIsCounted(t *testing.T) {
	n, a, b, filler := twoBrokers()
	api := newFakeAPI(4)
	clk := fakeClock()
	ra := replica(t, "replica-a", api, staleCache{api: api}, clk, nil)
	mb := newMetrics(t)
	rb := replica(t, "replica-b", api, staleCache{api: api}, clk, mb)

	require.True(t, ra.Reserve(context.Background(), request(a, "1500m", n, a, b, filler)).Fits)
	assert.Equal(t, []types.UID{a.UID}, keys(api.data(bucketOfNode(n.Name))), "the reservation is written before the resize is sent")
	assert.Equal(t, 1, ra.Len())

	got := rb.Reserve(context.Background(), request(b, "1500m", n, a, b, filler))
	assert.False(t, got.Fits)
	assert.Equal(t, RefusedNoRoom, got.Reason)
	assert.Equal(t, "node node-1 has 1 cpu free of 4 allocatable; the pod would request 1500m; counted: resizes reserved on the node by the updater's replicas and not seen yet", got.Why)
	assert.Equal(t, t0.Add(ttl), got.Until, "decided again when the reservation counted expires")
	assert.Equal(t, 1.0, testutil.ToFloat64(mb.refusals.WithLabelValues(RefusedNoRoom)))
	assert.Equal(t, []types.UID{a.UID}, keys(api.data(bucketOfNode(n.Name))), "nothing written for a resize that does not fit")
}

// TestAConflictReadsTheBucketAgainAndDecidesAgain: a replica whose watch of
// the bucket has not seen another's reservation yet decides on what it
// has; its write carries the version it read, the API server refuses it,
// and the replica reads the bucket again and decides again, now counting
// the other's reservation.
func TestAConflictReadsTheBucketAgainAndDecidesAgain(t *testing.T) {
	n, a, b, filler := twoBrokers()
	api := newFakeAPI(4)
	clk := fakeClock()
	ra := replica(t, "replica-a", api, staleCache{api: api}, clk, nil)
	mb := newMetrics(t)
	rb := replica(t, "replica-b", api, staleCache{api: api, lag: 1}, clk, mb)
	require.True(t, ra.Reserve(context.Background(), request(a, "1500m", n, a, b, filler)).Fits)

	got := rb.Reserve(context.Background(), request(b, "1500m", n, a, b, filler))
	assert.False(t, got.Fits, "decided again on the bucket as the API server holds it")
	assert.Equal(t, RefusedNoRoom, got.Reason)
	assert.Equal(t, 1, api.conflicts)
	assert.Equal(t, 1.0, testutil.ToFloat64(mb.conflicts))

	// When both fit, the second is written beside the first.
	n = onNode("node-1", "8")
	got = rb.Reserve(context.Background(), request(b, "1500m", n, a, b, filler))
	require.True(t, got.Fits, got.Why)
	assert.ElementsMatch(t, []types.UID{a.UID, b.UID}, keys(api.data(bucketOfNode(n.Name))))
	assert.Equal(t, 1.0, testutil.ToFloat64(mb.reservations))
}

// TestConflictsWithoutEndTheResizeWaits: a bucket written by others at
// every attempt: the resize is not sent, it waits and is decided again a
// little later.
func TestConflictsWithoutEndTheResizeWaits(t *testing.T) {
	n, a, b, filler := twoBrokers()
	api := newFakeAPI(4)
	clk := fakeClock()
	m := newMetrics(t)
	r := replica(t, "replica-a", api, nil, clk, m)
	// Another writer between each read and write of r.
	r.api = interleaved{fakeAPI: api, between: func() { api.set(t, bucketOfNode(n.Name), map[string]string{}, nil) }}
	got := r.Reserve(context.Background(), request(a, "1500m", n, a, b, filler))
	assert.False(t, got.Fits)
	assert.Equal(t, RefusedConflicts, got.Reason)
	assert.Equal(t, t0.Add(retryAfter), got.Until)
	assert.Equal(t, maxAttempts, api.conflicts)
	assert.Equal(t, float64(maxAttempts), testutil.ToFloat64(m.conflicts))
	assert.Zero(t, r.Len(), "no reservation held")
}

// interleaved is an API where another writer writes the bucket after each
// read.
type interleaved struct {
	*fakeAPI
	between func()
}

func (i interleaved) Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.ConfigMap, error) {
	cm, err := i.fakeAPI.Get(ctx, name, opts)
	i.between()
	return cm, err
}

func TestAnErrorMakesTheResizeWait(t *testing.T) {
	n, a, b, filler := twoBrokers()
	api := newFakeAPI(4)
	api.failWith = apierrors.NewForbidden(configMaps, Name(prefix, bucketOfNode(n.Name)), nil)
	m := newMetrics(t)
	r := replica(t, "replica-a", api, staleCache{api: api}, fakeClock(), m)
	got := r.Reserve(context.Background(), request(a, "1500m", n, a, b, filler))
	assert.False(t, got.Fits)
	assert.Equal(t, RefusedError, got.Reason)
	assert.Contains(t, got.Why, "forbidden")
	assert.Equal(t, t0.Add(retryAfter), got.Until)

	// A bucket that does not exist: the same.
	missing := newFakeAPI(0)
	r = replica(t, "replica-a", missing, nil, fakeClock(), m)
	got = r.Reserve(context.Background(), request(a, "1500m", n, a, b, filler))
	assert.False(t, got.Fits)
	assert.Equal(t, RefusedError, got.Reason)
	assert.Contains(t, got.Why, "not found")
	assert.Equal(t, 2.0, testutil.ToFloat64(m.refusals.WithLabelValues(RefusedError)))
}

// TestADeadReplicasReservationExpires: a replica reserves and dies (its
// reservation is never removed). Another replica counts it until a TTL
// after it first saw it, on its own clock (no time the dead one wrote is
// read), then reserves in its place and removes it.
func TestADeadReplicasReservationExpires(t *testing.T) {
	n, a, b, filler := twoBrokers()
	api := newFakeAPI(4)
	clk := fakeClock()
	dead := replica(t, "replica-a", api, staleCache{api: api}, clk, nil)
	require.True(t, dead.Reserve(context.Background(), request(a, "1500m", n, a, b, filler)).Fits)

	// The other replica first sees the bucket a minute later.
	clk.Step(time.Minute)
	m := newMetrics(t)
	r := replica(t, "replica-b", api, staleCache{api: api}, clk, m)
	got := r.Reserve(context.Background(), request(b, "1500m", n, a, b, filler))
	require.False(t, got.Fits)
	assert.Equal(t, t0.Add(time.Minute+ttl), got.Until, "a TTL from when this replica first saw it")

	clk.Step(ttl - time.Second)
	assert.False(t, r.Reserve(context.Background(), request(b, "1500m", n, a, b, filler)).Fits, "counted until it expires")
	clk.Step(time.Second)
	require.True(t, r.Reserve(context.Background(), request(b, "1500m", n, a, b, filler)).Fits, "expired: no longer counted")
	assert.Equal(t, []types.UID{b.UID}, keys(api.data(bucketOfNode(n.Name))), "the expired reservation is removed with the write")
	assert.Equal(t, 1.0, testutil.ToFloat64(m.removals.WithLabelValues(removedExpired)))
}

// TestAReservationEndsWithItsResize: released (not sent, refused), it is
// removed by the worker at once and the subscribers are told its node;
// shown by the node view, it is removed after Linger; not shown yet, it is
// kept.
func TestAReservationEndsWithItsResize(t *testing.T) {
	n, a, b, filler := twoBrokers()
	api := newFakeAPI(4)
	clk := fakeClock()
	m := newMetrics(t)
	r := replica(t, "replica-a", api, staleCache{api: api}, clk, m)
	var mu sync.Mutex
	var freed []string
	cancel := r.Subscribe(func(node string) {
		mu.Lock()
		defer mu.Unlock()
		freed = append(freed, node)
	})
	defer cancel()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(ctx)
	}()
	defer func() { stop(); <-done }()
	bucket := bucketOfNode(n.Name)

	require.True(t, r.Reserve(ctx, request(a, "1500m", n, a, b, filler)).Fits)
	r.Release(a)
	require.Eventually(t, func() bool { return len(api.data(bucket)) == 0 }, 10*time.Second, 10*time.Millisecond, "removed once released")
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(freed) == 1 && freed[0] == n.Name
	}, 10*time.Second, 10*time.Millisecond, "the node's waiting pods are told")
	assert.Zero(t, r.Len())
	assert.Equal(t, 1.0, testutil.ToFloat64(m.removals.WithLabelValues(removedReleased)))

	require.True(t, r.Reserve(ctx, request(a, "1500m", n, a, b, filler)).Fits)
	r.Seen(a)             // the node view shows the pod as it was
	r.Seen(shown(a, "1")) // a smaller resize than the one reserved
	assert.Equal(t, 1, r.Len(), "not shown yet: kept")
	r.Seen(shown(a, "1500m"))
	clk.Step(Linger - time.Millisecond)
	assert.Len(t, api.data(bucket), 1, "kept while the other replicas' views may lag")
	clk.Step(time.Millisecond)
	require.Eventually(t, func() bool { return len(api.data(bucket)) == 0 }, 10*time.Second, 10*time.Millisecond, "removed once shown for Linger")
	assert.Equal(t, 1.0, testutil.ToFloat64(m.removals.WithLabelValues(removedShown)))
	assert.Zero(t, r.Len())
	assert.Zero(t, testutil.ToFloat64(m.gauge))
}

// TestAReplicasOwnWritesNeverConflict: a replica's writes of one bucket go
// one at a time, each over the answer to the one before while its watch
// lags behind (here, it never shows them): many workers reserving on the
// nodes of one bucket at once never conflict.
func TestAReplicasOwnWritesNeverConflict(t *testing.T) {
	api := newFakeAPI(4)
	m := newMetrics(t)
	r := replica(t, "replica-a", api, staleCache{api: api, lag: 1 << 20}, fakeClock(), m)
	var nodes []*corev1.Node
	for i := 0; len(nodes) < 8; i++ {
		if name := fmt.Sprintf("node-%d", i); bucketOfNode(name) == bucketOfNode("node-1") {
			nodes = append(nodes, onNode(name, "64"))
		}
	}
	var wg sync.WaitGroup
	for w := range 32 {
		wg.Go(func() {
			n := nodes[w%len(nodes)]
			p := broker("tenant", fmt.Sprintf("kafka-%d", w), "500m")
			p.Spec.NodeName = n.Name
			assert.True(t, r.Reserve(context.Background(), request(p, "1", n, p)).Fits)
		})
	}
	wg.Wait()
	assert.Zero(t, api.conflicts)
	assert.Zero(t, testutil.ToFloat64(m.conflicts))
	assert.Len(t, api.data(bucketOfNode("node-1")), 32)
	assert.Equal(t, 32, r.Len())
}
