package preemption

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

var t0 = time.Date(2026, 9, 1, 10, 0, 0, 0, time.UTC)

func victim(name string) Victim {
	return Victim{UID: types.UID("uid-" + name), Namespace: "batch", Name: name, Node: "node-1"}
}

func TestLedgerAttributesAndReportsOnce(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	l := New(clk)
	assert.True(t, l.Add("broker", "kafka/broker-0", "kafka/brokers", victim("v1")))
	assert.False(t, l.Add("broker", "kafka/broker-0", "kafka/brokers", victim("v1")), "the same pair once")
	assert.True(t, l.Add("broker", "kafka/broker-0", "kafka/brokers", victim("v2")))

	got := l.TakeUnreported("broker")
	require.Len(t, got, 2)
	assert.Equal(t, "v1", got[0].Name)
	assert.True(t, got[0].Marked.Equal(t0), "marked when seen, without a condition time")
	assert.Empty(t, l.TakeUnreported("broker"), "reported once")

	clk.Step(time.Second)
	assert.Equal(t, []Ref{{Key: "kafka/broker-0", VPA: "kafka/brokers"}}, l.Gone("uid-v1"))
	of := l.Of("kafka/brokers")
	require.Len(t, of, 1)
	assert.True(t, of[0].Victims[0].Gone.Equal(t0.Add(time.Second)))
	assert.True(t, of[0].Victims[1].Gone.IsZero(), "v2 still terminating")
	assert.Empty(t, l.Of("other/vpa"))
}

func TestLedgerForgetsTheGoneAfterKeep(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	l := New(clk)
	l.Add("broker", "kafka/broker-0", "kafka/brokers", victim("v1"))
	l.Gone("uid-v1")
	clk.Step(Keep + time.Second)
	l.Add("other", "kafka/broker-1", "kafka/brokers", victim("v9")) // expiry runs on Add
	assert.Equal(t, 1, l.Len(), "the preemptor of a victim long gone is forgotten")
	assert.Empty(t, l.Gone("uid-v1"), "and the victim with it")
}

func TestLedgerForgetsADeletedPreemptorButNotItsVictims(t *testing.T) {
	l := New(clocktesting.NewFakeClock(t0))
	l.Add("a", "ns/a", "ns/vpa", victim("v1"))
	l.Add("b", "ns/b", "ns/vpa", victim("v1"))
	l.Forget("a")
	assert.Equal(t, []Ref{{Key: "ns/b", VPA: "ns/vpa"}}, l.Gone("uid-v1"))
	assert.Equal(t, 1, l.Len())
}

func TestLedgerBounds(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	l := New(clk)
	for i := 0; i < MaxVictimsPerPod+3; i++ {
		assert.True(t, l.Add("broker", "kafka/broker-0", "kafka/brokers", victim(fmt.Sprintf("v%d", i))))
	}
	of := l.Of("kafka/brokers")
	require.Len(t, of, 1)
	assert.Len(t, of[0].Victims, MaxVictimsPerPod)
	assert.Equal(t, 3, of[0].More, "the rest counted, not kept")

	for i := 0; i < MaxPods+10; i++ {
		clk.Step(time.Millisecond)
		l.Add(types.UID(fmt.Sprintf("p%d", i)), fmt.Sprintf("ns/p%d", i), "ns/vpa", victim(fmt.Sprintf("w%d", i)))
	}
	assert.Equal(t, MaxPods, l.Len())
	assert.Empty(t, l.Of("kafka/brokers"), "the oldest went first")
}

// Many workers reporting the same pods at once report each victim exactly
// once: taking and marking are one step.
func TestLedgerTakeUnreportedConcurrently(t *testing.T) {
	l := New(clocktesting.NewFakeClock(t0))
	const pods, victims, workers = 20, MaxVictimsPerPod, 16
	for p := 0; p < pods; p++ {
		for v := 0; v < victims; v++ {
			l.Add(types.UID(fmt.Sprintf("p%d", p)), fmt.Sprintf("ns/p%d", p), "ns/vpa", victim(fmt.Sprintf("p%d-v%d", p, v)))
		}
	}
	var mu sync.Mutex
	seen := map[types.UID]int{}
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := 0; p < pods; p++ {
				for _, v := range l.TakeUnreported(types.UID(fmt.Sprintf("p%d", p))) {
					mu.Lock()
					seen[v.UID]++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	assert.Len(t, seen, pods*victims)
	for uid, n := range seen {
		assert.Equal(t, 1, n, "victim %s reported %d times", uid, n)
	}
}
