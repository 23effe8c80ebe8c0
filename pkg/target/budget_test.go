package target

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Many workers of several namespaces take reads at once: no namespace ever
// has more than its share in flight, nor the process more than its budget,
// and every worker that was refused was refused for its namespace's share.
// Checking the share and taking it in two steps lets a namespace past it.
func TestReadBudgetSharesUnderContention(t *testing.T) {
	const process, perNamespace, namespaces, workers, rounds = 6, 2, 5, 64, 200
	b := NewReadBudget(process, perNamespace)
	var inProcess atomic.Int32
	inNamespace := make([]atomic.Int32, namespaces)
	var maxProcess, refused, granted atomic.Int32
	maxNamespace := make([]atomic.Int32, namespaces)
	raise := func(m *atomic.Int32, v int32) {
		for {
			old := m.Load()
			if v <= old || m.CompareAndSwap(old, v) {
				return
			}
		}
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			ns := w % namespaces
			for range rounds {
				release, err := b.Acquire(context.Background(), fmt.Sprint("ns-", ns))
				if err != nil {
					if !errors.Is(err, ErrNamespaceBusy) {
						t.Errorf("unexpected error: %v", err)
					}
					refused.Add(1)
					continue
				}
				granted.Add(1)
				raise(&maxNamespace[ns], inNamespace[ns].Add(1))
				raise(&maxProcess, inProcess.Add(1))
				time.Sleep(10 * time.Microsecond)
				inProcess.Add(-1)
				inNamespace[ns].Add(-1)
				release()
				release() // twice is harmless
			}
		})
	}
	wg.Wait()
	for ns := range namespaces {
		assert.LessOrEqual(t, maxNamespace[ns].Load(), int32(perNamespace), "namespace %d", ns)
		assert.Zero(t, b.InFlight(fmt.Sprint("ns-", ns)), "every share given back")
	}
	assert.LessOrEqual(t, maxProcess.Load(), int32(process))
	assert.Positive(t, refused.Load(), "namespaces of 12 or 13 workers were refused past their share")
	assert.Positive(t, granted.Load())
	t.Logf("granted %d, refused %d, most at once: %d in the process", granted.Load(), refused.Load(), maxProcess.Load())
}

func TestReadBudget(t *testing.T) {
	t.Run("past its share a namespace is refused at once; others are not", func(t *testing.T) {
		b := NewReadBudget(4, 2)
		ctx := context.Background()
		r1, err := b.Acquire(ctx, "hostile")
		require.NoError(t, err)
		r2, err := b.Acquire(ctx, "hostile")
		require.NoError(t, err)
		_, err = b.Acquire(ctx, "hostile")
		require.ErrorIs(t, err, ErrNamespaceBusy)
		r3, err := b.Acquire(ctx, "victim")
		require.NoError(t, err, "another namespace has its own share")
		r1()
		r4, err := b.Acquire(ctx, "hostile")
		require.NoError(t, err, "a share given back is taken again")
		for _, r := range []func(){r2, r3, r4} {
			r()
		}
	})
	t.Run("the process's budget is waited for until the caller's context ends", func(t *testing.T) {
		b := NewReadBudget(1, 1)
		held, err := b.Acquire(context.Background(), "a")
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		_, err = b.Acquire(ctx, "b")
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Zero(t, b.InFlight("b"), "a caller that gave up holds no share of its namespace")
		held()
		release, err := b.Acquire(context.Background(), "b")
		require.NoError(t, err)
		release()
	})
}
