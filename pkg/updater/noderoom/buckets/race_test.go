package buckets

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/clock"

	"github.com/vpa-inplace/vpa-inplace/pkg/updater/noderoom"
)

// TestReplicasNeverTogetherOverfillANode: two replicas, each with its own
// reservations, its own watch of the buckets (lagging a write behind) and
// its own in-process ledger, share one API server. Many workers of each
// decide at once the resizes of the eight brokers of one node, four of
// them in a namespace of each replica's shards; the node has room for two
// of the resizes. Each resize is sent only once the ledger and then the
// bucket let it through, as the controller sends it: at most two are sent,
// whichever replica decided them, and the bucket holds exactly their
// reservations. Each replica's ledger alone would let two of its own
// through; a read, check and write without the version read would let the
// second replica's write overwrite the first's reservation.
func TestReplicasNeverTogetherOverfillANode(t *testing.T) {
	const rounds, replicas, workers = 20, 2, 16
	n := onNode("node-1", "4")
	for round := range rounds {
		// Eight brokers of 250m: 2 cpus free. Each grows by 750m to 1
		// cpu: two fit (1500m), three do not (2250m).
		var pods []*corev1.Pod
		for i := range 8 {
			pods = append(pods, broker(fmt.Sprintf("tenant-%d", i%replicas), fmt.Sprintf("kafka-%d", i), "250m"))
		}
		view := func(string) []*corev1.Pod { return pods }
		api := newFakeAPI(4)
		var mu sync.Mutex
		sent := sets.New[types.UID]()
		start := make(chan struct{})
		var wg sync.WaitGroup
		for rep := range replicas {
			r := replica(t, fmt.Sprintf("replica-%d", rep), api, staleCache{api: api, lag: 1}, clock.RealClock{}, nil)
			ledger := noderoom.New(clock.RealClock{}, view)
			var own []*corev1.Pod
			for _, p := range pods {
				if p.Namespace == fmt.Sprintf("tenant-%d", rep) {
					own = append(own, p)
				}
			}
			for w := range workers {
				wg.Go(func() {
					<-start
					p := own[w%len(own)]
					if ok, _ := ledger.Reserve(p, to("1"), n); !ok {
						return
					}
					a := r.Reserve(context.Background(), Request{Pod: p, Target: to("1"), Node: n, Pods: pods, Held: ledger.Held(n.Name, p.UID)})
					if !a.Fits {
						ledger.Release(p)
						return
					}
					mu.Lock()
					sent.Insert(p.UID)
					mu.Unlock()
				})
			}
		}
		close(start)
		wg.Wait()
		require.LessOrEqual(t, sent.Len(), 2, "round %d: brokers sent a resize: %v", round, sets.List(sent))
		require.NotZero(t, sent.Len(), "round %d: a resize that fits is sent", round)
		require.ElementsMatch(t, sets.List(sent), keys(api.data(bucketOfNode(n.Name))),
			"round %d: the bucket holds the reservation of every resize sent, and no other", round)
	}
}
