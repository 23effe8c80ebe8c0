package bench

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestFailoverFigures(t *testing.T) {
	first, every, last, n := failoverFigures([]acceptance{
		{namespace: "a", after: 19 * time.Second},
		{namespace: "a", after: 17 * time.Second},
		{namespace: "b", after: 22 * time.Second},
		{namespace: "c", after: 18 * time.Second},
		{namespace: "b", after: 30 * time.Second},
	})
	assert.Equal(t, 17*time.Second, first, "the first of all")
	assert.Equal(t, 22*time.Second, every, "b's first came last")
	assert.Equal(t, 30*time.Second, last)
	assert.Equal(t, 3, n)

	first, every, last, n = failoverFigures(nil)
	assert.Zero(t, first+every+last)
	assert.Zero(t, n)
}

// The victim is the live replica working the most namespaces.
func TestChooseVictim(t *testing.T) {
	replicas := []*replica{{name: "a"}, {name: "b"}, {name: "c"}}
	owner := map[string]string{"n1": "a", "n2": "b", "n3": "b", "n4": "c", "n5": "c"}
	assert.Equal(t, 1, chooseVictim(replicas, owner), "b and c tie: the first")
	replicas[1].killed = true
	assert.Equal(t, 2, chooseVictim(replicas, owner), "b is already gone")
	assert.Equal(t, -1, chooseVictim(replicas, map[string]string{"n1": "b"}), "no live replica works a namespace")
}
