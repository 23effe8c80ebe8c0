package target

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// waitFor bounds each wait for a condition that the code meets within
// milliseconds on an idle machine: generous, so that a busy one (other
// builds, the race detector) does not fail a test that would pass.
const waitFor = time.Minute

func TestFlights(t *testing.T) {
	t.Run("concurrent callers share one call", func(t *testing.T) {
		var f flights[int]
		var calls atomic.Int32
		release := make(chan struct{})
		var wg sync.WaitGroup
		results := make(chan int, 16)
		for range 16 {
			wg.Go(func() {
				v, err := f.do(context.Background(), "k", func(context.Context) int {
					calls.Add(1)
					<-release
					return 7
				})
				assert.NoError(t, err)
				results <- v
			})
		}
		// Released once all 16 wait for the call: one that had not joined
		// yet would start a call of its own once the first has ended.
		require.Eventually(t, func() bool {
			f.mu.Lock()
			defer f.mu.Unlock()
			c := f.calls["k"]
			return c != nil && c.waiters == 16
		}, waitFor, time.Millisecond)
		close(release)
		wg.Wait()
		close(results)
		for v := range results {
			assert.Equal(t, 7, v)
		}
		assert.EqualValues(t, 1, calls.Load())
	})

	t.Run("a caller waits no longer than its context; the call goes on for the others", func(t *testing.T) {
		var f flights[int]
		started := make(chan struct{})
		finish := make(chan struct{})
		var callCtx context.Context
		fn := func(ctx context.Context) int {
			callCtx = ctx
			close(started)
			<-finish
			return 1
		}
		patient := make(chan error, 1)
		go func() {
			_, err := f.do(context.Background(), "k", fn)
			patient <- err
		}()
		<-started
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		defer cancel()
		_, err := f.do(ctx, "k", fn)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.NoError(t, callCtx.Err(), "another caller still waits: the call goes on")
		close(finish)
		require.NoError(t, <-patient)
	})

	t.Run("when every caller has given up, the call's context ends and the next caller starts anew", func(t *testing.T) {
		var f flights[int]
		var calls atomic.Int32
		ended := make(chan struct{})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := f.do(ctx, "k", func(ctx context.Context) int {
				calls.Add(1)
				<-ctx.Done()
				close(ended)
				return 0
			})
			done <- err
		}()
		require.Eventually(t, func() bool { return calls.Load() == 1 }, waitFor, time.Millisecond)
		cancel()
		require.ErrorIs(t, <-done, context.Canceled)
		select {
		case <-ended:
		case <-time.After(waitFor):
			t.Fatal("the call's context did not end once nobody waited for it")
		}
		v, err := f.do(context.Background(), "k", func(context.Context) int { calls.Add(1); return 2 })
		require.NoError(t, err)
		assert.Equal(t, 2, v)
		assert.EqualValues(t, 2, calls.Load())
		require.Eventually(t, func() bool { return f.running() == 0 }, waitFor, time.Millisecond)
	})
}

// A panic of the shared call is raised in its callers, where their own
// recovery (the updater's workers, the webhook's) handles it, never in the
// call's goroutine, which would end the process.
func TestFlightsPanicReachesTheCallers(t *testing.T) {
	var f flights[int]
	release := make(chan struct{})
	var wg sync.WaitGroup
	recovered := make(chan any, 2)
	for range 2 {
		wg.Go(func() {
			defer func() { recovered <- recover() }()
			_, _ = f.do(context.Background(), "k", func(context.Context) int {
				<-release
				panic("boom")
			})
		})
	}
	require.Eventually(t, func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		c := f.calls["k"]
		return c != nil && c.waiters == 2
	}, waitFor, time.Millisecond, "both callers wait for the one call")
	close(release)
	wg.Wait()
	close(recovered)
	for r := range recovered {
		require.NotNil(t, r)
		assert.Contains(t, fmt.Sprint(r), "boom")
	}
	v, err := f.do(context.Background(), "k", func(context.Context) int { return 3 })
	require.NoError(t, err)
	assert.Equal(t, 3, v, "the key is free again")
}
