package canary

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vpa-inplace/vpa-inplace/pkg/records"
)

// mergingStore is an in-memory store that, like records.ConfigMapStore
// after a conflict, takes another writer's records and says so.
type mergingStore struct {
	*records.InMemoryStore
	fn func(records.Owner, map[types.UID]*records.Record)
}

func (s *mergingStore) OnMerged(fn func(records.Owner, map[types.UID]*records.Record)) { s.fn = fn }

// take holds another writer's records and tells the gate.
func (s *mergingStore) take(owner records.Owner, taken map[types.UID]*records.Record) {
	for uid, r := range taken {
		s.Put(owner, uid, r)
	}
	s.fn(owner, taken)
}

// A deposed leader's last canary, met while the new leader's own canary is
// watched: the gate holds it as a canary of the round, and the other pods
// wait for its window too instead of being lowered when the new leader's
// canary passes.
func TestACanaryTakenFromAnotherWriterHoldsTheOthersBack(t *testing.T) {
	clk := newClock()
	store := &mergingStore{InMemoryStore: records.NewInMemoryStore()}
	g := New(Config{HarmHold: 24 * time.Hour}, store, clk)
	require.NotNil(t, store.fn, "the gate asks the store to be told")

	require.True(t, g.Admit(req(1, "1Gi")).Canary)
	g.Sent(owner, "uid-1", mem("2Gi"), mem("1Gi"))
	g.Started(owner, "uid-1", t0)
	require.False(t, g.Admit(req(2, "1Gi")).Canary)

	// The deposed leader lowered broker-0 just before it lost the lease;
	// its watch began five minutes in.
	clk.Step(5 * time.Minute)
	store.take(owner, map[types.UID]*records.Record{"uid-0": {Kind: records.KindCanary, Attempted: mem("1Gi"), From: mem("2Gi"),
		Watch: (*records.Watch)(nil).WithCanary(mem("2Gi"), mem("1Gi"), t0.Add(5*time.Minute)), RecordedAt: t0.Add(5 * time.Minute)}})

	clk.Step(5 * time.Minute)
	assert.Empty(t, g.Passed(owner, "uid-1", mem("1Gi")), "one canary of two has passed")
	v := g.Admit(req(2, "1Gi"))
	require.NotNil(t, v.Gate, "the others wait for the deposed leader's canary too")
	assert.Equal(t, t0.Add(5*time.Minute+window), v.Until)
	from, _, since, ok := g.Canary(owner, "uid-0", window)
	require.True(t, ok, "and it is watched as a canary")
	assert.Equal(t, "kafka: requests memory=2Gi", from.String())
	assert.Equal(t, t0.Add(5*time.Minute), since)

	clk.Step(5 * time.Minute)
	assert.Equal(t, []string{"kafka/broker-2"}, g.Passed(owner, "uid-0", mem("1Gi")))
	assert.Nil(t, g.Admit(req(2, "1Gi")).Gate)
}
