// Package gate runs the rules that may hold a pod's resize back before it
// is sent: one shape for every rule, one loop, one order. The anchor is
// kube-scheduler's framework (Reserve and Unreserve): a gate that takes a
// place (a restart under the disruption budget, room on the node, a
// canary's place) takes it when it passes; when a later gate does not pass,
// every gate already passed is released, in reverse order; and once the
// resize was sent, refused or lost, each is released through the same call,
// told the outcome, and keeps what the outcome says it must (a resize that
// may have been applied keeps its places).
//
// A gate is one of two kinds, as its rule is:
//
//   - a Holder's rule is part of the decision itself (pure, in pkg/resize):
//     before the pod is decided, it adds what it holds back to the
//     decision's input, and the decision says what waits and why (the
//     evidence rule, resize windows);
//   - an Admitter answers for a resize once decided: Pass, Wait (until when,
//     and why) or Refuse, and takes what it holds when it passes, in the
//     same step.
//
// Each gate says which resizes it applies to (Scope): those that lower a
// value, those that restart containers, or every change; a revert after
// harm and the start or end of a CPU boost only when it says so. The chain
// reads the resize's Class again before each gate: a gate may narrow the
// resize (hold some of its decreases back), and the gates after it see what
// is left.
//
// The chain holds no state of its own: each gate is safe for concurrent
// use, and each attempt is one worker's.
package gate

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Class is what a resize is, as the gates see it.
type Class struct {
	// Lowers: the resize lowers a value (a request or a limit).
	Lowers bool
	// Restarts: the resize restarts containers (resizePolicy
	// RestartContainer on a changed resource).
	Restarts bool
	// Revert: the resize undoes harm seen after a decrease.
	Revert bool
	// Boost: the resize starts or ends a CPU boost.
	Boost bool
}

// Scope says which resizes a gate applies to.
type Scope uint8

const (
	// Decreases: resizes that lower a value.
	Decreases Scope = 1 << iota
	// Restarts: resizes that restart containers.
	Restarts
	// Changes: every change, increases included.
	Changes
	// Boosts: the start and the end of a CPU boost too, which are exempt
	// otherwise.
	Boosts
	// Reverts: reverts after harm too, which are exempt otherwise.
	Reverts
)

// Exempts tells whether a resize of class c is out of the scope whatever
// it changes: a revert, or a boost's start or end, that the scope does not
// name. It is all a Holder's scope is checked for: before the decision,
// what the resize changes is not known yet.
func (s Scope) Exempts(c Class) bool {
	return (c.Revert && s&Reverts == 0) || (c.Boost && s&Boosts == 0)
}

// Covers tells whether the scope takes in a decided resize of class c.
func (s Scope) Covers(c Class) bool {
	if s.Exempts(c) {
		return false
	}
	return s&Changes != 0 || (s&Decreases != 0 && c.Lowers) || (s&Restarts != 0 && c.Restarts)
}

// String says what the scope takes in: "decreases, restarts; reverts too".
func (s Scope) String() string {
	var what []string
	switch {
	case s&Changes != 0:
		what = append(what, "every change")
	default:
		if s&Decreases != 0 {
			what = append(what, "decreases")
		}
		if s&Restarts != 0 {
			what = append(what, "restarts")
		}
	}
	if len(what) == 0 {
		what = append(what, "nothing")
	}
	out := strings.Join(what, ", ")
	var too []string
	if s&Boosts != 0 {
		too = append(too, "boosts")
	}
	if s&Reverts != 0 {
		too = append(too, "reverts")
	}
	if len(too) > 0 {
		out += "; " + strings.Join(too, " and ") + " too"
	}
	return out
}

// Answer is a gate's answer.
type Answer uint8

const (
	// Pass: the gate lets the resize go, and holds what it takes for it.
	Pass Answer = iota
	// Wait: not now; the gate knows what it waits for (a window, a
	// canary, room, a place), until when if time alone ends it, and the
	// decision says so.
	Wait
	// Refuse: not sent, by an operator's choice (a kill switch, a pause, a
	// freeze, --dry-run): the resize is withheld, and reported as such.
	Refuse
)

func (a Answer) String() string {
	switch a {
	case Pass:
		return "Pass"
	case Wait:
		return "Wait"
	case Refuse:
		return "Refuse"
	}
	return fmt.Sprintf("Answer(%d)", uint8(a))
}

// Verdict is a gate's answer for one resize.
type Verdict struct {
	Answer Answer
	// Gate names the gate that answered; the chain sets it when a gate
	// does not pass.
	Gate string
	// Reason is a short stable label (a metric's): "ClusterPaused".
	Reason string
	// Why says why, in a sentence fragment, for events and the condition.
	Why string
	// Until is when the answer may change by time alone; zero when only a
	// change of some object can change it.
	Until time.Time
}

// Outcome is what became of a resize the chain let through, or not.
type Outcome uint8

const (
	// NotSent: a gate did not pass, or the resize was not sent after all.
	NotSent Outcome = iota
	// Sent: the API server accepted the resize.
	Sent
	// Lost: the answer to the resize was lost (a timeout, a reset
	// connection, a 5xx): it may have been applied.
	Lost
	// Refused: the API server refused the resize, or it failed before it
	// could be applied.
	Refused
)

// MayApply tells whether the resize is, or may be, on the pod: what it
// reserved is kept until the pod shows what happened.
func (o Outcome) MayApply() bool { return o == Sent || o == Lost }

func (o Outcome) String() string {
	switch o {
	case NotSent:
		return "NotSent"
	case Sent:
		return "Sent"
	case Lost:
		return "Lost"
	case Refused:
		return "Refused"
	}
	return fmt.Sprintf("Outcome(%d)", uint8(o))
}

// Gate is one rule that may hold a resize back.
type Gate interface {
	// Name names the gate in verdicts and logs.
	Name() string
	// Scope says which resizes it applies to.
	Scope() Scope
}

// Holder is a gate whose rule is part of the decision: Hold adds what the
// gate holds back to the attempt's decision input, before the pod is
// decided. It is asked unless its scope exempts the resize.
type Holder[A any] interface {
	Gate
	Hold(ctx context.Context, a A)
}

// Admitter is a gate that answers for a decided resize.
type Admitter[A any] interface {
	Gate
	// Admit answers for the resize and, when it passes, takes what the
	// gate holds for it, in one step. A gate that does not pass takes
	// nothing (it gives back what it took before it answers), and amends
	// the attempt's decision so that it says what waits.
	Admit(ctx context.Context, a A) Verdict
	// Release ends, for the outcome, what Admit took for a resize it let
	// through: it is called once for every gate that passed, with every
	// outcome; a resize that may have been applied keeps what it took.
	Release(ctx context.Context, a A, o Outcome)
}

// Attempt is a resize on its way through the gates.
type Attempt interface {
	// Class says what the resize is now; an Admitter that narrows the
	// resize changes it.
	Class() Class
}

// Chain runs gates in one order.
type Chain[A Attempt] struct {
	gates     []Gate
	holders   []Holder[A]
	admitters []Admitter[A]
}

// New returns a chain of gates, run in the order given. Every gate is a
// Holder or an Admitter of A, and the holders come first: they act before
// the decision, the admitters after it.
func New[A Attempt](gates ...Gate) (*Chain[A], error) {
	c := &Chain[A]{gates: gates}
	names := map[string]bool{}
	for _, g := range gates {
		if names[g.Name()] {
			return nil, fmt.Errorf("gate %q listed twice", g.Name())
		}
		names[g.Name()] = true
		h, holds := g.(Holder[A])
		a, admits := g.(Admitter[A])
		switch {
		case !holds && !admits:
			return nil, fmt.Errorf("gate %q neither holds nor admits", g.Name())
		case holds && len(c.admitters) > 0:
			return nil, fmt.Errorf("gate %q holds back before the decision and is listed after gates that answer after it", g.Name())
		}
		if holds {
			c.holders = append(c.holders, h)
		}
		if admits {
			c.admitters = append(c.admitters, a)
		}
	}
	return c, nil
}

// Gates returns the gates in their order.
func (c *Chain[A]) Gates() []Gate { return append([]Gate(nil), c.gates...) }

// Hold asks every Holder whose scope does not exempt the resize to add
// what it holds back to the decision's input, in order.
func (c *Chain[A]) Hold(ctx context.Context, a A) {
	class := a.Class()
	for _, h := range c.holders {
		if !h.Scope().Exempts(class) {
			h.Hold(ctx, a)
		}
	}
}

// Run asks every Admitter whose scope covers the resize, in order, reading
// its class again before each. At the first that does not pass, every gate
// that passed is released (NotSent), in reverse order, and that verdict is
// returned, without a ticket. When every gate passed, the ticket holds what
// they took until Done.
func (c *Chain[A]) Run(ctx context.Context, a A) (Verdict, *Ticket[A]) {
	var passed []Admitter[A]
	for _, g := range c.admitters {
		if !g.Scope().Covers(a.Class()) {
			continue
		}
		v := g.Admit(ctx, a)
		if v.Answer == Pass {
			passed = append(passed, g)
			continue
		}
		v.Gate = g.Name()
		release(ctx, a, passed, NotSent)
		return v, nil
	}
	return Verdict{Answer: Pass}, &Ticket[A]{attempt: a, passed: passed}
}

// Ticket holds what the gates took for a resize they let through.
type Ticket[A Attempt] struct {
	attempt A
	passed  []Admitter[A]
	done    bool
}

// Done releases, once, every gate the resize passed, in reverse order,
// telling each the outcome. A nil ticket (the chain did not let the resize
// through) has nothing to release. A ticket is its worker's: Done is not
// called concurrently.
func (t *Ticket[A]) Done(ctx context.Context, o Outcome) {
	if t == nil || t.done {
		return
	}
	t.done = true
	release(ctx, t.attempt, t.passed, o)
}

func release[A Attempt](ctx context.Context, a A, passed []Admitter[A], o Outcome) {
	for i := len(passed) - 1; i >= 0; i-- {
		passed[i].Release(ctx, a, o)
	}
}
