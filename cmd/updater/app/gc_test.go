package app

import (
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestApplyGCPercent(t *testing.T) {
	before := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(before) })

	t.Run("default when GOGC is not set", func(t *testing.T) {
		debug.SetGCPercent(100)
		percent, fromEnv := ApplyGCPercent(func(string) (string, bool) { return "", false })
		assert.Equal(t, DefaultGCPercent, percent)
		assert.False(t, fromEnv)
		assert.Equal(t, DefaultGCPercent, debug.SetGCPercent(100), "the runtime uses it")
	})

	t.Run("GOGC in the environment wins", func(t *testing.T) {
		debug.SetGCPercent(80) // what the runtime read from GOGC=80
		percent, fromEnv := ApplyGCPercent(func(key string) (string, bool) { return "80", key == "GOGC" })
		assert.Equal(t, 80, percent)
		assert.True(t, fromEnv)
		assert.Equal(t, 80, debug.SetGCPercent(100), "left as the environment set it")
	})
}
