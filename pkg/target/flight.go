package target

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"
)

// flights runs at most one call per key at a time, shared by every caller
// that wants its result while it runs: pods of one owner, resolved
// together, cost one read. Unlike singleflight, each caller waits no
// longer than its own context allows, and the call's context is cancelled
// once no caller waits for it any more: a read that nobody wants is not
// finished, and a tenant's reads end with the requests that caused them.
// The zero value is ready to use.
type flights[V any] struct {
	mu    sync.Mutex
	calls map[string]*flight[V]
}

type flight[V any] struct {
	done chan struct{}
	val  V
	// panicked is what fn panicked with, and its stack; nil when it
	// returned.
	panicked *flightPanic
	waiters  int
	cancel   context.CancelFunc
}

// flightPanic is a panic of a shared call, raised again in each caller that
// waited for it (where the callers' own recovery handles it) instead of in
// the call's goroutine (where it would end the process).
type flightPanic struct {
	value any
	stack []byte
}

func (p *flightPanic) Error() string {
	return fmt.Sprintf("panic in a shared call: %v\n%s", p.value, p.stack)
}

// do returns what fn returns for key, from the call in progress for key or
// from a new one. fn runs in a goroutine of its own, on a context that
// carries the values of the ctx that started it (its logger), and that is
// cancelled when every caller waiting for it has given up. A caller that
// gives up gets its context's error. A panic of fn is raised again in each
// caller that waited for it.
func (f *flights[V]) do(ctx context.Context, key string, fn func(ctx context.Context) V) (V, error) {
	f.mu.Lock()
	if f.calls == nil {
		f.calls = map[string]*flight[V]{}
	}
	c, ok := f.calls[key]
	if !ok {
		callCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		c = &flight[V]{done: make(chan struct{}), cancel: cancel}
		f.calls[key] = c
		go func() {
			defer cancel()
			var v V
			var panicked *flightPanic
			func() {
				defer func() {
					if r := recover(); r != nil {
						panicked = &flightPanic{value: r, stack: debug.Stack()}
					}
				}()
				v = fn(callCtx)
			}()
			f.mu.Lock()
			c.val, c.panicked = v, panicked
			if f.calls[key] == c {
				delete(f.calls, key)
			}
			f.mu.Unlock()
			close(c.done)
		}()
	}
	c.waiters++
	f.mu.Unlock()

	select {
	case <-c.done:
		if c.panicked != nil {
			panic(c.panicked)
		}
		return c.val, nil
	case <-ctx.Done():
		f.mu.Lock()
		c.waiters--
		if c.waiters == 0 {
			// Nobody waits: the call ends, and the next caller starts
			// another.
			c.cancel()
			if f.calls[key] == c {
				delete(f.calls, key)
			}
		}
		f.mu.Unlock()
		var zero V
		return zero, ctx.Err()
	}
}

// running returns how many calls are in progress (tests).
func (f *flights[V]) running() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}
