package canary

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vpa-inplace/vpa-inplace/pkg/records"
)

// The same harmful decrease, tried again each time its hold ends, is held
// longer each time: 24h, 48h, 96h, then 7 days at most. The count of holds
// in a row is in the hold's record, so a restarted updater (a new gate on
// the same records) goes on from there.
func TestRepeatedHarmFromTheSameDecreaseLengthensTheHold(t *testing.T) {
	g, store, clk := newGate()
	harm := Harm{Pod: "uid-0", Name: "broker-0", From: mem("2Gi"), To: mem("1Gi"), Why: "container kafka OOMKilled"}
	for i, want := range []time.Duration{24 * time.Hour, 48 * time.Hour, 96 * time.Hour, 168 * time.Hour, 168 * time.Hour} {
		g.Harmed(owner, harm, false)
		hold, ok := g.Hold(owner)
		require.True(t, ok, "hold %d", i+1)
		assert.Equal(t, clk.Now().Add(want), g.HoldEnds(hold), "hold %d", i+1)
		r, _ := store.Get(owner.UID)
		assert.Equal(t, i+1, r.Holds, "hold %d: the count is in the record", i+1)

		// The decrease is held while the hold stands, and goes once it
		// ends: then it harms again, ten minutes later.
		clk.Step(want - time.Second)
		require.NotNil(t, g.Admit(req(1, "1Gi")).Gate, "hold %d", i+1)
		clk.Step(time.Second)
		v := g.Admit(req(1, "1Gi"))
		require.Nil(t, v.Gate, "hold %d has ended", i+1)
		require.True(t, v.Canary)
		g.Release(owner, "uid-1")
		clk.Step(10 * time.Minute)
		if i == 1 {
			g = New(Config{HarmHold: 24 * time.Hour}, store, clk)
		}
	}
	r, _ := store.Get(owner.UID)
	assert.LessOrEqual(t, r.Holds, records.MaxHolds)

	t.Run("harm long after the last hold ended starts again at --harm-hold", func(t *testing.T) {
		clk.Step(8 * 24 * time.Hour)
		g.Harmed(owner, harm, false)
		hold, ok := g.Hold(owner)
		require.True(t, ok)
		assert.Equal(t, clk.Now().Add(24*time.Hour), g.HoldEnds(hold))
		assert.Equal(t, 1, hold.Holds)
	})
	t.Run("harm of several pods while a hold stands does not lengthen it", func(t *testing.T) {
		for range 3 {
			g.Harmed(owner, harm, false)
		}
		hold, _ := g.Hold(owner)
		assert.Equal(t, 1, hold.Holds)
		assert.Equal(t, clk.Now().Add(24*time.Hour), g.HoldEnds(hold))
	})
	t.Run("harm of another resource after a hold ended is a first hold", func(t *testing.T) {
		clk.Step(24 * time.Hour)
		cpu := Harm{Pod: "uid-2", Name: "broker-2", From: cpuOf("2"), To: cpuOf("1"), Why: "NotReady"}
		g.Harmed(owner, cpu, false)
		hold, _ := g.Hold(owner)
		assert.Equal(t, 1, hold.Holds)
		assert.Equal(t, "kafka: requests cpu=1", hold.Attempted.String())
	})
}
