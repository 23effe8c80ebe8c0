package noderoom

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vpa-inplace/vpa-inplace/pkg/resources"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testheap"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
)

var t0 = time.Unix(1_800_000_000, 0)

// cache is the pods as a cache holds them, indexed by node, safe for
// concurrent use.
type cache struct {
	mu     sync.Mutex
	byNode map[string]map[types.UID]*corev1.Pod
}

func newCache(pods ...*corev1.Pod) *cache {
	c := &cache{byNode: map[string]map[types.UID]*corev1.Pod{}}
	for _, p := range pods {
		c.set(p)
	}
	return c
}

func (c *cache) set(p *corev1.Pod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	on := c.byNode[p.Spec.NodeName]
	if on == nil {
		on = map[types.UID]*corev1.Pod{}
		c.byNode[p.Spec.NodeName] = on
	}
	on[p.UID] = p
}

func (c *cache) onNode(node string) []*corev1.Pod {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*corev1.Pod, 0, len(c.byNode[node]))
	for _, p := range c.byNode[node] {
		out = append(out, p)
	}
	return out
}

func node(cpu string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}, Status: corev1.NodeStatus{Allocatable: testpod.List(cpu, "64Gi")}}
}

func broker(name, cpu string) *corev1.Pod {
	return testpod.New(name).Container("kafka", cpu, "1Gi").Running().Obj()
}

func to(cpu string) resources.Resources {
	return resources.Resources{"kafka": {Requests: testpod.List(cpu, "1Gi")}}
}

// resized is p once the API server has its resize to cpu (generation 2),
// not yet applied by the kubelet.
func resized(p *corev1.Pod, cpu string) *corev1.Pod {
	out := p.DeepCopy()
	out.Generation = 2
	out.Spec.Containers[0].Resources.Requests = testpod.List(cpu, "1Gi")
	return out
}

func TestReserve(t *testing.T) {
	a, b := broker("kafka-0", "500m"), broker("kafka-1", "500m")
	c := newCache(a, b)
	clk := clocktesting.NewFakeClock(t0)
	l := New(clk, c.onNode)

	ok, _ := l.Reserve(a, to("1500m"), node("2500m"))
	require.True(t, ok, "2 cpus free; kafka-0 grows by 1")
	ok, why := l.Reserve(b, to("1500m"), node("2500m"))
	assert.False(t, ok, "kafka-0's resize, not in the cache yet, holds its room")
	assert.Equal(t, "node node-1 has 1 cpu free of 2500m allocatable; the pod would request 1500m; counted: resizes sent to other pods of the node and not seen yet", why)
	assert.Equal(t, 1, l.Len(), "a resize that does not fit holds nothing")

	// The cache shows kafka-0's resize: its own requests count it, the
	// hold goes, and the answer is the same.
	c.set(resized(a, "1500m"))
	ok, _ = l.Reserve(b, to("1500m"), node("2500m"))
	assert.False(t, ok)
	assert.Equal(t, 0, l.Len())

	t.Run("a refused resize gives its room back", func(t *testing.T) {
		l := New(clk, newCache(a, b).onNode)
		ok, _ := l.Reserve(a, to("1500m"), node("2500m"))
		require.True(t, ok)
		assert.True(t, l.Release(a))
		ok, _ = l.Reserve(b, to("1500m"), node("2500m"))
		assert.True(t, ok)
	})
	t.Run("a resize sent whatever the node has free holds its room too", func(t *testing.T) {
		l := New(clk, newCache(a, b).onNode)
		ok, _ := l.Reserve(a, to("2500m"), nil)
		require.True(t, ok)
		ok, _ = l.Reserve(b, to("1500m"), node("2500m"))
		assert.False(t, ok)
	})
	t.Run("a hold the cache never shows ends after MaxHold", func(t *testing.T) {
		clk := clocktesting.NewFakeClock(t0)
		l := New(clk, newCache(a, b).onNode)
		ok, _ := l.Reserve(a, to("1500m"), node("2500m"))
		require.True(t, ok)
		clk.Step(MaxHold)
		ok, _ = l.Reserve(b, to("1500m"), node("2500m"))
		assert.True(t, ok)
	})
	t.Run("sent again on the same version, the larger of both is held", func(t *testing.T) {
		l := New(clk, newCache(a, b).onNode)
		ok, _ := l.Reserve(a, to("2"), node("3"))
		require.True(t, ok)
		// The answer was lost; the recommendation moved meanwhile.
		ok, _ = l.Reserve(a, to("1500m"), node("3"))
		require.True(t, ok)
		ok, _ = l.Reserve(b, to("1500m"), node("3"))
		assert.False(t, ok, "kafka-0 may still get 2 cpus")
	})
	t.Run("the cache's update ends the hold it shows", func(t *testing.T) {
		c := newCache(a, b)
		l := New(clk, c.onNode)
		ok, _ := l.Reserve(a, to("1500m"), nil)
		require.True(t, ok)
		assert.False(t, l.Seen(a), "the pod as it was when the resize was sent does not show it")
		assert.False(t, l.Seen(b), "no hold: nothing to end")
		elsewhere := resized(a, "1500m")
		elsewhere.Spec.NodeName = "node-2"
		assert.False(t, l.Seen(elsewhere), "a node without holds")
		assert.Equal(t, 1, l.Len())
		c.set(resized(a, "1500m"))
		assert.True(t, l.Seen(resized(a, "1500m")))
		assert.Equal(t, 0, l.Len(), "no check of the node needed")
	})
	t.Run("pods gone lose their holds", func(t *testing.T) {
		l := New(clk, newCache(a, b).onNode)
		ok, _ := l.Reserve(a, to("1500m"), node("2500m"))
		require.True(t, ok)
		l.Retain(func(uid types.UID) bool { return uid != a.UID })
		assert.Equal(t, 0, l.Len())
	})
}

// TestConcurrentReservationsNeverOverfillANode: many workers reserve the
// room of many brokers of one node at once, and settle the holds as the
// cache comes to show each resize; what is held and shown together never
// exceeds the node.
func TestConcurrentReservationsNeverOverfillANode(t *testing.T) {
	const brokers, workers = 8, 32
	var pods []*corev1.Pod
	for i := range brokers {
		pods = append(pods, broker(fmt.Sprintf("kafka-%d", i), "500m"))
	}
	c := newCache(pods...)
	l := New(clocktesting.NewFakeClock(t0), c.onNode)
	n := node("6") // 2 cpus free: two of the eight may grow by 1
	var granted atomic.Int32
	var wg sync.WaitGroup
	start := make(chan struct{})
	var once [brokers]sync.Once
	for w := range workers {
		wg.Go(func() {
			<-start
			for i := range 50 {
				p := pods[(w+i)%brokers]
				if ok, _ := l.Reserve(p, to("1500m"), n); !ok {
					continue
				}
				once[(w+i)%brokers].Do(func() {
					granted.Add(1)
					// The resize reaches the cache a little later.
					go c.set(resized(p, "1500m"))
				})
			}
		})
	}
	close(start)
	wg.Wait()
	assert.Equal(t, int32(2), granted.Load(), "brokers allowed to grow")
}

// BenchmarkReserve is one checked reservation on a full node (110 pods, the
// kubelet's default maximum, 10 of them with a hold): the time the ledger's
// lock is held for one fits-node resize.
func BenchmarkReserve(b *testing.B) {
	var pods []*corev1.Pod
	for i := range 110 {
		pods = append(pods, broker(fmt.Sprintf("pod-%d", i), "10m"))
	}
	c := newCache(pods...)
	l := New(clocktesting.NewFakeClock(t0), c.onNode)
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}, Status: corev1.NodeStatus{Allocatable: testpod.List("64", "256Gi")}}
	for _, p := range pods[:10] {
		if ok, why := l.Reserve(p, to("20m"), n); !ok {
			b.Fatal(why)
		}
	}
	p := pods[len(pods)-1]
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if ok, why := l.Reserve(p, to("20m"), n); !ok {
			b.Fatal(why)
		}
	}
}

// A hold keeps the cpu and memory FitsNode compares, whichever of them the
// pod requests, and the larger of two holds takes each at its larger.
func TestRoom(t *testing.T) {
	cpuOnly := roomOf(testpod.List("2", ""))
	both := roomOf(testpod.List("1500m", "2Gi"))
	assert.Equal(t, testpod.List("2", ""), cpuOnly.list())
	assert.Equal(t, testpod.List("1500m", "2Gi"), both.list())

	got := cpuOnly.larger(both).list()
	assert.Equal(t, "2", ptr(got[corev1.ResourceCPU]).String())
	assert.Equal(t, "2Gi", ptr(got[corev1.ResourceMemory]).String(), "memory only in the second")
	got = both.larger(roomOf(testpod.List("1", "3Gi"))).list()
	assert.Equal(t, "1500m", ptr(got[corev1.ResourceCPU]).String())
	assert.Equal(t, "3Gi", ptr(got[corev1.ResourceMemory]).String())
	assert.Empty(t, roomOf(testpod.List("", "")).list(), "nothing requested, nothing held")
}

func ptr[T any](v T) *T { return &v }

// BenchmarkRetainedPerHold measures the heap one hold keeps while its
// resize is on its way (a burst of resizes holds one per pod resized):
// retained-B/hold, after a collection.
func BenchmarkRetainedPerHold(b *testing.B) {
	const n = 1000
	pods := make([]*corev1.Pod, n)
	for i := range pods {
		pods[i] = broker(fmt.Sprintf("pod-%d", i), "10m")
		pods[i].UID = types.UID(fmt.Sprintf("uid-%d", i))
	}
	var retained int64
	for b.Loop() {
		retained += testheap.Held(func() any {
			l := New(clocktesting.NewFakeClock(t0), newCache().onNode)
			for _, p := range pods {
				if ok, why := l.Reserve(p, to("20m"), nil); !ok {
					b.Fatal(why)
				}
			}
			require.Equal(b, n, l.Len())
			return l
		})
	}
	b.ReportMetric(float64(retained)/float64(b.N*n), "retained-B/hold")
}

// onNodeNamed is a node like node(cpu), named name.
func onNodeNamed(name, cpu string) *corev1.Node {
	n := node(cpu)
	n.Name = name
	return n
}

// TestTheLedgerKeepsNoNodeWithoutHolds: spot nodes come and go; pods run
// on 10,000 of them, are resized and deleted, and every hold ends by one
// path or another. No hold is left, and no node is kept for it.
func TestTheLedgerKeepsNoNodeWithoutHolds(t *testing.T) {
	const nodes = 10_000
	clk := clocktesting.NewFakeClock(t0)
	c := newCache()
	l := New(clk, c.onNode)
	var aged []*corev1.Pod
	gone := map[types.UID]bool{}
	for i := range nodes {
		name := fmt.Sprintf("spot-%d", i)
		p := broker(fmt.Sprintf("pod-%d", i), "500m")
		p.UID = types.UID(fmt.Sprintf("uid-%d", i))
		p.Spec.NodeName = name
		c.set(p)
		switch i % 6 {
		case 0: // refused, or deleted before the cache showed the resize
			ok, _ := l.Reserve(p, to("1"), onNodeNamed(name, "4"))
			require.True(t, ok)
			require.True(t, l.Release(p))
		case 1: // the cache shows the resize
			ok, _ := l.Reserve(p, to("1"), nil)
			require.True(t, ok)
			c.set(resized(p, "1"))
			require.True(t, l.Seen(resized(p, "1")))
		case 2: // deleted, never resized: the delete handler releases it all the same
			assert.False(t, l.Release(p))
			assert.False(t, l.Seen(p))
		case 3: // gone, found by the periodic sweep
			ok, _ := l.Reserve(p, to("1"), nil)
			require.True(t, ok)
			gone[p.UID] = true
		case 4: // a resize that does not fit holds nothing
			ok, _ := l.Reserve(p, to("8"), onNodeNamed(name, "4"))
			require.False(t, ok)
		case 5: // never shown by the cache: ends after MaxHold
			ok, _ := l.Reserve(p, to("1"), nil)
			require.True(t, ok)
			aged = append(aged, p)
		}
	}
	require.Equal(t, len(gone)+len(aged), l.Len(), "the holds still on their way")
	clk.Step(MaxHold)
	l.Retain(func(uid types.UID) bool { return !gone[uid] })
	assert.Zero(t, l.Len(), "no hold is left")
	assert.Zero(t, l.Nodes(), "no node is kept without a hold")

	t.Run("a node keeps its entry while it holds something", func(t *testing.T) {
		l := New(clk, newCache().onNode)
		a, b := broker("kafka-0", "500m"), broker("kafka-1", "500m")
		ok, _ := l.Reserve(a, to("1"), nil)
		require.True(t, ok)
		ok, _ = l.Reserve(b, to("1"), nil)
		require.True(t, ok)
		require.True(t, l.Release(a))
		assert.Equal(t, 1, l.Nodes())
		ok, _ = l.Reserve(a, to("2500m"), node("3"))
		assert.False(t, ok, "kafka-1's hold is still counted")
		require.True(t, l.Release(b))
		assert.Zero(t, l.Nodes())
	})
}

// TestNodesComeAndGoUnderConcurrentReservations: while the entry of a node
// comes and goes with its holds (a pod of the node reserved and released
// again and again), concurrent checked reservations of other pods of the
// node still see each other's holds: what is held and shown together never
// exceeds the node.
func TestNodesComeAndGoUnderConcurrentReservations(t *testing.T) {
	const brokers, rounds = 8, 200
	var pods []*corev1.Pod
	for i := range brokers {
		pods = append(pods, broker(fmt.Sprintf("kafka-%d", i), "500m"))
	}
	churn := broker("churn", "10m")
	c := newCache(append(pods, churn)...)
	l := New(clocktesting.NewFakeClock(t0), c.onNode)
	n := node("6010m") // 2 cpus free: two of the eight may grow by 1
	var granted, held atomic.Int32
	var overfilled atomic.Bool
	var wg sync.WaitGroup
	start := make(chan struct{})
	stop := make(chan struct{})
	var churning sync.WaitGroup
	for range 4 {
		churning.Go(func() {
			<-start
			for {
				select {
				case <-stop:
					return
				default:
				}
				// Held at what it has: takes no room, makes and drops the
				// node's entry.
				l.Reserve(churn, resources.Resources{"kafka": {Requests: testpod.List("10m", "1Gi")}}, nil)
				l.Release(churn)
				l.Seen(churn)
			}
		})
	}
	for _, p := range pods {
		// One worker per broker: a pod's own hold is not counted
		// against it.
		wg.Go(func() {
			<-start
			for range rounds {
				ok, _ := l.Reserve(p, to("1500m"), n)
				if !ok {
					continue
				}
				granted.Add(1)
				if held.Add(1) > 2 {
					overfilled.Store(true)
				}
				runtime.Gosched()
				held.Add(-1)
				// Taken back: the resize was refused. The room is free
				// again for the others.
				l.Release(p)
			}
		})
	}
	close(start)
	wg.Wait()
	close(stop)
	churning.Wait()
	assert.False(t, overfilled.Load(), "more than two brokers held room at once")
	assert.Positive(t, granted.Load())
	assert.Zero(t, l.Len())
	assert.Zero(t, l.Nodes())
}

// TestHeldIsWhatOtherPodsHoldOnTheNode: what a check outside the ledger
// adds to the cache: the holds of the node's other pods, as FitsNode
// counts them, and nothing for a node without holds.
func TestHeldIsWhatOtherPodsHoldOnTheNode(t *testing.T) {
	a, b := broker("kafka-0", "500m"), broker("kafka-1", "500m")
	l := New(clocktesting.NewFakeClock(t0), newCache(a, b).onNode)
	assert.Empty(t, l.Held("node-1", ""))
	ok, _ := l.Reserve(a, to("1"), node("8"))
	require.True(t, ok)
	ok, _ = l.Reserve(b, to("2"), nil)
	require.True(t, ok)
	held := l.Held("node-1", b.UID)
	require.Len(t, held, 1)
	assert.Equal(t, testpod.List("1", "1Gi"), held[a.UID])
	assert.Len(t, l.Held("node-1", ""), 2)
	assert.Empty(t, l.Held("node-2", ""))
	assert.Equal(t, 1, l.Nodes(), "asking adds no entry")
}
