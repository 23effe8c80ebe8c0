//go:build e2e

package e2e

import (
	"strings"
	"sync"
	"testing"
)

// Tests that neither restart a component, nor need a node's room to
// themselves beyond their own pods, nor compare a cluster-wide figure before
// and after, call parallel first: they run beside each other once every
// serial test is done, each with a node of its own from E2E_PARALLEL_NODES
// (space-separated; default E2E_NODE alone, so they run one at a time), so
// that no test's raises take another's room. hack/e2e.sh gives go test a
// -parallel above the number of nodes; the pool bounds how many run.

var (
	poolOnce sync.Once
	pool     chan string
	// testNodes maps a parallel top-level test to the node it holds.
	testNodes sync.Map
)

func nodePool() chan string {
	poolOnce.Do(func() {
		nodes := strings.Fields(env("E2E_PARALLEL_NODES", env("E2E_NODE", "hollow-1")))
		pool = make(chan string, len(nodes))
		for _, n := range nodes {
			pool <- n
		}
	})
	return pool
}

// parallel marks t parallel and gives it a node of its own until it ends:
// nodeFor(t) names it. Call it before anything else: the namespace's cleanup,
// registered later, runs before the node goes back to the pool.
func parallel(t *testing.T) {
	t.Helper()
	t.Parallel()
	node := <-nodePool()
	name := rootName(t)
	testNodes.Store(name, node)
	t.Logf("node %s", node)
	t.Cleanup(func() {
		testNodes.Delete(name)
		nodePool() <- node
	})
}

// nodeFor is the node of t's ordinary pods: the one parallel gave it, or
// E2E_NODE for a serial test.
func nodeFor(t *testing.T) string {
	if n, ok := testNodes.Load(rootName(t)); ok {
		return n.(string)
	}
	return env("E2E_NODE", "hollow-1")
}

func rootName(t *testing.T) string {
	name, _, _ := strings.Cut(t.Name(), "/")
	return name
}
