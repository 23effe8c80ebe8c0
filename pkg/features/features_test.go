package features

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestInPlaceIsAlphaAndOffByDefault(t *testing.T) {
	gate := NewFeatureGate()
	assert.False(t, gate.Enabled(InPlace))
	require.NoError(t, gate.Set("InPlace=true"))
	assert.True(t, gate.Enabled(InPlace))
}

func TestCPUStartupBoostIsAlphaAndOffByDefault(t *testing.T) {
	gate := NewFeatureGate()
	assert.False(t, gate.Enabled(CPUStartupBoost))
	require.NoError(t, gate.Set("CPUStartupBoost=true"))
	assert.True(t, gate.Enabled(CPUStartupBoost))
	assert.False(t, gate.Enabled(InPlace), "independent of InPlace")
}

func TestUnknownGateIsRejected(t *testing.T) {
	gate := NewFeatureGate()
	assert.Error(t, gate.Set("NoSuchGate=true"))
}

func TestGatesAreIndependent(t *testing.T) {
	a, b := NewFeatureGate(), NewFeatureGate()
	require.NoError(t, a.Set("InPlace=true"))
	assert.False(t, b.Enabled(InPlace))
}
