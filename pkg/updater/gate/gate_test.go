package gate

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

// attempt is a resize in the tests: its class, which a gate may narrow, and
// the calls the gates saw, in order.
type attempt struct {
	class Class
	calls []string
	held  []string
}

func (a *attempt) Class() Class { return a.class }

// fake is an Admitter answering with answer; narrow, when set, changes the
// attempt's class when it passes.
type fake struct {
	name   string
	scope  Scope
	answer Answer
	narrow func(*Class)
}

func (g fake) Name() string { return g.name }
func (g fake) Scope() Scope { return g.scope }

func (g fake) Admit(_ context.Context, a *attempt) Verdict {
	a.calls = append(a.calls, "admit "+g.name)
	if g.answer != Pass {
		return Verdict{Answer: g.answer, Reason: "R" + g.name, Why: g.name + " says no", Until: time.Unix(1, 0)}
	}
	if g.narrow != nil {
		g.narrow(&a.class)
	}
	return Verdict{Answer: Pass}
}

func (g fake) Release(_ context.Context, a *attempt, o Outcome) {
	a.calls = append(a.calls, fmt.Sprintf("release %s %s", g.name, o))
}

// holder is a Holder noting that it held.
type holder struct {
	name  string
	scope Scope
}

func (h holder) Name() string { return h.name }
func (h holder) Scope() Scope { return h.scope }
func (h holder) Hold(_ context.Context, a *attempt) {
	a.held = append(a.held, h.name)
}

func chain(t *testing.T, gates ...Gate) *Chain[*attempt] {
	t.Helper()
	c, err := New[*attempt](gates...)
	require.NoError(t, err)
	return c
}

func TestScope(t *testing.T) {
	increase := Class{}
	decrease := Class{Lowers: true}
	restart := Class{Restarts: true}
	revert := Class{Restarts: true, Revert: true}
	boostEnd := Class{Lowers: true, Boost: true}
	tests := []struct {
		name   string
		scope  Scope
		class  Class
		covers bool
	}{
		{"decreases: a decrease", Decreases, decrease, true},
		{"decreases: an increase", Decreases, increase, false},
		{"decreases: a restart that lowers nothing", Decreases, restart, false},
		{"decreases: a boost's end", Decreases, boostEnd, false},
		{"decreases and boosts: a boost's end", Decreases | Boosts, boostEnd, true},
		{"restarts: a restart", Restarts, restart, true},
		{"restarts: a decrease that restarts nothing", Restarts, decrease, false},
		{"restarts: a revert that restarts", Restarts, revert, false},
		{"restarts and reverts: a revert that restarts", Restarts | Reverts, revert, true},
		{"every change: an increase", Changes, increase, true},
		{"every change: a revert", Changes, revert, false},
		{"every change: a boost's end", Changes, boostEnd, false},
		{"every change, boosts and reverts: a revert", Changes | Boosts | Reverts, revert, true},
		{"every change, boosts and reverts: a boost's end", Changes | Boosts | Reverts, boostEnd, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.covers, tt.scope.Covers(tt.class))
		})
	}
	assert.Equal(t, "decreases, restarts", (Decreases | Restarts).String())
	assert.Equal(t, "every change; boosts and reverts too", (Changes | Boosts | Reverts).String())
	assert.Equal(t, "restarts; reverts too", (Restarts | Reverts).String())
}

// Every gate passes: each takes its place, in order, and gives it back
// told the outcome, in reverse order.
func TestEveryGatePasses(t *testing.T) {
	for _, o := range []Outcome{Sent, Lost, Refused, NotSent} {
		t.Run(o.String(), func(t *testing.T) {
			c := chain(t, fake{name: "a", scope: Changes}, fake{name: "b", scope: Changes}, fake{name: "c", scope: Changes})
			a := &attempt{}
			v, ticket := c.Run(context.Background(), a)
			require.Equal(t, Pass, v.Answer)
			require.NotNil(t, ticket)
			ticket.Done(context.Background(), o)
			assert.Equal(t, []string{"admit a", "admit b", "admit c",
				"release c " + o.String(), "release b " + o.String(), "release a " + o.String()}, a.calls)
		})
	}
}

// A later gate's refusal (or wait) gives back, in reverse order, what the
// gates before it took; the gates after it are not asked.
func TestALaterRefusalReleasesTheEarlierGatesInReverseOrder(t *testing.T) {
	for _, answer := range []Answer{Wait, Refuse} {
		t.Run(answer.String(), func(t *testing.T) {
			c := chain(t, fake{name: "a", scope: Changes}, fake{name: "b", scope: Changes},
				fake{name: "c", scope: Changes, answer: answer}, fake{name: "d", scope: Changes})
			a := &attempt{}
			v, ticket := c.Run(context.Background(), a)
			assert.Nil(t, ticket)
			assert.Equal(t, Verdict{Answer: answer, Gate: "c", Reason: "Rc", Why: "c says no", Until: time.Unix(1, 0)}, v)
			assert.Equal(t, []string{"admit a", "admit b", "admit c", "release b NotSent", "release a NotSent"}, a.calls)
			ticket.Done(context.Background(), Sent)
			assert.Len(t, a.calls, 5, "nothing left to release")
		})
	}
}

// A gate applies to the resizes its scope covers, by rule: a revert passes
// every gate but the emergency brake's, a boost's end every gate that does
// not name boosts, an increase every gate of decreases or restarts.
func TestTheScopeDecidesWhichGatesAreAsked(t *testing.T) {
	gates := []Gate{
		fake{name: "brake", scope: Changes | Boosts | Reverts},
		fake{name: "pause", scope: Changes | Boosts},
		fake{name: "canary", scope: Decreases},
		fake{name: "budget", scope: Restarts | Boosts | Reverts},
	}
	tests := []struct {
		name  string
		class Class
		asked []string
	}{
		{"an increase", Class{}, []string{"brake", "pause"}},
		{"a decrease", Class{Lowers: true}, []string{"brake", "pause", "canary"}},
		{"a restarting decrease", Class{Lowers: true, Restarts: true}, []string{"brake", "pause", "canary", "budget"}},
		{"a revert", Class{Restarts: true, Revert: true}, []string{"brake", "budget"}},
		{"a boost's end", Class{Lowers: true, Boost: true}, []string{"brake", "pause"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := &attempt{class: tt.class}
			_, ticket := chain(t, gates...).Run(context.Background(), a)
			var want []string
			for _, g := range tt.asked {
				want = append(want, "admit "+g)
			}
			assert.Equal(t, want, a.calls)
			ticket.Done(context.Background(), Sent)
		})
	}
}

// The class is read again before each gate: a gate that holds back the
// resize's decreases leaves an increase, which the gates of decreases do
// not look at.
func TestTheClassIsReadBeforeEachGate(t *testing.T) {
	c := chain(t,
		fake{name: "canary", scope: Decreases, narrow: func(c *Class) { c.Lowers = false }},
		fake{name: "later decreases", scope: Decreases},
		fake{name: "room", scope: Changes})
	a := &attempt{class: Class{Lowers: true}}
	_, ticket := c.Run(context.Background(), a)
	ticket.Done(context.Background(), Sent)
	assert.Equal(t, []string{"admit canary", "admit room", "release room Sent", "release canary Sent"}, a.calls)
}

// Holders add to the decision's input unless their scope exempts the
// resize; before the decision, only a revert or a boost is known.
func TestHoldersAreAskedUnlessExempt(t *testing.T) {
	c := chain(t, holder{name: "evidence", scope: Changes}, holder{name: "windows", scope: Decreases | Restarts},
		fake{name: "brake", scope: Changes | Reverts})
	for _, tt := range []struct {
		name  string
		class Class
		held  []string
	}{
		{"an ordinary resize", Class{}, []string{"evidence", "windows"}},
		{"a revert", Class{Revert: true}, nil},
		{"a boost", Class{Boost: true}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := &attempt{class: tt.class}
			c.Hold(context.Background(), a)
			assert.Equal(t, tt.held, a.held)
			assert.Empty(t, a.calls, "no admitter is asked before the decision")
		})
	}
}

func TestNewChecksTheOrder(t *testing.T) {
	_, err := New[*attempt](fake{name: "brake", scope: Changes}, holder{name: "windows", scope: Changes})
	assert.ErrorContains(t, err, `gate "windows" holds back before the decision`)
	_, err = New[*attempt](fake{name: "a", scope: Changes}, fake{name: "a", scope: Changes})
	assert.ErrorContains(t, err, `gate "a" listed twice`)
	_, err = New[*attempt](notAGate{})
	assert.ErrorContains(t, err, `gate "nothing" neither holds nor admits`)
	c := chain(t, holder{name: "h", scope: Changes}, fake{name: "a", scope: Changes})
	names := []string{}
	for _, g := range c.Gates() {
		names = append(names, g.Name())
	}
	assert.Equal(t, []string{"h", "a"}, names)
}

type notAGate struct{}

func (notAGate) Name() string { return "nothing" }
func (notAGate) Scope() Scope { return Changes }

// places is a gate taking one of limit places per resize, checked and
// taken in one step.
type places struct {
	name     string
	limit    int
	mu       sync.Mutex
	taken    int
	most     int
	released atomic.Int64
}

func (p *places) Name() string { return p.name }
func (p *places) Scope() Scope { return Changes }

func (p *places) Admit(context.Context, *worker) Verdict {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.taken >= p.limit {
		return Verdict{Answer: Wait, Why: "no place left"}
	}
	p.taken++
	p.most = max(p.most, p.taken)
	return Verdict{Answer: Pass}
}

func (p *places) Release(_ context.Context, _ *worker, o Outcome) {
	p.released.Add(1)
	if o.MayApply() {
		return // kept until the pod shows what happened
	}
	p.mu.Lock()
	p.taken--
	p.mu.Unlock()
}

// refuseOdd refuses every other worker's resize.
type refuseOdd struct{}

func (refuseOdd) Name() string { return "odd" }
func (refuseOdd) Scope() Scope { return Changes }
func (refuseOdd) Admit(_ context.Context, w *worker) Verdict {
	if w.n%2 == 1 {
		return Verdict{Answer: Refuse}
	}
	return Verdict{Answer: Pass}
}
func (refuseOdd) Release(context.Context, *worker, Outcome) {}

type worker struct{ n int }

func (*worker) Class() Class { return Class{Lowers: true} }

// Many workers run the chain at once, a later gate refusing half of them
// and the API server refusing the rest: the places of the first gates are
// never more than their limits, and every place taken is given back. A
// chain that did not release the gates before a refusal would keep them.
func TestManyWorkersGiveEveryPlaceBack(t *testing.T) {
	room := &places{name: "room", limit: 3}
	budget := &places{name: "budget", limit: 2}
	c, err := New[*worker](room, budget, refuseOdd{})
	require.NoError(t, err)
	var wg sync.WaitGroup
	start := make(chan struct{})
	var sent atomic.Int64
	for n := range 64 {
		wg.Go(func() {
			<-start
			for range 50 {
				w := &worker{n: n}
				v, ticket := c.Run(context.Background(), w)
				if v.Answer != Pass {
					continue
				}
				sent.Add(1)
				ticket.Done(context.Background(), Refused)
			}
		})
	}
	close(start)
	wg.Wait()
	assert.Positive(t, sent.Load())
	for _, p := range []*places{room, budget} {
		p.mu.Lock()
		assert.Zero(t, p.taken, "%s: every place given back", p.name)
		assert.LessOrEqual(t, p.most, p.limit, "%s: never more places than its limit", p.name)
		p.mu.Unlock()
	}
	assert.Positive(t, room.released.Load())
}
