package owner

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/vpa-inplace/vpa-inplace/pkg/shard"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testlease"
)

const (
	leaseNamespace = "vpa-inplace-system"
	leasePrefix    = "updater"
)

// interval is a time a replica's write for a shard may have been in
// flight: from Guard to the deadline it gave.
type interval struct {
	replica    string
	start, end time.Time
}

// writes logs every write Guard let through, by shard.
type writes struct {
	mu  sync.Mutex
	log map[int][]interval
}

func (w *writes) add(k int, iv interval) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.log[k] = append(w.log[k], iv)
}

// overlaps returns, for each shard, the first two writes of different
// replicas that may have been in flight at once.
func (w *writes) overlaps() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for k, ivs := range w.log {
		sorted := slices.Clone(ivs)
		sort.Slice(sorted, func(i, j int) bool { return sorted[i].start.Before(sorted[j].start) })
		var last interval
		for _, iv := range sorted {
			if iv.start.Before(last.end) && iv.replica != last.replica {
				out = append(out, fmt.Sprintf("shard %d: %s until %s, %s from %s", k, last.replica, last.end.Format(time.StampMicro), iv.replica, iv.start.Format(time.StampMicro)))
				break
			}
			if iv.end.After(last.end) {
				last = iv
			}
		}
	}
	return out
}

func (w *writes) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, ivs := range w.log {
		n += len(ivs)
	}
	return n
}

// replica is one updater replica sharing the shards on the fake API
// server: its own informer, its own identity, a switch that stalls its
// Lease writes as a frozen process would.
type replica struct {
	id      string
	owner   *Owner
	cancel  context.CancelFunc
	done    chan struct{}
	stalled atomic.Bool
	unstall chan struct{}

	mu      sync.Mutex
	working []int
	// changes counts the OnChange calls.
	changes atomic.Int32
}

func (r *replica) stop() {
	r.cancel()
	<-r.done
}

type cluster struct {
	t      *testing.T
	kube   *kubefake.Clientset
	layout shard.Layout
	// namespaces holds one namespace per shard.
	namespaces []string
	writes     *writes
}

func newCluster(t *testing.T, shards int) *cluster {
	layout, err := shard.NewLayout(shards)
	require.NoError(t, err)
	var objs []runtime.Object
	for i := range shards {
		for _, name := range []string{ShardLeaseName(leasePrefix, i), MemberLeaseName(leasePrefix, i)} {
			objs = append(objs, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: leaseNamespace, Name: name}})
		}
	}
	kube := kubefake.NewClientset(objs...)
	testlease.Versioned(kube)
	c := &cluster{t: t, kube: kube, layout: layout, writes: &writes{log: map[int][]interval{}}}
	for i := range shards {
		for j := 0; ; j++ {
			if ns := fmt.Sprintf("tenant-%d", j); layout.Of(ns) == i {
				c.namespaces = append(c.namespaces, ns)
				break
			}
		}
	}
	return c
}

// start starts a replica, and a writer that asks Guard for every shard
// over and over, logging what it lets through.
func (c *cluster) start(id string) *replica {
	r := &replica{id: id, done: make(chan struct{}), unstall: make(chan struct{})}
	client := testlease.Wrap(c.kube, testlease.Hooks{Update: func(*coordinationv1.Lease) {
		if r.stalled.Load() {
			<-r.unstall
		}
	}})
	factory := informers.NewSharedInformerFactoryWithOptions(c.kube, 0, informers.WithNamespace(leaseNamespace))
	o, err := New(client.CoordinationV1(), factory.Coordination().V1().Leases(), Config{
		Namespace: leaseNamespace, Prefix: leasePrefix, Layout: c.layout, Identity: id,
		LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 200 * time.Millisecond,
		OnChange: func(_ context.Context, working []int) {
			r.mu.Lock()
			r.working = working
			r.mu.Unlock()
			r.changes.Add(1)
		},
	})
	require.NoError(c.t, err)
	r.owner = o
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	factory.Start(ctx.Done())
	var wg sync.WaitGroup
	wg.Go(func() { _ = o.Run(ctx) })
	wg.Go(func() {
		for ctx.Err() == nil {
			for k, ns := range c.namespaces {
				wctx, done, err := o.Guard(context.Background(), ns)
				if err != nil {
					continue
				}
				// A request that takes 20ms, unless its context ends it
				// sooner.
				start := time.Now()
				select {
				case <-wctx.Done():
				case <-time.After(20 * time.Millisecond):
				}
				c.writes.add(k, interval{replica: id, start: start, end: time.Now()})
				done()
			}
			time.Sleep(2 * time.Millisecond)
		}
	})
	go func() {
		wg.Wait()
		factory.Shutdown()
		close(r.done)
	}()
	c.t.Cleanup(func() {
		if r.stalled.Load() {
			close(r.unstall)
		}
		r.stop()
	})
	return r
}

// shared waits until every shard is held by exactly one of live, and each
// holds its share: at most ceil(shards / live), at least the floor.
func (c *cluster) shared(live []*replica, dead ...*replica) {
	c.t.Helper()
	n := c.layout.Shards()
	lo, hi := n/len(live), (n+len(live)-1)/len(live)
	var last string
	ok := func() bool {
		holders := make([]int, n)
		for _, r := range live {
			held := r.owner.Held()
			if len(held) < lo || len(held) > hi {
				last = fmt.Sprintf("%s holds %v, not %d to %d shards", r.id, held, lo, hi)
				return false
			}
			for _, k := range held {
				holders[k]++
			}
		}
		for k, h := range holders {
			if h != 1 {
				last = fmt.Sprintf("shard %d held by %d live replicas", k, h)
				return false
			}
		}
		for _, r := range dead {
			if held := r.owner.Held(); len(held) > 0 {
				last = fmt.Sprintf("%s, stalled, still lets writes through for %v", r.id, held)
				return false
			}
		}
		return true
	}
	deadline := time.Now().Add(60 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			c.t.Fatalf("the shards were not shared: %s", last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Replicas come, go and freeze; all along, every write each lets through
// is logged with the time it may be in flight. No two replicas ever let a
// write for one shard through at once (not even a frozen one whose Leases
// others took over), and each time the replicas settle, each holds its fair
// share and every shard has a holder.
func TestShardsAreSharedFairlyAndNeverWrittenByTwo(t *testing.T) {
	c := newCluster(t, 8)
	r0, r1, r2 := c.start("r0"), c.start("r1"), c.start("r2")
	c.shared([]*replica{r0, r1, r2})

	// Two more: the first three give shards up to them.
	r3, r4 := c.start("r3"), c.start("r4")
	c.shared([]*replica{r0, r1, r2, r3, r4})

	// r0 freezes (its Lease writes hang), r1 stops: the others take their
	// shards, r0's once its Leases expire, and r0 lets nothing through
	// any more.
	r0.stalled.Store(true)
	r1.stop()
	c.shared([]*replica{r2, r3, r4}, r0)

	// r0 thaws: its writes come back refused, it loses what it held and
	// joins again as a new member.
	r0.stalled.Store(false)
	close(r0.unstall)
	c.shared([]*replica{r0, r2, r3, r4})

	require.Greater(t, c.writes.count(), 100, "the writers let too little through to tell")
	require.Empty(t, c.writes.overlaps())
}

// A replica past its share gives its extra shards up as one change: its
// spans are rebuilt once, not once per shard given up.
func TestExtraShardsAreGivenUpAsOneChange(t *testing.T) {
	c := newCluster(t, 8)
	r0 := c.start("r0")
	c.shared([]*replica{r0})
	require.Eventually(t, func() bool {
		r0.mu.Lock()
		defer r0.mu.Unlock()
		return len(r0.working) == 8
	}, 60*time.Second, 10*time.Millisecond, "r0 works every shard")
	before := r0.changes.Load()

	r1 := c.start("r1")
	c.shared([]*replica{r0, r1})
	r0.mu.Lock()
	working := slices.Clone(r0.working)
	r0.mu.Unlock()
	require.Len(t, working, 4)
	require.Equal(t, before+1, r0.changes.Load(), "r0 gave its 4 extra shards up in %d changes", r0.changes.Load()-before)
}
