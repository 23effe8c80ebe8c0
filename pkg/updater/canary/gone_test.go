package canary

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
)

// What the gate holds goes with what it is held for: a canary whose pod
// was deleted while no worker watched it gives its place back (Retain),
// and a VPA that is gone is dropped, also when a worker asked about it
// after it went (Forget, RetainVPAs).
func TestWhatIsGoneIsFreed(t *testing.T) {
	g, store, _ := newGate()
	require.True(t, g.Admit(req(0, "1Gi")).Canary)
	g.Sent(owner, "uid-0", mem("2Gi"), mem("1Gi"))
	require.False(t, g.Admit(req(1, "1Gi")).Canary)

	assert.Equal(t, []string{"kafka/broker-1"}, g.Retain(func(uid types.UID) bool { return uid != "uid-0" }),
		"the pods waiting for a canary that is gone are queued")
	_, ok := store.Get("uid-0")
	assert.False(t, ok, "its record goes")
	assert.True(t, g.Admit(req(1, "1Gi")).Canary, "another pod takes its place")
	g.Release(owner, "uid-1")

	g.Forget(owner.UID)
	assert.NotContains(t, g.vpas, owner.UID)
	// A worker that resolved the VPA just before it went asks after.
	g.Started(owner, "uid-1", t0)
	require.Contains(t, g.vpas, owner.UID)
	g.RetainVPAs(func(uid types.UID) bool { return uid != owner.UID })
	assert.Empty(t, g.vpas)
}
